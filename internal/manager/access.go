package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Access control: every admin route names, in routes(), the permission it
// needs and where the scope it is checked at comes from (a rule). adminAuth
// resolves the caller (API key → its owner; sign-in session → its user),
// refuses disabled users and revoked keys, and checks the rule with
// package access. Listings are filtered by their handlers with the
// caller's policy instead of refused.

// scopeSource says where a route's resource, and so its scope, comes
// from. Its name is what docs/security.md's permission column says.
type scopeSource struct {
	name string
	// resolve returns the resources the permission is checked on (all must
	// be allowed); none when the object the route names does not exist
	// (the handler answers 404).
	resolve func(m *Manager, r *http.Request, acct string) ([]access.Resource, error)
}

// rule is what an admin route needs.
type rule struct {
	perm  access.Permission
	scope scopeSource
	// list marks a listing: never refused; its handler shows only what
	// the caller may see with perm.
	list bool
	// self marks routes any signed-in principal may call for itself (its
	// own keys, whoami, its session); its handler requires user:manage at
	// account scope for anyone else's objects.
	self bool
	// also adds checks that depend on the request (a task's connector
	// needs connector:access); nil for none.
	also func(m *Manager, r *http.Request, acct string) ([]need, error)
}

// need is one permission on one resource.
type need struct {
	perm access.Permission
	res  access.Resource
}

// doc is the rule as docs/security.md's permission column writes it.
func (rl rule) doc() string {
	switch {
	case rl.self:
		return "self"
	case rl.list:
		return fmt.Sprintf("list `%s`", rl.perm)
	}
	s := fmt.Sprintf("`%s` at %s", rl.perm, rl.scope.name)
	if rl.also != nil {
		s += " (+ uses)"
	}
	return s
}

func res(kind, name string, s access.Scope) []access.Resource {
	return []access.Resource{{Kind: kind, Name: name, Scope: s}}
}

