package manager

import (
	"context"

	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/events"
)

// Several managers may share one PostgreSQL store (package cluster).

// The other managers' broadcasts that the manager applies: the ones that
// feed the web UI's watches (package cluster carries them; the services
// register their own kinds, dispatch's in dispatch.New).
func (m *Manager) handleClusterEvents() {
	m.bus.Handle(cluster.Delegates, func(ctx context.Context, ev cluster.Event) {
		m.events.Publish(ctx, events.Event{Kind: events.DelegatesChanged, Account: ev.Account, Remote: true})
	})
	m.bus.Handle(cluster.Runs, func(ctx context.Context, ev cluster.Event) {
		m.events.Publish(ctx, events.Event{Kind: events.RunAdvanced, Account: ev.Account, Remote: true})
	})
}
