package manager

import (
	"context"

	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/events"
)

// subscribe wires what the manager does on the events (package events):
// the other managers hear of what their web UI pages show, and this
// manager's pages are woken. Dispatch subscribes the offers, the task
// broadcasts and the log followers (dispatch.New); the pipeline engine
// subscribes itself to the ends of step tasks (engine.New).
func (m *Manager) subscribe() {
	m.events.Subscribe(func(ctx context.Context, e events.Event) {
		if e.Remote || !e.Broadcast {
			return
		}
		switch e.Kind {
		case events.DelegatesChanged:
			m.bus.Broadcast(ctx, cluster.Event{Kind: cluster.Delegates, Account: e.Account})
		case events.RunAdvanced:
			m.bus.Broadcast(ctx, cluster.Event{Kind: cluster.Runs, Account: e.Account})
		}
	}, events.DelegatesChanged, events.RunAdvanced)
	// The web UI's live pages.
	m.events.Subscribe(func(_ context.Context, e events.Event) {
		switch e.Kind {
		case events.DelegatesChanged:
			m.watch.notify(e.Account)
		case events.RunAdvanced:
			m.runWatch.notify(e.Account)
		default:
			m.taskWatch.notify(e.Account)
		}
	}, events.TaskQueued, events.TaskAcquired, events.TaskStarted, events.TaskEnded, events.DelegatesChanged, events.RunAdvanced)
}
