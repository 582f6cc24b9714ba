package dispatch

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/assign"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// queue is this manager's index of the queued tasks, decoded once: what
// offers, re-offers and the queue sweep read instead of listing and
// decoding tasks from the store on every event. A deep queue (thousands of
// tasks waiting for selectors no connected delegate has) then costs memory,
// not a store scan per delegate connection or per result.
//
// The store stays the truth. A task enters the index when it is queued or
// requeued (here, or by another manager's broadcast) and leaves it when it
// is claimed or finished here, or when an acquire finds it gone; a full
// resync from the store (at start and every queueResync) adds what a lost
// broadcast missed and drops what another manager took.
type queue struct {
	mu    sync.Mutex
	tasks map[string]*queued
	// order lists each account's entries in queue order (priority with
	// aging: store.CompareQueued, fixed per task, the store's order too);
	// dropped entries stay as tombstones until they are half the list.
	order map[string][]*queued
	dead  map[string]int
}

// queued is one task of the index: what it is (replaced whole, never
// changed, so a snapshot may share it) and, under the index's lock, its
// pacing.
type queued struct {
	*queuedTask
	gone bool
	// since is when the entry was made (a resync drops only older ones).
	since time.Time
	// nextOffer and backoff pace re-offers of a task that waits.
	nextOffer time.Time
	backoff   time.Duration
}

// queuedTask is a queued task as assignment needs it.
type queuedTask struct {
	task store.Task
	// view is the task for the static assignment rules; its PreferInstance
	// (ranking only) is left empty.
	view assign.Task
	// sig names the task's static requirements: tasks with the same sig
	// pass or fail the static rules on the same delegates.
	sig string
}

// queueResync is how often the index is rebuilt from the store.
const queueResync = 30 * time.Second

// reofferFirst and reofferMax bound the pause between re-offers of a task
// that waits: 1 s, doubling up to 30 s.
const (
	reofferFirst = time.Second
	reofferMax   = 30 * time.Second
)

func newQueue() *queue {
	return &queue{tasks: map[string]*queued{}, order: map[string][]*queued{}, dead: map[string]int{}}
}

func staticView(t store.Task) assign.Task {
	return assign.Task{
		ID: t.ID, Org: t.Spec.Org, Project: t.Spec.Project, Selectors: t.Spec.Selectors,
		Capabilities: t.Spec.Capabilities, DeniedInstances: t.DeniedInstances,
		Container: t.Spec.Type == protocol.TaskContainer,
	}
}

func signature(v assign.Task) string {
	norm := func(l []string) string {
		c := slices.Clone(l)
		for i := range c {
			c[i] = protocol.NormalizeSelector(c[i])
		}
		slices.Sort(c)
		return strings.Join(c, "\x1f")
	}
	return v.Org + "\x1e" + v.Project + "\x1e" + norm(v.Selectors) + "\x1e" + norm(v.Capabilities) + "\x1e" + norm(v.DeniedInstances) + map[bool]string{true: "\x1ec"}[v.Container] + "\x1e" + v.Type
}

// put adds a queued task, or refreshes it (a requeue changes its deny list).
func (q *queue) put(t store.Task, now time.Time) {
	if t.Status != protocol.StatusQueued {
		q.drop(t.ID)
		return
	}
	t = t.WithoutSecretValues() // the index never holds secret values
	v := staticView(t)
	e := &queued{queuedTask: &queuedTask{task: t, view: v, sig: signature(v)},
		nextOffer: now.Add(reofferFirst), backoff: reofferFirst, since: now}
	q.mu.Lock()
	defer q.mu.Unlock()
	if old := q.tasks[t.ID]; old != nil {
		old.queuedTask = e.queuedTask
		return
	}
	q.tasks[t.ID] = e
	l := q.order[t.AccountID] // a new task usually goes last: a search, no copy
	i, _ := slices.BinarySearchFunc(l, e, func(a, b *queued) int { return store.CompareQueued(&a.task, &b.task) })
	q.order[t.AccountID] = slices.Insert(l, i, e)
}

// drop removes a task that is no longer queued.
func (q *queue) drop(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.tasks[id]
	if e == nil {
		return
	}
	delete(q.tasks, id)
	e.gone = true
	acct := e.task.AccountID
	q.dead[acct]++
	if l := q.order[acct]; q.dead[acct] > len(l)/2 {
		q.order[acct] = slices.DeleteFunc(l, func(e *queued) bool { return e.gone })
		q.dead[acct] = 0
		if len(q.order[acct]) == 0 {
			delete(q.order, acct)
			delete(q.dead, acct)
		}
	}
}

// has reports whether a task is in the index.
func (q *queue) has(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.tasks[id] != nil
}

// each calls fn for an account's queued tasks in queue order until fn
// returns false. fn runs under the index's lock: it must not call the
// index, nor block.
func (q *queue) each(accountID string, fn func(e *queued) bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range q.order[accountID] {
		if !e.gone && !fn(e) {
			return
		}
	}
}

// snapshot returns every queued task, grouped by account, in queue order.
// The tasks are shared, not copied: they never change.
func (q *queue) snapshot() map[string][]*queuedTask {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string][]*queuedTask, len(q.order))
	for acct, l := range q.order {
		for _, e := range l {
			if !e.gone {
				out[acct] = append(out[acct], e.queuedTask)
			}
		}
	}
	return out
}

// due returns, for an account, up to limit tasks whose re-offer is due at
// now, and pushes each one's next re-offer back (doubling the pause).
func (q *queue) due(accountID string, now time.Time, limit int) []store.Task {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []store.Task
	for _, e := range q.order[accountID] {
		if len(out) >= limit {
			break
		}
		if e.gone || now.Before(e.nextOffer) {
			continue
		}
		out = append(out, e.task)
		e.backoff = min(2*e.backoff, reofferMax)
		e.nextOffer = now.Add(e.backoff)
	}
	return out
}

// replace makes the index hold ts (the store's queued tasks, read from
// read on), keeping the pacing of tasks it already held. Entries made
// since read began are kept: the store read may not have seen them.
func (q *queue) replace(ts []store.Task, read, now time.Time) {
	keep := make(map[string]bool, len(ts))
	for _, t := range ts {
		keep[t.ID] = true
		q.put(t, now)
	}
	q.mu.Lock()
	var stale []string
	for id, e := range q.tasks {
		if !keep[id] && e.since.Before(read) {
			stale = append(stale, id)
		}
	}
	q.mu.Unlock()
	for _, id := range stale {
		q.drop(id)
	}
}

// resyncQueue rebuilds the index from the store.
func (m *Service) resyncQueue(ctx context.Context) error {
	read := m.cfg.Now()
	var all []store.Task
	var after *store.Task
	for {
		page, err := m.st.QueuedPage(ctx, after, 1000)
		if err != nil {
			return err
		}
		all = append(all, page...)
		if len(page) < 1000 {
			break
		}
		after = &page[len(page)-1]
	}
	m.queue.replace(all, read, m.cfg.Now())
	return nil
}
