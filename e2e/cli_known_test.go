package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestTaskWaitsForAKnownDelegate: with real processes, a delegate that
// stopped (and deregistered, as a one-shot delegate does) is still known:
// a task it could run waits for it past the liveness window, task run
// --detach says so, and the task runs once the delegate is back; a task
// that no known delegate could run (a typo'd selector) ends not_assigned
// after one liveness window, and task run says that while it waits.
// Before, both ended not_assigned after one window, while task run said
// it would wait up to the queue timeout.
func TestTaskWaitsForAKnownDelegate(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "--heartbeat-interval", "1s")
	tok := c.token("batch")
	env := c.seed004Env(tok, "batch", "batch")
	d := c.delegate("batch", "batch-host", env...)
	d.signal(syscall.SIGTERM)
	if code := d.wait(60 * time.Second); code != 0 {
		t.Fatalf("delegate exit %d on SIGTERM", code)
	}

	r := c.cli("task", "run", "--detach", "--queue-timeout", "1h", "--selector", "batch", "--script", "echo ran")
	if r.code != 0 {
		t.Fatalf("task run --detach: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	if want := "legate: task " + id + ": waiting up to the queue timeout (1h) for delegate batch (batch-host), which is not connected"; !strings.Contains(r.stderr, want) {
		t.Errorf("task run --detach: stderr %q, want %q", r.stderr, want)
	}

	// The typo'd task ends after one window (3s), and task run said so.
	r = c.cli("task", "run", "--selector", "bacth", "--script", "echo never")
	if r.code != 3 || !strings.Contains(r.stderr, "legate: no known delegate can run this: it ends not_assigned within one liveness window (3s)") {
		t.Errorf("task run with a typo'd selector: exit %d, stderr:\n%s\nwant 3 and what will happen", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "queue timeout") {
		t.Errorf("task run promised the queue timeout to a task that ends after one window:\n%s", r.stderr)
	}
	// More than a window has passed since the first task was submitted.
	if st := c.task(id).Status; st != protocol.StatusQueued {
		t.Fatalf("the task a known delegate can run: %s after a window, want queued", st)
	}
	c.delegate("batch", "batch-host", env...)
	eventually(t, 60*time.Second, "the waiting task to run on the delegate back", func() bool {
		return c.task(id).Status == protocol.StatusSucceeded
	})
}
