package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

func newQueuedTask(id, acct string, created time.Time, selectors ...string) store.Task {
	return store.Task{ID: id, AccountID: acct, Status: protocol.StatusQueued, CreatedAt: created,
		Spec: protocol.TaskSpec{Type: protocol.TaskShell, Selectors: selectors}}
}

func queueIDs(q *queue, acct string) []string {
	var ids []string
	q.each(acct, func(e *queued) bool { ids = append(ids, e.task.ID); return true })
	return ids
}

func TestQueueIndex(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	q := newQueue()
	for i, id := range []string{"a", "b", "c", "d"} {
		q.put(newQueuedTask(id, "acc", t0.Add(time.Duration(i)*time.Second)), t0)
	}
	q.put(newQueuedTask("x", "other", t0), t0)
	q.drop("b")
	q.drop("nope")
	if diff := cmp.Diff([]string{"a", "c", "d"}, queueIDs(q, "acc")); diff != "" {
		t.Errorf("order after a drop (-want +got):\n%s", diff)
	}
	// A requeue refreshes the entry in place (its deny list changed).
	re := newQueuedTask("a", "acc", t0)
	re.DeniedInstances = []string{"i1"}
	q.put(re, t0)
	if diff := cmp.Diff([]string{"a", "c", "d"}, queueIDs(q, "acc")); diff != "" {
		t.Errorf("order after a requeue (-want +got):\n%s", diff)
	}
	q.each("acc", func(e *queued) bool {
		if e.task.ID == "a" && len(e.view.DeniedInstances) != 1 {
			t.Errorf("requeued entry kept the old deny list: %v", e.view.DeniedInstances)
		}
		return true
	})
	// A task that is no longer queued leaves the index.
	done := newQueuedTask("c", "acc", t0)
	done.Status = protocol.StatusSucceeded
	q.put(done, t0)
	if diff := cmp.Diff([]string{"a", "d"}, queueIDs(q, "acc")); diff != "" {
		t.Errorf("after a finished task (-want +got):\n%s", diff)
	}
	if n := len(q.snapshot()["acc"]) + len(q.snapshot()["other"]); n != 3 {
		t.Errorf("%d tasks indexed, want 3", n)
	}

	// Re-offers: due after 1 s, then after 2 s, 4 s, ... at most 30 s.
	var got []time.Duration
	for now := t0; now.Before(t0.Add(2 * time.Minute)); now = now.Add(100 * time.Millisecond) {
		for _, task := range q.due("other", now, 10) {
			if task.ID != "x" {
				t.Fatalf("due returned %s", task.ID)
			}
			got = append(got, now.Sub(t0))
		}
	}
	want := []time.Duration{1 * time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second, 31 * time.Second, 61 * time.Second, 91 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("re-offer times (-want +got):\n%s", diff)
	}
	if n := len(q.due("acc", t0.Add(time.Hour), 1)); n != 1 {
		t.Errorf("due with limit 1 returned %d tasks", n)
	}

	// A resync keeps what the store holds and what was queued since the
	// store was read, and drops the rest; a task the resync adds takes
	// its place in queue order (e was queued before new).
	read := t0.Add(time.Minute)
	q.put(newQueuedTask("new", "acc", read), read.Add(time.Millisecond))
	q.replace([]store.Task{newQueuedTask("d", "acc", t0.Add(3*time.Second)), newQueuedTask("e", "acc", t0.Add(4*time.Second))}, read, read.Add(time.Second))
	if diff := cmp.Diff([]string{"d", "e", "new"}, queueIDs(q, "acc")); diff != "" {
		t.Errorf("after a resync (-want +got):\n%s", diff)
	}
	if ids := queueIDs(q, "other"); len(ids) != 0 {
		t.Errorf("other account after a resync: %v, want none", ids)
	}
}

