package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Failover when the delegate's connection closes (issue 18): the manager
// does not wait for the lease of a silent delegate (three heartbeat
// intervals) when the connection of a delegate running tasks closes under
// it; it cuts their leases to one interval. How long failover takes is
// measured by BenchmarkFailoverAfterKill, not asserted here.

// A delegate killed with SIGKILL while it runs a task with a retry: the
// manager sees its WebSocket close, says that the task fails over after one
// interval, and the task runs again on the other replica and succeeds.
func TestFailoverConnectionClosedRequeuesToReplica(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "--heartbeat-interval", "2s")
	tok := c.token("fc1")
	const group = "fc1-group"
	pa := c.delegate(group, "fc1-a", c.seed004Env(tok, group, "")...)
	c.waitConnected("fc1-a", protocol.ConnWebSocket)
	w := newTwoRuns(t)
	id := c.submit("--selector", group, "--retries", "1", "--queue-timeout", "60s", "--script", w.script())
	first := c.waitRunning(id)
	if first.DelegateHostname != "fc1-a" || first.Attempts != 1 {
		t.Fatalf("first attempt: %+v", first)
	}
	waitFile(t, w.path("first"), "first run started")
	pb := c.delegate(group, "fc1-b", c.seed004Env(tok, group, "")...)

	pa.signal(syscall.SIGKILL)
	signalledExit(pa)

	got := c.waitTerminal(id)
	if got.Status != protocol.StatusSucceeded || got.Attempts != 2 || got.DelegateHostname != "fc1-b" || exitCode(got) != "0" {
		t.Errorf("re-queued task: status %s attempts %d host %q exit %s error %q; want succeeded, 2, fc1-b, 0",
			got.Status, got.Attempts, got.DelegateHostname, exitCode(got), got.Error)
	}
	if !acquired(pb, id) {
		t.Errorf("survivor's log shows no acquire of %s", id)
	}
	if logs := c.mustCLI("task", "logs", id); !strings.Contains(logs, "second run") {
		t.Errorf("re-queued task logs = %q, want the second run's output", logs)
	}
	if out := c.mgr.out.String(); !hasLine(out, "connection closed while it runs tasks", "hostname=fc1-a", "connection=websocket") {
		t.Errorf("manager log has no failover on the closed connection of fc1-a:\n%s", linesWith(out, "fc1-a"))
	}
	c.noneRunning()
}

// A delegate whose WebSocket is cut while it runs a task (the network, not
// the process) reaches the manager again at once over polling, and later
// over a new WebSocket: it keeps its task, which runs once and succeeds,
// however long after the cut it ends.
func TestFailoverCutConnectionKeepsTask(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	proxy := startCutProxy(t, c.url)
	tok := c.token("fc2")
	env := c.seed004Env(tok, "fc2", "")
	for i, kv := range env {
		if strings.HasPrefix(kv, "MANAGER_HOST_AND_PORT=") {
			env[i] = "MANAGER_HOST_AND_PORT=" + proxy.url
		}
	}
	p := c.delegate("fc2", "fc2-host", env...)
	c.waitConnected("fc2-host", protocol.ConnWebSocket)

	runs := filepath.Join(t.TempDir(), "runs")
	marker := filepath.Join(t.TempDir(), "go")
	id := c.submit("--retries", "1", "--script",
		fmt.Sprintf("echo run >> %s; echo started; while [ ! -e %s ]; do sleep 0.05; done; echo survived the cut", runs, marker))
	before := c.waitRunning(id)

	cut := time.Now()
	proxy.cut()
	c.waitConnected("fc2-host", protocol.ConnPolling)
	// Wait until the manager has recorded contact two heartbeat intervals
	// (500 ms each) after the cut: a lease cut to one interval at the cut
	// and not given back would have ended by then.
	eventually(t, 20*time.Second, "contact two intervals after the cut", func() bool {
		d, ok := c.findDelegate("fc2-host")
		return ok && d.LastHeartbeat != nil && d.LastHeartbeat.After(cut.Add(time.Second))
	})
	proxy.heal()
	c.waitConnected("fc2-host", protocol.ConnWebSocket)
	if now := c.task(id); now.Status != protocol.StatusRunning || now.Attempts != 1 || now.InstanceID != before.InstanceID {
		t.Fatalf("after the cut: status %s attempts %d instance %s, want running, 1, %s", now.Status, now.Attempts, now.InstanceID, before.InstanceID)
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := c.waitTerminal(id)
	if got.Status != protocol.StatusSucceeded || got.Attempts != 1 || got.InstanceID != before.InstanceID {
		t.Errorf("task: status %s attempts %d instance %s error %q; want succeeded, 1, %s", got.Status, got.Attempts, got.InstanceID, got.Error, before.InstanceID)
	}
	if b, err := os.ReadFile(runs); err != nil || string(b) != "run\n" {
		t.Errorf("the task's script ran %q times, want once (err %v)", b, err)
	}
	if logs := c.mustCLI("task", "logs", id); !strings.Contains(logs, "started") || !strings.Contains(logs, "survived the cut") {
		t.Errorf("logs across the cut = %q", logs)
	}
	if p.exited() {
		t.Error("the delegate exited")
	}
}
