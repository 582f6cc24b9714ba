package dispatch

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Delegate approval. A token created with --require-approval makes the
// delegates that register with it pending: they hold a session and are
// listed, but are offered no task and receive no configuration. The
// decision is about a delegate — its name within the token — so it
// covers every replica, present or to come (a StatefulSet that scales up
// needs no new approval), and it is stored, so it survives restarts and
// holds on every manager of a database. A rejected delegate is refused at
// its next call with delegate_rejected, and stops.

// approvalState returns the decision about a live delegate.
func (l *live) approvalState() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.approval
}

// rejected reports whether an administrator rejected the delegate.
func (l *live) rejected() bool { return l.approvalState() == protocol.ApprovalRejected }

// awaitingApproval reports whether the delegate waits for approval.
func (l *live) awaitingApproval() bool { return l.approvalState() == protocol.ApprovalPending }

// refuseRejected answers a call of a rejected delegate.
func refuseRejected(w http.ResponseWriter, name string) {
	api.WriteError(w, http.StatusForbidden, protocol.CodeDelegateRejected,
		"delegate %q was rejected by an administrator of the account and may not connect; stop it, or ask an administrator to approve it (legate delegates approve %s) and start it again",
		name, name)
}

// setApproval applies a decision to a delegate connected here: an
// approved one gets its configuration and the tasks that wait; a rejected
// one loses its session (its next call is refused).
func (m *Service) setApproval(ctx context.Context, d *live, state string) {
	d.mu.Lock()
	old := d.approval
	d.approval = state
	d.mu.Unlock()
	if old == state {
		return
	}
	switch state {
	case protocol.ApprovalApproved:
		m.log.Info("delegate approved", "account", d.accountID, "instance", d.id, "name", d.name, "hostname", d.hostname)
		applied, err := m.configurationFor(ctx, d.accountID, targetOf(d))
		if err != nil {
			m.log.Warn("find the configuration of an approved delegate", "instance", d.id, "err", err)
		}
		d.mu.Lock()
		d.cfgKey, d.cfgKnown = configurationKey(applied), true
		v3 := d.protocolVersion == 0 || d.protocolVersion >= 3
		if applied != nil && v3 {
			// As at a registration: it runs the script before it takes
			// tasks, and its heartbeats say when it is done.
			d.configuring = configuringLabel(applied.Name, applied.Version)
		}
		d.mu.Unlock()
		if applied != nil && v3 {
			d.push(protocol.Event{Kind: protocol.EventConfigurationChanged})
		}
		m.offerQueued(ctx, d)
	case protocol.ApprovalRejected:
		m.log.Info("delegate rejected: its session ends", "account", d.accountID, "instance", d.id, "name", d.name, "hostname", d.hostname)
		m.hub.remove(d.id)
	}
}

// refreshApproval re-reads the decision about a delegate connected here
// from the store (a pending delegate at each heartbeat, and every one of
// a name another manager decided about).
func (m *Service) refreshApproval(ctx context.Context, d *live) {
	state, err := m.st.InstanceApproval(ctx, d.id)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			m.log.Debug("read a delegate's approval", "instance", d.id, "err", err)
		}
		return
	}
	m.setApproval(ctx, d, state)
}

// approvalChanged applies a decision another manager made about the
// delegates named name.
func (m *Service) approvalChanged(ctx context.Context, acct, name string) {
	for _, d := range m.hub.account(acct) {
		if strings.EqualFold(d.name, name) {
			m.refreshApproval(ctx, d)
		}
	}
}

func (m *Service) handleApproveDelegate(w http.ResponseWriter, r *http.Request, acct string) {
	m.decide(w, r, acct, protocol.ApprovalApproved)
}

func (m *Service) handleRejectDelegate(w http.ResponseWriter, r *http.Request, acct string) {
	m.decide(w, r, acct, protocol.ApprovalRejected)
}

// decide records an approval or rejection of the delegate {name}, applies
// it to the instances connected here and tells the other managers.
func (m *Service) decide(w http.ResponseWriter, r *http.Request, acct, state string) {
	ctx := r.Context()
	name := r.PathValue("name")
	by := api.CallerOf(ctx).Policy.Principal.Name
	ins, err := m.st.SetApproval(ctx, acct, name, state, by, m.cfg.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "no delegate named %q in this account (legate delegates list --pending shows those that wait)", name)
		return
	case errors.Is(err, store.ErrNoApproval):
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict,
			"delegate %q registered with a token that requires no approval: there is nothing to decide (to stop it, revoke its token: legate token revoke NAME)", name)
		return
	case err != nil:
		api.StoreError(w, err, "delegate "+strconv.Quote(name))
		return
	}
	out := protocol.ApprovalAnswer{Name: name, Approval: state, Instances: make([]protocol.Delegate, 0, len(ins))}
	hosts := make([]string, 0, len(ins))
	for _, in := range ins {
		if d := m.hub.get(in.ID); d != nil && !d.isGone() {
			m.setApproval(ctx, d, state)
		}
		out.Name = in.Name
		out.Instances = append(out.Instances, protocol.Delegate{
			InstanceID: in.ID, Name: in.Name, Hostname: in.Hostname, IP: in.IP, Tags: nonNil(in.Tags),
			Version: in.Version, Type: in.Type, RegisteredAt: in.RegisteredAt.UTC(), Org: in.Org, Project: in.Project,
			Approval: in.Approval, Status: protocol.DelegateDisconnected,
		})
		hosts = append(hosts, in.Hostname)
	}
	m.bus.Broadcast(ctx, cluster.Event{Kind: cluster.Approval, Account: acct, Instance: name})
	m.log.Info("delegate "+state, "account", acct, "name", name, "by", by, "hostnames", strings.Join(hosts, ","))
	api.NoteAudit(ctx, func(e *store.AuditEvent) {
		e.Resource = out.Name
		if len(ins) > 0 {
			e.Org, e.Project = ins[0].Org, ins[0].Project
		}
		if len(hosts) > 0 {
			e.Detail = "instances: " + strings.Join(hosts, ", ")
		}
	})
	api.WriteJSON(w, http.StatusOK, out)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
