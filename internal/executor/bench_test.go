package executor

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkShellStart runs a trivial shell task without isolation, in a
// cgroup and with the process tree, each also in a sandbox (namespaces),
// one after the other in each iteration (so a busy machine weighs on all
// alike), and reports per mechanism the median time from Run to the shell
// started (OnStart: what pickup latency includes) and of the whole run.
//
//	go test -run '^$' -bench ShellStart -benchtime 500x ./internal/executor/
func BenchmarkShellStart(b *testing.B) {
	type mech struct {
		name        string
		opts        Options
		start, runs []time.Duration
	}
	var mechs []*mech
	for _, name := range []string{"none", "cgroup", "tree", "cgroup-sandbox", "tree-sandbox"} {
		m := &mech{name: name, opts: Options{Env: []string{"PATH=" + os.Getenv("PATH")}}}
		dir := b.TempDir()
		m.opts.WorkDir = filepath.Join(dir, "tasks", "t")
		if name != "none" {
			mode, sandboxed := strings.CutSuffix(name, "-sandbox")
			opts := IsolatorOptions{Mode: Isolation(mode), Dir: dir, Sandbox: SandboxOff}
			if sandboxed {
				opts.Sandbox = SandboxNamespaces
			}
			iso, err := NewIsolator(opts)
			if err != nil {
				b.Logf("%s not measured: %v", name, err)
				continue
			}
			b.Cleanup(func() { _ = iso.Close() })
			m.opts.Isolator = iso
		}
		mechs = append(mechs, m)
	}
	spec := shellSpec("true")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, m := range mechs {
			begin := time.Now()
			m.opts.OnStart = func() { m.start = append(m.start, time.Since(begin)) }
			if o := Run(b.Context(), spec, m.opts, nil); o.Error != "" {
				b.Fatal(o.Error)
			}
			m.runs = append(m.runs, time.Since(begin))
		}
	}
	b.StopTimer()
	median := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2].Microseconds())
	}
	for _, m := range mechs {
		b.ReportMetric(median(m.start), m.name+"-start-µs")
		b.ReportMetric(median(m.runs), m.name+"-run-µs")
	}
}
