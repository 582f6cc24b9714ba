package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Access control: every admin route names the permission it needs and
// where the scope it is checked at comes from (a Rule). The Server
// resolves the caller (Config.Authenticate: API key → its owner; sign-in
// session → its user) and checks the rule with package access. Listings
// are filtered by their handlers with the caller's policy instead of
// refused.

// ScopeSource says where a route's resource, and so its scope, comes
// from. Its name is what docs/security.md's permission column says.
type ScopeSource struct {
	Name string
	// Resolve returns the resources the permission is checked on (all must
	// be allowed); store.ErrNotFound when the object the route names does
	// not exist (the handler answers 404). nil: the permission held at
	// any scope (Anywhere).
	Resolve func(r *http.Request, acct string) ([]access.Resource, error)
}

// Rule is what an admin route needs.
type Rule struct {
	Perm  access.Permission
	Scope ScopeSource
	// List marks a listing: never refused; its handler shows only what
	// the caller may see with Perm.
	List bool
	// Self marks routes any signed-in principal may call for itself (its
	// own keys, whoami, its session); its handler requires user:manage at
	// account scope for anyone else's objects.
	Self bool
	// Also adds checks that depend on the request (a task's connector
	// needs connector:access); nil for none.
	Also func(r *http.Request, acct string) ([]Need, error)
}

// Need is one permission on one resource.
type Need struct {
	Perm access.Permission
	Res  access.Resource
}

// Doc is the rule as docs/security.md's permission column writes it.
func (rl Rule) Doc() string {
	switch {
	case rl.Self:
		return "self"
	case rl.List:
		return fmt.Sprintf("list `%s`", rl.Perm)
	}
	s := fmt.Sprintf("`%s` at %s", rl.Perm, rl.Scope.Name)
	if rl.Also != nil {
		s += " (+ uses)"
	}
	return s
}

// Res is one resource of a kind and name at a scope.
func Res(kind, name string, s access.Scope) []access.Resource {
	return []access.Resource{{Kind: kind, Name: name, Scope: s}}
}

// The scope sources that need nothing but the request. Those that read
// an object (a task, a token, a delegate, ...) are made by the service
// that owns the object.
var (
	// AtAccount: the account itself (account-level objects: orgs,
	// connectors, users, groups, roles).
	AtAccount = ScopeSource{"account", func(r *http.Request, _ string) ([]access.Resource, error) {
		return Res(ResourceKind(r), r.PathValue("name"), access.Account), nil
	}}
	// AtBody: the org and project of the request body.
	AtBody = ScopeSource{"body", func(r *http.Request, _ string) ([]access.Resource, error) {
		var sc struct {
			Org     string `json:"org"`
			Project string `json:"project"`
			Name    string `json:"name"`
			Role    string `json:"role"`
		}
		body, err := PeekBody(r)
		if err != nil {
			return nil, err
		}
		_ = json.Unmarshal(body, &sc) // the handler reports a bad body
		name := sc.Name
		if name == "" {
			name = sc.Role
		}
		return Res(ResourceKind(r), name, access.Scope{Org: strings.TrimSpace(sc.Org), Project: strings.TrimSpace(sc.Project)}), nil
	}}
	// AtQuery: ?org=&project=.
	AtQuery = ScopeSource{"query", func(r *http.Request, _ string) ([]access.Resource, error) {
		q := r.URL.Query()
		name := q.Get("role")
		if name == "" {
			name = r.PathValue("name")
		}
		return Res(ResourceKind(r), name, access.Scope{Org: q.Get("org"), Project: q.Get("project")}), nil
	}}
	// AtOrgPath: the org of the path (a project is created or deleted
	// within its org).
	AtOrgPath = ScopeSource{"org in path", func(r *http.Request, _ string) ([]access.Resource, error) {
		return Res("project", r.PathValue("name"), access.Scope{Org: r.PathValue("org")}), nil
	}}
	// Anywhere: the permission held at any scope (users, groups and roles
	// are account objects that an org admin must see to bind them there;
	// connectors are account objects that a project's tasks may use).
	Anywhere = ScopeSource{"any scope", nil}
)

// ResourceKind names the resource of a route from its path
// ("/api/v1/connectors/{name}" → connector).
func ResourceKind(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, "/api/v1/")
	p, _, _ = strings.Cut(p, "/")
	return strings.TrimSuffix(p, "s")
}

// Caller is who makes an admin request.
type Caller struct {
	Policy *access.Policy
	// Key is the API key of the request; zero for a sign-in session.
	Key store.APIKey
	// Session is the sign-in session of the request; zero for a key.
	Session store.WebSession
}

type callerCtx struct{}

// WithCaller is ctx carrying the caller of its request.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerCtx{}, c)
}

// CallerOf returns the caller of an admin request (audit records
// CallerOf(ctx).Policy.Principal); an empty policy outside one.
func CallerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerCtx{}).(Caller)
	if c.Policy == nil {
		c.Policy = &access.Policy{}
	}
	return c
}

// MayManageOthers reports whether the caller may act on other
// principals' keys: user:manage at account scope.
func (c Caller) MayManageOthers() bool { return c.Policy.Allows(access.UserManage, access.Account) }

// PrincipalID is the caller's principal ID ("" for an account key).
func (c Caller) PrincipalID() string {
	if c.Policy.Principal.Kind == protocol.OwnerAccount {
		return ""
	}
	return c.Policy.Principal.ID
}
