package bench

import (
	"context"
	"fmt"
	"os"
	"time"
)

// SwarmStep is what the swarm measured at one size.
type SwarmStep struct {
	Delegates int `json:"delegates"`
	// ConnectS is how long growing the swarm to this size took (register
	// + open the event channel, Connect at once).
	ConnectS     Stat `json:"connect_s"`
	ManagerRSSMB Stat `json:"manager_rss_mb"`
	// RSSMBPer1000 is (RSS − idle RSS) per 1,000 delegates.
	RSSMBPer1000 Stat `json:"rss_mb_per_1000"`
	// ManagerCPUPct is the manager's CPU over the window, percent of one core.
	ManagerCPUPct Stat `json:"manager_cpu_pct"`
	// CPUPctPer1000 is (CPU − idle CPU) per 1,000 delegates.
	CPUPctPer1000 Stat `json:"cpu_pct_per_1000"`
	// HeartbeatsPerS handled by the manager (acknowledged) over the window.
	HeartbeatsPerS Stat `json:"heartbeats_per_s"`
	// CPUUSPerHeartbeat is (CPU − idle CPU) over the window divided by the
	// heartbeats handled in it: the cost of one heartbeat, in microseconds.
	CPUUSPerHeartbeat Stat `json:"cpu_us_per_heartbeat"`
	// BenchCPUPct is this (the bench) process's CPU over the window: when
	// it nears 100 × cores, the swarm rather than the manager is the limit.
	BenchCPUPct Stat `json:"bench_cpu_pct"`
	BenchRSSMB  Stat `json:"bench_rss_mb"`
	PickupP50MS Stat `json:"pickup_p50_ms"`
	PickupP99MS Stat `json:"pickup_p99_ms"`
	PickupMaxMS Stat `json:"pickup_max_ms"`
}

// SwarmSummary is the swarm scenario's line.
type SwarmSummary struct {
	Scenario       string      `json:"scenario"`
	Transport      string      `json:"transport"`
	Store          string      `json:"store"`
	HeartbeatMS    int64       `json:"heartbeat_ms"`
	WindowS        float64     `json:"window_s"`
	Runs           int         `json:"runs"`
	PickupsPerStep int         `json:"pickups_per_step"`
	QueuedOther    int         `json:"queued_other"`
	IdleRSSMB      Stat        `json:"idle_manager_rss_mb"`
	IdleCPUPct     Stat        `json:"idle_manager_cpu_pct"`
	Steps          []SwarmStep `json:"steps"`
	FileLimit      uint64      `json:"file_limit"`
	SourceIPs      int         `json:"source_ips"`
	swarmHealth
}

// ScalingLine is one line of the scaling scenario: one step of the swarm.
type ScalingLine struct {
	Scenario    string  `json:"scenario"`
	Transport   string  `json:"transport"`
	Store       string  `json:"store"`
	HeartbeatMS int64   `json:"heartbeat_ms"`
	WindowS     float64 `json:"window_s"`
	Runs        int     `json:"runs"`
	SwarmStep
	IdleRSSMB  Stat `json:"idle_manager_rss_mb"`
	IdleCPUPct Stat `json:"idle_manager_cpu_pct"`
	swarmHealth
}

func stepKey(i int, name string) string { return fmt.Sprintf("%d/%s", i, name) }