// The scope sources.
var (
	// atAccount: the account itself (account-level objects: orgs,
	// connectors, users, groups, roles).
	atAccount = scopeSource{"account", func(_ *Manager, r *http.Request, _ string) ([]access.Resource, error) {
		return res(resourceKind(r), r.PathValue("name"), access.Account), nil
	}}
	// atBody: the org and project of the request body.
	atBody = scopeSource{"body", func(_ *Manager, r *http.Request, _ string) ([]access.Resource, error) {
		var sc struct {
			Org     string `json:"org"`
			Project string `json:"project"`
			Name    string `json:"name"`
			Role    string `json:"role"`
		}
		body, err := peekBody(r)
		if err != nil {
			return nil, err
		}
		_ = json.Unmarshal(body, &sc) // the handler reports a bad body
		name := sc.Name
		if name == "" {
			name = sc.Role
		}
		return res(resourceKind(r), name, access.Scope{Org: strings.TrimSpace(sc.Org), Project: strings.TrimSpace(sc.Project)}), nil
	}}
	// atQuery: ?org=&project=.
	atQuery = scopeSource{"query", func(_ *Manager, r *http.Request, _ string) ([]access.Resource, error) {
		q := r.URL.Query()
		name := q.Get("role")
		if name == "" {
			name = r.PathValue("name")
		}
		return res(resourceKind(r), name, access.Scope{Org: q.Get("org"), Project: q.Get("project")}), nil
	}}
	// atOrgPath: the org of the path (a project is created or deleted
	// within its org).
	atOrgPath = scopeSource{"org in path", func(_ *Manager, r *http.Request, _ string) ([]access.Resource, error) {
		return res("project", r.PathValue("name"), access.Scope{Org: r.PathValue("org")}), nil
	}}
	// atTask: the scope of the task the path names.
	atTask = scopeSource{"task", func(m *Manager, r *http.Request, acct string) ([]access.Resource, error) {
		t, err := m.st.GetTask(r.Context(), acct, r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return res("task", t.ID, access.Scope{Org: t.Spec.Org, Project: t.Spec.Project}), nil
	}}
	// atToken: the scope of the token the path names.
	atToken = scopeSource{"token", func(m *Manager, r *http.Request, acct string) ([]access.Resource, error) {
		ts, err := m.st.ListTokens(r.Context(), acct)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if t.Name == r.PathValue("name") {
				return res("token", t.Name, access.Scope{Org: t.Org, Project: t.Project}), nil
			}
		}
		return nil, store.ErrNotFound
	}}
	// atDelegate: the scopes of the instances of the delegate the path
	// names (each must be allowed).
	atDelegate = scopeSource{"delegate", func(m *Manager, r *http.Request, acct string) ([]access.Resource, error) {
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
	// atConfiguration: the scope of the configuration the path names.
	atConfiguration = scopeSource{"configuration", func(m *Manager, r *http.Request, acct string) ([]access.Resource, error) {
		c, err := m.st.GetConfiguration(r.Context(), acct, r.PathValue("name"))
		if err != nil {
			return nil, err
		}
		return res("configuration", c.Name, access.Scope{Org: c.Org, Project: c.Project}), nil
	}}
	// anywhere: the permission held at any scope (users, groups and roles
	// are account objects that an org admin must see to bind them there;
	// connectors are account objects that a project's tasks may use).
	anywhere = scopeSource{"any scope", nil}
)

// resourceKind names the resource of a route from its path
// ("/api/v1/connectors/{name}" → connector).
func resourceKind(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, "/api/v1/")
	p, _, _ = strings.Cut(p, "/")
	return strings.TrimSuffix(p, "s")
}

// peekBody reads the body, which authorize has read into memory already,
// and puts it back for the handler.
func peekBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// taskUses: a task that uses a connector needs connector:access at the
// task's scope; one that references stored secrets needs secret:access on
// each at the scope it resolves to (secretNeeds).
func taskUses(m *Manager, r *http.Request, acct string) ([]need, error) {
	body, err := peekBody(r)
	if err != nil {
		return nil, err
	}
	var spec protocol.TaskSpec
	_ = json.Unmarshal(body, &spec) // the handler reports a bad body
	var out []need
	if spec.Connector != "" {
		out = append(out, need{access.ConnectorAccess, access.Resource{Kind: "connector", Name: spec.Connector,
			Scope: access.Scope{Org: strings.TrimSpace(spec.Org), Project: strings.TrimSpace(spec.Project)}}})
	}
	secrets, err := m.secretNeeds(r.Context(), acct, spec)
	if err != nil {
		return nil, err
	}
	return append(out, secrets...), nil
}

// caller is who makes an admin request.
type caller struct {
	policy *access.Policy
	// key is the API key of the request; zero for a sign-in session.
	key store.APIKey
	// session is the sign-in session of the request; zero for a key.
	session store.WebSession
}

type callerCtx struct{}

// callerOf returns the caller of an admin request (audit records
// callerOf(ctx).policy.Principal).
func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerCtx{}).(caller)
	if c.policy == nil {
		c.policy = &access.Policy{}
	}
	return c
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
	m.broadcast(ctx, clusterEvent{Kind: clusterAccess, Account: acct})
}

// sessionPrefix starts every sign-in session token.
const sessionPrefix = "lgs_"

