package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// ThroughputSummary is the throughput scenario's line.
type ThroughputSummary struct {
	Scenario    string `json:"scenario"`
	Store       string `json:"store"`
	Delegates   int    `json:"delegates"`
	HeartbeatMS int64  `json:"heartbeat_ms"`
	Runs        int    `json:"runs"`
	TasksPerRun int    `json:"tasks_per_run"`
	Inflight    int    `json:"inflight"`
	TasksPerS   Stat   `json:"tasks_per_s"`
	// Latency is submit → result answer, as the submitter sees it.
	LatencyP50MS Stat `json:"latency_p50_ms"`
	LatencyP99MS Stat `json:"latency_p99_ms"`
	LatencyMaxMS Stat `json:"latency_max_ms"`
	// ManagerCPUPct is the manager's CPU (user+system) over the measured
	// interval, in percent of one core.
	ManagerCPUPct Stat `json:"manager_cpu_pct"`
	// ManagerCPUUSPerTask is manager CPU microseconds per task.
	ManagerCPUUSPerTask Stat `json:"manager_cpu_us_per_task"`
	ManagerRSSMB        Stat `json:"manager_rss_mb"`
	// ManagerWriteKiBPerTask and ManagerWritesPerTask are what the
	// manager passed to write system calls per task, in KiB and in calls
	// (/proc/PID/io wchar and syscw: its database's WAL and its sockets).
	ManagerWriteKiBPerTask Stat `json:"manager_write_kib_per_task"`
	ManagerWritesPerTask   Stat `json:"manager_writes_per_task"`
	// Reports says how the simulated delegates acquire and report:
	// "websocket" (frames, when the manager takes them) or "http"
	// (--http-reports).
	Reports string `json:"reports"`
	// DelegateHTTPPerTask is the simulated delegates' HTTP requests per
	// task (acquire, started, result over HTTP; heartbeats and acquire
	// frames on the WebSocket are not requests); the submit is not
	// counted.
	DelegateHTTPPerTask Stat `json:"delegate_http_requests_per_task"`
	// BenchCPUPct is this process's CPU (submitters and simulated
	// delegates) over the measurement: on 2 cores, manager + bench near
	// 200 means the machine, not the manager, is the limit.
	BenchCPUPct Stat `json:"bench_cpu_pct"`
	// OffersPerTask is task_available events received per task (a task
	// is offered to one delegate, then more after 250 ms, then again every
	// second while queued); LostAcquiresPerTask counts acquires that lost
	// (already claimed); RepeatedOffersPerTask counts offers of a task the
	// delegate was already working on.
	OffersPerTask         Stat   `json:"offers_per_task"`
	LostAcquiresPerTask   Stat   `json:"lost_acquires_per_task"`
	RepeatedOffersPerTask Stat   `json:"repeated_offers_per_task"`
	CPUProfile            string `json:"cpuprofile,omitempty"`
	swarmHealth
}

func (r *runner) throughput(ctx context.Context) error {
	c := r.cfg
	s := series{}
	var health swarmHealth
	for run := 1; run <= c.Runs; run++ {
		profile := ""
		if run == c.Runs {
			profile = profilePath(c.CPUProfile)
		}
		if err := r.throughputRun(ctx, run, s, &health, profile); err != nil {
			return fmt.Errorf("throughput run %d: %w", run, err)
		}
	}
	return emit(r.out, ThroughputSummary{
		Scenario: ScenarioThroughput, Store: c.Store, Delegates: c.Delegates, HeartbeatMS: c.Heartbeat.Milliseconds(),
		Runs: c.Runs, TasksPerRun: c.Tasks, Inflight: c.Inflight, TasksPerS: s.stat("tps"),
		LatencyP50MS: s.stat("p50"), LatencyP99MS: s.stat("p99"), LatencyMaxMS: s.stat("max"),
		ManagerCPUPct: s.stat("cpu"), ManagerCPUUSPerTask: s.stat("cpu_task"), ManagerRSSMB: s.stat("rss"),
		ManagerWriteKiBPerTask: s.stat("write_kib"), ManagerWritesPerTask: s.stat("writes"), BenchCPUPct: s.stat("bench_cpu"),
		OffersPerTask: s.stat("offers"), LostAcquiresPerTask: s.stat("lost"), RepeatedOffersPerTask: s.stat("repeated"), DelegateHTTPPerTask: s.stat("http"), Reports: reportsMode(c.HTTPReports), CPUProfile: profilePath(c.CPUProfile), swarmHealth: health,
	})
}

