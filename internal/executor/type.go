package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// A Type is one kind of task (protocol.TaskShell, TaskHTTP, ...): it
// checks a task's payload and makes its executions. A new task type is a
// file in this package with its Type and Execution, listed in types, and
// its wire type in package protocol.
type Type interface {
	// New checks spec's payload, and that this delegate can run it (opts:
	// a container runtime, say), and returns one execution of it. It
	// starts nothing and creates nothing that needs cleaning up. Its error
	// ends the task as failed, and as the delegate's fault when it is one
	// (a faultError). Run has checked spec's environment before.
	New(spec protocol.TaskSpec, opts Options) (Execution, error)
}

// An Execution is one run of a task, made by its Type's New. Run drives
// it from one goroutine: Start; then Done, or, when the task's context is
// cancelled or its timeout passes, Interrupt and, unless Done is closed
// within the kill grace, Terminate, and Done; then Finish; Cleanup last,
// always (also when Start failed or was never called).
type Execution interface {
	// Start starts the task, its output going to out (which never fails
	// and may be written from any goroutine). ctx bounds only what Start
	// does itself (preparing volumes, say): once started, the task ends
	// by itself or by Interrupt and Terminate. An error means the task did
	// not start; it ends the task as New's does.
	Start(ctx context.Context, out io.Writer) error
	// Done is closed once the task ended: by itself, or, after Interrupt,
	// once what Interrupt asked to stop is gone (or Terminate ended it).
	// Run calls it again after Interrupt.
	Done() <-chan struct{}
	// Interrupt asks the task to stop: SIGTERM to its processes, a stop of
	// its container, the abort of its request. It may block while the
	// type's own graceful stop runs (an Isolator's, a runtime's `stop`).
	Interrupt()
	// Terminate ends what is left of the task by force: SIGKILL.
	Terminate()
	// Finish returns how the task ended, once Done is closed, and writes
	// its last notices to out. stop is nil when the task ended by itself,
	// else why Run stopped it.
	Finish(stop *Stop) Outcome
	// Cleanup removes what the run created (its container, its pipe, its
	// isolation), writing to out what it could not remove.
	Cleanup()
}

// types are the task types a delegate runs, by their name on the wire: a
// table, never changed.
var types = map[string]Type{
	protocol.TaskShell:      shellType{},
	protocol.TaskHTTP:       httpType{},
	protocol.TaskContainer:  containerType{},
	protocol.TaskKubernetes: kubernetesType{},
	protocol.TaskHelm:       helmType{},
	protocol.TaskVerify:     verifyType{},
}

// Lookup returns the Type of task type name, or an error that names it
// when there is none.
func Lookup(name string) (Type, error) {
	if t, ok := types[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("unknown task type %q", name)
}

// TaskTypes are the names of the task types this delegate runs with
// opts, sorted: what it registers (protocol.RegisterRequest.TaskTypes). A
// type that may be missing on a delegate (a program it runs, say) says so
// with a method available(Options) error, and counts only when that
// returns nil.
func TaskTypes(opts Options) []string { return availableTypes(types, opts) }

// availableTypes is TaskTypes of a table.
func availableTypes(table map[string]Type, opts Options) []string {
	out := []string{}
	for name, t := range table {
		if a, ok := t.(interface{ available(Options) error }); ok && a.available(opts) != nil {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// UsesContainers reports whether tasks of type name run in the delegate's
// container runtime (Options.Containers): a delegate holds them until
// containers.Runtime.Sweep has removed what an earlier run of it left.
func UsesContainers(name string) bool {
	_, ok := types[name].(interface{ usesContainers() })
	return ok
}

// faultError is an error of New or Start that is the delegate's fault
// (or its position in the network's), not the task's: the outcome has
// DelegateFault set, and the task may run elsewhere. An error of another
// package (a container runtime's) says so with the same method.
type faultError struct{ error }

// DelegateFault marks the error as the delegate's fault.
func (faultError) DelegateFault() bool { return true }

// faultf returns a faultError.
func faultf(format string, args ...any) error {
	return faultError{fmt.Errorf(format, args...)}
}

// errOutcome is the outcome of a task that New or Start refused.
func errOutcome(err error) Outcome {
	var fe interface{ DelegateFault() bool }
	if errors.As(err, &fe) && fe.DelegateFault() {
		return faulted(err.Error())
	}
	return failed(err.Error())
}

// A Stop is why Run stopped a task before it ended by itself.
type Stop struct {
	// Timeout is the task's timeout when it passed; 0 means the task's
	// context was cancelled.
	Timeout time.Duration
}

// Outcome is the outcome of a task stopped for s.
func (s *Stop) Outcome() Outcome {
	if s.Timeout <= 0 {
		return Outcome{Status: protocol.StatusCancelled, Error: "task cancelled"}
	}
	return Outcome{Status: protocol.StatusTimedOut, Error: fmt.Sprintf("task timed out after %s", s.Timeout)}
}

// Notice is the line that ends the output of a task stopped for s; what
// says what was stopped ("killed process group").
func (s *Stop) Notice(what string) string {
	if s.Timeout <= 0 {
		return fmt.Sprintf("\n[legate: task cancelled; %s]\n", what)
	}
	return fmt.Sprintf("\n[legate: task timed out after %s; %s]\n", s.Timeout, what)
}

// execute runs ex to its end (see Execution) and returns its outcome.
func execute(ctx context.Context, ex Execution, opts Options, out io.Writer) Outcome {
	defer ex.Cleanup()
	if ctx.Err() != nil {
		return Outcome{Status: protocol.StatusCancelled, Error: "task cancelled before it started"}
	}
	if err := ex.Start(ctx, out); err != nil {
		return errOutcome(err)
	}
	if opts.OnStart != nil {
		opts.OnStart()
	}
	return ex.Finish(wait(ctx, ex, opts.Timeout, opts.killGrace()))
}

// wait is the one wait loop of every task type. It waits until ex is
// done, and returns nil; or until ctx is cancelled or timeout (if > 0)
// passes: it then interrupts ex, terminates it if it is not done grace
// later, waits until it is done, and returns why it stopped it.
func wait(ctx context.Context, ex Execution, timeout, grace time.Duration) *Stop {
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var stop Stop
	select {
	case <-ex.Done():
		return nil
	case <-ctx.Done():
	case <-expired:
		stop.Timeout = timeout
	}
	ex.Interrupt()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-ex.Done():
		return &stop
	case <-t.C:
	}
	ex.Terminate()
	<-ex.Done()
	return &stop
}

func (o Options) killGrace() time.Duration {
	if o.KillGrace > 0 {
		return o.KillGrace
	}
	return DefaultKillGrace
}