// authenticate resolves the caller of an admin request, or answers it.
func (m *Manager) authenticate(w http.ResponseWriter, r *http.Request) (caller, string, bool) {
	value := bearer(r)
	if value == "" {
		writeError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "missing API key (Authorization: Bearer <key>; the CLI reads LEGATE_API_KEY or the key legate login stored)")
		return caller{}, "", false
	}
	now := m.cfg.Now()
	var c caller
	var acct, ownerKind, ownerID string
	if strings.HasPrefix(value, sessionPrefix) {
		ws, err := m.st.WebSessionByHash(r.Context(), hashSecret(value))
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "invalid sign-in session; sign in again (legate login)")
			return caller{}, "", false
		case err != nil:
			storeError(w, err, "sign-in session")
			return caller{}, "", false
		case ws.RevokedAt != nil || !now.Before(ws.ExpiresAt):
			writeError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "the sign-in session has ended (signed out or expired); sign in again (legate login)")
			return caller{}, "", false
		}
		c.session, acct, ownerKind, ownerID = ws, ws.AccountID, protocol.PrincipalUser, ws.PrincipalID
	} else {
		k, err := m.apiKey(r.Context(), hashSecret(value))
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				writeError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "invalid API key")
				return caller{}, "", false
			}
			storeError(w, err, "API key")
			return caller{}, "", false
		}
		if k.RevokedAt != nil {
			if m.apiKeys.shouldWarn(k.ID, now) {
				m.log.Warn("request with a revoked API key refused", "account", k.AccountID, "key", k.Name, "remote", r.RemoteAddr)
			}
			writeError(w, http.StatusUnauthorized, protocol.CodeAPIKeyRevoked,
				"API key %q was revoked at %s; use another API key (DATA/admin.env of a manager holds one, and legate apikey create makes more)",
				k.Name, k.RevokedAt.UTC().Format(time.RFC3339))
			return caller{}, "", false
		}
		m.apiKeys.used(k.ID, now)
		c.key, acct, ownerKind, ownerID = k, k.AccountID, k.OwnerKind, k.OwnerID
	}
	if ownerKind == protocol.OwnerAccount {
		c.policy = accountPolicy(acct)
		return c, acct, true
	}
	pol, disabled, err := m.policyOf(r.Context(), acct, ownerID)
	switch {
	case errors.Is(err, errPrincipalGone):
		writeError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "the user or service account of this credential was deleted")
		return caller{}, "", false
	case err != nil:
		storeError(w, err, "user")
		return caller{}, "", false
	case disabled:
		writeError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated,
			"%s is disabled; an administrator can enable it (legate user enable %s)", pol.Principal, pol.Principal.Name)
		return caller{}, "", false
	}
	c.policy = pol
	return c, acct, true
}

// authorize checks a route's rule for the caller, or answers the request.
func (m *Manager) authorize(w http.ResponseWriter, r *http.Request, rl rule, c caller, acct string) bool {
	if rl.self || rl.list {
		return true
	}
	if rl.scope.name == atBody.name || rl.also != nil {
		// The body is read here, within the route's limit and deadline
		// (readBody answers a body too large or too slow), and handed on.
		body, ok := readBody(w, r)
		if !ok {
			return false
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	var needs []need
	if rl.scope.resolve == nil { // anywhere
		if c.policy.AllowsBelow(rl.perm, access.Account) {
			return true
		}
		needs = append(needs, need{rl.perm, access.Resource{Kind: resourceKind(r), Name: r.PathValue("name"), Scope: access.Account}})
	} else {
		rs, err := rl.scope.resolve(m, r, acct)
		if errors.Is(err, store.ErrNotFound) {
			return true // the handler answers 404
		}
		if err != nil {
			storeError(w, err, "the scope of the request")
			return false
		}
		for _, res := range rs {
			needs = append(needs, need{rl.perm, res})
		}
	}
	if rl.also != nil {
		more, err := rl.also(m, r, acct)
		if err != nil {
			storeError(w, err, "the scope of the request")
			return false
		}
		needs = append(needs, more...)
	}
	if len(needs) > 0 {
		auditResource(r.Context(), needs[0].res)
	}
	for _, n := range needs {
		if err := c.policy.Check(n.perm, n.res); err != nil {
			m.log.Info("request refused", "account", acct, "principal", c.policy.Principal.Name,
				"permission", n.perm, "resource", n.res.String(), "route", r.Method+" "+r.URL.Path)
			writeError(w, http.StatusForbidden, protocol.CodeForbidden, "%s", err.Error())
			return false
		}
	}
	return true
}

// mayManageOthers reports whether the caller may act on other
// principals' keys: user:manage at account scope.
func (c caller) mayManageOthers() bool { return c.policy.Allows(access.UserManage, access.Account) }

// principalID is the caller's principal ID ("" for an account key).
func (c caller) principalID() string {
	if c.policy.Principal.Kind == protocol.OwnerAccount {
		return ""
	}
	return c.policy.Principal.ID
}
