package manager

import (
	"context"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// followers returns the followers subscribed to a task's output.
func (b *logBus) followers(taskID string) []*follower {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*follower
	for f := range b.subs[taskID] {
		out = append(out, f)
	}
	return out
}

// subscribedTasks is how many tasks have followers.
func (b *logBus) subscribedTasks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

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
	var first *follower
	eventually(t, 10*time.Second, "the follow subscribed", func() bool {
		fs := tm.m.logs.followers(task.ID)
		if len(fs) == 1 {
			first = fs[0]
		}
		return first != nil
	})
	first.markLagged()
	eventually(t, 10*time.Second, "the lagged follow subscribed again", func() bool {
		fs := tm.m.logs.followers(task.ID)
		return len(fs) == 1 && fs[0] != first
	})
	if _, err := admin.CancelTask(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("follow: %v", err)
	}
	eventually(t, 10*time.Second, "no follower left", func() bool { return tm.m.logs.subscribedTasks() == 0 })
}
