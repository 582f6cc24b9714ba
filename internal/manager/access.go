package manager

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Access control: every admin route names, in routes(), the permission it
// needs and where the scope it is checked at comes from (an api.Rule).
// authenticate resolves the caller (API key → its owner; sign-in session
// → its user) and refuses disabled users and revoked keys; api.Server
// checks the rule with package access. Listings are filtered by their
// handlers with the caller's policy instead of refused.

// The scope sources that read the object a route names (api has those
// that need only the request).

// atTask: the scope of the task the path names.
func (m *Manager) atTask() api.ScopeSource {
	return api.ScopeSource{Name: "task", Resolve: func(r *http.Request, acct string) ([]access.Resource, error) {
		t, err := m.st.GetTask(r.Context(), acct, r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return api.Res("task", t.ID, access.Scope{Org: t.Spec.Org, Project: t.Spec.Project}), nil
	}}
}

// atToken: the scope of the token the path names.
func (m *Manager) atToken() api.ScopeSource {
	return api.ScopeSource{Name: "token", Resolve: func(r *http.Request, acct string) ([]access.Resource, error) {
		ts, err := m.st.ListTokens(r.Context(), acct)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if t.Name == r.PathValue("name") {
				return api.Res("token", t.Name, access.Scope{Org: t.Org, Project: t.Project}), nil
			}
		}
		return nil, store.ErrNotFound
	}}
}

// atDelegate: the scopes of the instances of the delegate the path
// names (each must be allowed).
func (m *Manager) atDelegate() api.ScopeSource {
	return api.ScopeSource{Name: "delegate", Resolve: func(r *http.Request, acct string) ([]access.Resource, error) {
		// Only that delegate's rows: its routes cost the same with 10 or
		// 10,000 delegates in the account.
		ins, err := m.st.ListInstancePage(r.Context(), store.InstanceQuery{AccountID: acct, Name: r.PathValue("name"), Deregistered: true})
		if err != nil {
			return nil, err
		}
		var out []access.Resource
		seen := map[access.Scope]bool{}
		for _, in := range ins {
			sc := access.Scope{Org: in.Org, Project: in.Project}
			if strings.EqualFold(in.Name, r.PathValue("name")) && !seen[sc] {
				seen[sc] = true
				out = append(out, access.Resource{Kind: "delegate", Name: in.Name, Scope: sc})
			}
		}
		if len(out) == 0 {
			return nil, store.ErrNotFound
		}
		return out, nil
	}}
}

// atConfiguration: the scope of the configuration the path names.
func (m *Manager) atConfiguration() api.ScopeSource {
	return api.ScopeSource{Name: "configuration", Resolve: func(r *http.Request, acct string) ([]access.Resource, error) {
		c, err := m.st.GetConfiguration(r.Context(), acct, r.PathValue("name"))
		if err != nil {
			return nil, err
		}
		return api.Res("configuration", c.Name, access.Scope{Org: c.Org, Project: c.Project}), nil
	}}
}

// taskUses: a task that uses a connector needs connector:access at the
// task's scope; one that references stored secrets needs secret:access on
// each at the scope it resolves to (secrets.Service.Needs).
func (m *Manager) taskUses(r *http.Request, acct string) ([]api.Need, error) {
	body, err := api.PeekBody(r)
	if err != nil {
		return nil, err
	}
	var spec protocol.TaskSpec
	_ = json.Unmarshal(body, &spec) // the handler reports a bad body
	var out []api.Need
	if spec.Connector != "" {
		out = append(out, api.Need{Perm: access.ConnectorAccess, Res: access.Resource{Kind: "connector", Name: spec.Connector,
			Scope: access.Scope{Org: strings.TrimSpace(spec.Org), Project: strings.TrimSpace(spec.Project)}}})
	}
	secrets, err := m.secrets.Needs(r.Context(), acct, spec)
	if err != nil {
		return nil, err
	}
	return append(out, secrets...), nil
}

// policyCache holds the policies (principal, groups, bindings, roles) of
// the principals this manager has seen, for at most the API key cache's
// TTL. Any change of users, groups, roles or bindings clears it here and,
// by broadcast, on every manager. Its zero value is ready to use.
type policyCache struct {
	mu      sync.Mutex
	entries map[string]policyEntry // by principal ID
	gen     uint64
}

type policyEntry struct {
	pol      *access.Policy
	disabled bool
	loaded   time.Time
}

func (c *policyCache) lookup(id string, now time.Time, ttl time.Duration) (policyEntry, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if ok && now.Sub(e.loaded) < ttl {
		return e, c.gen, true
	}
	return policyEntry{}, c.gen, false
}

func (c *policyCache) put(id string, e policyEntry, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.entries == nil {
		c.entries = map[string]policyEntry{}
	}
	c.entries[id] = e
}

func (c *policyCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.entries = nil
}

// errPrincipalGone: the owner of a key or session was deleted.
var errPrincipalGone = errors.New("principal deleted")

