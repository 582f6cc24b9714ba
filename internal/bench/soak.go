package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// SoakSample is one reading during a soak.
type SoakSample struct {
	AtS               float64 `json:"at_s"`
	ManagerRSSMB      float64 `json:"manager_rss_mb"`
	ManagerGoroutines float64 `json:"manager_goroutines"`
	ManagerOpenFiles  float64 `json:"manager_open_files"`
	BenchRSSMB        float64 `json:"bench_rss_mb"`
	BenchGoroutines   float64 `json:"bench_goroutines"`
	// DBMB is the size of the SQLite files (database and WAL); 0 on
	// PostgreSQL.
	DBMB     float64 `json:"db_mb"`
	Finished int64   `json:"finished"`
}

// SoakSummary is the soak scenario's line. The slopes are Theil–Sen
// estimates (medianSlope) over the second half of each run's samples (the
// first half is the warm-up: caches, pools and the WAL fill), per hour;
// Samples are the last run's readings.
type SoakSummary struct {
	Scenario    string  `json:"scenario"`
	Store       string  `json:"store"`
	Delegates   int     `json:"delegates"`
	RatePerS    int     `json:"rate_per_s"`
	DurationS   float64 `json:"duration_s"`
	SampleS     float64 `json:"sample_s"`
	HeartbeatMS int64   `json:"heartbeat_ms"`
	Runs        int     `json:"runs"`
	// TasksPerS is the rate of finished tasks achieved over the run.
	TasksPerS             Stat         `json:"tasks_per_s"`
	Failed                Stat         `json:"failed"`
	LatencyP50MS          Stat         `json:"latency_p50_ms"`
	LatencyP99MS          Stat         `json:"latency_p99_ms"`
	ManagerRSSMBPerH      Stat         `json:"manager_rss_mb_per_h"`
	ManagerGoroutinesPerH Stat         `json:"manager_goroutines_per_h"`
	ManagerOpenFilesPerH  Stat         `json:"manager_open_files_per_h"`
	BenchRSSMBPerH        Stat         `json:"bench_rss_mb_per_h"`
	BenchGoroutinesPerH   Stat         `json:"bench_goroutines_per_h"`
	DBMBPerH              Stat         `json:"db_mb_per_h"`
	ManagerRSSMBLast      Stat         `json:"manager_rss_mb_last"`
	ManagerGoroutinesLast Stat         `json:"manager_goroutines_last"`
	ManagerOpenFilesLast  Stat         `json:"manager_open_files_last"`
	Samples               []SoakSample `json:"samples"`
	swarmHealth
}

func (r *runner) soak(ctx context.Context) error {
	c := r.cfg
	s := series{}
	var health swarmHealth
	var last []SoakSample
	for run := 1; run <= c.Runs; run++ {
		samples, err := r.soakRun(ctx, run, s, &health)
		if err != nil {
			return fmt.Errorf("soak run %d: %w", run, err)
		}
		last = samples
	}
	return emit(r.out, SoakSummary{
		Scenario: ScenarioSoak, Store: c.Store, Delegates: c.Delegates, RatePerS: c.Rate, DurationS: c.Duration.Seconds(),
		SampleS: c.Sample.Seconds(), HeartbeatMS: c.Heartbeat.Milliseconds(), Runs: c.Runs,
		TasksPerS: s.stat("tps"), Failed: s.stat("failed"), LatencyP50MS: s.stat("p50"), LatencyP99MS: s.stat("p99"),
		ManagerRSSMBPerH: s.stat("rss_h"), ManagerGoroutinesPerH: s.stat("gr_h"), ManagerOpenFilesPerH: s.stat("fd_h"),
		BenchRSSMBPerH: s.stat("brss_h"), BenchGoroutinesPerH: s.stat("bgr_h"), DBMBPerH: s.stat("db_h"),
		ManagerRSSMBLast: s.stat("rss"), ManagerGoroutinesLast: s.stat("gr"), ManagerOpenFilesLast: s.stat("fd"),
		Samples: last, swarmHealth: health,
	})
}

