package dispatch

import (
	"fmt"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// TestMailboxDropsOffersFirst: a full mailbox, filled by push or by a
// requeue after a failed write, drops task_available events (offered
// again later), oldest first, before any abort or acknowledgement.
func TestMailboxDropsOffersFirst(t *testing.T) {
	offer := func(i int) protocol.Event {
		return protocol.Event{Kind: protocol.EventTaskAvailable, TaskID: fmt.Sprintf("offer-%d", i)}
	}
	abort := func(i int) protocol.Event {
		return protocol.Event{Kind: protocol.EventAbort, TaskID: fmt.Sprintf("abort-%d", i)}
	}
	count := func(ev []protocol.Event, kind string) int {
		n := 0
		for _, e := range ev {
			if e.Kind == kind {
				n++
			}
		}
		return n
	}

	// push: a mailbox full of offers takes an abort, losing the oldest offer.
	l := newLive(store.Instance{ID: "i"})
	for i := range mailboxCap {
		l.push(offer(i))
	}
	l.push(abort(0))
	ev := l.take()
	if len(ev) != mailboxCap || ev[0].TaskID != "offer-1" || ev[len(ev)-1].TaskID != "abort-0" {
		t.Fatalf("push into a full mailbox: %d events, first %s, last %s; want %d, offer-1 first, abort-0 last", len(ev), ev[0].TaskID, ev[len(ev)-1].TaskID, mailboxCap)
	}

	// requeue: a failed write puts 600 offers back in front of 600 newer
	// events, aborts at their end: the aborts all stay.
	var failed []protocol.Event
	for i := range 600 {
		failed = append(failed, offer(i))
	}
	for i := 600; i < 1100; i++ {
		l.push(offer(i))
	}
	for i := range 100 {
		l.push(abort(i))
	}
	l.requeue(failed)
	ev = l.take()
	if len(ev) != mailboxCap || count(ev, protocol.EventAbort) != 100 {
		t.Fatalf("requeue past the cap: %d events, %d aborts; want %d and all 100 aborts", len(ev), count(ev, protocol.EventAbort), mailboxCap)
	}
	if ev[0].Kind != protocol.EventTaskAvailable || ev[0].TaskID != "offer-176" {
		t.Errorf("first event %s %s; want offer-176 (the 176 oldest offers dropped)", ev[0].Kind, ev[0].TaskID)
	}

	// Only aborts past the cap: the newest go, the order stays.
	for i := range mailboxCap {
		l.push(abort(i))
	}
	l.requeue([]protocol.Event{abort(-1)})
	ev = l.take()
	if len(ev) != mailboxCap || ev[0].TaskID != "abort--1" || ev[len(ev)-1].TaskID != fmt.Sprintf("abort-%d", mailboxCap-2) {
		t.Errorf("aborts past the cap: %d events, %s … %s", len(ev), ev[0].TaskID, ev[len(ev)-1].TaskID)
	}
}
