package cluster

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Output of a task reaches the followers connected to the manager its
// delegate sends it to through that manager's log bus, at once. Followers
// connected to another manager sharing the store learn of it from a
// broadcast: "the store has new output of task T" (or "T ended"), upon
// which they read the store. Output itself is not broadcast: a PostgreSQL
// notification holds less than 8,000 bytes, and the store is where a
// follower reads anyway (from its own cursor, so nothing is skipped or
// sent twice). Notes are gathered while a broadcast is under way and sent
// together, several tasks per notification, so a chatty task costs at
// most one broadcast per round trip to the database, whatever its number
// of log requests. Followers still read the store every so often, for
// notifications lost while a listener reconnected.

// OutputMark is one task in an output broadcast.
type OutputMark struct {
	Task string `json:"t"`
	// Ended: the task reached a terminal state (else: it has new output).
	Ended bool `json:"e,omitempty"`
	// Account is the task's, on an Ended mark: the other managers wake
	// their web UI's task pages of that account.
	Account string `json:"a,omitempty"`
}

// NoteOutput tells the other managers, in the next output broadcast,
// that a task has new output in the store, or ended (acct: the task's,
// kept with an end). A no-op on SQLite.
func (b *Bus) NoteOutput(taskID, acct string, ended bool) {
	if b.st.Shared() {
		b.outputs.note(taskID, acct, ended)
	}
}

// outputNotes gathers the marks not broadcast yet.
type outputNotes struct {
	mu      sync.Mutex
	pending map[string]OutputMark // by task ID
	wake    chan struct{}         // cap 1: pending is not empty
}

func newOutputNotes() *outputNotes {
	return &outputNotes{pending: map[string]OutputMark{}, wake: make(chan struct{}, 1)}
}

func (n *outputNotes) note(taskID, acct string, ended bool) {
	n.mu.Lock()
	if mk := n.pending[taskID]; !mk.Ended {
		mk = OutputMark{Task: taskID, Ended: ended}
		if ended {
			mk.Account = acct
		}
		n.pending[taskID] = mk
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// take returns the pending marks and forgets them.
func (n *outputNotes) take() []OutputMark {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) == 0 {
		return nil
	}
	out := make([]OutputMark, 0, len(n.pending))
	for _, mk := range n.pending {
		out = append(out, mk)
	}
	clear(n.pending)
	return out
}

// outputLoop broadcasts the output notes until ctx ends, then sends what
// is left.
func (b *Bus) outputLoop(ctx context.Context) {
	for {
		select {
		case <-b.outputs.wake:
			b.broadcastOutput(ctx, b.outputs.take())
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			b.broadcastOutput(fctx, b.outputs.take())
			cancel()
			return
		}
	}
}

// maxBroadcast bounds a broadcast's payload: PostgreSQL refuses one of
// 8,000 bytes or more.
const maxBroadcast = 7900

// broadcastOutput sends marks in as few broadcasts as fit.
func (b *Bus) broadcastOutput(ctx context.Context, marks []OutputMark) {
	for _, p := range outputPayloads(b.id, marks, maxBroadcast) {
		if err := b.st.Broadcast(ctx, p); err != nil {
			b.log.Warn("tell the other managers about task output", "tasks", len(marks), "err", err)
			return // the followers' store reads catch up
		}
	}
}

// outputPayloads packs marks into Output broadcasts of at most limit
// bytes each (a mark that does not fit alone is left out: task IDs are
// short).
func outputPayloads(origin string, marks []OutputMark, limit int) []string {
	var out []string
	ev := Event{Kind: Output, Origin: origin}
	empty, _ := json.Marshal(ev)
	size := len(empty) + len(`,"out":[]`)
	flush := func() {
		if len(ev.Output) > 0 {
			b, _ := json.Marshal(ev)
			out = append(out, string(b))
		}
		ev.Output = nil
		size = len(empty) + len(`,"out":[]`)
	}
	for _, mk := range marks {
		b, _ := json.Marshal(mk)
		n := len(b) + 1 // and a comma
		if size+n > limit {
			flush()
		}
		if size+n > limit {
			continue
		}
		ev.Output = append(ev.Output, mk)
		size += n
	}
	flush()
	return out
}
