package logbus

import (
	"fmt"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// TestLogBusBoundsQueuedBytes: a follower that does not read is marked
// lagged once its queue holds followerQueueBytes, all followers together
// hold at most busQueueBytes, and what they take or leave behind leaves
// the account.
func TestLogBusBoundsQueuedBytes(t *testing.T) {
	b := New()
	chunk := func(seq int64) store.StoredChunk {
		// 512 KiB, twice a delegate's chunk: the queue's bytes, not its
		// 256 places, bound it.
		return store.StoredChunk{Attempt: 1, Chunk: protocol.LogChunk{Seq: seq, Data: strings.Repeat("x", 512<<10)}}
	}
	lagged := func(f *Follower) bool {
		select {
		case <-f.lagged:
			return true
		default:
			return false
		}
	}
	perFollower := followerQueueBytes / (512 << 10)
	slow := b.Subscribe("t1")
	for i := range perFollower {
		b.Publish("t1", []store.StoredChunk{chunk(int64(i + 1))})
	}
	if lagged(slow) || len(slow.ch) != perFollower {
		t.Fatalf("after %d chunks (%d MiB): lagged %v, queued %d; want not lagged, all queued", perFollower, followerQueueBytes>>20, lagged(slow), len(slow.ch))
	}
	b.Publish("t1", []store.StoredChunk{chunk(int64(perFollower + 1))})
	if !lagged(slow) || len(slow.ch) != perFollower {
		t.Fatalf("one chunk past %d MiB: lagged %v, queued %d; want lagged, %d queued", followerQueueBytes>>20, lagged(slow), len(slow.ch), perFollower)
	}
	// Taking a chunk makes room again.
	slow.Took(<-slow.ch)
	b.Publish("t1", []store.StoredChunk{chunk(int64(perFollower + 2))})
	if len(slow.ch) != perFollower {
		t.Fatalf("after taking one: %d queued, want %d", len(slow.ch), perFollower)
	}

	// Followers of other tasks fill the bus up to busQueueBytes.
	var others []*Follower
	for n := 2; b.queued.Load()+followerQueueBytes <= busQueueBytes; n++ {
		id := fmt.Sprint("t", n)
		f := b.Subscribe(id)
		others = append(others, f)
		for i := range perFollower {
			b.Publish(id, []store.StoredChunk{chunk(int64(i + 1))})
		}
		if lagged(f) {
			t.Fatalf("follower %s lagged with the bus at %d MiB", id, b.queued.Load()>>20)
		}
	}
	last := b.Subscribe("tlast")
	b.Publish("tlast", []store.StoredChunk{chunk(1)})
	if !lagged(last) || len(last.ch) != 0 {
		t.Fatalf("with the bus full (%d MiB): lagged %v, queued %d; want lagged, none queued", b.queued.Load()>>20, lagged(last), len(last.ch))
	}
	if got := b.queued.Load(); got > busQueueBytes {
		t.Fatalf("bus holds %d bytes, more than %d", got, busQueueBytes)
	}
	b.Unsubscribe("t1", slow)
	b.Unsubscribe("tlast", last)
	for i, f := range others {
		b.Unsubscribe(fmt.Sprint("t", i+2), f)
	}
	if got := b.queued.Load(); got != 0 {
		t.Fatalf("bus account %d bytes after every follower left, want 0", got)
	}
}
