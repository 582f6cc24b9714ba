package identity

import (
	"context"
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

// Authentication of admin requests: Authenticate resolves the caller (API
// key → its owner; sign-in session → its user) and refuses disabled users
// and revoked keys; api.Server then checks the route's rule with package
// access. The callers' policies are cached (policyCache) and dropped on
// every manager when users, groups, roles or bindings change
// (accessChanged).

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

// ErrPrincipalGone: the owner of a key, a session or a webhook was
// deleted.
var ErrPrincipalGone = errors.New("principal deleted")

// Policy returns the policy of the principal of account acct with this
// kind and ID, and whether it is disabled: account admin for a principal
// of kind protocol.OwnerAccount (the account itself); ErrPrincipalGone
// when the principal no longer exists. It is cached as a caller's is.
func (s *Service) Policy(ctx context.Context, acct, kind, id string) (*access.Policy, bool, error) {
	if kind == protocol.OwnerAccount {
		return accountPolicy(acct), false, nil
	}
	return s.policyOf(ctx, acct, id)
}

// policyOf returns the policy of the principal with this ID, and whether it
// is disabled; ErrPrincipalGone when it no longer exists.
func (s *Service) policyOf(ctx context.Context, acct, id string) (*access.Policy, bool, error) {
	now := s.cfg.Now()
	if e, _, ok := s.policies.lookup(id, now, s.apiKeyTTL()); ok {
		return e.pol, e.disabled, nil
	}
	_, gen, _ := s.policies.lookup(id, now, s.apiKeyTTL())
	p, err := s.st.PrincipalByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && p.AccountID != acct) {
		return nil, false, ErrPrincipalGone
	}
	if err != nil {
		return nil, false, err
	}
	groups, err := s.st.GroupsOf(ctx, id)
	if err != nil {
		return nil, false, err
	}
	bs, err := s.st.ListBindings(ctx, acct, append([]string{id}, groups...)...)
	if err != nil {
		return nil, false, err
	}
	roles, err := s.st.ListRoles(ctx, acct)
	if err != nil {
		return nil, false, err
	}
	pol := &access.Policy{Principal: access.Principal{Kind: p.Kind, ID: p.ID, Name: p.Name, Groups: groups}, Roles: rolesByName(roles)}
	for _, b := range bs {
		pol.Bindings = append(pol.Bindings, bindingOf(b))
	}
	s.policies.put(id, policyEntry{pol: pol, disabled: p.Disabled, loaded: now}, gen)
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
func (s *Service) accessChanged(ctx context.Context, acct string) {
	s.policies.clear()
	s.bus.Broadcast(ctx, cluster.Event{Kind: cluster.Access, Account: acct})
}

// SessionPrefix starts every sign-in session token.
const SessionPrefix = "lgs_"

// Authenticate resolves the caller of an admin request (api.Server's
// Config.Authenticate), or answers it.
func (s *Service) Authenticate(w http.ResponseWriter, r *http.Request) (api.Caller, string, bool) {
	value := api.Bearer(r)
	if value == "" {
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "missing API key (Authorization: Bearer <key>; the CLI reads LEGATE_API_KEY or the key legate login stored)")
		return api.Caller{}, "", false
	}
	now := s.cfg.Now()
	var c api.Caller
	var acct, ownerKind, ownerID string
	if strings.HasPrefix(value, SessionPrefix) {
		ws, err := s.st.WebSessionByHash(r.Context(), api.HashSecret(value))
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
		k, err := s.apiKey(r.Context(), api.HashSecret(value))
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "invalid API key")
				return api.Caller{}, "", false
			}
			api.StoreError(w, err, "API key")
			return api.Caller{}, "", false
		}
		if k.RevokedAt != nil {
			if s.apiKeys.shouldWarn(k.ID, now) {
				s.log.Warn("request with a revoked API key refused", "account", k.AccountID, "key", k.Name, "remote", r.RemoteAddr)
			}
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeAPIKeyRevoked,
				"API key %q was revoked at %s; use another API key (DATA/admin.env of a manager holds one, and legate apikey create makes more)",
				k.Name, k.RevokedAt.UTC().Format(time.RFC3339))
			return api.Caller{}, "", false
		}
		s.apiKeys.used(k.ID, now)
		c.Key, acct, ownerKind, ownerID = k, k.AccountID, k.OwnerKind, k.OwnerID
	}
	if ownerKind == protocol.OwnerAccount {
		c.Policy = accountPolicy(acct)
		return c, acct, true
	}
	pol, disabled, err := s.policyOf(r.Context(), acct, ownerID)
	switch {
	case errors.Is(err, ErrPrincipalGone):
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
