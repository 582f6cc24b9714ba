package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/backoff"
	"github.com/legate-dev/legate/internal/protocol"
)

// StormLine is one line of the storm scenario: a fleet of simulated
// delegates dropped at once by a manager killed (SIGKILL) and started
// again on the same database and port, with the manager's admission
// limit and Retry-After hints off (the delegates' old backoff: equal
// jitter, no hint) or on (the manager's default limit; full jitter, the
// hint honoured).
type StormLine struct {
	Scenario    string `json:"scenario"`
	Hints       bool   `json:"hints"`
	Delegates   int    `json:"delegates"`
	Store       string `json:"store"`
	HeartbeatMS int64  `json:"heartbeat_ms"`
	Runs        int    `json:"runs"`
	// Admissions is the manager's --admissions with hints on (0: its
	// default, 64).
	Admissions int `json:"admissions,omitempty"`
	// ConnectS is how long connecting the fleet took at first.
	ConnectS Stat `json:"connect_s"`
	// ReadyS is from the kill until the new manager answers the bench's
	// health check (GET /healthz, 2 s timeout, retried): how long the
	// storm keeps it from answering anything else.
	ReadyS Stat `json:"ready_s"`
	// BackS is from the kill until every delegate has its WebSocket
	// again (the new manager starts at once); Back how many had (all,
	// unless the bound of --storm-timeout passed).
	BackS Stat `json:"back_s"`
	Back  Stat `json:"back"`
	// PeakRSSMB is the new manager process's largest RSS from its start
	// until all were back (read every 200 ms); CPUPct its CPU over that
	// time, PeakCPUPct over its busiest second (percent of one core).
	PeakRSSMB  Stat `json:"peak_rss_mb"`
	CPUPct     Stat `json:"cpu_pct"`
	PeakCPUPct Stat `json:"peak_cpu_pct"`
	// RetryAfter counts the answers 503 overloaded (with Retry-After)
	// the delegates got; Failed the other failed attempts (connection
	// refused while the manager was down, other errors).
	RetryAfter Stat   `json:"retry_after_answers"`
	Failed     Stat   `json:"failed_attempts"`
	FileLimit  uint64 `json:"file_limit"`
}

// stormCounters are what the reconnecting delegates count.
type stormCounters struct {
	back, retryAfter, failed atomic.Int64
}

func (r *runner) storm(ctx context.Context) error {
	c := r.cfg
	if need := uint64(c.Delegates) + 512; need > r.fileLimit {
		return fmt.Errorf("%d delegates need about %d open files in this process and in the manager; the limit is %d (raise `ulimit -n`)",
			c.Delegates, need, r.fileLimit)
	}
	for _, hints := range []bool{false, true} {
		s := series{}
		for run := 1; run <= c.Runs; run++ {
			if err := r.stormRun(ctx, run, hints, s); err != nil {
				return fmt.Errorf("storm (hints %v) run %d: %w", hints, run, err)
			}
		}
		if err := emit(r.out, StormLine{Scenario: ScenarioStorm, Hints: hints, Delegates: c.Delegates, Store: c.Store,
			HeartbeatMS: c.Heartbeat.Milliseconds(), Runs: c.Runs, Admissions: admissionsOf(hints, c.Admissions), ConnectS: s.stat("connect"), ReadyS: s.stat("ready"),
			BackS: s.stat("back_s"), Back: s.stat("back"), PeakRSSMB: s.stat("rss"), CPUPct: s.stat("cpu"),
			PeakCPUPct: s.stat("peak_cpu"), RetryAfter: s.stat("retry_after"), Failed: s.stat("failed"), FileLimit: r.fileLimit}); err != nil {
			return err
		}
	}
	return nil
}

// stormRun connects the fleet, kills the manager, starts it again on the
// same data and port, and measures until every delegate is back.
func (r *runner) stormRun(ctx context.Context, run int, hints bool, s series) error {
	c := r.cfg
	dir, rm, err := r.tempDir()
	if err != nil {
		return err
	}
	defer rm()
	o := managerOpts{heartbeat: c.Heartbeat, logLevel: c.LogLevel}
	switch {
	case !hints:
		o.args = []string{"--admissions", "-1"}
	case c.Admissions > 0:
		o.args = []string{"--admissions", strconv.Itoa(c.Admissions)}
	}
	if c.Store == StorePostgres {
		dsn, drop, err := throwawayDB(ctx, c.PostgresDSN)
		if err != nil {
			return err
		}
		defer drop()
		o.db = dsn
	}
	m, err := startManager(ctx, c.Exe, dir, o)
	if err != nil {
		return err
	}
	defer func() {
		if m != nil {
			m.shutdown(r.log)
		}
	}()
	tok, err := m.token(ctx, "bench")
	if err != nil {
		return err
	}
	u, err := url.Parse(m.url)
	if err != nil {
		return err
	}
	o.listen = u.Host
	var st stormCounters
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sw := newSwarm(sctx, r.log, m, tok, c.Workers, c.SourceIPs, false, func(string) {})
	defer sw.close()
	sw.onDrop = func(ctx context.Context, d *sim) {
		sw.wg.Add(1)
		go func() { defer sw.wg.Done(); sw.reconnect(ctx, d, hints, &st) }()
	}
	t0 := time.Now()
	if err := sw.grow(sctx, simSpec{name: benchTag, tags: []string{benchTag}, mode: modeWebSocket}, 0, c.Delegates, c.Connect); err != nil {
		return err
	}
	s.add("connect", time.Since(t0).Seconds())
	r.progress(run, "fleet connected", "hints", hints, "delegates", c.Delegates, "connect_s", round3(time.Since(t0).Seconds()))

	killed := time.Now()
	m.kill()
	started := make(chan int, 1)
	o.started, o.readyWithin = started, c.StormTimeout
	type startResult struct {
		m     *manager
		err   error
		ready time.Duration
	}
	res := make(chan startResult, 1)
	go func() {
		m, err := startManager(ctx, c.Exe, dir, o)
		res <- startResult{m, err, time.Since(killed)}
	}()
	var pid int
	select {
	case pid = <-started:
	case sr := <-res:
		return fmt.Errorf("start the manager again: %w", sr.err)
	}
	watchErr := r.stormWatch(ctx, run, hints, pid, killed, &st, s)
	sr := <-res
	if sr.err != nil {
		return fmt.Errorf("start the manager again: %w", sr.err)
	}
	m = sr.m
	s.add("ready", sr.ready.Seconds())
	r.progress(run, "manager answered again", "hints", hints, "ready_s", round3(sr.ready.Seconds()))
	return watchErr
}

