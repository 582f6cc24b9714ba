package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/executor"
	"github.com/legate-dev/legate/internal/protocol"
)

// When a task ends, for any reason, every process it started ends: a
// background job, a child that calls setsid, a double-forked daemon and a
// child that ignores SIGTERM, with each isolation mechanism of the
// delegate (LEGATE_TASK_ISOLATION). Processes are recognised by a unique
// argv[0] (`exec -a`).

// isolationModes are the mechanisms to test here: tree always, cgroup when
// this machine lets the test create cgroups (the delegate then can too).
func isolationModes(t *testing.T) []string {
	t.Helper()
	modes := []string{"tree"}
	iso, err := executor.NewIsolator(executor.IsolatorOptions{Mode: executor.IsolationCgroup, Dir: t.TempDir()})
	if err != nil {
		t.Logf("cgroup mode not tested: %v", err)
		return modes
	}
	_ = iso.Close()
	return append(modes, "cgroup")
}

// procMarker returns a unique argv[0] prefix and kills what still carries
// it when the test ends (so a failing run leaves nothing behind).
func procMarker(t *testing.T) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	m := "legate-marker-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		for _, pid := range markedPIDs(m) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return m
}

// markedPIDs returns the live processes whose argv[0] starts with m (a
// zombie's command line is empty: it is dead).
func markedPIDs(m string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.HasPrefix(b, []byte(m)) {
			out = append(out, pid)
		}
	}
	return out
}

func describeMarked(m string) string {
	var out []string
	for _, pid := range markedPIDs(m) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		out = append(out, fmt.Sprintf("%d:%s", pid, bytes.TrimSpace(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))))
	}
	return strings.Join(out, ", ")
}

// waitNoMarked waits (bounded) until no process carries m.
func waitNoMarked(t *testing.T, m string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for len(markedPIDs(m)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes of the task outlived it: %s", describeMarked(m))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// spawnKinds are the processes spawnScript starts.
var spawnKinds = []string{"bg", "setsid", "daemon", "noterm"}

// spawnScript starts one process of each kind, waits until all run,
// prints "ready", then runs end. ready reads each process's argv[0] with
// bash's own read: a fork per process made a pass over /proc take seconds
// on a loaded machine.
func spawnScript(m, end string) string {
	return fmt.Sprintf(`M=%s
ready() { for p in /proc/[0-9]*; do a0=; read -r -d '' a0 2>/dev/null <"$p/cmdline"; [ "$a0" = "$M-$1" ] && return 0; done; return 1; }
( exec -a $M-bg sleep 300 ) &
setsid bash -c "exec -a $M-setsid sleep 300" &
( setsid bash -c "exec -a $M-daemon sleep 300" </dev/null >/dev/null 2>&1 & )
( trap '' TERM; exec -a $M-noterm sleep 300 ) &
for k in %s; do until ready $k; do sleep 0.02; done; done
echo ready
%s
`, m, strings.Join(spawnKinds, " "), end)
}

func (c *cluster) api() *client.Client {
	c.t.Helper()
	cl, err := client.New(c.url, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	cl.SetSecret(c.apiKey)
	return cl
}

// waitTerminal polls the task until it is terminal.
func waitTerminal(t testing.TB, api *client.Client, id string, within time.Duration) protocol.Task {
	t.Helper()
	var task protocol.Task
	eventually(t, within, "task "+id+" to end", func() bool {
		var err error
		task, err = api.GetTask(context.Background(), id)
		return err == nil && protocol.Terminal(task.Status)
	})
	return task
}

// waitLogs waits until the task's output contains s; t is the (sub)test
// that waits.
func (c *cluster) waitLogs(t testing.TB, id, s string) {
	t.Helper()
	eventually(t, 60*time.Second, "output "+strconv.Quote(s)+" of task "+id, func() bool {
		return strings.Contains(c.cli("task", "logs", id).stdout, s)
	})
}

// isolatedDelegate starts a delegate with LEGATE_TASK_ISOLATION=mode and
// the tag mode, with token ("" = a new one).
func (c *cluster) isolatedDelegate(mode, workDir, token string) *proc {
	c.t.Helper()
	name := "iso-" + mode
	if token == "" {
		token = c.token(name)
	}
	env := append(c.seed004Env(token, name, mode), "LEGATE_TASK_ISOLATION="+mode, "DELEGATE_HOSTNAME="+name+"-host")
	p := start(c.t, "delegate "+name, env, "delegate", "--grace", "20s", "--workdir", workDir)
	c.waitConnected(name+"-host", "")
	return p
}

func TestTaskProcessesEndWithTheirTask(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "--heartbeat-interval", "2s") // no failover here: a busy machine must not lose the delegate
	api := c.api()
	endings := []struct {
		name, end string
		timeout   time.Duration
		cancel    bool
		status    string
	}{
		{name: "success", end: "exit 0", status: protocol.StatusSucceeded},
		{name: "failure", end: "exit 3", status: protocol.StatusFailed},
		{name: "timeout", end: "exec -a $M-end sleep 300", timeout: 15 * time.Second, status: protocol.StatusTimedOut},
		{name: "cancel", end: "exec -a $M-end sleep 300", cancel: true, status: protocol.StatusCancelled},
	}
	for _, mode := range isolationModes(t) {
		c.isolatedDelegate(mode, t.TempDir(), "")
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			for _, e := range endings {
				t.Run(e.name, func(t *testing.T) {
					t.Parallel()
					m := procMarker(t)
					task, err := api.SubmitTask(t.Context(), protocol.TaskSpec{
						Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: spawnScript(m, e.end)},
						Selectors: []string{mode}, TimeoutMS: e.timeout.Milliseconds(),
					})
					if err != nil {
						t.Fatal(err)
					}
					if e.cancel {
						c.waitLogs(t, task.ID, "ready\n")
						if _, err := api.CancelTask(t.Context(), task.ID); err != nil {
							t.Fatal(err)
						}
					}
					got := waitTerminal(t, api, task.ID, 90*time.Second)
					if got.Status != e.status {
						t.Fatalf("task ended %s (%s), want %s; output:\n%s", got.Status, got.Error, e.status, c.cli("task", "logs", task.ID).stdout)
					}
					if out := c.cli("task", "logs", task.ID).stdout; !strings.Contains(out, "ready\n") {
						t.Fatalf("the task ended before its processes ran; output:\n%s", out)
					}
					waitNoMarked(t, m)
				})
			}
		})
	}
}