func (r *runner) swarm(ctx context.Context, perStep bool) error {
	c := r.cfg
	need := uint64(c.Steps[len(c.Steps)-1]) + 512
	if need > r.fileLimit {
		return fmt.Errorf("%d delegates need about %d open files in this process and in the manager; the limit is %d (raise `ulimit -n`)",
			c.Steps[len(c.Steps)-1], need, r.fileLimit)
	}
	s := series{}
	var health swarmHealth
	for run := 1; run <= c.Runs; run++ {
		if err := r.swarmRun(ctx, run, s, &health); err != nil {
			return fmt.Errorf("%s run %d: %w", c.Scenario, run, err)
		}
	}
	steps := make([]SwarmStep, len(c.Steps))
	for i, n := range c.Steps {
		st := func(name string) Stat { return s.stat(stepKey(i, name)) }
		steps[i] = SwarmStep{Delegates: n, ConnectS: st("connect"), ManagerRSSMB: st("rss"), RSSMBPer1000: st("rss1000"),
			ManagerCPUPct: st("cpu"), CPUPctPer1000: st("cpu1000"), HeartbeatsPerS: st("hbps"), CPUUSPerHeartbeat: st("cpuhb"),
			BenchCPUPct: st("bench_cpu"), BenchRSSMB: st("bench_rss"), PickupP50MS: st("p50"), PickupP99MS: st("p99"), PickupMaxMS: st("max")}
	}
	if perStep {
		for _, st := range steps {
			if err := emit(r.out, ScalingLine{Scenario: ScenarioScaling, Transport: c.Transport, Store: c.Store,
				HeartbeatMS: c.Heartbeat.Milliseconds(), WindowS: c.Window.Seconds(), Runs: c.Runs, SwarmStep: st,
				IdleRSSMB: s.stat("idle_rss"), IdleCPUPct: s.stat("idle_cpu"), swarmHealth: health}); err != nil {
				return err
			}
		}
		return nil
	}
	return emit(r.out, SwarmSummary{Scenario: ScenarioSwarm, Transport: c.Transport, Store: c.Store,
		HeartbeatMS: c.Heartbeat.Milliseconds(), WindowS: c.Window.Seconds(), Runs: c.Runs, PickupsPerStep: c.Tasks,
		QueuedOther: c.QueuedOther, IdleRSSMB: s.stat("idle_rss"), IdleCPUPct: s.stat("idle_cpu"), Steps: steps,
		FileLimit: r.fileLimit, SourceIPs: c.SourceIPs, swarmHealth: health})
}

func (r *runner) swarmRun(ctx context.Context, run int, s series, health *swarmHealth) error {
	c := r.cfg
	m, tok, _, done, err := r.freshManager(ctx, "bench", "")
	if err != nil {
		return err
	}
	defer done()
	res := newResults()
	sw := newSwarm(ctx, r.log, m, tok, c.Workers, c.SourceIPs, c.HTTPReports, res.deliver)
	defer sw.close()
	if c.QueuedOther > 0 {
		if err := sw.grow(ctx, holderSpec(), 0, 1, 1); err != nil {
			return err
		}
		sleepCtx(ctx, 200*time.Millisecond)
		if err := r.queueOther(ctx, m, c.QueuedOther); err != nil {
			return err
		}
	}
	st := swarmSteps{m: m, sw: sw, res: res, s: s, run: run}
	if st.idleCPU, st.idleRSS, err = r.swarmIdle(ctx, m); err != nil {
		return err
	}
	s.add("idle_cpu", 100*st.idleCPU)
	s.add("idle_rss", st.idleRSS)
	r.progress(run, "idle manager", "rss_mb", round3(st.idleRSS), "cpu_pct", round3(100*st.idleCPU))

	spec := simSpec{name: benchTag, tags: []string{benchTag}, mode: c.Transport}
	have, base := 0, sw.size()
	for i, n := range c.Steps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t0 := time.Now()
		if n > have {
			if err := sw.grow(ctx, spec, base+have, base+n, c.Connect); err != nil {
				return err
			}
			have = n
		}
		if err := r.swarmStep(ctx, &st, i, n, time.Since(t0)); err != nil {
			return err
		}
	}
	health.add(sw.counters())
	return nil
}

// swarmIdle measures the manager idle (no delegate, or only the holder):
// its CPU, in cores, and RSS.
func (r *runner) swarmIdle(ctx context.Context, m *manager) (cpu, rss float64, err error) {
	c := r.cfg
	sleepCtx(ctx, min(c.Heartbeat, 2*time.Second))
	idleWindow := min(c.Window, 10*time.Second)
	u0, err := m.usage()
	if err != nil {
		return 0, 0, err
	}
	sleepCtx(ctx, idleWindow)
	u1, err := m.usage()
	if err != nil {
		return 0, 0, err
	}
	return (u1.cpu - u0.cpu).Seconds() / idleWindow.Seconds(), u1.rssMB(), nil
}

