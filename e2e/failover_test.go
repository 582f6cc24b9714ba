package e2e

// End-to-end crash and failover tests (issue 4, "No task lost"): delegates
// and managers are killed (SIGKILL), stopped (SIGTERM) or frozen
// (SIGSTOP/SIGCONT) while tasks run, and every task must end where the
// design says: re-queued to a replica when it has retries left, failed
// with the lost delegate named when it has none, never applied twice, never
// stuck running. The manager runs with a 500 ms heartbeat interval, so the
// liveness window and the lease are 1.5 s.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// ---------------------------------------------------------------------------
// Helpers

// orphans records the PIDs of task scripts (each the leader of its own
// process group, see executor.runShell) and kills what is left of those
// groups at cleanup: a delegate killed with SIGKILL leaves its task's
// process group behind.
type orphans struct {
	file string
}

func newOrphans(t *testing.T) *orphans {
	t.Helper()
	o := &orphans{file: filepath.Join(t.TempDir(), "pids")}
	t.Cleanup(func() {
		for _, pid := range o.pids() {
			if isTaskScript(pid) {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	return o
}

// record is the script line that appends the script's PID to the file.
func (o *orphans) record() string { return fmt.Sprintf("echo $$ >> %s", o.file) }

func (o *orphans) pids() []int {
	b, _ := os.ReadFile(o.file)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 1 {
			out = append(out, n)
		}
	}
	return out
}

// isTaskScript reports whether pid is a live (not zombie) `bash script.sh`,
// so that cleanup never signals a reused PID.
func isTaskScript(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Equal(cmdline, []byte("bash\x00script.sh\x00")) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// twoRuns is a task script whose first run and later runs differ: the first
// run (whichever delegate gets it) announces "first run", waits for the
// release marker (at most about a minute) and exits 7; every later run
// prints "second run" and exits 0. mkdir makes "first" atomic.
type twoRuns struct {
	dir     string
	orphans *orphans
}

func newTwoRuns(t *testing.T) *twoRuns {
	t.Helper()
	return &twoRuns{dir: t.TempDir(), orphans: newOrphans(t)}
}

func (w *twoRuns) path(name string) string { return filepath.Join(w.dir, name) }

func (w *twoRuns) script() string {
	return fmt.Sprintf(`%s
if mkdir %s 2>/dev/null; then
  echo "first run"
  i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
  touch %s
  exit 7
fi
echo "second run"
`, w.orphans.record(), w.path("first"), w.path("release"), w.path("first-done"))
}

// release lets the first run exit (7).
func (w *twoRuns) release(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(w.path("release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func waitFile(t *testing.T, path, what string) {
	t.Helper()
	eventually(t, 20*time.Second, what, func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// hasLine reports whether some line of out contains every one of parts.
func hasLine(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func linesWith(out string, parts ...string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if hasLine(line, parts...) {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// acquired reports whether the delegate's log shows that it acquired task id.
func acquired(p *proc, id string) bool {
	return hasLine(p.out.String(), `msg="task acquired"`, "task="+id)
}

// waitDelegateDone waits until the delegate's log shows that it is done
// with task id (it logs "task finished" once its result was delivered or
// refused).
func waitDelegateDone(t *testing.T, p *proc, id string) {
	t.Helper()
	eventually(t, 30*time.Second, p.name+" done with task "+id, func() bool {
		return hasLine(p.out.String(), `msg="task finished"`, "task="+id)
	})
}

// waitDisconnected waits until the manager lists the delegate as disconnected.
func (c *cluster) waitDisconnected(hostname string) {
	c.t.Helper()
	eventually(c.t, 20*time.Second, "delegate "+hostname+" disconnected", func() bool {
		d, ok := c.findDelegate(hostname)
		return ok && d.Status == protocol.DelegateDisconnected
	})
}

// noneRunning fails when a task of the cluster is still running.
func (c *cluster) noneRunning() {
	c.t.Helper()
	for _, tk := range c.taskList() {
		if tk.Status == protocol.StatusRunning {
			c.t.Errorf("task %s still running on %s (attempts %d)", tk.ID, tk.DelegateHostname, tk.Attempts)
		}
	}
}

func exitCode(tk protocol.Task) string {
	if tk.ExitCode == nil {
		return "none"
	}
	return strconv.Itoa(*tk.ExitCode)
}

// signalledExit waits for a process killed by a signal to be gone.
func signalledExit(p *proc) {
	p.t.Helper()
	_ = p.wait(15 * time.Second)
}

// restartDelegate starts a new delegate process with the same environment
// (hence the same identity) as one started by cluster.delegate.
func (c *cluster) restartDelegate(hostname string, env ...string) *proc {
	c.t.Helper()
	env = append(env, "DELEGATE_HOSTNAME="+hostname)
	p := start(c.t, "delegate "+hostname+" (restarted)", env, "delegate", "--grace", "20s")
	eventually(c.t, 20*time.Second, "restarted delegate "+hostname+" registered", func() bool {
		return strings.Contains(p.out.String(), "registered with the manager")
	})
	return p
}

// ---------------------------------------------------------------------------
// Delegate lost while running a task

// A delegate killed with SIGKILL while it runs a task with a retry: the task
// runs again on the other replica of the group (attempts 2), and the other
// replica's own task is not disturbed.
func TestFailoverKillDelegateRequeuesToReplica(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("fo1")
	const group = "fo1-group"
	pa := c.delegate(group, "fo1-a", c.seed004Env(tok, group, "")...)
	w := newTwoRuns(t)
	id := c.submit("--selector", group, "--retries", "1", "--queue-timeout", "30s", "--script", w.script())
	first := c.waitRunning(id)
	if first.DelegateHostname != "fo1-a" || first.Attempts != 1 {
		t.Fatalf("first attempt: %+v", first)
	}
	waitFile(t, w.path("first"), "first run started")

	// The second replica joins and runs a task of its own.
	pb := c.delegate(group, "fo1-b", c.seed004Env(tok, group, "")...)
	other, releaseOther := blocker(t, "other done")
	oid := c.submit("--selector", "fo1-b", "--script", "echo other started; "+other)
	before := c.waitRunning(oid)

	pa.signal(syscall.SIGKILL)
	signalledExit(pa)
	c.waitDisconnected("fo1-a")

	got := c.waitTerminal(id)
	if got.Status != protocol.StatusSucceeded || got.Attempts != 2 || got.DelegateHostname != "fo1-b" || exitCode(got) != "0" {
		t.Errorf("re-queued task: status %s attempts %d host %q exit %s error %q; want succeeded, 2, fo1-b, 0",
			got.Status, got.Attempts, got.DelegateHostname, exitCode(got), got.Error)
	}
	if !acquired(pb, id) {
		t.Errorf("survivor's log shows no acquire of %s", id)
	}
	if logs := c.mustCLI("task", "logs", id); !strings.Contains(logs, "second run") {
		t.Errorf("re-queued task logs = %q, want the second run's output", logs)
	}

	// The survivor's own task kept running, on the same lease, untouched.
	now := c.task(oid)
	if now.Status != protocol.StatusRunning || now.DelegateHostname != "fo1-b" || now.Attempts != 1 ||
		now.InstanceID != before.InstanceID || now.StartedAt == nil || !now.StartedAt.Equal(*before.StartedAt) {
		t.Errorf("survivor's own task disturbed: before %+v, now %+v", before, now)
	}
	releaseOther()
	done := c.waitTerminal(oid)
	if done.Status != protocol.StatusSucceeded || done.Attempts != 1 || done.DelegateHostname != "fo1-b" {
		t.Errorf("survivor's own task: %+v", done)
	}
	if logs := c.mustCLI("task", "logs", oid); !strings.Contains(logs, "other started") || !strings.Contains(logs, "other done") {
		t.Errorf("survivor's own task logs = %q", logs)
	}
	if pb.exited() {
		t.Error("the surviving replica exited")
	}
	c.noneRunning()
}

// The same with no retries: the task fails, names the lost delegate, and
// never runs a second time.
func TestFailoverKillDelegateNoRetriesFails(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("fo2")
	const group = "fo2-group"
	pa := c.delegate(group, "fo2-a", c.seed004Env(tok, group, "")...)
	w := newTwoRuns(t)
	id := c.submit("--selector", group, "--retries", "0", "--queue-timeout", "30s", "--script", w.script())
	if first := c.waitRunning(id); first.DelegateHostname != "fo2-a" {
		t.Fatalf("first attempt on %q", first.DelegateHostname)
	}
	waitFile(t, w.path("first"), "first run started")
	pb := c.delegate(group, "fo2-b", c.seed004Env(tok, group, "")...)

	pa.signal(syscall.SIGKILL)
	signalledExit(pa)

	got := c.waitTerminal(id)
	if got.Status != protocol.StatusFailed || got.Attempts != 1 {
		t.Errorf("task: status %s attempts %d host %q error %q; want failed after 1 attempt", got.Status, got.Attempts, got.DelegateHostname, got.Error)
	}
	if !strings.Contains(got.Error, group) || !strings.Contains(got.Error, "fo2-a") {
		t.Errorf("error %q does not name the lost delegate (%s on fo2-a)", got.Error, group)
	}
	// It stays that way and never reached the survivor.
	holds(t, time.Second, "task stays failed after one attempt", func() bool {
		tk := c.task(id)
		return tk.Status == protocol.StatusFailed && tk.Attempts == 1
	})
	if acquired(pb, id) {
		t.Errorf("survivor acquired the task that had no retries left:\n%s", linesWith(pb.out.String(), id))
	}
	r := c.cli("task", "logs", id)
	if strings.Contains(r.stdout, "second run") || strings.Contains(r.stderr, "attempt 2") {
		t.Errorf("task ran a second time: stdout %q stderr %q", r.stdout, r.stderr)
	}
	if _, err := os.Stat(w.path("first")); err != nil {
		t.Errorf("first run never started: %v", err)
	}
	c.noneRunning()
}

// A delegate frozen with SIGSTOP past its lease: the task runs again
// elsewhere and succeeds there; when the frozen delegate resumes, its late
// result (exit 7) and output are refused, the task keeps the second run's
// result, and the delegate goes on working.
func TestFailoverStoppedDelegateLateResultRefused(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("fo3")
	const group = "fo3-group"
	pa := c.delegate(group, "fo3-a", c.seed004Env(tok, group, "")...)
	w := newTwoRuns(t)
	id := c.submit("--selector", group, "--retries", "1", "--queue-timeout", "30s", "--script", w.script())
	if first := c.waitRunning(id); first.DelegateHostname != "fo3-a" {
		t.Fatalf("first attempt on %q", first.DelegateHostname)
	}
	waitFile(t, w.path("first"), "first run started")
	pb := c.delegate(group, "fo3-b", c.seed004Env(tok, group, "")...)

	pa.signal(syscall.SIGSTOP)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = pa.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	c.waitDisconnected("fo3-a")
	second := c.waitTerminal(id)
	if second.Status != protocol.StatusSucceeded || second.Attempts != 2 || second.DelegateHostname != "fo3-b" || exitCode(second) != "0" {
		t.Fatalf("second run: status %s attempts %d host %q exit %s error %q; want succeeded, 2, fo3-b, 0",
			second.Status, second.Attempts, second.DelegateHostname, exitCode(second), second.Error)
	}

	// The first run ends (exit 7) while its delegate is still frozen; the
	// delegate sees it only when it resumes.
	w.release(t)
	waitFile(t, w.path("first-done"), "first run finished")
	pa.signal(syscall.SIGCONT)
	resumed = true

	waitDelegateDone(t, pa, id)
	if !hasLine(pa.out.String(), "refused the result", "task="+id) {
		t.Errorf("the late result was not refused; delegate log:\n%s", linesWith(pa.out.String(), id))
	}
	if !hasLine(c.mgr.out.String(), "refused", id) {
		t.Errorf("manager log records no refusal for %s:\n%s", id, linesWith(c.mgr.out.String(), id))
	}
	final := c.task(id)
	if final.Status != protocol.StatusSucceeded || exitCode(final) != "0" || final.Attempts != 2 || final.DelegateHostname != "fo3-b" ||
		final.Error != "" || final.FinishedAt == nil || !final.FinishedAt.Equal(*second.FinishedAt) {
		t.Errorf("late result applied: after the second run %+v, now %+v", second, final)
	}
	r := c.cli("task", "logs", id)
	if strings.Contains(r.stdout, "[legate: task") {
		t.Errorf("output of the stale attempt was applied after the lease expired: %q", r.stdout)
	}
	if !strings.Contains(r.stdout, "second run") {
		t.Errorf("task logs = %q, want the second run's output", r.stdout)
	}

	// The frozen delegate comes back and works.
	c.waitConnected("fo3-a", "")
	tk, res := c.runJSON("--selector", "fo3-a", "--queue-timeout", "20s", "--script", "echo back again")
	if res.code != 0 || tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != "fo3-a" {
		t.Errorf("resumed delegate: code %d task %+v stderr %s", res.code, tk, res.stderr)
	}
	if pb.exited() || pa.exited() {
		t.Error("a delegate exited")
	}
	c.noneRunning()
}

// ---------------------------------------------------------------------------
// Manager restarts

// managerRestartMidRun stops the manager with sig while a task runs on a
// delegate of capacity 1 and a second task waits for it; the running task
// finishes while the manager is down; after a restart on the same address
// and data directory its result and output land, and the waiting task runs.
func managerRestartMidRun(t *testing.T, sig syscall.Signal, prefix string) {
	c := startCluster(t)
	tok := c.token(prefix)
	host := prefix + "-host"
	pd := c.delegate(prefix, host, append(c.seed004Env(tok, prefix, ""), "DELEGATE_TASK_CAPACITY=1")...)
	o := newOrphans(t)
	dir := t.TempDir()
	marker, done := filepath.Join(dir, "release"), filepath.Join(dir, "done")
	running := c.submit("--selector", host, "--retries", "0", "--script", fmt.Sprintf(
		`%s; echo "before the manager went away"; i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo "finished while it was away"; touch %s`,
		o.record(), marker, done))
	first := c.waitRunning(running)
	// Output sent before the crash is stored before the crash.
	eventually(t, 20*time.Second, "first output line stored", func() bool {
		return strings.Contains(c.mustCLI("task", "logs", running), "before the manager went away")
	})
	queued := c.submit("--selector", host, "--queue-timeout", "60s", "--script", "echo the queued task ran")
	if q := c.task(queued); q.Status != protocol.StatusQueued {
		t.Fatalf("second task on a full delegate: %s on %q, want queued", q.Status, q.DelegateHostname)
	}

	addr := strings.TrimPrefix(c.url, "http://")
	c.mgr.signal(sig)
	code := c.mgr.wait(20 * time.Second)
	if sig == syscall.SIGTERM && code != 0 {
		t.Errorf("manager exit code on SIGTERM = %d, want 0", code)
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFile(t, done, "task finished while the manager was down")
	c.startManager(addr)

	got := c.waitTerminal(running)
	if got.Status != protocol.StatusSucceeded || exitCode(got) != "0" || got.Attempts != 1 || got.DelegateHostname != host || got.InstanceID != first.InstanceID {
		t.Errorf("task that ran through the restart: status %s exit %s attempts %d host %q error %q; want succeeded, 0, 1, %s",
			got.Status, exitCode(got), got.Attempts, got.DelegateHostname, got.Error, host)
	}
	logs := c.mustCLI("task", "logs", running)
	if !strings.Contains(logs, "before the manager went away\n") || !strings.Contains(logs, "finished while it was away\n") {
		t.Errorf("output across the restart = %q", logs)
	}
	q := c.waitTerminal(queued)
	if q.Status != protocol.StatusSucceeded || q.DelegateHostname != host || q.Attempts != 1 {
		t.Errorf("queued task after the restart: %+v", q)
	}
	if logs := c.mustCLI("task", "logs", queued); !strings.Contains(logs, "the queued task ran") {
		t.Errorf("queued task logs = %q", logs)
	}
	t.Logf("manager stopped with %s (exit %d): running task %s ended %s exit %s after %d attempt(s); queued task %s ended %s on %s",
		sig, code, running, got.Status, exitCode(got), got.Attempts, queued, q.Status, q.DelegateHostname)
	c.noneRunning()
	if pd.exited() {
		t.Error("the delegate exited across the manager restart")
	}
	c.waitConnected(host, "")
}

func TestFailoverManagerKillMidRun(t *testing.T) {
	t.Parallel()
	managerRestartMidRun(t, syscall.SIGKILL, "mk")
}

func TestFailoverManagerSigtermRestartMidRun(t *testing.T) {
	t.Parallel()
	managerRestartMidRun(t, syscall.SIGTERM, "mt")
}

// ---------------------------------------------------------------------------
// Timeouts when the delegate is gone

// A task with a timeout on a delegate frozen with SIGSTOP: the lease (1.5 s)
// and the manager's timeout enforcement (2 s + 1 s) race; whichever wins,
// the task ends, and the delegate's report after SIGCONT changes nothing.
func TestFailoverStoppedDelegateTimeout(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("fo6")
	pd := c.delegate("fo6", "fo6-host", c.seed004Env(tok, "fo6", "")...)
	o := newOrphans(t)
	started := filepath.Join(t.TempDir(), "started")
	id := c.submit("--selector", "fo6-host", "--timeout", "2s", "--retries", "0", "--script", fmt.Sprintf(
		"%s; touch %s; i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done", o.record(), started))
	waitFile(t, started, "task started")
	pd.signal(syscall.SIGSTOP)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = pd.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	got := c.waitTerminal(id)
	t.Logf("frozen delegate, --timeout 2s --retries 0: the manager ended the task %s (error %q)", got.Status, got.Error)
	switch got.Status {
	case protocol.StatusTimedOut:
	case protocol.StatusFailed:
		if !strings.Contains(got.Error, "fo6-host") {
			t.Errorf("failed task's error %q does not name the lost delegate", got.Error)
		}
	default:
		t.Errorf("task ended %s, want timed_out or failed", got.Status)
	}

	pd.signal(syscall.SIGCONT)
	resumed = true
	// The resumed delegate stops the stale task and reports; the report
	// comes from an expired lease and must be refused, its output too.
	eventually(t, 30*time.Second, "stale task's process stopped by the resumed delegate", func() bool {
		for _, pid := range o.pids() {
			if isTaskScript(pid) {
				return false
			}
		}
		return true
	})
	waitDelegateDone(t, pd, id)
	final := c.task(id)
	if final.Status != got.Status || final.Error != got.Error || final.FinishedAt == nil || !final.FinishedAt.Equal(*got.FinishedAt) {
		t.Errorf("late report changed the task: was %+v, now %+v", got, final)
	}
	if !hasLine(pd.out.String(), "refused the result", "task="+id) {
		t.Errorf("the late result from the expired lease was not refused; delegate log:\n%s", linesWith(pd.out.String(), id))
	}
	if !hasLine(c.mgr.out.String(), "refused", id) {
		t.Errorf("manager log records no refusal of the late result; manager log:\n%s", linesWith(c.mgr.out.String(), id))
	}
	if logs := c.mustCLI("task", "logs", id); strings.Contains(logs, "[legate: task") {
		t.Errorf("output sent after the lease expired was applied to the ended task: %q", logs)
	}
	c.waitConnected("fo6-host", "")
	if r := c.cli("task", "run", "--selector", "fo6-host", "--queue-timeout", "20s", "--script", "echo fine"); r.code != 0 || !strings.Contains(r.stdout, "fine") {
		t.Errorf("resumed delegate: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	c.noneRunning()
}

// The manager enforces a task's timeout when the delegate running it is
// gone: the delegate is killed before its own timer fires, and the manager
// restarted so that its start-up grace keeps the lease from expiring; the
// timeout alone must end the task.
func TestFailoverTimeoutEnforcedWhileDelegateGone(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("fo6b")
	pd := c.delegate("fo6b", "fo6b-host", c.seed004Env(tok, "fo6b", "")...)
	o := newOrphans(t)
	started := filepath.Join(t.TempDir(), "started")
	id := c.submit("--selector", "fo6b-host", "--timeout", "1s", "--retries", "0", "--script", fmt.Sprintf(
		"%s; touch %s; i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done", o.record(), started))
	waitFile(t, started, "task started")
	startedBy := time.Now() // the task was acquired before this
	pd.signal(syscall.SIGKILL)
	addr := strings.TrimPrefix(c.url, "http://")
	c.mgr.signal(syscall.SIGKILL)
	signalledExit(pd)
	signalledExit(c.mgr)
	// Setup, not an assertion: let the timeout (1 s) plus the manager's
	// allowance (2 heartbeat intervals) pass while the manager is down.
	time.Sleep(time.Until(startedBy.Add(2200 * time.Millisecond)))
	c.startManager(addr)

	got := c.waitTerminal(id)
	t.Logf("delegate gone, manager restarted: task ended %s (error %q)", got.Status, got.Error)
	if got.Status != protocol.StatusTimedOut {
		t.Errorf("task status %s (error %q, attempts %d), want timed_out: the timeout must be enforced without the delegate", got.Status, got.Error, got.Attempts)
	}
	c.noneRunning()
}

// ---------------------------------------------------------------------------
// Delegate restart with the same identity

// A delegate killed and started again with the same identity (name,
// hostname, IP) while its task runs: it is the same instance, and the task
// it no longer runs must end (abandoned and re-queued, or failed) — never
// stay running.
func TestFailoverDelegateRestartSameIdentity(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("fo7")
	const group = "fo7-group"
	env := c.seed004Env(tok, group, "")
	pa := c.delegate(group, "fo7-a", env...)
	before, _ := c.findDelegate("fo7-a")
	w := newTwoRuns(t)
	id := c.submit("--selector", group, "--retries", "1", "--queue-timeout", "30s", "--script", w.script())
	if first := c.waitRunning(id); first.DelegateHostname != "fo7-a" {
		t.Fatalf("first attempt on %q", first.DelegateHostname)
	}
	waitFile(t, w.path("first"), "first run started")
	pb := c.delegate(group, "fo7-b", env...)

	pa.signal(syscall.SIGKILL)
	signalledExit(pa)
	pa2 := c.restartDelegate("fo7-a", env...)
	after, _ := c.findDelegate("fo7-a")
	if after.InstanceID != before.InstanceID {
		t.Errorf("restart with the same identity got instance %s, was %s", after.InstanceID, before.InstanceID)
	}

	got := c.waitTerminal(id)
	how := "requeued and run on the other replica"
	switch {
	case got.Status == protocol.StatusSucceeded && got.Attempts == 2 && got.DelegateHostname == "fo7-b":
	case got.Status == protocol.StatusSucceeded && got.Attempts == 2:
		how = "requeued and run on " + got.DelegateHostname
	default:
		how = fmt.Sprintf("ended %s after %d attempt(s) on %q", got.Status, got.Attempts, got.DelegateHostname)
	}
	abandoned := strings.Contains(c.mgr.out.String(), "abandon")
	t.Logf("restarted delegate's lost task: %s (error %q; manager log mentions abandon: %v; restarted delegate acquired it: %v)",
		how, got.Error, abandoned, acquired(pa2, id))
	if got.Status == protocol.StatusSucceeded && got.Attempts == 2 && got.DelegateHostname == "fo7-a" {
		t.Errorf("the task was re-run on the instance that lost it (it must be denied): %+v", got)
	}
	if got.Status != protocol.StatusSucceeded || got.Attempts != 2 {
		t.Errorf("task with a retry left and a live replica: %s after %d attempt(s) (%q), want succeeded on the second", got.Status, got.Attempts, got.Error)
	}

	// The restarted delegate works.
	tk, res := c.runJSON("--selector", "fo7-a", "--queue-timeout", "20s", "--script", "echo restarted")
	if res.code != 0 || tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != "fo7-a" {
		t.Errorf("restarted delegate: code %d task %+v stderr %s", res.code, tk, res.stderr)
	}
	if pb.exited() || pa2.exited() {
		t.Error("a delegate exited")
	}
	c.noneRunning()
}
