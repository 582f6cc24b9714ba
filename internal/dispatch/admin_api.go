package dispatch

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// isTokenName reports whether s is a valid name of a token, org, project
// or connector (protocol.ValidName).
func isTokenName(s string) bool { return protocol.ValidName(s) }

func tokenView(t store.Token) protocol.Token {
	v := protocol.Token{Name: t.Name, CreatedAt: t.CreatedAt.UTC(), RevokedAt: api.UTC(t.RevokedAt), Status: protocol.TokenActive, Org: t.Org, Project: t.Project,
		RequireApproval: t.RequireApproval, InitSecrets: t.InitSecrets, Uses: t.Uses, UsesLeft: t.Remaining()}
	if t.RevokedAt != nil {
		v.Status = protocol.TokenRevoked
	}
	return v
}

func (m *Service) handleCreateToken(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateTokenRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	if !isTokenName(req.Name) {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "token name %q is invalid: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", req.Name)
		return
	}
	if err := errors.Join(m.scopes.CheckScope(r.Context(), acct, req.Org, req.Project), protocol.CheckTokenUses(req.Uses)); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	names, ok := m.checkInitSecrets(w, r, acct, req)
	if !ok {
		return
	}
	value := api.NewSecret("", 24)
	t := store.Token{ID: api.NewID("k_"), AccountID: acct, Name: req.Name, Hash: api.HashSecret(value), CreatedAt: m.cfg.Now(),
		Org: req.Org, Project: req.Project, RequireApproval: req.RequireApproval, InitSecrets: names, Uses: req.Uses, UsesLeft: req.Uses}
	if err := m.st.CreateToken(r.Context(), t); err != nil {
		if errors.Is(err, store.ErrConflict) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "a token named %q already exists (its value is shown only when it is created, and a revoked token keeps its name): choose another name", req.Name)
			return
		}
		api.StoreError(w, err, "token")
		return
	}
	v := tokenView(t)
	v.Value = value
	api.WriteJSON(w, http.StatusCreated, v)
}

func (m *Service) handleListTokens(w http.ResponseWriter, r *http.Request, acct string) {
	ts, err := m.st.ListTokens(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "tokens")
		return
	}
	pol := api.CallerOf(r.Context()).Policy
	out := protocol.TokenList{Tokens: make([]protocol.Token, 0, len(ts))}
	for _, t := range ts {
		if !pol.Allows(access.TokenView, access.Scope{Org: t.Org, Project: t.Project}) {
			continue
		}
		out.Tokens = append(out.Tokens, tokenView(t))
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (m *Service) handleRevokeToken(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	t, err := m.st.RevokeToken(r.Context(), acct, name, m.cfg.Now())
	if err != nil {
		api.StoreError(w, err, "token "+strconv.Quote(name))
		return
	}
	m.markTokenRevoked(t.ID)
	// Disconnect every delegate that registered with it, promptly, here
	// and on the other managers.
	n := m.disconnectToken(acct, t.ID, "the delegate token "+strconv.Quote(t.Name)+" was revoked")
	m.bus.Broadcast(r.Context(), cluster.Event{Kind: cluster.Revoke, Account: acct, Token: t.ID})
	m.log.Info("token revoked", "account", acct, "token", t.Name, "disconnected", n)
	api.WriteJSON(w, http.StatusOK, tokenView(t))
}

func (m *Service) handleListDelegates(w http.ResponseWriter, r *http.Request, acct string) {
	q, err := protocol.ParseDelegateQuery(r.URL.Query())
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	if !q.Paged() {
		ds, err := m.delegateList(r.Context(), acct, q.All)
		if err != nil {
			api.StoreError(w, err, "delegates")
			return
		}
		api.WriteJSON(w, http.StatusOK, protocol.DelegateList{Delegates: ds})
		return
	}
	page, err := m.delegatePage(r.Context(), acct, q)
	if err != nil {
		api.StoreError(w, err, "delegates")
		return
	}
	api.WriteJSON(w, http.StatusOK, page)
}

// delegateList is every instance of the account as the API shows it: the
// stored row with the live state of this manager laid over it. Instances
// that deregistered are left out unless all is set.
func (m *Service) delegateList(ctx context.Context, acct string, all bool) ([]protocol.Delegate, error) {
	ins, err := m.st.ListInstances(ctx, acct)
	if err != nil {
		return nil, err
	}
	results, err := m.st.ConfigurationResults(ctx, acct)
	if err != nil {
		return nil, err
	}
	tokenNames, err := m.tokenNames(ctx, acct)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.Delegate, 0, len(ins))
	for _, in := range ins {
		if in.DeregisteredAt != nil && !all {
			continue
		}
		out = append(out, m.instanceView(in, tokenNames, results))
	}
	sortDelegates(out)
	if err := m.upgrades.View(ctx, acct, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

func sortDelegates(out []protocol.Delegate) {
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Hostname < b.Hostname
	})
}

