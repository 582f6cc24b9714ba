package delegate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// defaultPerfInterval is how often the performance line is logged.
const defaultPerfInterval = time.Minute

// perfStats holds the counters of the performance line.
type perfStats struct {
	// executing counts acquired tasks, from acquisition to the delivery
	// of their result; validating counts tasks whose capabilities are
	// being validated (cached validations do not count).
	executing, validating gauge
	// ran and failed count the tasks run to an end since the start, and
	// those that failed or timed out; acquireNS is the last acquisition's
	// round trip. The heartbeat reports them.
	ran, failed, acquireNS atomic.Int64
}

// hbPerf samples the heartbeat's performance figures; the heartbeat
// loop calls it once per heartbeat.
type hbPerf struct {
	mu  sync.Mutex
	cpu cpuSampler
}

// sample returns the figures of a heartbeat.
func (h *hbPerf) sample(st *perfStats) *protocol.DelegatePerf {
	p := &protocol.DelegatePerf{TasksRun: st.ran.Load(), TasksFailed: st.failed.Load(),
		AcquireMS: round1(float64(st.acquireNS.Load()) / 1e6)}
	h.mu.Lock()
	proc, system, ok := h.cpu.sample()
	h.mu.Unlock()
	if ok {
		proc, system = round1(proc), round1(system)
		p.ProcessCPUPercent, p.CPUPercent = &proc, &system
	}
	if used, err := memoryUsed(); err == nil {
		used = round1(used)
		p.MemoryPercent = &used
	}
	if rss, err := readRSS(); err == nil {
		p.RSSBytes = &rss
	}
	return p
}

// gauge is a count of things in progress that also remembers its maximum
// since the last performance line.
type gauge struct {
	cur, max atomic.Int64
}

// begin counts one more thing in progress and returns the function that
// ends it. It is safe on a nil gauge.
func (g *gauge) begin() (end func()) {
	if g == nil {
		return func() {}
	}
	n := g.cur.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			break
		}
	}
	return func() { g.cur.Add(-1) }
}

// takeMax returns the maximum since the last call and starts the next
// period at the current count.
func (g *gauge) takeMax() int64 {
	cur := g.cur.Load()
	return max(g.max.Swap(cur), cur)
}

// perfLoop logs the performance line every interval until ctx ends: the
// CPU load of this process and of the whole machine (percent of all CPUs,
// over the interval), the maximum numbers of executing and validating
// tasks since the last line, the resident memory and the goroutines.
func (a *Agent) perfLoop(ctx context.Context) {
	interval := a.opts.PerfInterval
	if interval < 0 {
		return
	}
	if interval == 0 {
		interval = defaultPerfInterval
	}
	var cpu cpuSampler
	cpu.sample() // the baseline
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		attrs := make([]slog.Attr, 0, 6)
		if proc, system, ok := cpu.sample(); ok {
			attrs = append(attrs, slog.Float64("cpu_process", round1(proc)), slog.Float64("cpu_system", round1(system)))
		}
		attrs = append(attrs,
			slog.Int64("max_executing", a.perf.executing.takeMax()),
			slog.Int64("max_validating", a.perf.validating.takeMax()))
		if rss, err := readRSS(); err == nil {
			attrs = append(attrs, slog.Float64("rss_mb", round1(float64(rss)/(1<<20))))
		}
		attrs = append(attrs, slog.Int("goroutines", runtime.NumGoroutine()))
		a.log.LogAttrs(ctx, slog.LevelInfo, "performance", attrs...)
	}
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// cpuSampler turns the CPU time counters of /proc into loads between two
// samples. Both are in clock ticks, so the process's share of all CPUs is
// the ratio of the two differences.
type cpuSampler struct {
	proc, idle, all uint64
	valid           bool
}

// sample reads the counters and returns the loads since the last sample
// in percent; ok is false at the first sample or when /proc is unreadable.
func (s *cpuSampler) sample() (proc, system float64, ok bool) {
	p, err := readProcessTicks()
	if err != nil {
		s.valid = false
		return 0, 0, false
	}
	idle, all, err := readCPU()
	if err != nil {
		s.valid = false
		return 0, 0, false
	}
	if s.valid && all > s.all {
		d := float64(all - s.all)
		proc = min(100, 100*float64(p-s.proc)/d)
		system = max(0, 100*(d-float64(idle-s.idle))/d)
		ok = true
	} else if s.valid {
		ok = true // no tick passed: nothing ran
	}
	s.proc, s.idle, s.all, s.valid = p, idle, all, true
	return proc, system, ok
}

// readProcessTicks returns the user and system CPU time of this process
// in clock ticks (/proc/self/stat).
func readProcessTicks() (uint64, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	return parseProcessTicks(string(b))
}

// parseProcessTicks parses "pid (comm) state ... utime stime ...": utime
// and stime are fields 14 and 15; comm may contain spaces and parentheses.
func parseProcessTicks(s string) (uint64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("parse /proc/self/stat: no command")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0, errors.New("parse /proc/self/stat: too few fields")
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc/self/stat utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc/self/stat stime: %w", err)
	}
	return utime + stime, nil
}

// readRSS returns the resident memory of this process in bytes
// (/proc/self/status, VmRSS).
func readRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return parseKB(v)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read /proc/self/status: %w", err)
	}
	return 0, errors.New("no VmRSS in /proc/self/status")
}

// parseKB parses "  12345 kB".
func parseKB(v string) (int64, error) {
	f := strings.Fields(v)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("unexpected VmRSS value %q", v)
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("unexpected VmRSS value %q", v)
	}
	return n << 10, nil
}