func (r *runner) soakRun(ctx context.Context, run int, s series, health *swarmHealth) ([]SoakSample, error) {
	c := r.cfg
	m, tok, dir, done, err := r.freshManager(ctx, "bench", "")
	if err != nil {
		return nil, err
	}
	defer done()
	res := newResults()
	sw := newSwarm(ctx, r.log, m, tok, c.Workers, c.SourceIPs, c.HTTPReports, res.deliver)
	defer sw.close()
	if err := sw.grow(ctx, simSpec{name: benchTag, tags: []string{benchTag}, mode: c.Transport}, 0, c.Delegates, c.Connect); err != nil {
		return nil, err
	}
	r.progress(run, "soak", "delegates", c.Delegates, "rate_per_s", c.Rate, "duration", c.Duration)

	// runCtx ends the tasks under way if the run fails; soakCtx ends the
	// submissions when the duration is over.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	soakCtx, cancel := context.WithTimeout(runCtx, c.Duration)
	defer cancel()
	load := &soakLoad{m: m, res: res, slots: make(chan struct{}, 64*c.Rate)}
	load.wg.Add(1)
	go func() {
		defer load.wg.Done()
		load.pace(soakCtx, runCtx, c.Rate)
	}()

	start := time.Now()
	samples, err := r.soakSamples(ctx, soakCtx, m, dir, start, &load.finished)
	if err != nil {
		stopRun()
		load.wg.Wait()
		return nil, err
	}
	took := time.Since(start)
	load.wg.Wait()
	health.add(sw.counters())

	soakStats(s, load, samples, took)
	r.progress(run, "soak done", "tasks_per_s", round3(float64(load.finished.Load())/took.Seconds()), "failed", load.failed.Load(),
		"manager_rss_mb_per_h", round3(s["rss_h"][len(s["rss_h"])-1]), "samples", len(samples))
	return samples, nil
}

// soakLoad is a soak's open loop: a task every 1/rate, each followed to
// its result; at most 64 × rate in flight (more means the manager has
// fallen behind: the rest are counted as failed, not queued without
// bound here).
type soakLoad struct {
	m     *manager
	res   *results
	slots chan struct{} // one per task in flight
	wg    sync.WaitGroup

	finished, failed atomic.Int64
	mu               sync.Mutex
	lat              []time.Duration // of the finished tasks
}

// pace submits the tasks due at rate per second until soakCtx ends; the
// tasks run until they finish or runCtx ends.
func (l *soakLoad) pace(soakCtx, runCtx context.Context, rate int) {
	// Ticks may come late or be dropped on a busy machine: each one
	// submits what is due since the start, so the rate holds.
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	began := time.Now()
	var sent int64
	for {
		select {
		case <-soakCtx.Done():
			return
		case <-t.C:
		}
		due := int64(time.Since(began).Seconds()*float64(rate)) - sent
		for ; due > 0; due-- {
			sent++
			select {
			case l.slots <- struct{}{}:
			default:
				l.failed.Add(1)
				continue
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer func() { <-l.slots }()
				l.task(runCtx)
			}()
		}
	}
}

// task submits one task and follows it to its result.
func (l *soakLoad) task(runCtx context.Context) {
	t0 := time.Now()
	// The task's own context outlives the soak by a minute so the last
	// ones finish.
	tctx, tcancel := context.WithTimeout(runCtx, time.Minute)
	defer tcancel()
	tk, err := l.m.admin.SubmitTask(tctx, protocol.TaskSpec{Type: protocol.TaskShell,
		Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{benchTag}})
	if err == nil {
		err = l.res.wait(tctx, tk.ID, time.Minute)
	}
	if err != nil {
		l.failed.Add(1)
		return
	}
	l.finished.Add(1)
	l.mu.Lock()
	l.lat = append(l.lat, time.Since(t0))
	l.mu.Unlock()
}

// soakSamples reads a sample every c.Sample until soakCtx ends.
func (r *runner) soakSamples(ctx, soakCtx context.Context, m *manager, dir string, start time.Time, finished *atomic.Int64) ([]SoakSample, error) {
	var samples []SoakSample
	tick := time.NewTicker(r.cfg.Sample)
	defer tick.Stop()
	for soakCtx.Err() == nil {
		select {
		case <-soakCtx.Done():
		case <-tick.C:
			sm, err := r.soakSample(ctx, m, dir, start)
			if err != nil {
				return nil, err
			}
			sm.Finished = finished.Load()
			samples = append(samples, sm)
			r.log.Debug("soak sample", "at_s", sm.AtS, "manager_rss_mb", sm.ManagerRSSMB, "goroutines", sm.ManagerGoroutines,
				"open_files", sm.ManagerOpenFiles, "db_mb", sm.DBMB, "finished", sm.Finished)
		}
	}
	return samples, nil
}

