package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestTaskRunSaysWhatHappensNext: when the manager says what becomes of
// a task no delegate can run now (it ends not_assigned soon, or waits for
// a known delegate that is not connected), task run says that instead of
// "up to the queue timeout", attached and with --detach, and task explain
// prints it. Before, task run always promised the queue timeout.
func TestTaskRunSaysWhatHappensNext(t *testing.T) {
	t.Parallel()
	const soon = "no known delegate can run this: it ends not_assigned within one liveness window (30s)"
	m := newFakeManager(t, outcomeSpec{block: true})
	west := protocol.DelegateVerdict{InstanceID: "i1", Name: "west", Hostname: "host-c",
		Reasons: []protocol.Reason{{Rule: protocol.RuleSelectors, Message: "missing selectors: gpu"}}}
	m.setExplanation(protocol.Explanation{TaskID: "t_1", Status: protocol.StatusQueued,
		Summary: "no delegate can run this task: 1 delegate, 1 missing selectors", Delegates: []protocol.DelegateVerdict{west}, Outlook: soon})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errOut := newNotifyBuffer()
	done := make(chan result, 1)
	go func() {
		done <- runCLIWith(ctx, m.env(), "", newNotifyBuffer(), errOut, fastNotices,
			"task", "run", "--selector", "gpu", "--queue-timeout", "5m", "--script", "nvidia-smi")
	}()
	want := "legate: " + soon + "; Ctrl-C stops waiting and leaves the task queued (legate task cancel t_1)\n"
	eventually(t, 10*time.Second, "the notice", func() bool { return strings.Contains(errOut.String(), want) })
	cancel()
	r := <-done
	if strings.Contains(r.stderr, "at most its queue timeout") {
		t.Errorf("task run promises the queue timeout to a task that ends sooner:\n%s", r.stderr)
	}

	// Detached: the ID on stdout, what happens next on stderr (the fake
	// numbers tasks in order: this is the second).
	const waits = "waiting up to the queue timeout (1h) for delegate batch (batch-7), which is not connected"
	m.setExplanation(protocol.Explanation{TaskID: "t_2", Status: protocol.StatusQueued, Summary: "no delegate can run this task now", Outlook: waits})
	r = runCLI(t.Context(), m.env(), "", "task", "run", "--detach", "--selector", "batch", "--script", "x")
	if r.err != nil || r.stdout != "t_2\n" {
		t.Fatalf("task run --detach: %v, stdout %q\n%s", r.err, r.stdout, r.stderr)
	}
	if want := "legate: task t_2: " + waits + " (legate task explain t_2)\n"; r.stderr != want {
		t.Errorf("task run --detach: stderr %q, want %q", r.stderr, want)
	}
	r = runCLI(t.Context(), m.env(), "", "task", "explain", "t_2")
	if r.err != nil {
		t.Fatalf("task explain: %v\n%s", r.err, r.stderr)
	}
	if want := "Next: " + waits + "\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("task explain:\n%s\nwant the line %q", r.stdout, want)
	}
}