func TestQueueSignatureIgnoresOrderAndCase(t *testing.T) {
	a := staticView(newQueuedTask("a", "acc", time.Time{}, "Linux", "gpu"))
	b := staticView(newQueuedTask("b", "acc", time.Time{}, "GPU", " linux"))
	c := staticView(newQueuedTask("c", "acc", time.Time{}, "linux"))
	if signature(a) != signature(b) {
		t.Errorf("same selectors, different signatures: %q %q", signature(a), signature(b))
	}
	if signature(a) == signature(c) {
		t.Errorf("different selectors, same signature")
	}
}

// TestSweepWakesWhenTheEarliestLeaseEnds: the sweep loop sleeps its
// interval, or less so that it wakes just after the earliest lease ends
// (failover then takes the lease, not the lease and a tick), never in a
// spin for a lease already past, and not at all early during the grace
// period after a start.
func TestSweepWakesWhenTheEarliestLeaseEnds(t *testing.T) {
	// Whole milliseconds: the store keeps microseconds.
	clock := &fakeClock{now: time.Now().Truncate(time.Millisecond)}
	m, st, acct := newTestService(t, clock.Now)
	ctx := context.Background()
	tick := m.cfg.SweepInterval
	if got := m.nextSweep(ctx, clock.Now()); got != tick {
		t.Errorf("no lease: %v, want the interval %v", got, tick)
	}
	start := clock.Now()
	task := newQueuedTask("t1", acct, start)
	task.QueueDeadline = start.Add(time.Hour)
	if err := st.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimTask(ctx, store.Claim{TaskID: "t1", InstanceID: "i1", LeaseDuration: m.leaseDuration() + 100*time.Millisecond}, start); err != nil {
		t.Fatal(err)
	}
	// Within the first lease period after a start: the plain interval.
	if got := m.nextSweep(ctx, clock.Now()); got != tick {
		t.Errorf("during the start grace: %v, want %v", got, tick)
	}
	clock.Add(m.leaseDuration())
	if got, want := m.nextSweep(ctx, clock.Now()), 101*time.Millisecond; got != want {
		t.Errorf("lease ends in 100ms: %v, want %v", got, want)
	}
	clock.Add(time.Second)
	if got := m.nextSweep(ctx, clock.Now()); got != minSweepPause {
		t.Errorf("lease past: %v, want the minimum pause %v", got, minSweepPause)
	}
}

// TestQueueIndexPriority: the index keeps each account's tasks in the
// store's queue order (priority with aging, store.CompareQueued) whatever
// the order they arrive in (a resync, a broadcast from another manager),
// tombstones included, so offers and re-offers take the higher first.
func TestQueueIndexPriority(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	step := protocol.PriorityAgingStep
	task := func(id string, created time.Duration, p int) store.Task {
		tk := newQueuedTask(id, "acc", t0.Add(created))
		tk.Spec.Priority = p
		return tk
	}
	q := newQueue()
	for _, tk := range []store.Task{
		task("n1", 0, protocol.PriorityNormal),
		task("n2", time.Second, 0),
		task("gone", 2*time.Second, protocol.PriorityNormal),
		task("low-old", -10*step, protocol.PriorityLow),
		task("urgent", 3*time.Second, protocol.PriorityUrgent),
		task("n3", 4*time.Second, protocol.PriorityNormal),
		task("high", 5*time.Second, protocol.PriorityHigh),
	} {
		q.put(tk, t0)
		if tk.ID == "gone" {
			q.drop("gone")
		}
	}
	want := []string{"low-old", "urgent", "high", "n1", "n2", "n3"}
	if diff := cmp.Diff(want, queueIDs(q, "acc")); diff != "" {
		t.Errorf("queue order (-want +got):\n%s", diff)
	}
	var due []string
	for _, tk := range q.due("acc", t0.Add(time.Hour), 10) {
		due = append(due, tk.ID)
	}
	if diff := cmp.Diff(want, due); diff != "" {
		t.Errorf("re-offer order (-want +got):\n%s", diff)
	}
}
