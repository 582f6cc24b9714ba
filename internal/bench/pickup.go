package bench

import (
	"context"
	"fmt"
	"time"
)

// PickupSummary is the pickup scenario's line.
type PickupSummary struct {
	Scenario  string `json:"scenario"`
	Transport string `json:"transport"`
	// Delegate is "simulated" (reports started without a process) or
	// "real" (legate delegate processes forking the task's bash).
	Delegate       string `json:"delegate"`
	Store          string `json:"store"`
	Delegates      int    `json:"delegates"`
	QueuedOther    int    `json:"queued_other"`
	HeartbeatMS    int64  `json:"heartbeat_ms"`
	Runs           int    `json:"runs"`
	TasksPerRun    int    `json:"tasks_per_run"`
	P50MS          Stat   `json:"p50_ms"`
	P99MS          Stat   `json:"p99_ms"`
	MaxMS          Stat   `json:"max_ms"`
	BaselinePeriod int64  `json:"baseline_period_ms,omitempty"`
	BaselineTasks  int    `json:"baseline_tasks_per_run,omitempty"`
	BaselineP50MS  *Stat  `json:"baseline_p50_ms,omitempty"`
	BaselineP99MS  *Stat  `json:"baseline_p99_ms,omitempty"`
	BaselineMaxMS  *Stat  `json:"baseline_max_ms,omitempty"`
	// RatioP50 is the baseline's median p50 over ours (how many times faster).
	RatioP50     float64 `json:"ratio_p50,omitempty"`
	RatioP99     float64 `json:"ratio_p99,omitempty"`
	ManagerRSSMB Stat    `json:"manager_rss_mb"`
	// ConnectS is how long connecting the delegates took (after the queue
	// for other selectors was filled).
	ConnectS Stat `json:"connect_s"`
	// OffersPerTask and LostAcquiresPerTask during the measured pickups,
	// as in throughput; SlowPerRun counts pickups over 100 ms per run.
	// (Simulated delegates only.)
	OffersPerTask       *Stat `json:"offers_per_task,omitempty"`
	LostAcquiresPerTask *Stat `json:"lost_acquires_per_task,omitempty"`
	SlowPerRun          Stat  `json:"slow_over_100ms_per_run"`
	swarmHealth
}

func (r *runner) pickup(ctx context.Context) error {
	c := r.cfg
	s := series{}
	var health swarmHealth
	for run := 1; run <= c.Runs; run++ {
		if err := r.pickupRun(ctx, run, s, &health); err != nil {
			return fmt.Errorf("pickup run %d: %w", run, err)
		}
	}
	sum := PickupSummary{
		Scenario: ScenarioPickup, Transport: c.Transport, Delegate: "simulated", Store: c.Store, Delegates: c.Delegates,
		QueuedOther: c.QueuedOther, HeartbeatMS: c.Heartbeat.Milliseconds(), Runs: c.Runs, TasksPerRun: c.Tasks,
		P50MS: s.stat("p50"), P99MS: s.stat("p99"), MaxMS: s.stat("max"),
		ManagerRSSMB: s.stat("rss"), ConnectS: s.stat("connect"), SlowPerRun: s.stat("slow"), swarmHealth: health,
	}
	if c.Real {
		sum.Delegate = "real"
	} else {
		offers, lost := s.stat("offers"), s.stat("lost")
		sum.OffersPerTask, sum.LostAcquiresPerTask = &offers, &lost
	}
	if c.BaselineTasks > 0 {
		b50, b99, bmax := s.stat("b50"), s.stat("b99"), s.stat("bmax")
		sum.BaselinePeriod, sum.BaselineTasks = c.BaselinePeriod.Milliseconds(), c.BaselineTasks
		sum.BaselineP50MS, sum.BaselineP99MS, sum.BaselineMaxMS = &b50, &b99, &bmax
		sum.RatioP50 = ratio(b50.Median, sum.P50MS.Median)
		sum.RatioP99 = ratio(b99.Median, sum.P99MS.Median)
	}
	return emit(r.out, sum)
}

