package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// FootprintSummary is the footprint scenario's line.
type FootprintSummary struct {
	Scenario    string `json:"scenario"`
	HeartbeatMS int64  `json:"heartbeat_ms"`
	Runs        int    `json:"runs"`
	// StartToConnectedMS is exec of the delegate until it logs that its
	// event channel is connected.
	StartToConnectedMS Stat `json:"start_to_connected_ms"`
	// IdleRSSMB is the delegate's RSS, connected and idle for SettleMS.
	IdleRSSMB Stat  `json:"idle_rss_mb"`
	SettleMS  int64 `json:"settle_ms"`
	// BusyRSSMB is the delegate's largest RSS while BusyTasks run at once
	// (the delegate process only, not the tasks' own processes).
	BusyRSSMB  Stat   `json:"busy_rss_mb"`
	BusyTasks  int    `json:"busy_tasks"`
	BusyScript string `json:"busy_script"`
	// BusyPickup is queued → process started of the busy tasks (submitted
	// back to back) as the manager stamps them: a real process this time.
	BusyPickupP50MS Stat `json:"busy_pickup_p50_ms"`
	BusyPickupMaxMS Stat `json:"busy_pickup_max_ms"`
	// DelegateBinary is the file the delegate ran as (the base name of
	// the binary its "delegate starting" line names: legate, or
	// legate-delegate beside it).
	DelegateBinary string `json:"delegate_binary"`
}

func (r *runner) footprint(ctx context.Context) error {
	c := r.cfg
	m, tok, dir, done, err := r.freshManager(ctx, "footprint", "")
	if err != nil {
		return err
	}
	defer done()
	s := series{}
	var binary string
	for run := 1; run <= c.Runs; run++ {
		if err := r.footprintRun(ctx, run, dir, m, tok, s, &binary); err != nil {
			return fmt.Errorf("footprint run %d: %w", run, err)
		}
	}
	return emit(r.out, FootprintSummary{Scenario: ScenarioFootprint, HeartbeatMS: c.Heartbeat.Milliseconds(), Runs: c.Runs,
		StartToConnectedMS: s.stat("connect"), IdleRSSMB: s.stat("idle"), SettleMS: c.Settle.Milliseconds(),
		BusyRSSMB: s.stat("busy"), BusyTasks: c.BusyTasks, BusyScript: c.BusyScript,
		BusyPickupP50MS: s.stat("p50"), BusyPickupMaxMS: s.stat("max"), DelegateBinary: binary})
}

func (r *runner) footprintRun(ctx context.Context, run int, dir string, m *manager, tok string, s series, binary *string) error {
	c := r.cfg
	host := fmt.Sprintf("footprint-%d", run)
	var extra []string
	if c.DelegateBinary != "" {
		extra = append(extra, "LEGATE_DELEGATE_BINARY="+c.DelegateBinary)
	}
	d, err := startDelegate(c.Exe, dir, m, tok, "footprint", host, extra...)
	if err != nil {
		return err
	}
	defer func() {
		if err := d.stop(10 * time.Second); err != nil {
			r.log.Warn("stop delegate", "err", err)
		}
	}()
	at, err := d.waitConnected(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	connect := at.Sub(d.started)
	*binary = LoggedBinary(d.out.String())
	if *binary != "" {
		*binary = filepath.Base(*binary)
	}
	sleepCtx(ctx, c.Settle)
	idle, err := readUsage(d.pid())
	if err != nil {
		return err
	}
	ids := make([]string, 0, c.BusyTasks)
	for i := 0; i < c.BusyTasks; i++ {
		t, err := m.admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell,
			Shell: &protocol.ShellSpec{Script: c.BusyScript}, Selectors: []string{host}})
		if err != nil {
			return fmt.Errorf("busy task: %w", err)
		}
		ids = append(ids, t.ID)
	}
	busy := idle.rssMB()
	var pickup []time.Duration
	deadline := time.Now().Add(2 * time.Minute)
	pending := map[string]bool{}
	for _, id := range ids {
		pending[id] = true
	}
	for len(pending) > 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d busy tasks did not finish within 2m", len(pending))
		}
		if u, err := readUsage(d.pid()); err == nil {
			busy = max(busy, u.rssMB())
		}
		for id := range pending {
			t, err := m.admin.GetTask(ctx, id)
			if err != nil {
				return fmt.Errorf("get busy task: %w", err)
			}
			if protocol.Terminal(t.Status) {
				if t.Status != protocol.StatusSucceeded {
					return fmt.Errorf("busy task %s ended %s: %s", id, t.Status, t.Error)
				}
				p, err := pickupOf(t)
				if err != nil {
					return err
				}
				pickup = append(pickup, p)
				delete(pending, id)
			}
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	l := latenciesOf(pickup)
	s.add("connect", ms(connect))
	s.add("idle", idle.rssMB())
	s.add("busy", busy)
	s.add("p50", l.p50)
	s.add("max", l.max)
	r.progress(run, "footprint", "start_to_connected_ms", round3(ms(connect)), "idle_rss_mb", round3(idle.rssMB()),
		"busy_rss_mb", round3(busy), "busy_pickup_p50_ms", round3(l.p50))
	return nil
}