// tokenNames maps the account's token IDs to their names.
func (m *Service) tokenNames(ctx context.Context, acct string) (map[string]string, error) {
	tokens, err := m.st.ListTokens(ctx, acct)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, t := range tokens {
		names[t.ID] = t.Name
	}
	return names, nil
}

// instanceView is one stored instance as the API shows it, with the live
// state of this manager laid over it (upgrade fields aside: the upgrades
// service's View).
func (m *Service) instanceView(in store.Instance, tokenNames map[string]string, results map[string]store.ConfigurationResult) protocol.Delegate {
	now := m.cfg.Now()
	v := protocol.Delegate{
		InstanceID: in.ID, Name: in.Name, Hostname: in.Hostname, IP: in.IP, Tags: in.Tags,
		Version: in.Version, Type: in.Type, TokenName: tokenNames[in.TokenID],
		Status: protocol.DelegateDisconnected, Connection: in.Connection,
		LastHeartbeat: api.UTC(in.LastHeartbeat), Capacity: in.Capacity, Draining: in.Draining,
		RegisteredAt: in.RegisteredAt.UTC(), Org: in.Org, Project: in.Project,
		Description: in.Description, Approval: in.Approval, Upgrade: in.UpgradeMode,
		TaskIsolation: in.TaskIsolation, TaskTypes: in.TaskTypes,
		ContainerRuntime: in.ContainerRuntime, ContainerReason: in.ContainerReason,
	}
	d := m.hub.get(in.ID)
	if d != nil && !d.isGone() {
		v.Approval = d.approvalState()
	}
	if res, ok := results[in.ID]; ok {
		v.Configuration = res.Configuration
	}
	if v.Tags == nil {
		v.Tags = []string{}
	}
	if d != nil && !d.isGone() && in.DeregisteredAt == nil {
		view := delegateView(d)
		seen := view.LastSeen.UTC()
		v.LastHeartbeat = &seen
		v.RunningTasks, v.Capacity, v.Draining, v.OverThreshold = view.Running, view.Capacity, view.Draining, view.OverThreshold
		v.Configuring = view.Configuring
		v.Connection = d.connectionKind()
		d.mu.Lock()
		v.Perf = d.perf
		d.mu.Unlock()
		if now.Sub(seen) <= m.window() {
			v.Status = protocol.DelegateConnected
		}
	}
	if v.Status == protocol.DelegateDisconnected && m.st.Shared() && d == nil &&
		in.DeregisteredAt == nil && in.LastHeartbeat != nil && now.Sub(*in.LastHeartbeat) <= m.window() {
		// Connected to another manager on this database, which records
		// its liveness every half heartbeat interval.
		v.Status = protocol.DelegateConnected
	}
	if in.Approval == protocol.ApprovalRejected || v.Approval == protocol.ApprovalRejected {
		// Refused at every call from the decision on, on every manager:
		// its last heartbeat, still within the window, says nothing.
		v.Approval, v.Status = protocol.ApprovalRejected, protocol.DelegateDisconnected
	}
	if in.DeregisteredAt != nil {
		v.Status = protocol.DelegateDeregistered
	}
	v.DuplicateIdentity = m.procs.Duplicate(in.AccountID+"\x00"+in.IdentityKey, now)
	m.cfg.Wedged.Show(in.ID, &v)
	if v.Status != protocol.DelegateConnected {
		v.Connection, v.Perf = "", nil
	}
	return v
}

