package manager

import (
	"sync"

	"github.com/legate-dev/legate/internal/store"
)

// logBus fans task output out to followers (legate task logs --follow) as it
// arrives. A follower that falls behind is marked lagged and reads the rest
// from the store, so a slow reader never blocks a delegate. Output that
// arrives through another manager sharing the store is not on this bus:
// that manager's notification (outputcast.go) tells the followers here to
// read the store at once.
type logBus struct {
	mu   sync.Mutex
	subs map[string]map[*follower]struct{}
}

type follower struct {
	ch     chan store.StoredChunk
	done   chan struct{} // closed when the task ends
	lagged chan struct{} // closed when a chunk could not be delivered
	// stored has a value when output this follower was not sent on ch
	// (it came through another manager) is in the store.
	stored chan struct{}
	once   sync.Once
	lonce  sync.Once
}

func newLogBus() *logBus { return &logBus{subs: map[string]map[*follower]struct{}{}} }

// markLagged tells the follower that a chunk could not be delivered to it.
func (f *follower) markLagged() { f.lonce.Do(func() { close(f.lagged) }) }

func (b *logBus) subscribe(taskID string) *follower {
	f := &follower{
		ch: make(chan store.StoredChunk, 256), done: make(chan struct{}), lagged: make(chan struct{}),
		stored: make(chan struct{}, 1),
	}
	b.mu.Lock()
	m := b.subs[taskID]
	if m == nil {
		m = map[*follower]struct{}{}
		b.subs[taskID] = m
	}
	m[f] = struct{}{}
	b.mu.Unlock()
	return f
}

func (b *logBus) unsubscribe(taskID string, f *follower) {
	b.mu.Lock()
	if m := b.subs[taskID]; m != nil {
		delete(m, f)
		if len(m) == 0 {
			delete(b.subs, taskID)
		}
	}
	b.mu.Unlock()
}

// resubscribe replaces the subscription f of a follower that lagged with a
// new one.
func (b *logBus) resubscribe(taskID string, f *follower) *follower {
	b.unsubscribe(taskID, f)
	return b.subscribe(taskID)
}

func (b *logBus) publish(taskID string, chunks []store.StoredChunk) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for f := range b.subs[taskID] {
		for _, c := range chunks {
			select {
			case f.ch <- c:
			default:
				f.markLagged()
			}
		}
	}
}

// stored tells the task's followers that the store has output they were
// not sent (it came through another manager).
func (b *logBus) stored(taskID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for f := range b.subs[taskID] {
		select {
		case f.stored <- struct{}{}:
		default: // already told
		}
	}
}

// finish tells the task's followers that it reached a terminal state.
func (b *logBus) finish(taskID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for f := range b.subs[taskID] {
		f.once.Do(func() { close(f.done) })
	}
}
