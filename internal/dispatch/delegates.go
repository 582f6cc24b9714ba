package dispatch

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// How delegates leave the listing:
//   - one that stops cleanly deregisters: its row stays, marked, so that
//     the same identity coming back keeps its instance ID (and its
//     capability allowlist); listings leave it out unless ?all=true;
//   - `legate delegates delete NAME` removes a group that is neither
//     connected nor running a task (handleDeleteDelegate);
//   - every manager prunes the instances out of contact for longer than
//     Config.PruneDelegatesAfter (pruneLoop), deregistered or not.
// A delegate whose row was removed while it was in contact anyway loses
// its session at the next liveness flush (flush) and registers again.

// handleDeleteDelegate removes every instance of the delegate group
// {name} of the account. A group with an instance in contact within the
// liveness window (here or, through the store, on another manager) or a
// running task is refused: a delegate still running would register again
// at once.
func (m *Service) handleDeleteDelegate(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	now := m.cfg.Now()
	busy := &store.DelegateBusyError{}
	for _, d := range m.hub.account(acct) {
		if strings.EqualFold(d.name, name) && !d.isGone() && now.Sub(time.Unix(0, d.lastSeen.Load())) <= m.window() {
			busy.Name = d.name
			busy.Connected = append(busy.Connected, d.hostname)
		}
	}
	if len(busy.Connected) > 0 {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "%s", delegateBusyMessage(busy))
		return
	}
	gone, err := m.st.DeleteDelegate(r.Context(), acct, name, now.Add(-m.window()))
	switch {
	case errors.As(err, &busy):
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "%s", delegateBusyMessage(busy))
		return
	case errors.Is(err, store.ErrNotFound):
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "no delegate named %q in this account (legate delegates list --all shows them all)", name)
		return
	case err != nil:
		api.StoreError(w, err, "delegate "+strconv.Quote(name))
		return
	}
	out := protocol.DeletedDelegate{Name: gone[0].Name, Instances: make([]protocol.Delegate, 0, len(gone))}
	hosts := make([]string, 0, len(gone))
	for _, in := range gone {
		m.forgetInstance(in.ID)
		status := protocol.DelegateDisconnected
		if in.DeregisteredAt != nil {
			status = protocol.DelegateDeregistered
		}
		tags := in.Tags
		if tags == nil {
			tags = []string{}
		}
		out.Instances = append(out.Instances, protocol.Delegate{
			InstanceID: in.ID, Name: in.Name, Hostname: in.Hostname, IP: in.IP, Tags: tags, Version: in.Version,
			Type: in.Type, Status: status, LastHeartbeat: api.UTC(in.LastHeartbeat), Capacity: in.Capacity,
			RegisteredAt: in.RegisteredAt.UTC(), Org: in.Org, Project: in.Project, Description: in.Description,
		})
		hosts = append(hosts, in.Hostname)
	}
	m.events.Publish(r.Context(), events.Event{Kind: events.DelegatesChanged, Account: acct, Broadcast: true})
	m.log.Info("delegate deleted", "account", acct, "name", out.Name, "instances", len(gone), "hostnames", strings.Join(hosts, ","))
	api.WriteJSON(w, http.StatusOK, out)
}

// delegateBusyMessage says why a delegate cannot be deleted and what to do.
func delegateBusyMessage(busy *store.DelegateBusyError) string {
	var todo []string
	if len(busy.Connected) > 0 {
		todo = append(todo, "stop it first (a delegate that stops with Ctrl-C or SIGTERM deregisters and leaves the listing by itself), "+
			"or revoke its token to disconnect it (legate token revoke NAME)")
	}
	if busy.Running > 0 {
		todo = append(todo, "wait for its tasks to end or cancel them (legate task list --status running)")
	}
	return busy.Error() + ": " + strings.Join(todo, "; ")
}

// forgetInstance drops what this manager keeps in memory of a removed
// instance. A live entry is ended (its event channel closed): the delegate,
// if it is still there, must register again.
func (m *Service) forgetInstance(id string) {
	m.hub.remove(id)
	m.caps.Forget(id)
}

// Pruning runs every pruneEvery(PruneDelegatesAfter) on every manager,
// removing at most pruneBatch instances per store transaction and
// pruneMaxBatches transactions per pass; what is left waits for the next
// pass.
const (
	pruneBatch      = 200
	pruneMaxBatches = 25
)

// pruneEvery is the pause between two prune passes: a twelfth of the
// time an instance may be out of contact, between 100ms and 10m. The
// first pass comes one pause after the start, when the delegates of a
// manager that was down for long have reconnected.
func pruneEvery(after time.Duration) time.Duration {
	return min(max(after/12, 100*time.Millisecond), 10*time.Minute)
}

// pruneLoop removes the delegate instances out of contact for longer than
// Config.PruneDelegatesAfter, and the audit records older than
// Config.AuditRetention, until ctx ends.
func (m *Service) pruneLoop(ctx context.Context) {
	after := m.cfg.PruneDelegatesAfter
	if after < 0 && m.cfg.AuditRetention < 0 {
		return
	}
	every := 10 * time.Minute
	if after > 0 {
		every = pruneEvery(after)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := m.cfg.Now()
			if after >= 0 {
				m.prune(ctx, now)
			}
			m.identity.PruneAudit(ctx, now)
		}
	}
}

// prune runs one pass: this manager forgets the live entries silent for
// longer than Config.PruneDelegatesAfter (another manager may have removed
// their rows), then removes such instances from the store in batches.
// Managers sharing a database may prune at once: the store hands each
// stale row to one of them.
func (m *Service) prune(ctx context.Context, now time.Time) int {
	cutoff := now.Add(-m.cfg.PruneDelegatesAfter)
	for _, d := range m.hub.all() {
		if time.Unix(0, d.lastSeen.Load()).Before(cutoff) {
			m.forgetInstance(d.id)
		}
	}
	total := 0
	for range pruneMaxBatches {
		ids, err := m.st.PruneInstances(ctx, cutoff, pruneBatch)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("prune delegate instances out of contact", "err", err)
			}
			break
		}
		for _, id := range ids {
			m.forgetInstance(id)
		}
		total += len(ids)
		if len(ids) < pruneBatch {
			break
		}
	}
	if total > 0 {
		m.log.Info("pruned delegate instances out of contact", "instances", total, "prune_after", m.cfg.PruneDelegatesAfter)
	}
	return total
}