// TestTaskProcessesEndWhenTheDelegateIsForcedToStop: the second signal
// cancels running tasks; their processes end before the delegate exits.
func TestTaskProcessesEndWhenTheDelegateIsForcedToStop(t *testing.T) {
	t.Parallel()
	for _, mode := range isolationModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			c := startCluster(t, "--heartbeat-interval", "2s") // no failover here: a busy machine must not lose the delegate
			api := c.api()
			d := c.isolatedDelegate(mode, t.TempDir(), "")
			m := procMarker(t)
			task, err := api.SubmitTask(t.Context(), protocol.TaskSpec{
				Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: spawnScript(m, "exec -a $M-end sleep 300")}, Selectors: []string{mode},
			})
			if err != nil {
				t.Fatal(err)
			}
			c.waitLogs(t, task.ID, "ready\n")
			d.signal(syscall.SIGTERM) // drain: the task may finish...
			eventually(t, 20*time.Second, "the delegate to drain", func() bool {
				return strings.Contains(d.out.String(), "stop requested")
			})
			d.signal(syscall.SIGTERM) // ...until the second signal cancels it
			if code := d.wait(60 * time.Second); code != 0 {
				t.Fatalf("delegate exit code %d", code)
			}
			waitNoMarked(t, m)
		})
	}
}

// TestTaskProcessesOfACrashedDelegateEndAtItsNextStart: a delegate killed
// with SIGKILL cannot end its tasks' processes; started again on the same
// working directory, it ends them before taking tasks.
func TestTaskProcessesOfACrashedDelegateEndAtItsNextStart(t *testing.T) {
	t.Parallel()
	for _, mode := range isolationModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			c := startCluster(t, "--heartbeat-interval", "2s") // no failover here: a busy machine must not lose the delegate
			api := c.api()
			wd, tok := t.TempDir(), c.token("crashing")
			d := c.isolatedDelegate(mode, wd, tok)
			m := procMarker(t)
			task, err := api.SubmitTask(t.Context(), protocol.TaskSpec{
				Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: spawnScript(m, "exec -a $M-end sleep 300")}, Selectors: []string{mode},
			})
			if err != nil {
				t.Fatal(err)
			}
			c.waitLogs(t, task.ID, "ready\n")
			d.signal(syscall.SIGKILL)
			d.wait(30 * time.Second)
			if n := len(markedPIDs(m)); n < len(spawnKinds) {
				t.Fatalf("only %d processes of the task left after the crash (%s); the test needs them to outlive it", n, describeMarked(m))
			}
			c.isolatedDelegate(mode, wd, tok)
			waitNoMarked(t, m)
		})
	}
}