// soakStats adds a run's figures to s: its rate, failures and latencies,
// the slopes per hour of its readings over the second half of the
// samples, and the last readings.
func soakStats(s series, l *soakLoad, samples []SoakSample, took time.Duration) {
	lat := latenciesOf(l.lat)
	s.add("tps", float64(l.finished.Load())/took.Seconds())
	s.add("failed", float64(l.failed.Load()))
	s.add("p50", lat.p50)
	s.add("p99", lat.p99)
	half := samples[len(samples)/2:]
	slope := func(f func(SoakSample) float64) float64 {
		xs, ys := make([]float64, len(half)), make([]float64, len(half))
		for i, sm := range half {
			xs[i], ys[i] = sm.AtS/3600, f(sm)
		}
		return medianSlope(xs, ys)
	}
	s.add("rss_h", slope(func(x SoakSample) float64 { return x.ManagerRSSMB }))
	s.add("gr_h", slope(func(x SoakSample) float64 { return x.ManagerGoroutines }))
	s.add("fd_h", slope(func(x SoakSample) float64 { return x.ManagerOpenFiles }))
	s.add("brss_h", slope(func(x SoakSample) float64 { return x.BenchRSSMB }))
	s.add("bgr_h", slope(func(x SoakSample) float64 { return x.BenchGoroutines }))
	s.add("db_h", slope(func(x SoakSample) float64 { return x.DBMB }))
	if n := len(samples); n > 0 {
		s.add("rss", samples[n-1].ManagerRSSMB)
		s.add("gr", samples[n-1].ManagerGoroutines)
		s.add("fd", samples[n-1].ManagerOpenFiles)
	}
}

// soakSample reads the manager's RSS, goroutines (its /metrics) and open
// files, this process's RSS and goroutines (the simulated delegates live
// here), and the SQLite files' size.
func (r *runner) soakSample(ctx context.Context, m *manager, dir string, start time.Time) (SoakSample, error) {
	sm := SoakSample{AtS: round3(time.Since(start).Seconds())}
	u, err := m.usage()
	if err != nil {
		return sm, err
	}
	sm.ManagerRSSMB = round3(u.rssMB())
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", m.pid()))
	if err != nil {
		return sm, fmt.Errorf("count the manager's open files: %w", err)
	}
	sm.ManagerOpenFiles = float64(len(fds))
	sm.ManagerGoroutines, err = scrapeGauge(ctx, m.url+protocol.PathMetrics, "go_goroutines")
	if err != nil {
		return sm, err
	}
	b, err := readUsage(os.Getpid())
	if err != nil {
		return sm, err
	}
	sm.BenchRSSMB = round3(b.rssMB())
	sm.BenchGoroutines = float64(runtime.NumGoroutine())
	var size int64
	for _, name := range []string{"legate.db", "legate.db-wal"} {
		if fi, err := os.Stat(filepath.Join(dir, "manager", name)); err == nil {
			size += fi.Size()
		}
	}
	sm.DBMB = round3(float64(size) / (1 << 20))
	return sm, nil
}

// scrapeGauge reads one unlabelled sample from a Prometheus text page.
func scrapeGauge(ctx context.Context, url, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read the manager's metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read the manager's metrics: %w", err)
	}
	return 0, fmt.Errorf("the manager's metrics have no %s", name)
}

// medianSlope is the Theil–Sen slope of the points (xs[i], ys[i]): the
// median of the slopes between every two points with different x. Unlike
// a least-squares line, a burst in a few samples (the goroutines and open
// files of a soak follow the tasks in flight, which a busy machine piles
// up for a minute) cannot tilt it: a quarter of the points may be
// anything. 0 for fewer than two distinct x.
func medianSlope(xs, ys []float64) float64 {
	var slopes []float64
	for i := range xs {
		for j := i + 1; j < len(xs); j++ {
			if dx := xs[j] - xs[i]; dx != 0 {
				slopes = append(slopes, (ys[j]-ys[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return 0
	}
	sort.Float64s(slopes)
	n := len(slopes)
	m := slopes[n/2]
	if n%2 == 0 {
		m = (slopes[n/2-1] + slopes[n/2]) / 2
	}
	return round3(m)
}
