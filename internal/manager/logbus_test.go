package manager

import (
	"context"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestFollowThatLaggedUnsubscribes follows a task's output, marks the
// follower lagged (as publish does when its buffer is full), so that it
// reads from the store and subscribes again, and ends the task: once the
// follow has returned, the task has no follower left on the bus.
func TestFollowThatLaggedUnsubscribes(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	fctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop) // before the manager stops: the client would retry
	go func() {
		_, err := admin.StreamLogs(fctx, task.ID, true, func(protocol.LogStreamLine) error { return nil })
		done <- err
	}()
	eventually(t, 10*time.Second, "the follow subscribed", func() bool { return followers(tm, task.ID) == 1 })
	if n := tm.m.dispatch.LagFollowers(task.ID); n != 1 {
		t.Fatalf("marked %d followers lagged, want 1", n)
	}
	// A follower once lagged stays so: the one left, not lagged, is the
	// follow's new subscription.
	eventually(t, 10*time.Second, "the lagged follow subscribed again", func() bool {
		n, lagged := tm.m.dispatch.Followers(task.ID)
		return n == 1 && lagged == 0
	})
	if _, err := admin.CancelTask(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("follow: %v", err)
	}
	eventually(t, 10*time.Second, "no follower left", func() bool { return tm.m.dispatch.FollowedTasks() == 0 })
}

// followers returns how many followers of the task's log tm's dispatch
// holds.
func followers(tm *testManager, taskID string) int {
	n, _ := tm.m.dispatch.Followers(taskID)
	return n
}
