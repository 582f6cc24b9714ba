package metrics

import (
	"bytes"
	"context"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"strconv"
	"syscall"
)

// goSamples maps Go runtime metrics to the names the Prometheus Go
// collector gives them.
var goSamples = [...]struct {
	name, help, runtime string
	typ                 Type
}{
	{"go_goroutines", "Number of goroutines that currently exist.", "/sched/goroutines:goroutines", TypeGauge},
	{"go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use.", "/memory/classes/heap/objects:bytes", TypeGauge},
	{"go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use.", "/memory/classes/heap/objects:bytes", TypeGauge},
	{"go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already.", "/gc/heap/allocs:bytes", TypeCounter},
	{"go_memstats_sys_bytes", "Number of bytes obtained from system.", "/memory/classes/total:bytes", TypeGauge},
	{"go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place.", "/gc/heap/goal:bytes", TypeGauge},
	{"go_gc_cycles_total", "Count of completed GC cycles.", "/gc/cycles/total:gc-cycles", TypeCounter},
	{"go_gc_gogc_percent", "Heap size target percentage configured by the user (GOGC).", "/gc/gogc:percent", TypeGauge},
	{"go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user (GOMEMLIMIT).", "/gc/gomemlimit:bytes", TypeGauge},
	{"go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting.", "/sched/gomaxprocs:threads", TypeGauge},
}

// AddProcessMetrics adds the standard Go runtime and process series, with
// the names the Prometheus client gives them: go_goroutines, go_threads,
// go_info, go_memstats_* (heap in use, allocated in total, obtained from
// the system, next GC goal), go_gc_*, go_sched_gomaxprocs_threads,
// process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds, process_max_fds and
// process_start_time_seconds. The process_* series other than CPU come from
// /proc and are left out where it does not exist.
func (r *Registry) AddProcessMetrics() {
	descs := []Desc{
		{Opts: Opts{Name: "go_threads", Help: "Number of OS threads created."}, Type: TypeGauge},
		{Opts: Opts{Name: "go_info", Help: "Information about the Go environment."}, Type: TypeGauge, Labels: []string{"version"}},
		{Opts: Opts{Name: "process_cpu_seconds_total", Help: "Total user and system CPU time spent in seconds."}, Type: TypeCounter},
		{Opts: Opts{Name: "process_resident_memory_bytes", Help: "Resident memory size in bytes."}, Type: TypeGauge},
		{Opts: Opts{Name: "process_virtual_memory_bytes", Help: "Virtual memory size in bytes."}, Type: TypeGauge},
		{Opts: Opts{Name: "process_open_fds", Help: "Number of open file descriptors."}, Type: TypeGauge},
		{Opts: Opts{Name: "process_max_fds", Help: "Maximum number of open file descriptors."}, Type: TypeGauge},
		{Opts: Opts{Name: "process_start_time_seconds", Help: "Start time of the process since unix epoch in seconds."}, Type: TypeGauge},
	}
	for _, g := range goSamples {
		descs = append(descs, Desc{Opts: Opts{Name: g.name, Help: g.help}, Type: g.typ})
	}
	r.Collect(collectProcess, descs...)
}

func collectProcess(_ context.Context, s *Scrape) error {
	samples := make([]rtmetrics.Sample, len(goSamples))
	for i, g := range goSamples {
		samples[i].Name = g.runtime
	}
	rtmetrics.Read(samples)
	for i, g := range goSamples {
		switch v := samples[i].Value; v.Kind() {
		case rtmetrics.KindUint64:
			s.Add(g.name, float64(v.Uint64()))
		case rtmetrics.KindFloat64:
			s.Add(g.name, v.Float64())
		}
	}
	threads, _ := runtime.ThreadCreateProfile(nil)
	s.Add("go_threads", float64(threads))
	s.Add("go_info", 1, runtime.Version())

	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
		s.Add("process_cpu_seconds_total", cpu)
	}
	page := float64(os.Getpagesize())
	if f := procFields("/proc/self/statm"); len(f) >= 2 {
		if vm, err := strconv.ParseFloat(f[0], 64); err == nil {
			s.Add("process_virtual_memory_bytes", vm*page)
		}
		if rss, err := strconv.ParseFloat(f[1], 64); err == nil {
			s.Add("process_resident_memory_bytes", rss*page)
		}
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, err := d.Readdirnames(-1)
		d.Close()
		if err == nil {
			s.Add("process_open_fds", float64(len(names)-1)) // less the one reading it
		}
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		s.Add("process_max_fds", float64(lim.Cur))
	}
	if start, ok := startTime(); ok {
		s.Add("process_start_time_seconds", start)
	}
	return nil
}

// userHZ is the unit of the times in /proc/PID/stat: 100 on every Linux
// platform Go supports (the Prometheus client assumes it too).
const userHZ = 100

// startTime is the process start time in seconds since the epoch: the boot
// time from /proc/stat plus the start in ticks from /proc/self/stat.
func startTime() (float64, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after it. starttime is field 22, the 20th after the name.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 20 {
		return 0, false
	}
	ticks, err := strconv.ParseFloat(string(f[19]), 64)
	if err != nil {
		return 0, false
	}
	all, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(all) {
		if rest, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			boot, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64)
			if err != nil {
				return 0, false
			}
			return boot + ticks/userHZ, true
		}
	}
	return 0, false
}

func procFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	f := bytes.Fields(b)
	out := make([]string, len(f))
	for i, x := range f {
		out[i] = string(x)
	}
	return out
}