// stormWatch samples the new manager process from its start until every
// delegate is back or --storm-timeout passes; times count from the kill.
func (r *runner) stormWatch(ctx context.Context, run int, hints bool, pid int, killed time.Time, st *stormCounters, s series) error {
	c := r.cfg
	u0, err := readUsage(pid)
	if err != nil {
		return err
	}
	peakRSS, peakCPU := u0.rssMB(), 0.0
	last, lastAt, start := u0, time.Now(), time.Now()
	u1 := u0
	for st.back.Load() < int64(c.Delegates) && time.Since(killed) < c.StormTimeout && ctx.Err() == nil {
		sleepCtx(ctx, 200*time.Millisecond)
		if u1, err = readUsage(pid); err != nil {
			return err
		}
		peakRSS = max(peakRSS, u1.rssMB())
		if dt := time.Since(lastAt); dt >= time.Second {
			peakCPU = max(peakCPU, 100*(u1.cpu-last.cpu).Seconds()/dt.Seconds())
			last, lastAt = u1, time.Now()
		}
	}
	took := time.Since(killed)
	avgCPU := 100 * (u1.cpu - u0.cpu).Seconds() / max(time.Since(start).Seconds(), 0.001)
	peakCPU = max(peakCPU, avgCPU) // back within a second: the one second
	back := st.back.Load()
	s.add("back_s", took.Seconds())
	s.add("back", float64(back))
	s.add("rss", peakRSS)
	s.add("cpu", avgCPU)
	s.add("peak_cpu", peakCPU)
	s.add("retry_after", float64(st.retryAfter.Load()))
	s.add("failed", float64(st.failed.Load()))
	r.progress(run, "fleet back", "hints", hints, "back", back, "of", c.Delegates, "back_s", round3(took.Seconds()),
		"peak_rss_mb", round3(peakRSS), "cpu_pct", round3(avgCPU),
		"peak_cpu_pct", round3(peakCPU), "retry_after_answers", st.retryAfter.Load(), "failed_attempts", st.failed.Load())
	if back < int64(c.Delegates) {
		r.log.Warn("not every delegate was back within --storm-timeout", "back", back, "of", c.Delegates, "timeout", c.StormTimeout)
	}
	return ctx.Err()
}

// reconnect opens d's WebSocket again after it was lost, as the real
// delegate does: with its session (a manager started again on the same
// database takes it), registering again when the manager asks. With
// hints, its backoff has full jitter and a Retry-After is honoured; without,
// the delegate's backoff before them (equal jitter, no hint).
func (s *swarm) reconnect(ctx context.Context, d *sim, hints bool, st *stormCounters) {
	b := backoff.Backoff{Min: 500 * time.Millisecond, Max: 30 * time.Second, Full: hints}
	var hint time.Duration
	for ctx.Err() == nil {
		wait := b.Next()
		if hints {
			wait = b.After(hint)
		}
		sleepCtx(ctx, wait)
		if ctx.Err() != nil {
			return
		}
		err := s.dial(ctx, d, d.session)
		if err == nil {
			st.back.Add(1)
			return
		}
		hint = 0
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe) && pe.Code == protocol.CodeOverloaded:
			st.retryAfter.Add(1)
			hint = pe.RetryAfter
		case errors.As(err, &pe) && (pe.Code == protocol.CodeSessionExpired || pe.Code == protocol.CodeUnauthenticated):
			st.failed.Add(1)
			if hint = s.reregister(ctx, d, st); hint < 0 {
				return
			}
		default:
			st.failed.Add(1)
		}
	}
}

// reregister registers d again for a new session; it returns the
// Retry-After of a refusal (0: registered or none), -1 when it failed for
// good.
func (s *swarm) reregister(ctx context.Context, d *sim, st *stormCounters) time.Duration {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	reg, err := d.c.Register(rctx, protocol.RegisterRequest{AccountID: s.account, Token: s.token, Name: d.spec.name,
		Hostname: d.hostname, IP: "127.0.0.1", Tags: d.spec.tags, Version: "bench", Type: "SHELL"})
	var pe *protocol.Error
	switch {
	case err == nil:
		d.c.SetSecret(reg.Session)
		d.session = reg.Session
		return 0
	case errors.As(err, &pe) && pe.Code == protocol.CodeOverloaded:
		st.retryAfter.Add(1)
		return pe.RetryAfter
	case errors.As(err, &pe) && !pe.Code.Recoverable():
		s.log.Warn("simulated delegate refused at registration", "delegate", d.hostname, "err", err)
		return -1
	}
	st.failed.Add(1)
	return 0
}

// admissionsOf is the --admissions a storm line ran with (-1: none).
func admissionsOf(hints bool, n int) int {
	if !hints {
		return -1
	}
	return n
}
