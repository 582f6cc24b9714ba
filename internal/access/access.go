// Package access decides who may do what: the permissions of each resource
// type, the built-in and custom roles made of them, the bindings of roles
// to users, service accounts and groups at account, org or project scope,
// and one pure function, Check, that says whether a principal's bindings
// allow a permission on a resource at a scope — and when they do not,
// which permission is missing, on which resource, at which scope. It knows
// nothing of HTTP or SQL: the manager loads bindings from the store and
// asks.
package access

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Permission is an action on a resource type, written "resource:action"
// (delegate:delete).
type Permission string

// The permissions, by resource type (docs/access.md lists them with the
// built-in roles): delegate view is always granted (Check allows it
// whatever the bindings); creating or editing a delegate includes
// creating its tokens and manifests.
const (
	DelegateView   Permission = "delegate:view"
	DelegateEdit   Permission = "delegate:edit"
	DelegateDelete Permission = "delegate:delete"

	ConfigurationView   Permission = "configuration:view"
	ConfigurationEdit   Permission = "configuration:edit"
	ConfigurationDelete Permission = "configuration:delete"

	// Tokens: creating one is DelegateEdit; TokenDelete revokes.
	TokenView   Permission = "token:view"
	TokenDelete Permission = "token:delete"

	ConnectorView   Permission = "connector:view"
	ConnectorEdit   Permission = "connector:edit"
	ConnectorDelete Permission = "connector:delete"
	// ConnectorAccess lets a task use the connector (and so the delegates
	// it selects).
	ConnectorAccess Permission = "connector:access"

	// SecretView lists secret names, never values.
	SecretView   Permission = "secret:view"
	SecretEdit   Permission = "secret:edit"
	SecretDelete Permission = "secret:delete"
	// SecretAccess lets a task reference the secret.
	SecretAccess Permission = "secret:access"

	TaskView   Permission = "task:view"
	TaskRun    Permission = "task:run"
	TaskCancel Permission = "task:cancel"
	// TaskPrivileged lets a task's container ask for access to the
	// delegate's host: privileged mode, capabilities beyond the runtime's
	// defaults, host_path volumes (the delegate's own policy must allow
	// them too). Only account admins have it among the built-in roles: a
	// privileged container is root on a host that may run every scope's
	// tasks.
	TaskPrivileged Permission = "task:privileged"

	PipelineView    Permission = "pipeline:view"
	PipelineEdit    Permission = "pipeline:edit"
	PipelineExecute Permission = "pipeline:execute"

	// Orgs and projects (the scopes themselves): view, create, delete.
	// Every route needs a rule, theirs too: creating a project in an org
	// is OrgEdit at that org.
	OrgView   Permission = "org:view"
	OrgEdit   Permission = "org:edit"
	OrgDelete Permission = "org:delete"

	// Users and roles: users, service accounts, groups, roles, bindings and
	// the API keys of others.
	UserView   Permission = "user:view"
	UserManage Permission = "user:manage"

	AuditView Permission = "audit:view"
)

// resources lists each resource type's actions, in the order of the
// documentation.
var resources = []struct {
	kind    string
	actions []string
}{
	{"delegate", []string{"view", "edit", "delete"}},
	{"configuration", []string{"view", "edit", "delete"}},
	{"token", []string{"view", "delete"}},
	{"connector", []string{"view", "edit", "delete", "access"}},
	{"secret", []string{"view", "edit", "delete", "access"}},
	{"task", []string{"view", "run", "cancel", "privileged"}},
	{"pipeline", []string{"view", "edit", "execute"}},
	{"org", []string{"view", "edit", "delete"}},
	{"user", []string{"view", "manage"}},
	{"audit", []string{"view"}},
}

// All returns every permission, in documentation order.
func All() []Permission {
	var out []Permission
	for _, r := range resources {
		for _, a := range r.actions {
			out = append(out, Permission(r.kind+":"+a))
		}
	}
	return out
}

// Resource is the type of the permission (delegate for delegate:delete).
func (p Permission) Resource() string {
	r, _, _ := strings.Cut(string(p), ":")
	return r
}

// ParsePermission reads "resource:action" (case-insensitive, trimmed);
// "resource:*" stands for every action of the resource. It returns the
// permissions meant, or an error that lists what is valid.
func ParsePermission(s string) ([]Permission, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	kind, action, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("permission %q: want RESOURCE:ACTION, e.g. delegate:delete (legate role permissions lists them)", s)
	}
	for _, r := range resources {
		if r.kind != kind {
			continue
		}
		if action == "*" {
			out := make([]Permission, 0, len(r.actions))
			for _, a := range r.actions {
				out = append(out, Permission(kind+":"+a))
			}
			return out, nil
		}
		if slices.Contains(r.actions, action) {
			return []Permission{Permission(s)}, nil
		}
		return nil, fmt.Errorf("permission %q: %s has the actions %s (or *)", s, kind, strings.Join(r.actions, ", "))
	}
	kinds := make([]string, 0, len(resources))
	for _, r := range resources {
		kinds = append(kinds, r.kind)
	}
	return nil, fmt.Errorf("permission %q: unknown resource %q; resources are %s", s, kind, strings.Join(kinds, ", "))
}

