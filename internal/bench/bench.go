package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// EnvCPUProfile names the file a legate process writes a pprof CPU profile
// to when it exits (the bench sets it for the manager with --cpuprofile).
const EnvCPUProfile = "LEGATE_CPUPROFILE"

// Run runs cfg's scenario and writes its summary line(s) to out; progress
// goes to log.
func Run(ctx context.Context, cfg Config, out io.Writer, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	limit, err := raiseFileLimit()
	if err != nil {
		return err
	}
	r := &runner{cfg: cfg, out: out, log: log, fileLimit: limit}
	switch cfg.Scenario {
	case ScenarioPickup:
		return r.pickup(ctx)
	case ScenarioThroughput:
		return r.throughput(ctx)
	case ScenarioSwarm:
		return r.swarm(ctx, false)
	case ScenarioScaling:
		return r.swarm(ctx, true)
	case ScenarioFootprint:
		return r.footprint(ctx)
	case ScenarioFailover:
		return r.failover(ctx)
	case ScenarioSoak:
		return r.soak(ctx)
	case ScenarioStorm:
		return r.storm(ctx)
	}
	return fmt.Errorf("unknown scenario %q", cfg.Scenario)
}

// runner holds what every scenario needs.
type runner struct {
	cfg       Config
	out       io.Writer
	log       *slog.Logger
	fileLimit uint64
}

// tempDir makes a directory for one run; the returned function removes it.
func (r *runner) tempDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "legate-bench-"+r.cfg.Scenario+"-")
	if err != nil {
		return "", nil, fmt.Errorf("temp directory: %w", err)
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

// startManager starts a manager for one run (on a throwaway PostgreSQL
// database with --store postgres). The returned function stops it and
// drops the database.
// freshManager starts a manager for one run in a new temporary directory
// and creates a delegate token on it. done stops the manager and removes
// the directory.
func (r *runner) freshManager(ctx context.Context, tokenName, profile string) (m *manager, tok, dir string, done func(), err error) {
	dir, rm, err := r.tempDir()
	if err != nil {
		return nil, "", "", nil, err
	}
	m, stop, err := r.startManager(ctx, dir, r.cfg.Heartbeat, profile)
	if err != nil {
		rm()
		return nil, "", "", nil, err
	}
	done = func() { stop(); rm() }
	if tok, err = m.token(ctx, tokenName); err != nil {
		done()
		return nil, "", "", nil, err
	}
	return m, tok, dir, done, nil
}

func (r *runner) startManager(ctx context.Context, dir string, heartbeat time.Duration, profile string) (*manager, func(), error) {
	o := managerOpts{heartbeat: heartbeat, cpuProfile: profile, logLevel: r.cfg.LogLevel}
	drop := func() {}
	if r.cfg.Store == StorePostgres {
		dsn, d, err := throwawayDB(ctx, r.cfg.PostgresDSN)
		if err != nil {
			return nil, nil, err
		}
		o.db, drop = dsn, d
	}
	m, err := startManager(ctx, r.cfg.Exe, dir, o)
	if err != nil {
		drop()
		return nil, nil, err
	}
	r.log.Debug("manager started", "pid", m.pid(), "url", m.url)
	return m, func() { m.shutdown(r.log); drop() }, nil
}

// queueOther submits n tasks whose selector no delegate takes (a holder
// delegate with that tag reports itself over its threshold, so the tasks
// stay queued instead of being ended as unrunnable) with a long queue
// timeout.
func (r *runner) queueOther(ctx context.Context, m *manager, n int) error {
	if n == 0 {
		return nil
	}
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) || ctx.Err() != nil {
					return
				}
				_, err := m.admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"},
					Selectors: []string{otherTag}, QueueTimeoutMS: (24 * time.Hour).Milliseconds()})
				if err != nil {
					errs <- fmt.Errorf("queue a task for other selectors: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	r.log.Info("queued tasks for other selectors", "tasks", n, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// Tags of the simulated delegates.
const (
	benchTag    = "bench"
	otherTag    = "bench-other"
	baselineTag = "baseline-3s"
)

func holderSpec() simSpec {
	return simSpec{name: "bench-holder", tags: []string{otherTag}, mode: modeWebSocket,
		overThreshold: "bench holder: keeps the tasks for other selectors queued"}
}

// waiter waits for a task's end.
type waiter interface {
	wait(ctx context.Context, id string, limit time.Duration) (protocol.Task, error)
}

// streamWaiter waits for a task run by real delegates by following its
// log stream until the manager sends the final task.
type streamWaiter struct{ m *manager }

func (w streamWaiter) wait(ctx context.Context, id string, limit time.Duration) (protocol.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t, err := w.m.admin.StreamLogs(ctx, id, true, func(protocol.LogStreamLine) error { return nil })
	if err != nil {
		return t, fmt.Errorf("wait for task %s: %w", id, err)
	}
	return t, nil
}

// pickupOnce submits one trivial task for selector tag and waits for its
// end; it returns queued → started.
func pickupOnce(ctx context.Context, m *manager, w waiter, tag string, limit time.Duration) (time.Duration, error) {
	t, err := m.admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"},
		Selectors: []string{tag}})
	if err != nil {
		return 0, fmt.Errorf("pickup of a %s task: %w", tag, err)
	}
	done, err := w.wait(ctx, t.ID, limit)
	if err != nil {
		return 0, err
	}
	if done.Status != protocol.StatusSucceeded {
		return 0, fmt.Errorf("task %s ended %s: %s", done.ID, done.Status, done.Error)
	}
	return pickupOf(done)
}

// pickups measures n tasks one at a time after warmup unmeasured ones.
func pickups(ctx context.Context, m *manager, w waiter, tag string, warmup, n int, limit time.Duration) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := 0; i < warmup+n; i++ {
		d, err := pickupOnce(ctx, m, w, tag, limit)
		if err != nil {
			return nil, err
		}
		if i >= warmup {
			out = append(out, d)
		}
	}
	return out, nil
}

// baselinePickups measures n tasks picked up by a delegate that polls
// without waiting every period; submissions are spread over the period's
// phases.
func baselinePickups(ctx context.Context, m *manager, w waiter, n int, period time.Duration) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		d, err := pickupOnce(ctx, m, w, baselineTag, 3*period+30*time.Second)
		if err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
		out = append(out, d)
		// The next submission lands at another phase of the poll cycle.
		phase := time.Duration((int64(i)*1379)%1000) * period / 1000
		sleepCtx(ctx, phase)
	}
	return out, ctx.Err()
}

// swarmHealth is what went wrong in a swarm, for the summary (all zero in
// a sound run).
type swarmHealth struct {
	WSDrops          int64 `json:"ws_drops"`
	HeartbeatsFailed int64 `json:"heartbeats_failed"`
	CallsFailed      int64 `json:"calls_failed"`
}

func (h *swarmHealth) add(c counters) {
	h.WSDrops += c.drops
	h.HeartbeatsFailed += c.hbFailed
	h.CallsFailed += c.failed
}

func (r *runner) progress(run int, msg string, args ...any) {
	r.log.Info(fmt.Sprintf("run %d/%d: %s", run, r.cfg.Runs, msg), args...)
}

func profilePath(p string) string {
	if p == "" {
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return abs
}
