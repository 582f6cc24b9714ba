package manager

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Output of a task reaches the followers connected to the manager its
// delegate sends it to through the log bus, at once. Followers connected
// to another manager sharing the store learn of it from a broadcast: "the
// store has new output of task T" (or "T ended"), upon which they read the
// store. Output itself is not broadcast: a PostgreSQL notification holds
// less than 8,000 bytes, and the store is where a follower reads anyway
// (from its own cursor, so nothing is skipped or sent twice). Notes are
// gathered while a broadcast is under way and sent together, several
// tasks per notification, so a chatty task costs at most one broadcast per
// round trip to the database, whatever its number of log requests.
// Followers still read the store every Config.FollowPollInterval, for
// notifications lost while a listener reconnected.

// outputMark is one task in an output broadcast.
type outputMark struct {
	Task string `json:"t"`
	// Ended: the task reached a terminal state (else: it has new output).
	Ended bool `json:"e,omitempty"`
	// Account is the task's, on an Ended mark: the other managers wake
	// their web UI's task pages of that account.
	Account string `json:"a,omitempty"`
}

// outputNotes gathers the marks not broadcast yet.
type outputNotes struct {
	mu      sync.Mutex
	pending map[string]outputMark // by task ID
	wake    chan struct{}         // cap 1: pending is not empty
}

func newOutputNotes() *outputNotes {
	return &outputNotes{pending: map[string]outputMark{}, wake: make(chan struct{}, 1)}
}

// note records that a task has new output, or ended (acct: the task's,
// kept with an end).
func (n *outputNotes) note(taskID, acct string, ended bool) {
	n.mu.Lock()
	if mk := n.pending[taskID]; !mk.Ended {
		mk = outputMark{Task: taskID, Ended: ended}
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
func (n *outputNotes) take() []outputMark {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) == 0 {
		return nil
	}
	out := make([]outputMark, 0, len(n.pending))
	for _, mk := range n.pending {
		out = append(out, mk)
	}
	clear(n.pending)
	return out
}

// outputStored tells the followers of a task on every manager that it has
// new output in the store.
func (m *Manager) outputStored(taskID string) {
	if m.st.Shared() {
		m.outputs.note(taskID, "", false)
	}
}

// taskEnded tells the followers of a task of acct on every manager that
// it reached a terminal state, and wakes the web UI's task pages.
func (m *Manager) taskEnded(acct, taskID string) {
	m.logs.finish(taskID)
	m.taskWatch.notify(acct)
	if isStepTask(taskID) {
		m.runNotes.note(taskID) // runLoop advances its pipeline run
	}
	if m.st.Shared() {
		m.outputs.note(taskID, acct, true)
	}
}

// outputLoop broadcasts the output notes until ctx ends, then sends what
// is left (a no-op on SQLite).
func (m *Manager) outputLoop(ctx context.Context) {
	if !m.st.Shared() {
		return
	}
	for {
		select {
		case <-m.outputs.wake:
			m.broadcastOutput(ctx, m.outputs.take())
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			m.broadcastOutput(fctx, m.outputs.take())
			cancel()
			return
		}
	}
}

// maxBroadcast bounds a broadcast's payload: PostgreSQL refuses one of
// 8,000 bytes or more.
const maxBroadcast = 7900

// broadcastOutput sends marks in as few broadcasts as fit.
func (m *Manager) broadcastOutput(ctx context.Context, marks []outputMark) {
	for _, p := range outputPayloads(m.id, marks, maxBroadcast) {
		if err := m.st.Broadcast(ctx, p); err != nil {
			m.log.Warn("tell the other managers about task output", "tasks", len(marks), "err", err)
			return // the followers' store reads catch up
		}
	}
}

// outputPayloads packs marks into clusterOutput broadcasts of at most
// limit bytes each (a mark that does not fit alone is left out: task IDs
// are short).
func outputPayloads(origin string, marks []outputMark, limit int) []string {
	var out []string
	ev := clusterEvent{Kind: clusterOutput, Origin: origin}
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