// Scope is where a resource lives or a binding applies: the account (both
// empty), an org, or a project of an org.
type Scope struct {
	Org     string `json:"org,omitempty"`
	Project string `json:"project,omitempty"`
}

// Account is the account scope.
var Account = Scope{}

// Covers reports whether s is t or above it: a binding at s applies to a
// resource at t. Org and project names compare case-sensitively, as the
// store keeps them.
func (s Scope) Covers(t Scope) bool {
	switch {
	case s.Org == "":
		return true
	case s.Org != t.Org:
		return false
	case s.Project == "":
		return true
	}
	return s.Project == t.Project
}

// Valid reports whether s is well formed: a project needs its org.
func (s Scope) Valid() bool { return s.Project == "" || s.Org != "" }

func (s Scope) String() string {
	switch {
	case s.Org == "":
		return "account scope"
	case s.Project == "":
		return fmt.Sprintf("org %s", s.Org)
	}
	return fmt.Sprintf("project %s/%s", s.Org, s.Project)
}

// ParseScope reads "account", "ORG" or "ORG/PROJECT" (as String and the
// CLI write them, without the words). Names follow the rules of org
// names: 1-63 letters, digits, '.', '_' or '-', starting with a letter or
// digit.
func ParseScope(s string) (Scope, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "account" {
		return Account, nil
	}
	org, project, hasProject := strings.Cut(s, "/")
	if !validName(org) || (hasProject && !validName(project)) {
		return Scope{}, fmt.Errorf("scope %q: want account, ORG or ORG/PROJECT (names of letters, digits, '.', '_' or '-')", s)
	}
	return Scope{Org: org, Project: project}, nil
}

// Key writes s for ParseScope: "account", "ORG" or "ORG/PROJECT".
func (s Scope) Key() string {
	switch {
	case s.Org == "":
		return "account"
	case s.Project == "":
		return s.Org
	}
	return s.Org + "/" + s.Project
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') ||
			(i > 0 && (c == '.' || c == '_' || c == '-'))
		if !ok {
			return false
		}
	}
	return true
}

// ValidName reports whether s is a valid name of a user, service
// account, group or role: the rule of token and org names.
func ValidName(s string) bool { return validName(s) }

// Principal kinds, and the kind of a group as a binding's subject.
const (
	KindUser           = "user"
	KindServiceAccount = "service_account"
	KindGroup          = "group"
)

// Principal is who makes a request: a user or a service account, with the
// groups it belongs to (by ID).
type Principal struct {
	Kind   string
	ID     string
	Name   string
	Groups []string
}

func (p Principal) String() string {
	if p.Kind == KindServiceAccount {
		return "service account " + p.Name
	}
	return "user " + p.Name
}

// Role is a named set of permissions. Built-in roles exist in every
// account and cannot be changed.
type Role struct {
	Name        string
	Description string
	Builtin     bool
	Permissions []Permission
}

// Has reports whether the role grants p.
func (r Role) Has(p Permission) bool { return slices.Contains(r.Permissions, p) }

// The built-in roles' names.
const (
	RoleAccountAdmin  = "account-admin"
	RoleOrgAdmin      = "org-admin"
	RoleProjectAdmin  = "project-admin"
	RoleDelegateAdmin = "delegate-admin"
	RoleViewer        = "viewer"
)

// Builtins returns the built-in roles. A role grants its permissions at
// the scope of its binding and beneath; "org admin" bound at a project
// is a project admin with org rights there, which is harmless: the
// permissions that only make sense above (creating projects) need a scope
// above.
func Builtins() []Role {
	all := All()
	without := func(drop ...Permission) []Permission {
		return slices.DeleteFunc(slices.Clone(all), func(p Permission) bool { return slices.Contains(drop, p) })
	}
	views := []Permission{}
	for _, p := range all {
		if strings.HasSuffix(string(p), ":view") && p != AuditView {
			views = append(views, p)
		}
	}
	return []Role{
		{Name: RoleAccountAdmin, Builtin: true, Description: "everything, including users and roles",
			Permissions: all},
		{Name: RoleOrgAdmin, Builtin: true, Description: "everything within its scope, including its users' bindings and projects, except privileged task containers",
			Permissions: without(TaskPrivileged)},
		{Name: RoleProjectAdmin, Builtin: true, Description: "everything within its scope except creating or deleting orgs and projects, managing users and privileged task containers",
			Permissions: without(OrgEdit, OrgDelete, UserManage, TaskPrivileged)},
		{Name: RoleDelegateAdmin, Builtin: true, Description: "delegates, their tokens and configurations; views the rest; no secret or connector access",
			Permissions: []Permission{DelegateView, DelegateEdit, DelegateDelete,
				ConfigurationView, ConfigurationEdit, ConfigurationDelete,
				TokenView, TokenDelete, TaskView, ConnectorView, SecretView, OrgView}},
		{Name: RoleViewer, Builtin: true, Description: "views everything but the audit log and secret values",
			Permissions: views},
	}
}

