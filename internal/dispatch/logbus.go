package dispatch

import (
	"sync"
	"sync/atomic"

	"github.com/legate-dev/legate/internal/store"
)

// A follower holds at most followerQueueChunks chunks or followerQueueBytes
// bytes of output not yet sent, and all followers together at most
// busQueueBytes: past either, the follower is marked lagged and reads the
// rest from the store. One follower keeps the slack it had when only chunks
// were counted (256 of up to 256 KiB: a follower of `task run` that falls
// behind for a moment loses nothing of a big output, whose middle is never
// stored); the bus's bound is new: before it, every slow follower could
// hold 64 MiB of the manager's memory.
const (
	followerQueueChunks = 256
	followerQueueBytes  = 64 << 20
	busQueueBytes       = 128 << 20
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
	// queued is the bytes waiting in every follower's queue.
	queued atomic.Int64
}

type follower struct {
	bus    *logBus
	ch     chan store.StoredChunk
	queued atomic.Int64  // bytes waiting in ch
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
		bus: b, ch: make(chan store.StoredChunk, followerQueueChunks), done: make(chan struct{}), lagged: make(chan struct{}),
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

// took accounts for a chunk the follower received from ch.
func (f *follower) took(c store.StoredChunk) {
	n := int64(len(c.Chunk.Data))
	f.queued.Add(-n)
	f.bus.queued.Add(-n)
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
	// What it never received leaves the bus's account (publish holds mu,
	// so nothing is added to ch after this).
	for {
		select {
		case c := <-f.ch:
			f.took(c)
		default:
			return
		}
	}
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
			n := int64(len(c.Chunk.Data))
			if f.queued.Load()+n > followerQueueBytes || b.queued.Load()+n > busQueueBytes {
				f.markLagged()
				continue
			}
			select {
			case f.ch <- c:
				f.queued.Add(n)
				b.queued.Add(n)
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