// delegatePage is the page of the account's delegates q selects: the
// store reads the page's rows only (name, tag and scope filters and the
// cursor in SQL), and the live filters (connected, approval) are applied
// here, reading further names while they leave the page short.
func (m *Service) delegatePage(ctx context.Context, acct string, q protocol.DelegateQuery) (protocol.DelegateList, error) {
	out := protocol.DelegateList{Delegates: []protocol.Delegate{}}
	tokenNames, err := m.tokenNames(ctx, acct)
	if err != nil {
		return out, err
	}
	sq := store.InstanceQuery{AccountID: acct, After: q.Page, NameContains: q.Name, Tag: q.Tag, Deregistered: q.All}
	if q.Org != "" {
		sq.Scopes = []store.ScopeFilter{{Org: q.Org, Project: q.Project}}
	}
	live := q.Connected != nil || q.Approval != ""
	if q.Limit > 0 {
		// One more name than the page: a next page exists when it matches.
		sq.Names = q.Limit + 1
		if live {
			sq.Names = max(sq.Names, 2*q.Limit)
		}
	}
	names := 0
	for {
		ins, err := m.st.ListInstancePage(ctx, sq)
		if err != nil {
			return out, err
		}
		ids := make([]string, len(ins))
		for i, in := range ins {
			ids[i] = in.ID
		}
		results, err := m.st.ConfigurationResultsOf(ctx, ids)
		if err != nil {
			return out, err
		}
		last := ""
		for _, in := range ins {
			if in.Name != last {
				last = in.Name
				sq.After = in.Name
			}
			v := m.instanceView(in, tokenNames, results)
			if q.Connected != nil && (v.Status == protocol.DelegateConnected) != *q.Connected ||
				q.Approval != "" && v.Approval != q.Approval {
				continue
			}
			if n := len(out.Delegates); n == 0 || out.Delegates[n-1].Name != v.Name {
				if q.Limit > 0 && names == q.Limit {
					// A name past the page matches: there is a next page.
					out.Next = out.Delegates[n-1].Name
					return out, m.upgrades.PageView(ctx, acct, out.Delegates)
				}
				names++
			}
			out.Delegates = append(out.Delegates, v)
		}
		if sq.Names == 0 || countNames(ins) < sq.Names {
			break // every name was read
		}
	}
	return out, m.upgrades.PageView(ctx, acct, out.Delegates)
}

// delegateGroup is every instance of the delegate named name (case
// ignored), stopped ones too, as the API shows them: it reads only that
// group's rows, so describing a delegate costs the same with 10 or 10,000
// delegates in the account.
func (m *Service) delegateGroup(ctx context.Context, acct, name string) ([]protocol.Delegate, error) {
	tokenNames, err := m.tokenNames(ctx, acct)
	if err != nil {
		return nil, err
	}
	ins, err := m.st.ListInstancePage(ctx, store.InstanceQuery{AccountID: acct, Name: name, Deregistered: true})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
	}
	results, err := m.st.ConfigurationResultsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.Delegate, 0, len(ins))
	for _, in := range ins {
		out = append(out, m.instanceView(in, tokenNames, results))
	}
	sortDelegates(out)
	return out, m.upgrades.PageView(ctx, acct, out)
}

// countNames counts the names of instances in name order.
func countNames(ins []store.Instance) int {
	n := 0
	for i, in := range ins {
		if i == 0 || ins[i-1].Name != in.Name {
			n++
		}
	}
	return n
}
