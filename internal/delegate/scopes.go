package delegate

import (
	"context"
	"slices"
	"sync"

	"github.com/legate-dev/legate/internal/executor"
	"github.com/legate-dev/legate/internal/protocol"
)

// scopeGate lets tasks of one scope at a time run on a delegate that has
// no sandbox (and whose operator did not allow mixed scopes): without
// one, a task can read what a concurrent task of another scope holds (its
// environment in /proc, its files, its container's processes). Tasks of the
// running scope enter at once; a task of another scope waits until those
// end. Waiters enter in the order they came: once one waits, tasks of the
// running scope that come after it wait behind it, so no scope starves.
type scopeGate struct {
	mu    sync.Mutex
	scope string
	n     int // tasks inside, all of scope
	queue []*gateWaiter
}

type gateWaiter struct {
	scope string
	in    chan struct{} // closed when it entered
}

// scopeOf is the key of a task's scope.
func scopeOf(spec protocol.TaskSpec) string { return spec.Org + "/" + spec.Project }

// enter waits until a task of scope may run, or ctx ends, calling
// waiting first when it has to wait. It returns the func that ends the
// task's turn, to call once the task ended (also when ctx ended first: the
// task then ends cancelled without running).
func (g *scopeGate) enter(ctx context.Context, scope string, waiting func()) (leave func()) {
	g.mu.Lock()
	if len(g.queue) == 0 && (g.n == 0 || g.scope == scope) {
		g.scope = scope
		g.n++
		g.mu.Unlock()
		return g.leave
	}
	w := &gateWaiter{scope: scope, in: make(chan struct{})}
	g.queue = append(g.queue, w)
	g.mu.Unlock()
	if waiting != nil {
		waiting()
	}
	select {
	case <-w.in:
		return g.leave
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.in: // entered as ctx ended
		return g.leave
	default:
	}
	g.queue = slices.DeleteFunc(g.queue, func(x *gateWaiter) bool { return x == w })
	g.admit()
	return func() {}
}

func (g *scopeGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	g.admit()
}

// admit lets in the waiters at the head of the queue that may run now:
// all of the head's scope that follow each other, once the gate is empty.
func (g *scopeGate) admit() {
	for len(g.queue) > 0 && (g.n == 0 || g.queue[0].scope == g.scope) {
		w := g.queue[0]
		g.queue = g.queue[1:]
		g.scope = w.scope
		g.n++
		close(w.in)
	}
}

// reportSandbox logs, once at start, how tasks are kept apart, keeps it
// for the registration, and gates scopes when there is no sandbox.
func (a *Agent) reportSandbox(st executor.SandboxState) {
	rep := &protocol.TaskIsolation{Sandbox: protocol.SandboxNamespaces, UIDs: st.UIDs, Scopes: protocol.ScopesMixed}
	if st.Mode != executor.SandboxNamespaces {
		rep.Sandbox, rep.Reason = protocol.SandboxNone, st.Reason
		if !a.opts.AllowMixedScopes && !a.cfg.AllowMixedScopes {
			rep.Scopes = protocol.ScopesOneAtATime
			a.gate = &scopeGate{}
		}
	}
	a.isoReport = rep
	if rep.Sandbox == protocol.SandboxNamespaces {
		a.log.Info("task sandbox: each shell task in namespaces of its own", "uids", rep.UIDs)
		return
	}
	a.log.Warn("task sandbox: none; tasks could see each other's processes, environment and files",
		"reason", rep.Reason, "scopes", rep.Scopes, "summary", rep.Summary())
}
