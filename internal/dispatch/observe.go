package dispatch

import (
	"context"
	"time"

	"github.com/legate-dev/legate/internal/events"
)

// seenDelegate is what the Delegates page shows of a live instance that
// the sweep compares from one pass to the next.
type seenDelegate struct {
	account   string
	connected bool
	gone      bool
	running   int
	capacity  int
	approval  string
	conn      string
	// pass is the sweep that last saw it (not compared).
	pass uint64
}

// observeDelegates (sweep loop only) notifies the watchers of every
// account whose live delegates changed since the last sweep: registered,
// gone, silent past the liveness window or back, approved, busier. With
// a shared store it looks at every account and tells the other managers
// about the changes of connection and approval (not of load, which change
// often), since their pages list this manager's delegates too; alone, it
// looks only at the accounts someone watches.
func (m *Service) observeDelegates(ctx context.Context, now time.Time) {
	if m.seen == nil {
		m.seen = map[string]seenDelegate{}
	}
	shared := m.st.Shared()
	m.seenPass++
	pass := m.seenPass
	changed := map[string]bool{}
	// moved: accounts whose delegates connected, left or were decided on.
	moved := map[string]bool{}
	for _, d := range m.hub.all() {
		if !shared && !m.watch.Watched(d.accountID) {
			continue
		}
		d.mu.Lock()
		s := seenDelegate{account: d.accountID, gone: d.gone, running: len(d.running), capacity: d.capacity,
			approval: d.approval, conn: d.connection}
		d.mu.Unlock()
		s.connected = now.Sub(time.Unix(0, d.lastSeen.Load())) <= m.window()
		old, ok := m.seen[d.id]
		s.pass, old.pass = pass, pass
		m.seen[d.id] = s
		if ok && old == s {
			continue
		}
		changed[s.account] = true
		if !ok || old.connected != s.connected || old.gone != s.gone || old.approval != s.approval || old.conn != s.conn {
			moved[s.account] = true
		}
	}
	for id, s := range m.seen {
		if s.pass != pass {
			delete(m.seen, id)
			changed[s.account], moved[s.account] = true, true
		}
	}
	for acct := range changed {
		m.events.Publish(ctx, events.Event{Kind: events.DelegatesChanged, Account: acct, Broadcast: moved[acct]})
	}
}
