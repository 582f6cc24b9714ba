// Package logbus fans task output out to the followers of a task's log
// (legate task logs --follow) on one manager, bounded in memory: a
// follower that falls behind is marked lagged and reads the rest from the
// store, so a slow reader never blocks a delegate.
package logbus

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

// Bus fans task output out to followers (legate task logs --follow) as it
// arrives. A follower that falls behind is marked lagged and reads the rest
// from the store, so a slow reader never blocks a delegate. Output that
// arrives through another manager sharing the store is not on this bus:
// that manager's notification tells the followers here to
// read the store at once.
type Bus struct {
	mu   sync.Mutex
	subs map[string]map[*Follower]struct{}
	// queued is the bytes waiting in every follower's queue.
	queued atomic.Int64
}

type Follower struct {
	bus    *Bus
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

// New returns an empty bus.
func New() *Bus { return &Bus{subs: map[string]map[*Follower]struct{}{}} }

// MarkLagged tells the follower that a chunk could not be delivered to it.
func (f *Follower) MarkLagged() { f.lonce.Do(func() { close(f.lagged) }) }

func (b *Bus) Subscribe(taskID string) *Follower {
	f := &Follower{
		bus: b, ch: make(chan store.StoredChunk, followerQueueChunks), done: make(chan struct{}), lagged: make(chan struct{}),
		stored: make(chan struct{}, 1),
	}
	b.mu.Lock()
	m := b.subs[taskID]
	if m == nil {
		m = map[*Follower]struct{}{}
		b.subs[taskID] = m
	}
	m[f] = struct{}{}
	b.mu.Unlock()
	return f
}

// Took accounts for a chunk the follower received from ch.
func (f *Follower) Took(c store.StoredChunk) {
	n := int64(len(c.Chunk.Data))
	f.queued.Add(-n)
	f.bus.queued.Add(-n)
}

func (b *Bus) Unsubscribe(taskID string, f *Follower) {
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
			f.Took(c)
		default:
			return
		}
	}
}

// Resubscribe replaces the subscription f of a follower that lagged with a
// new one.
func (b *Bus) Resubscribe(taskID string, f *Follower) *Follower {
	b.Unsubscribe(taskID, f)
	return b.Subscribe(taskID)
}

func (b *Bus) Publish(taskID string, chunks []store.StoredChunk) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for f := range b.subs[taskID] {
		for _, c := range chunks {
			n := int64(len(c.Chunk.Data))
			if f.queued.Load()+n > followerQueueBytes || b.queued.Load()+n > busQueueBytes {
				f.MarkLagged()
				continue
			}
			select {
			case f.ch <- c:
				f.queued.Add(n)
				b.queued.Add(n)
			default:
				f.MarkLagged()
			}
		}
	}
}

// Stored tells the task's followers that the store has output they were
// not sent (it came through another manager).
func (b *Bus) Stored(taskID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for f := range b.subs[taskID] {
		select {
		case f.stored <- struct{}{}:
		default: // already told
		}
	}
}

// Finish tells the task's followers that it reached a terminal state.
func (b *Bus) Finish(taskID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for f := range b.subs[taskID] {
		f.once.Do(func() { close(f.done) })
	}
}

// C delivers the chunks published for the followed task; Took must be
// called for each one received.
func (f *Follower) C() <-chan store.StoredChunk { return f.ch }

// Done is closed when the task reached a terminal state.
func (f *Follower) Done() <-chan struct{} { return f.done }

// Lagged is closed when a chunk could not be delivered: the follower
// reads the rest from the store (and may Resubscribe).
func (f *Follower) Lagged() <-chan struct{} { return f.lagged }

// StoredC has a value when the store holds output this follower was not
// sent (it came through another manager).
func (f *Follower) StoredC() <-chan struct{} { return f.stored }

// Followers returns how many followers the task's log has, and how many
// of them lagged.
func (b *Bus) Followers(taskID string) (n, lagged int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for f := range b.subs[taskID] {
		n++
		select {
		case <-f.lagged:
			lagged++
		default:
		}
	}
	return n, lagged
}

// Tasks returns how many tasks have a follower.
func (b *Bus) Tasks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// LagAll marks every follower of a task's log lagged, as Publish does to
// one that falls behind, and returns how many it marked.
func (b *Bus) LagAll(taskID string) int {
	b.mu.Lock()
	fs := make([]*Follower, 0, len(b.subs[taskID]))
	for f := range b.subs[taskID] {
		fs = append(fs, f)
	}
	b.mu.Unlock()
	for _, f := range fs {
		f.MarkLagged()
	}
	return len(fs)
}