func (r *runner) throughputRun(ctx context.Context, run int, s series, health *swarmHealth, profile string) error {
	c := r.cfg
	m, tok, _, done, err := r.freshManager(ctx, "bench", profile)
	if err != nil {
		return err
	}
	defer done()
	res := newResults()
	sw := newSwarm(ctx, r.log, m, tok, c.Workers, c.SourceIPs, c.HTTPReports, res.deliver)
	defer sw.close()
	if err := sw.grow(ctx, simSpec{name: benchTag, tags: []string{benchTag}, mode: modeWebSocket}, 0, c.Delegates, c.Connect); err != nil {
		return err
	}
	sleepCtx(ctx, 200*time.Millisecond)
	if _, err := closedLoop(ctx, m, res, c.Warmup, c.Inflight); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	r.progress(run, "submitting", "tasks", c.Tasks, "inflight", c.Inflight, "delegates", c.Delegates, "store", c.Store)
	u0, err := m.usage()
	if err != nil {
		return err
	}
	c0 := sw.counters()
	b0, err := readUsage(os.Getpid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	lat, err := closedLoop(ctx, m, res, c.Tasks, c.Inflight)
	if err != nil {
		return err
	}
	took := time.Since(t0)
	u1, err := m.usage()
	if err != nil {
		return err
	}
	b1, err := readUsage(os.Getpid())
	if err != nil {
		return err
	}
	s.add("bench_cpu", 100*(b1.cpu-b0.cpu).Seconds()/took.Seconds())
	tps := float64(c.Tasks) / took.Seconds()
	l := latenciesOf(lat)
	cpu := u1.cpu - u0.cpu
	s.add("tps", tps)
	s.add("p50", l.p50)
	s.add("p99", l.p99)
	s.add("max", l.max)
	s.add("cpu", 100*cpu.Seconds()/took.Seconds())
	s.add("cpu_task", float64(cpu.Microseconds())/float64(c.Tasks))
	s.add("rss", u1.rssMB())
	s.add("write_kib", float64(u1.wchar-u0.wchar)/1024/float64(c.Tasks))
	s.add("writes", float64(u1.syscw-u0.syscw)/float64(c.Tasks))
	r.progress(run, "throughput", "tasks_per_s", round3(tps), "p50_ms", round3(l.p50), "p99_ms", round3(l.p99),
		"manager_cpu_pct", round3(100*cpu.Seconds()/took.Seconds()))
	c1 := sw.counters()
	n := float64(c.Tasks)
	s.add("offers", float64(c1.offered-c0.offered)/n)
	s.add("lost", float64(c1.lost-c0.lost)/n)
	s.add("repeated", float64(c1.repeated-c0.repeated)/n)
	s.add("http", float64(c1.httpCalls-c0.httpCalls)/n)
	health.add(c1)
	return nil
}

// closedLoop runs n trivial tasks, at most inflight at once, each submitted
// as soon as one finishes; it returns each task's submit → result time.
func closedLoop(ctx context.Context, m *manager, res *results, n, inflight int) ([]time.Duration, error) {
	var next atomic.Int64
	var mu sync.Mutex
	lat := make([]time.Duration, 0, n)
	var firstErr error
	var wg sync.WaitGroup
	for w := 0; w < min(inflight, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if next.Add(1) > int64(n) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				t, err := m.admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell,
					Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{benchTag}})
				if err == nil {
					err = res.wait(ctx, t.ID, time.Minute)
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lat = append(lat, time.Since(t0))
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return lat, ctx.Err()
}

// reportsMode names how the simulated delegates report.
func reportsMode(httpReports bool) string {
	if httpReports {
		return "http"
	}
	return "websocket"
}