// swarmSteps is what the steps of one swarm run share: the manager and
// the swarm, the series they add to, and the idle manager's CPU (cores)
// and RSS, which each step's figures are net of.
type swarmSteps struct {
	m                *manager
	sw               *swarm
	res              *results
	s                series
	run              int
	idleCPU, idleRSS float64
}

// swarmStep measures the swarm at step i (n delegates, connected in
// connect): the manager's usage over a window, then pickups.
func (r *runner) swarmStep(ctx context.Context, st *swarmSteps, i, n int, connect time.Duration) error {
	c := r.cfg
	// One interval for the new delegates' heartbeats to spread.
	sleepCtx(ctx, c.Heartbeat)
	w, err := r.swarmWindow(ctx, st.m, st.sw)
	if err != nil {
		return err
	}
	net := max(w.cpu-st.idleCPU, 0)
	samples, err := pickups(ctx, st.m, swarmWaiter{st.m, st.res}, benchTag, c.Warmup, c.Tasks, 30*time.Second)
	if err != nil {
		return fmt.Errorf("pickup at %d delegates: %w", n, err)
	}
	l := latenciesOf(samples)
	add := func(name string, v float64) { st.s.add(stepKey(i, name), v) }
	add("connect", connect.Seconds())
	add("rss", w.rss)
	add("rss1000", (w.rss-st.idleRSS)/float64(n)*1000)
	add("cpu", 100*w.cpu)
	add("cpu1000", 100*net/float64(n)*1000)
	add("hbps", w.hbs/c.Window.Seconds())
	if w.hbs > 0 {
		add("cpuhb", net*c.Window.Seconds()/w.hbs*1e6)
	}
	add("bench_cpu", w.benchCPUPct)
	add("bench_rss", w.benchRSS)
	add("p50", l.p50)
	add("p99", l.p99)
	add("max", l.max)
	r.progress(st.run, "step", "delegates", n, "connect_s", round3(connect.Seconds()), "rss_mb", round3(w.rss),
		"cpu_pct", round3(100*w.cpu), "heartbeats_per_s", round3(w.hbs/c.Window.Seconds()),
		"pickup_p50_ms", round3(l.p50), "pickup_p99_ms", round3(l.p99))
	return nil
}

// swarmUsage is what one step's window measured.
type swarmUsage struct {
	cpu         float64 // the manager's CPU, cores
	rss         float64 // the manager's peak RSS, MB (read every second)
	hbs         float64 // the heartbeats the manager acknowledged
	benchCPUPct float64 // this process's CPU, percent of one core
	benchRSS    float64 // this process's RSS at the end, MB
}

// swarmWindow measures the manager and this process over c.Window.
func (r *runner) swarmWindow(ctx context.Context, m *manager, sw *swarm) (swarmUsage, error) {
	c := r.cfg
	u0, err := m.usage()
	if err != nil {
		return swarmUsage{}, err
	}
	c0 := sw.counters()
	b0, err := readUsage(os.Getpid())
	if err != nil {
		return swarmUsage{}, err
	}
	rss := u0.rssMB()
	end := time.Now().Add(c.Window)
	for time.Now().Before(end) && ctx.Err() == nil {
		sleepCtx(ctx, min(time.Second, time.Until(end)))
		if u, err := m.usage(); err == nil {
			rss = max(rss, u.rssMB())
		}
	}
	u1, err := m.usage()
	if err != nil {
		return swarmUsage{}, err
	}
	c1 := sw.counters()
	b1, err := readUsage(os.Getpid())
	if err != nil {
		return swarmUsage{}, err
	}
	return swarmUsage{
		cpu:         (u1.cpu - u0.cpu).Seconds() / c.Window.Seconds(),
		rss:         rss,
		hbs:         float64(c1.hbAcked - c0.hbAcked),
		benchCPUPct: 100 * (b1.cpu - b0.cpu).Seconds() / c.Window.Seconds(),
		benchRSS:    b1.rssMB(),
	}, nil
}
