package dispatch

import (
	"context"

	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/events"
)

// subscribe wires what dispatch does on the events (package events): each
// change is published once where it is made, and these are the only
// places that fan it out.
func (m *Service) subscribe() {
	// A task queued here is offered to this manager's delegates (one
	// queued through another manager is offered by its broadcast's
	// handler, which reads it from the store).
	m.events.Subscribe(func(ctx context.Context, e events.Event) {
		if !e.Remote && e.Task != nil {
			m.offerTask(ctx, *e.Task, e.Widen)
		}
	}, events.TaskQueued)
	// The other managers hear of queued tasks (to offer them to their
	// delegates), and of output and ends (for their followers).
	m.events.Subscribe(func(ctx context.Context, e events.Event) {
		if e.Remote {
			return
		}
		switch e.Kind {
		case events.TaskQueued:
			m.bus.Broadcast(ctx, cluster.Event{Kind: cluster.Task, Account: e.Account, Task: e.TaskID})
		case events.TaskEnded:
			m.bus.NoteOutput(e.TaskID, e.Account, true)
		case events.TaskOutput:
			m.bus.NoteOutput(e.TaskID, "", false)
		}
	}, events.TaskQueued, events.TaskEnded, events.TaskOutput)
	// Followers of a task's log: its end, and output another manager
	// stored (this manager's own output reaches them through the log bus
	// as it arrives).
	m.events.Subscribe(func(_ context.Context, e events.Event) {
		switch {
		case e.Kind == events.TaskEnded:
			m.logs.Finish(e.TaskID)
		case e.Kind == events.TaskOutput && e.Remote:
			m.logs.Stored(e.TaskID)
		}
	}, events.TaskEnded, events.TaskOutput)
}
