package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// results tells whoever waits for a task that the manager took its
// result report, whichever of the two comes first.
type results struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func newResults() *results { return &results{m: map[string]chan struct{}{}} }

func (r *results) ch(id string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.m[id]
	if c == nil {
		c = make(chan struct{}, 1)
		r.m[id] = c
	}
	return c
}

// deliver is the swarm's onResult.
func (r *results) deliver(id string) {
	select {
	case r.ch(id) <- struct{}{}:
	default: // a second result report of the same task
	}
}

// wait waits until the manager took task id's result, up to limit.
func (r *results) wait(ctx context.Context, id string, limit time.Duration) error {
	c := r.ch(id)
	defer func() {
		r.mu.Lock()
		delete(r.m, id)
		r.mu.Unlock()
	}()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-c:
		return nil
	case <-t.C:
		return fmt.Errorf("task %s: no result within %s", id, limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// swarmWaiter waits for a task run by the simulated delegates: for the
// manager to take its result, then reads the task as the manager stored it
// (its times; the result's acknowledgement carries none), outside any
// measured interval.
type swarmWaiter struct {
	m   *manager
	res *results
}

func (w swarmWaiter) wait(ctx context.Context, id string, limit time.Duration) (protocol.Task, error) {
	if err := w.res.wait(ctx, id, limit); err != nil {
		return protocol.Task{}, err
	}
	t, err := w.m.admin.GetTask(ctx, id)
	if err != nil {
		return protocol.Task{}, fmt.Errorf("read task %s after its result: %w", id, err)
	}
	return t, nil
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
