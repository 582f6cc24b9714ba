package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// results hands the manager's answer to a task's result report to whoever
// waits for that task, whichever of the two comes first.
type results struct {
	mu sync.Mutex
	m  map[string]chan protocol.Task
}

func newResults() *results { return &results{m: map[string]chan protocol.Task{}} }

func (r *results) ch(id string) chan protocol.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.m[id]
	if c == nil {
		c = make(chan protocol.Task, 1)
		r.m[id] = c
	}
	return c
}

// deliver is the swarm's onResult.
func (r *results) deliver(t protocol.Task) {
	select {
	case r.ch(t.ID) <- t:
	default: // a second result report of the same task
	}
}

// wait waits for task id's result, up to limit.
func (r *results) wait(ctx context.Context, id string, limit time.Duration) (protocol.Task, error) {
	c := r.ch(id)
	defer func() {
		r.mu.Lock()
		delete(r.m, id)
		r.mu.Unlock()
	}()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case task := <-c:
		return task, nil
	case <-t.C:
		return protocol.Task{}, fmt.Errorf("task %s: no result within %s", id, limit)
	case <-ctx.Done():
		return protocol.Task{}, ctx.Err()
	}
}

// pickupOf is queued → started as the manager stamped them: from the
// task's row being stored as queued to the manager receiving the
// delegate's "started" report.
func pickupOf(t protocol.Task) (time.Duration, error) {
	if t.StartedAt == nil {
		return 0, fmt.Errorf("task %s (%s) has no started_at", t.ID, t.Status)
	}
	return t.StartedAt.Sub(t.CreatedAt), nil
}
