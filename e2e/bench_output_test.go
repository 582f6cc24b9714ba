package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// A task that writes a lot of output quickly must keep the delegate's
// memory flat (the delegate back-pressures the task's pipe) and its output
// must still arrive complete up to what the manager stores: the first and
// last 4 MiB, with a marker saying how much was left out in between.
//
// The benchmark measures the same with 1 GiB (BENCHMARKS.md):
//
//	(cd e2e && go test -run '^$' -bench DelegateRSSWith1GiBOutput -benchtime 1x .)
//	(cd e2e && LEGATE_E2E_BINARY=/path/to/older/legate go test -run '^$' -bench DelegateRSSWith1GiBOutput -benchtime 1x .)

// seqLine is the length of each line of seqScript's output.
const seqLine = 11

// seqScript writes n bytes quickly: the numbered lines "1000000000\n",
// "1000000001\n", … cut at n (seq's fast path writes hundreds of MB/s).
func seqScript(n int64) string {
	return fmt.Sprintf("seq 1000000000 1999999999 | head -c %d", n)
}

// seqBytes returns the bytes [from, to) of seqScript's output.
func seqBytes(from, to int64) []byte {
	line, off := from/seqLine, from%seqLine
	var b bytes.Buffer
	b.Grow(int(to - from + 2*seqLine))
	for int64(b.Len()) < off+to-from {
		b.WriteString(strconv.FormatInt(1000000000+line, 10))
		b.WriteByte('\n')
		line++
	}
	return b.Bytes()[off : off+to-from]
}

// peakRSS returns the peak resident set size of a process (VmHWM), in bytes.
func peakRSS(t testing.TB, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("peak RSS of %d: %v", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

const mib = 1 << 20

var omittedRE = regexp.MustCompile(`\n\[legate: (\d+) bytes of output omitted here: a task's stored output keeps its first and last 4 MiB\]\n`)

// checkHeadAndTail checks that out, the stored output of seqScript(total),
// is exactly its first h bytes, the omitted marker for the n bytes in
// between, and its last t bytes, with h and t the manager's 4 MiB each.
func checkHeadAndTail(t testing.TB, out string, total int64) {
	t.Helper()
	m := omittedRE.FindStringSubmatchIndex(out)
	if m == nil {
		t.Fatalf("stored output (%d bytes) has no omitted marker; it begins %q", len(out), out[:min(len(out), 200)])
	}
	omitted, _ := strconv.ParseInt(out[m[2]:m[3]], 10, 64)
	head, tail := int64(m[0]), int64(len(out)-m[1])
	if head+omitted+tail != total {
		t.Fatalf("head %d + omitted %d + tail %d = %d bytes, want the %d written", head, omitted, tail, head+omitted+tail, total)
	}
	// The cap drops whole chunks (at most 256 KiB): 8 MiB in all, give or
	// take a chunk, of which the head is at least 4 MiB.
	if head < 4*mib || head+tail <= 8*mib-256<<10 || head+tail > 8*mib+256<<10 {
		t.Fatalf("kept head %d and tail %d bytes, want 4 MiB each", head, tail)
	}
	if !bytes.Equal([]byte(out[:head]), seqBytes(0, head)) {
		t.Fatal("the stored head differs from the first bytes written")
	}
	if !bytes.Equal([]byte(out[m[1]:]), seqBytes(total-tail, total)) {
		t.Fatal("the stored tail differs from the last bytes written")
	}
}

// runOutputTask runs seqScript(n) with secrets and returns it once
// terminal.
func runOutputTask(t testing.TB, api *client.Client, n int64, secrets map[string]string) protocol.Task {
	t.Helper()
	task, err := api.SubmitTask(context.Background(), protocol.TaskSpec{
		Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: seqScript(n)},
		TimeoutMS: (30 * time.Minute).Milliseconds(), SecretEnv: secrets,
	})
	if err != nil {
		t.Fatal(err)
	}
	return waitTerminal(t, api, task.ID, 30*time.Minute)
}

// TestDelegateMemoryStaysFlatWithLargeOutput: 256 MiB written as fast as
// seq can, with a 64 MiB bound on the delegate's peak RSS (a bound on
// memory, not a timing). The task has a secret that begins like every
// line, so the masking writer keeps holding back possible matches (its
// window must stay small too) and never masks anything.
func TestDelegateMemoryStaysFlatWithLargeOutput(t *testing.T) {
	t.Parallel()
	const total = 256 * mib
	c := startCluster(t)
	d := c.delegate("output", "output-host", c.seed004Env(c.token("output"), "output", "")...)
	task := runOutputTask(t, c.api(), total, map[string]string{"NEVER_PRINTED": "1000000000-is-not-a-line"})
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("task ended %s: %s", task.Status, task.Error)
	}
	rss := peakRSS(t, d.cmd.Process.Pid)
	checkHeadAndTail(t, c.mustCLI("task", "logs", task.ID), total)
	if rss >= 64*mib {
		t.Fatalf("delegate peak RSS %.1f MiB with a task writing %d MiB, want under 64 MiB", float64(rss)/mib, total/mib)
	}
	t.Logf("delegate peak RSS %.1f MiB", float64(rss)/mib)
}