// FailoverSummary is the failover scenario's line.
type FailoverSummary struct {
	Scenario    string `json:"scenario"`
	HeartbeatMS int64  `json:"heartbeat_ms"`
	Runs        int    `json:"runs"`
	// FailoverS is from kill -9 of the delegate running the task to the
	// manager's started_at of the task's second attempt on the other one.
	FailoverS Stat `json:"failover_s"`
	// FailoverIntervals is FailoverS in heartbeat intervals.
	FailoverIntervals Stat `json:"failover_intervals"`
}

func (r *runner) failover(ctx context.Context) error {
	c := r.cfg
	m, tok, dir, done, err := r.freshManager(ctx, "failover", "")
	if err != nil {
		return err
	}
	defer done()
	procs := map[string]*delegateProc{}
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	start := func(host string) error {
		// The task waits for a file the bench writes in its directory,
		// which a task sandbox hides (its /tmp is the task's own); what is
		// measured is the lease, not the sandbox.
		p, err := startDelegate(c.Exe, dir, m, tok, "failover", host, "LEGATE_TASK_SANDBOX=off", "LEGATE_ALLOW_MIXED_SCOPES=true")
		if err != nil {
			return err
		}
		procs[host] = p
		_, err = p.waitConnected(ctx, 30*time.Second)
		return err
	}
	for _, h := range []string{"failover-a", "failover-b"} {
		if err := start(h); err != nil {
			return err
		}
	}
	s := series{}
	for run := 1; run <= c.Runs; run++ {
		took, err := r.failoverRun(ctx, dir, run, m, procs)
		if err != nil {
			return fmt.Errorf("failover run %d: %w", run, err)
		}
		s.add("s", took.Seconds())
		s.add("intervals", took.Seconds()/c.Heartbeat.Seconds())
		r.progress(run, "failover", "seconds", round3(took.Seconds()), "intervals", round3(took.Seconds()/c.Heartbeat.Seconds()))
		for h, p := range procs {
			if p.exited() {
				if err := start(h); err != nil {
					return err
				}
			}
		}
	}
	return emit(r.out, FailoverSummary{Scenario: ScenarioFailover, HeartbeatMS: c.Heartbeat.Milliseconds(), Runs: c.Runs,
		FailoverS: s.stat("s"), FailoverIntervals: s.stat("intervals")})
}

func (r *runner) failoverRun(ctx context.Context, dir string, run int, m *manager, procs map[string]*delegateProc) (time.Duration, error) {
	hb := r.cfg.Heartbeat
	marker := filepath.Join(dir, fmt.Sprintf("go-%d", run))
	task, err := m.admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Retries: 1, Selectors: []string{"failover"},
		Shell: &protocol.ShellSpec{Script: "while [ ! -e " + marker + " ]; do sleep 0.01; done"}})
	if err != nil {
		return 0, fmt.Errorf("failover task: %w", err)
	}
	first, err := waitTask(ctx, m, task.ID, 30*time.Second, func(t protocol.Task) bool { return t.StartedAt != nil })
	if err != nil {
		return 0, fmt.Errorf("first attempt: %w", err)
	}
	victim := procs[first.DelegateHostname]
	if victim == nil {
		return 0, fmt.Errorf("task runs on unknown delegate %q", first.DelegateHostname)
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill the delegate: %w", err)
	}
	killed := time.Now()
	<-victim.done
	second, err := waitTask(ctx, m, task.ID, 10*hb+30*time.Second, func(t protocol.Task) bool { return t.Attempts >= 2 && t.StartedAt != nil })
	if err != nil {
		return 0, fmt.Errorf("second attempt: %w", err)
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return 0, err
	}
	if _, err := waitTask(ctx, m, task.ID, 30*time.Second, func(t protocol.Task) bool { return protocol.Terminal(t.Status) }); err != nil {
		return 0, fmt.Errorf("task end: %w", err)
	}
	return second.StartedAt.Sub(killed), nil
}

// waitTask polls a task every 10 ms until cond holds.
func waitTask(ctx context.Context, m *manager, id string, limit time.Duration, cond func(protocol.Task) bool) (protocol.Task, error) {
	deadline := time.Now().Add(limit)
	for {
		t, err := m.admin.GetTask(ctx, id)
		if err == nil && cond(t) {
			return t, nil
		}
		if time.Now().After(deadline) {
			return t, fmt.Errorf("task %s: condition not met within %s (status %s, attempts %d, err %v)", id, limit, t.Status, t.Attempts, err)
		}
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		sleepCtx(ctx, 10*time.Millisecond)
	}
}

// LoggedBinary is the binary a delegate's log says it runs as (binary=
// of its "delegate starting" line, a path), "" when the log has none.
func LoggedBinary(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="delegate starting"`) {
			continue
		}
		_, v, ok := strings.Cut(line, " binary=")
		if !ok {
			return ""
		}
		if strings.HasPrefix(v, `"`) {
			if q, err := strconv.QuotedPrefix(v); err == nil {
				v, _ = strconv.Unquote(q)
			}
		} else {
			v, _, _ = strings.Cut(v, " ")
		}
		return v
	}
	return ""
}