func (r *runner) pickupRun(ctx context.Context, run int, s series, health *swarmHealth) error {
	c := r.cfg
	m, tok, dir, done, err := r.freshManager(ctx, "bench", "")
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
		sleepCtx(ctx, 200*time.Millisecond) // the holder's first heartbeat (over threshold) lands
		r.progress(run, "queueing tasks for other selectors", "tasks", c.QueuedOther)
		if err := r.queueOther(ctx, m, c.QueuedOther); err != nil {
			return err
		}
	}
	base := sw.size()
	r.progress(run, "connecting simulated delegates", "delegates", c.Delegates, "transport", c.Transport)
	t0 := time.Now()
	var w waiter = swarmWaiter{m, res}
	if c.Real {
		stopReal, err := r.realDelegates(ctx, dir, m, tok, c.Delegates)
		if err != nil {
			return err
		}
		defer stopReal()
		w = streamWaiter{m}
	} else if err := sw.grow(ctx, simSpec{name: benchTag, tags: []string{benchTag}, mode: c.Transport}, base, base+c.Delegates, c.Connect); err != nil {
		return err
	}
	s.add("connect", time.Since(t0).Seconds())
	r.progress(run, "delegates connected", "took", time.Since(t0).Round(time.Millisecond))
	sleepCtx(ctx, 200*time.Millisecond) // long polls open, first heartbeats handled
	if _, err := pickups(ctx, m, w, benchTag, c.Warmup, 0, 30*time.Second); err != nil {
		return err
	}
	c0 := sw.counters()
	samples, err := pickups(ctx, m, w, benchTag, 0, c.Tasks, 30*time.Second)
	if err != nil {
		return err
	}
	c1 := sw.counters()
	s.add("offers", float64(c1.offered-c0.offered)/float64(c.Tasks))
	s.add("lost", float64(c1.lost-c0.lost)/float64(c.Tasks))
	slow := 0
	for _, d := range samples {
		if d > 100*time.Millisecond {
			slow++
		}
	}
	s.add("slow", float64(slow))
	l := latenciesOf(samples)
	s.add("p50", l.p50)
	s.add("p99", l.p99)
	s.add("max", l.max)
	r.progress(run, "pickup", "p50_ms", round3(l.p50), "p99_ms", round3(l.p99), "max_ms", round3(l.max))
	if u, err := m.usage(); err == nil {
		s.add("rss", u.rssMB())
	}
	if c.BaselineTasks > 0 {
		n := sw.size()
		if err := sw.grow(ctx, simSpec{name: "baseline", tags: []string{baselineTag}, mode: modePoll3s, period: c.BaselinePeriod}, n, n+1, 1); err != nil {
			return err
		}
		r.progress(run, "baseline: a delegate polling every "+c.BaselinePeriod.String(), "tasks", c.BaselineTasks)
		bs, err := baselinePickups(ctx, m, swarmWaiter{m, res}, c.BaselineTasks, c.BaselinePeriod)
		if err != nil {
			return err
		}
		bl := latenciesOf(bs)
		s.add("b50", bl.p50)
		s.add("b99", bl.p99)
		s.add("bmax", bl.max)
		r.progress(run, "baseline pickup", "p50_ms", round3(bl.p50), "p99_ms", round3(bl.p99))
	}
	health.add(sw.counters())
	return nil
}

// realDelegates starts n real delegate processes tagged bench (polling with
// --transport polling) and waits until they are connected. The returned
// function stops them.
func (r *runner) realDelegates(ctx context.Context, dir string, m *manager, tok string, n int) (func(), error) {
	extra := []string{"DELEGATE_TAGS=" + benchTag}
	if r.cfg.Transport == TransportPolling {
		extra = append(extra, "POLL_FOR_TASKS=true")
	}
	procs := make([]*delegateProc, 0, n)
	stop := func() {
		for _, d := range procs {
			if err := d.stop(10 * time.Second); err != nil {
				r.log.Warn("stop delegate", "err", err)
			}
		}
	}
	for i := 0; i < n; i++ {
		d, err := startDelegate(r.cfg.Exe, dir, m, tok, benchTag, fmt.Sprintf("bench-real-%02d", i), extra...)
		if err != nil {
			stop()
			return nil, err
		}
		procs = append(procs, d)
	}
	for _, d := range procs {
		if _, err := d.waitConnected(ctx, 30*time.Second); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}