// BenchmarkDelegateRSSWith1GiBOutput: one real manager and one real
// delegate; each iteration a task writes 1 GiB. Reports the delegate's and
// the manager's peak RSS, the end-to-end rate (submit to result) and how
// many of the tasks succeeded (a delegate that runs out of memory or
// misses its heartbeats does not finish them; that is measured, not
// failed, so older builds can be measured too).
func BenchmarkDelegateRSSWith1GiBOutput(b *testing.B) {
	const total = 1 << 30
	c := startCluster(b)
	d := c.delegateProc("bench-output")
	api := c.api()
	var took time.Duration
	succeeded := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		task := runOutputTask(b, api, total, nil)
		d := time.Since(start)
		b.StopTimer()
		if task.Status == protocol.StatusSucceeded {
			succeeded++
			took += d
			checkHeadAndTail(b, c.mustCLI("task", "logs", task.ID), total)
		} else {
			b.Logf("task ended %s: %s", task.Status, task.Error)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(succeeded)/float64(b.N), "succeeded/op")
	b.ReportMetric(float64(peakRSS(b, d.Process.Pid))/mib, "delegate-peak-RSS-MiB")
	b.ReportMetric(float64(peakRSS(b, c.mgr.cmd.Process.Pid))/mib, "manager-peak-RSS-MiB")
	if succeeded > 0 {
		b.ReportMetric(float64(total)*float64(succeeded)/1e6/took.Seconds(), "MB/s") // of the tasks that succeeded
	}
}

// BenchmarkTaskRunOutput: a task writes LEGATE_BENCH_OUTPUT_MB megabytes
// (default 200) and `legate task run` prints them, as a user runs it: the
// CLI process follows the task's output live and its stdout is counted.
// Reports the rate from the CLI's start to its exit, whether the CLI
// received every byte (it keeps up: a follower that falls behind gets only
// the stored head and tail), and the peak RSS of the delegate and the
// manager.
//
//	(cd e2e && go test -run '^$' -bench TaskRunOutput -benchtime 5x .)
func BenchmarkTaskRunOutput(b *testing.B) {
	total := int64(200_000_000)
	if v, err := strconv.ParseInt(os.Getenv("LEGATE_BENCH_OUTPUT_MB"), 10, 64); err == nil && v > 0 {
		total = v * 1_000_000
	}
	c := startCluster(b)
	d := c.delegateProc("bench-taskrun")
	var took time.Duration
	complete := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(binary, "task", "run", "--timeout", "30m", "--script", seqScript(total))
		cmd.Env = append(baseEnv(), "LEGATE_URL="+c.url, "LEGATE_API_KEY="+c.apiKey)
		var n countWriter
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &n, &stderr
		start := time.Now()
		err := cmd.Run()
		took += time.Since(start)
		if err != nil {
			b.Fatalf("task run: %v\n%s", err, stderr.String())
		}
		if int64(n) == total {
			complete++
		} else {
			b.Logf("task run printed %d bytes of the %d written", int64(n), total)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(total)*float64(b.N)/1e6/took.Seconds(), "MB/s")
	b.ReportMetric(float64(complete)/float64(b.N), "complete/op")
	b.ReportMetric(float64(peakRSS(b, d.Process.Pid))/mib, "delegate-peak-RSS-MiB")
	b.ReportMetric(float64(peakRSS(b, c.mgr.cmd.Process.Pid))/mib, "manager-peak-RSS-MiB")
}

// countWriter counts the bytes written to it.
type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) {
	*w += countWriter(len(p))
	return len(p), nil
}
