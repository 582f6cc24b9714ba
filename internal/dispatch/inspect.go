package dispatch

import (
	"context"
	"time"

	"github.com/legate-dev/legate/internal/assign"
	"github.com/legate-dev/legate/internal/store"
)

// What the manager's tests look at inside dispatch: they start a whole
// manager and check, besides its answers, the state behind them. Nothing
// else calls these.

// Live returns this manager's live view of a delegate instance (as the
// offers see it) and its connection kind; ok is false when the instance
// is not live here.
func (m *Service) Live(instanceID string) (d assign.Delegate, connection string, ok bool) {
	l := m.hub.get(instanceID)
	if l == nil {
		return assign.Delegate{}, "", false
	}
	return delegateView(l), l.connectionKind(), true
}

// Followers returns how many followers of a task's log this manager
// holds, and how many of them lagged.
func (m *Service) Followers(taskID string) (n, lagged int) { return m.logs.Followers(taskID) }

// FollowedTasks returns how many tasks have a follower of their log here.
func (m *Service) FollowedTasks() int { return m.logs.Tasks() }

// LagFollowers marks every follower of a task's log lagged, as the log
// bus does to one that falls behind, and returns how many it marked.
func (m *Service) LagFollowers(taskID string) int { return m.logs.LagAll(taskID) }

// QueuedTask returns the task the queue index holds for id.
func (m *Service) QueuedTask(id string) (store.Task, bool) {
	m.queue.mu.Lock()
	defer m.queue.mu.Unlock()
	e := m.queue.tasks[id]
	if e == nil {
		return store.Task{}, false
	}
	return e.task, true
}

// SweepQueue runs the queue's part of one sweep at now.
func (m *Service) SweepQueue(ctx context.Context, now time.Time) { m.sweepQueue(ctx, now) }

// Prune runs one pass of the prune loop at now and returns how many
// instances it removed.
func (m *Service) Prune(ctx context.Context, now time.Time) int { return m.prune(ctx, now) }