// Builtin returns the built-in role of that name.
func Builtin(name string) (Role, bool) {
	r, ok := builtinRoles()[name]
	r.Permissions = slices.Clone(r.Permissions)
	return r, ok
}

// builtinRoles are Builtins by name, made once: every admin request checks
// its bindings' roles, and building the roles each time showed in a
// loaded manager's CPU (BENCHMARKS.md, fewer statements per task). Read
// only; Builtin hands out copies.
var builtinRoles = sync.OnceValue(func() map[string]Role {
	m := map[string]Role{}
	for _, r := range Builtins() {
		m[r.Name] = r
	}
	return m
})

// Binding grants Role to a subject (a user, service account or group, by
// ID) at Scope and beneath.
type Binding struct {
	Role        string
	SubjectKind string
	SubjectID   string
	Scope       Scope
}

// Applies reports whether b binds p (directly or through a group).
func (b Binding) Applies(p Principal) bool {
	switch b.SubjectKind {
	case KindGroup:
		return slices.Contains(p.Groups, b.SubjectID)
	case p.Kind:
		return b.SubjectID == p.ID
	}
	return false
}

// Resource names what a permission is checked on: its type and name (for
// messages) and where it lives.
type Resource struct {
	Kind  string
	Name  string
	Scope Scope
}

func (r Resource) String() string {
	if r.Name == "" {
		return fmt.Sprintf("%ss at %s", r.Kind, r.Scope)
	}
	return fmt.Sprintf("%s %q at %s", r.Kind, r.Name, r.Scope)
}

// Refusal says why a request was refused: who lacks which permission on
// which resource at which scope.
type Refusal struct {
	Principal  Principal
	Permission Permission
	Resource   Resource
}

func (e *Refusal) Error() string {
	return fmt.Sprintf("%s lacks the permission %s on %s; a role with %s bound at %s or above grants it (legate role bind ROLE --%s %s ...)",
		e.Principal, e.Permission, e.Resource, e.Permission, e.Resource.Scope, subjectFlag(e.Principal.Kind), e.Principal.Name)
}

func subjectFlag(kind string) string {
	if kind == KindServiceAccount {
		return "service-account"
	}
	return "user"
}

// Policy is what Check needs of a principal: its bindings (those that
// apply to it, directly or through its groups; others are ignored) and
// the account's roles by name (custom ones; built-ins are known).
type Policy struct {
	Principal Principal
	Bindings  []Binding
	Roles     map[string]Role
}

// role returns the role named name: a built-in or one of p.Roles.
func (p *Policy) role(name string) (Role, bool) {
	if r, ok := builtinRoles()[name]; ok {
		return r, true // read only
	}
	r, ok := p.Roles[name]
	return r, ok
}

// Allows reports whether p may perm on a resource at s.
func (p *Policy) Allows(perm Permission, s Scope) bool {
	if perm == DelegateView {
		return true
	}
	for _, b := range p.Bindings {
		if !b.Applies(p.Principal) || !b.Scope.Covers(s) {
			continue
		}
		if r, ok := p.role(b.Role); ok && r.Has(perm) {
			return true
		}
	}
	return false
}

// AllowsBelow reports whether p may perm at s or at any scope beneath it
// (a listing at s shows something).
func (p *Policy) AllowsBelow(perm Permission, s Scope) bool {
	if p.Allows(perm, s) {
		return true
	}
	for _, b := range p.Bindings {
		if b.Applies(p.Principal) && s.Covers(b.Scope) {
			if r, ok := p.role(b.Role); ok && r.Has(perm) {
				return true
			}
		}
	}
	return false
}

// Scopes returns where p holds perm: all when that covers the whole
// account, else the scopes of the bindings that grant it (each applies to
// itself and beneath; none when p does not hold it anywhere). A listing
// asks the store for what lies at or beneath them, so that its limit
// counts only what the caller may see.
func (p *Policy) Scopes(perm Permission) (all bool, scopes []Scope) {
	if perm == DelegateView {
		return true, nil
	}
	for _, b := range p.Bindings {
		if !b.Applies(p.Principal) {
			continue
		}
		if r, ok := p.role(b.Role); !ok || !r.Has(perm) {
			continue
		}
		if b.Scope == Account {
			return true, nil
		}
		if !slices.Contains(scopes, b.Scope) {
			scopes = append(scopes, b.Scope)
		}
	}
	return false, scopes
}

// Check is the decision: nil when p may perm on res, else a *Refusal.
func (p *Policy) Check(perm Permission, res Resource) error {
	if p.Allows(perm, res.Scope) {
		return nil
	}
	return &Refusal{Principal: p.Principal, Permission: perm, Resource: res}
}

// Permissions returns every permission p holds at s, sorted.
func (p *Policy) Permissions(s Scope) []Permission {
	var out []Permission
	for _, perm := range All() {
		if p.Allows(perm, s) {
			out = append(out, perm)
		}
	}
	return out
}
