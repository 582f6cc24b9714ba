package manager

import (
	"context"
	"encoding/json"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Several managers may share one PostgreSQL store. Each keeps the live
// state of the delegates connected to it; what one manager decides that
// concerns another's delegates crosses over as a broadcast (LISTEN/NOTIFY):
// a task to offer, a task to abort, a token or an API key revoked.
// Broadcasts are hints that cut latency; the store stays the truth, and the
// rebroadcast, heartbeat reconciliation and cache TTLs catch anything a
// lost broadcast missed.

// clusterEvent is one broadcast between managers.
type clusterEvent struct {
	Kind     string `json:"k"`
	Origin   string `json:"o"`
	Account  string `json:"a,omitempty"`
	Task     string `json:"t,omitempty"`
	Instance string `json:"i,omitempty"`
	Token    string `json:"tok,omitempty"`
	APIKey   string `json:"ak,omitempty"`
	// Output lists tasks with new output or ended (outputcast.go).
	Output []outputMark `json:"out,omitempty"`
}

const (
	clusterTask   = "task"   // a task is queued: offer it to your delegates
	clusterAbort  = "abort"  // tell Instance to stop Task
	clusterRevoke = "revoke" // Token is revoked: disconnect its delegates
	clusterConfig = "config" // Account's configurations changed: tell your delegates
	// APIKey (an ID) is revoked: drop it from your cache.
	clusterAPIKeyRevoke = "apikey_revoke"
	// Account's users, groups, roles or bindings changed: drop your
	// cached policies.
	clusterAccess = "access"
	// Output's tasks have new output in the store, or ended: tell your
	// followers.
	clusterOutput = "output"
	// The delegates of Account named Instance were approved or rejected:
	// read the decision for yours.
	clusterApproval = "approval"
	// Account's delegates connected, stopped, went silent or came back,
	// or were approved, rejected or deleted: tell your web UI pages.
	clusterDelegates = "delegates"
	// A pipeline run of Account advanced: tell your web UI pages.
	clusterRuns = "runs"
)

// broadcast tells the other managers about ev (a no-op on SQLite).
func (m *Manager) broadcast(ctx context.Context, ev clusterEvent) {
	if !m.st.Shared() {
		return
	}
	ev.Origin = m.id
	b, _ := json.Marshal(ev)
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := m.st.Broadcast(bctx, string(b)); err != nil {
		m.log.Warn("broadcast to other managers", "kind", ev.Kind, "err", err)
	}
}

// listenLoop applies other managers' broadcasts until ctx ends.
func (m *Manager) listenLoop(ctx context.Context) {
	if !m.st.Shared() {
		return
	}
	_ = m.st.Listen(ctx, func(payload string) {
		var ev clusterEvent
		if err := json.Unmarshal([]byte(payload), &ev); err != nil || ev.Origin == m.id {
			return
		}
		m.applyClusterEvent(ctx, ev)
	}, func() {
		m.listenUp.Store(true)
		m.log.Debug("listening to other managers")
	})
}

// listening reports whether this manager has been listening to the other
// managers' broadcasts (at least once: a broken listener reconnects).
func (m *Manager) listening() bool { return m.listenUp.Load() }

func (m *Manager) applyClusterEvent(ctx context.Context, ev clusterEvent) {
	switch ev.Kind {
	case clusterTask:
		// Created or re-queued through another manager.
		m.taskWatch.notify(ev.Account)
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
	case clusterAbort:
		if d := m.hub.get(ev.Instance); d != nil {
			d.dropRunning(ev.Task)
			d.push(protocol.Event{Kind: protocol.EventAbort, TaskID: ev.Task, Reason: "stopped by another manager"})
		}
		m.logs.finish(ev.Task)
	case clusterConfig:
		m.reconfigure(ctx, ev.Account)
	case clusterOutput:
		for _, mk := range ev.Output {
			if mk.Ended {
				m.logs.finish(mk.Task)
				m.taskWatch.notify(mk.Account)
			} else {
				m.logs.stored(mk.Task)
			}
		}
	case clusterAPIKeyRevoke:
		m.apiKeys.invalidate(ev.APIKey)
	case clusterAccess:
		m.policies.clear()
	case clusterApproval:
		m.approvalChanged(ctx, ev.Account, ev.Instance)
	case clusterDelegates:
		m.watch.notify(ev.Account)
	case clusterRuns:
		m.runWatch.notify(ev.Account)
	case clusterRevoke:
		m.markTokenRevoked(ev.Token)
		m.disconnectToken(ev.Account, ev.Token, "the delegate token was revoked")
	}
}

// disconnectToken ends the sessions of this manager's delegates that
// registered with the token.
func (m *Manager) disconnectToken(acct, tokenID, reason string) int {
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