// policyOf returns the policy of the principal with this ID, and whether it
// is disabled; errPrincipalGone when it no longer exists.
func (m *Manager) policyOf(ctx context.Context, acct, id string) (*access.Policy, bool, error) {
	now := m.cfg.Now()
	if e, _, ok := m.policies.lookup(id, now, m.apiKeyTTL()); ok {
		return e.pol, e.disabled, nil
	}
	_, gen, _ := m.policies.lookup(id, now, m.apiKeyTTL())
	p, err := m.st.PrincipalByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && p.AccountID != acct) {
		return nil, false, errPrincipalGone
	}
	if err != nil {
		return nil, false, err
	}
	groups, err := m.st.GroupsOf(ctx, id)
	if err != nil {
		return nil, false, err
	}
	bs, err := m.st.ListBindings(ctx, acct, append([]string{id}, groups...)...)
	if err != nil {
		return nil, false, err
	}
	roles, err := m.st.ListRoles(ctx, acct)
	if err != nil {
		return nil, false, err
	}
	pol := &access.Policy{Principal: access.Principal{Kind: p.Kind, ID: p.ID, Name: p.Name, Groups: groups}, Roles: rolesByName(roles)}
	for _, b := range bs {
		pol.Bindings = append(pol.Bindings, bindingOf(b))
	}
	m.policies.put(id, policyEntry{pol: pol, disabled: p.Disabled, loaded: now}, gen)
	return pol, p.Disabled, nil
}

func rolesByName(rs []store.Role) map[string]access.Role {
	out := make(map[string]access.Role, len(rs))
	for _, r := range rs {
		ar := access.Role{Name: r.Name, Description: r.Description}
		for _, p := range r.Permissions {
			ar.Permissions = append(ar.Permissions, access.Permission(p))
		}
		out[r.Name] = ar
	}
	return out
}

func bindingOf(b store.Binding) access.Binding {
	return access.Binding{Role: b.Role, SubjectKind: b.SubjectKind, SubjectID: b.SubjectID, Scope: access.Scope{Org: b.Org, Project: b.Project}}
}

// accountPolicy is the policy of a key owned by the account itself (keys
// written to the store directly, outside the API): account admin.
func accountPolicy(acct string) *access.Policy {
	p := access.Principal{Kind: protocol.OwnerAccount, ID: acct, Name: "account " + acct}
	return &access.Policy{Principal: p, Bindings: []access.Binding{{Role: access.RoleAccountAdmin, SubjectKind: protocol.OwnerAccount, SubjectID: acct}}}
}

// accessChanged drops every cached policy here and on the other
// managers: users, groups, roles or bindings changed.
func (m *Manager) accessChanged(ctx context.Context, acct string) {
	m.policies.clear()
	m.bus.Broadcast(ctx, cluster.Event{Kind: cluster.Access, Account: acct})
}

// sessionPrefix starts every sign-in session token.
const sessionPrefix = "lgs_"

// authenticate resolves the caller of an admin request, or answers it.
func (m *Manager) authenticate(w http.ResponseWriter, r *http.Request) (api.Caller, string, bool) {
	value := api.Bearer(r)
	if value == "" {
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "missing API key (Authorization: Bearer <key>; the CLI reads LEGATE_API_KEY or the key legate login stored)")
		return api.Caller{}, "", false
	}
	now := m.cfg.Now()
	var c api.Caller
	var acct, ownerKind, ownerID string
	if strings.HasPrefix(value, sessionPrefix) {
		ws, err := m.st.WebSessionByHash(r.Context(), api.HashSecret(value))
		switch {
		case errors.Is(err, store.ErrNotFound):
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "invalid sign-in session; sign in again (legate login)")
			return api.Caller{}, "", false
		case err != nil:
			api.StoreError(w, err, "sign-in session")
			return api.Caller{}, "", false
		case ws.RevokedAt != nil || !now.Before(ws.ExpiresAt):
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "the sign-in session has ended (signed out or expired); sign in again (legate login)")
			return api.Caller{}, "", false
		}
		c.Session, acct, ownerKind, ownerID = ws, ws.AccountID, protocol.PrincipalUser, ws.PrincipalID
	} else {
		k, err := m.apiKey(r.Context(), api.HashSecret(value))
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "invalid API key")
				return api.Caller{}, "", false
			}
			api.StoreError(w, err, "API key")
			return api.Caller{}, "", false
		}
		if k.RevokedAt != nil {
			if m.apiKeys.shouldWarn(k.ID, now) {
				m.log.Warn("request with a revoked API key refused", "account", k.AccountID, "key", k.Name, "remote", r.RemoteAddr)
			}
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeAPIKeyRevoked,
				"API key %q was revoked at %s; use another API key (DATA/admin.env of a manager holds one, and legate apikey create makes more)",
				k.Name, k.RevokedAt.UTC().Format(time.RFC3339))
			return api.Caller{}, "", false
		}
		m.apiKeys.used(k.ID, now)
		c.Key, acct, ownerKind, ownerID = k, k.AccountID, k.OwnerKind, k.OwnerID
	}
	if ownerKind == protocol.OwnerAccount {
		c.Policy = accountPolicy(acct)
		return c, acct, true
	}
	pol, disabled, err := m.policyOf(r.Context(), acct, ownerID)
	switch {
	case errors.Is(err, errPrincipalGone):
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "the user or service account of this credential was deleted")
		return api.Caller{}, "", false
	case err != nil:
		api.StoreError(w, err, "user")
		return api.Caller{}, "", false
	case disabled:
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated,
			"%s is disabled; an administrator can enable it (legate user enable %s)", pol.Principal, pol.Principal.Name)
		return api.Caller{}, "", false
	}
	c.Policy = pol
	return c, acct, true
}
