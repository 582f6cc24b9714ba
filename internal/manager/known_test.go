package manager

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestNotAssignedOnlyWhenNoKnownDelegateCanRunIt: a task that no delegate
// the account has a record of could run (a typo'd selector) ends
// not_assigned after one liveness window, and task explain says so while it
// waits; a task that a known but disconnected delegate could run (a
// one-shot delegate that deregistered when it exited) waits up to its
// queue timeout, and task explain names the delegate it waits for.
func TestNotAssignedOnlyWhenNoKnownDelegateCanRunIt(t *testing.T) {
	// Sweeps are run by the test, with chosen times.
	tm := startTestManager(t, Config{HeartbeatInterval: time.Hour, SweepInterval: time.Hour, DefaultQueueTimeout: 24 * time.Hour})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "batch")
	if err != nil {
		t.Fatal(err)
	}
	// One-shot: it registers, and deregisters when it exits.
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "batch", "batch-7", "batch")
	if err := d.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	typo, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "x"}, Selectors: []string{"bacth"}})
	if err != nil {
		t.Fatal(err)
	}
	known, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "x"}, Selectors: []string{"batch"}})
	if err != nil {
		t.Fatal(err)
	}
	window := tm.m.window()

	e, err := admin.ExplainTask(ctx, typo.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "no known delegate can run this: it ends not_assigned within one liveness window ("; !strings.HasPrefix(e.Outlook, want) {
		t.Errorf("outlook of a typo'd selector = %q, want it to start with %q", e.Outlook, want)
	}
	e, err = admin.ExplainTask(ctx, known.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "waiting up to the queue timeout (24h) for delegate batch (batch-7), which is not connected"; e.Outlook != want {
		t.Errorf("outlook of a task a known delegate can run = %q, want %q", e.Outlook, want)
	}

	status := func(id string) protocol.Task {
		t.Helper()
		got, err := admin.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	now := time.Now()
	for _, at := range []time.Time{now, now.Add(window + time.Second), now.Add(3*window + time.Second)} {
		tm.m.dispatch.SweepQueue(ctx, at)
	}
	if got := status(typo.ID); got.Status != protocol.StatusNotAssigned || !strings.Contains(got.Error, "no known delegate can run this task") {
		t.Errorf("a task no known delegate can run: %s (%q), want %s with the reason", got.Status, got.Error, protocol.StatusNotAssigned)
	}
	if got := status(known.ID); got.Status != protocol.StatusQueued {
		t.Errorf("a task a known, disconnected delegate can run: %s after three windows (%q), want queued", got.Status, got.Error)
	}

	tm.m.dispatch.SweepQueue(ctx, now.Add(25*time.Hour))
	if got := status(known.ID); got.Status != protocol.StatusNotAssigned || !strings.Contains(got.Error, "queue timeout (24h0m0s)") {
		t.Errorf("past its queue timeout: %s (%q), want %s for the queue timeout", got.Status, got.Error, protocol.StatusNotAssigned)
	}

	// A deleted delegate is no longer known: the fast answer again.
	if _, err := admin.DeleteDelegate(ctx, "batch"); err != nil {
		t.Fatal(err)
	}
	again, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "x"}, Selectors: []string{"batch"}})
	if err != nil {
		t.Fatal(err)
	}
	if e, err = admin.ExplainTask(ctx, again.ID); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.Outlook, "no known delegate can run this") {
		t.Errorf("outlook once the delegate is deleted = %q, want the fast answer", e.Outlook)
	}

	// A rejected delegate is refused at every call: it never comes back,
	// so a task only it could run gets the fast answer too.
	var gated protocol.Token
	if err := json.Unmarshal([]byte(tm.mustAPI(t, tm.admin.APIKey, "POST", protocol.PathTokens, `{"name":"gated","require_approval":true}`, 201)), &gated); err != nil {
		t.Fatal(err)
	}
	tm.registerFake(t, tm.admin.AccountID, gated.Value, "rogue", "rogue-1", "rogue")
	tm.mustAPI(t, tm.admin.APIKey, "POST", protocol.PathDelegates+"/rogue/reject", "", 200)
	forRogue, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "x"}, Selectors: []string{"rogue"}})
	if err != nil {
		t.Fatal(err)
	}
	if e, err = admin.ExplainTask(ctx, forRogue.ID); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.Outlook, "no known delegate can run this") {
		t.Errorf("outlook of a task only a rejected delegate could run = %q, want the fast answer", e.Outlook)
	}
}
