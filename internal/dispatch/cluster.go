package dispatch

import (
	"context"

	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/protocol"
)

// Several managers may share one PostgreSQL store (package cluster).

// handleClusterEvents registers the other managers' broadcasts that
// dispatch applies (package cluster carries them; the other services
// register their own kinds).
func (m *Service) handleClusterEvents() {
	m.bus.Handle(cluster.Task, func(ctx context.Context, ev cluster.Event) {
		// Created or re-queued through another manager.
		m.events.Publish(ctx, events.Event{Kind: events.TaskQueued, Account: ev.Account, TaskID: ev.Task, Remote: true})
		t, err := m.st.GetTask(ctx, ev.Account, ev.Task)
		if err != nil || t.Status != protocol.StatusQueued {
			return
		}
		// Indexed even when none of the account's delegates is connected
		// here: one may connect before the task is taken.
		m.queue.put(t, m.cfg.Now())
		if len(m.hub.account(ev.Account)) > 0 {
			m.offerTask(ctx, t, false)
		}
	})
	m.bus.Handle(cluster.Abort, func(ctx context.Context, ev cluster.Event) {
		if d := m.hub.get(ev.Instance); d != nil {
			d.dropRunning(ev.Task)
			d.push(protocol.Event{Kind: protocol.EventAbort, TaskID: ev.Task, Reason: "stopped by another manager"})
		}
		m.logs.Finish(ev.Task)
	})
	m.bus.Handle(cluster.Config, func(ctx context.Context, ev cluster.Event) {
		m.reconfigure(ctx, ev.Account)
	})
	m.bus.Handle(cluster.Output, func(ctx context.Context, ev cluster.Event) {
		for _, mk := range ev.Output {
			if mk.Ended {
				m.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: mk.Account, TaskID: mk.Task, Remote: true})
			} else {
				m.events.Publish(ctx, events.Event{Kind: events.TaskOutput, TaskID: mk.Task, Remote: true})
			}
		}
	})
	m.bus.Handle(cluster.Approval, func(ctx context.Context, ev cluster.Event) {
		m.approvalChanged(ctx, ev.Account, ev.Instance)
	})
	m.bus.Handle(cluster.Revoke, func(ctx context.Context, ev cluster.Event) {
		m.markTokenRevoked(ev.Token)
		m.disconnectToken(ev.Account, ev.Token, "the delegate token was revoked")
	})
}

// disconnectToken ends the sessions of this manager's delegates that
// registered with the token.
func (m *Service) disconnectToken(acct, tokenID, reason string) int {
	n := 0
	for _, d := range m.hub.account(acct) {
		if d.tokenID == tokenID {
			d.push(protocol.Event{Kind: protocol.EventTokenRevoked, Reason: reason})
			m.hub.remove(d.id)
			n++
		}
	}
	return n
}
