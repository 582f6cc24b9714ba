package webui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// Settings: a page per kind of thing, each listing what the API lists
// for the user; the sections the user's role cannot view are not linked
// (and the API refuses them anyway). Secrets show names only: the API
// never returns a value.

// section is one page of the settings.
type section struct {
	Key   string
	Title string
	// allowed says whether the policy may view it.
	allowed func(*access.Policy) bool
}

func below(perm access.Permission) func(*access.Policy) bool {
	return func(p *access.Policy) bool { return p.AllowsBelow(perm, access.Account) }
}

var sections = []section{
	{"tokens", "Delegate tokens", below(access.TokenView)},
	{"apikeys", "API keys", func(*access.Policy) bool { return true }},
	{"users", "Users", below(access.UserView)},
	{"groups", "Groups", below(access.UserView)},
	{"roles", "Roles", below(access.UserView)},
	{"bindings", "Role bindings", below(access.UserView)},
	{"secrets", "Secrets", below(access.SecretView)},
	{"connectors", "Connectors", below(access.ConnectorView)},
	{"configurations", "Delegate configurations", below(access.ConfigurationView)},
	{"limits", "Deployment limits", below(access.PipelineView)},
	{"audit", "Audit log", func(p *access.Policy) bool { return p.Allows(access.AuditView, access.Account) }},
}

// settingsView is what every settings page gets.
type settingsView struct {
	Section  string
	Title    string
	Sections []section
	Pager    pager
	// Now is when the page was made, for the relative times.
	Now time.Time
	// Can says which forms the user's roles allow (the API decides; a
	// form not allowed is replaced by a line that says what it needs).
	Can settingsCan
	// Form holds what a refused form sent, to fill it again (never a
	// secret's value or a password).
	Form url.Values
	// Confirm, when set, is the page that asks before a destructive action.
	Confirm *confirmView
	// One of these is set, by Section.
	Tokens         []tokenRow
	CanCreateToken bool
	NewToken       *protocol.Token
	APIKeys        []apiKeyRow
	NewAPIKey      *protocol.APIKey
	Users          []protocol.User
	Groups         []protocol.Group
	Roles          []protocol.Role
	Permissions    []access.Permission
	Bindings       []bindingRow
	Secrets        []scoped[protocol.Secret]
	Connectors     []protocol.Connector
	Configurations []scoped[protocol.Configuration]
	Limits         *protocol.DeploymentLimits
	Audit          auditView
}

// settingsCan is what the user may change, as far as the page can tell
// before asking the API.
type settingsCan struct {
	ManageUsers        bool // user:manage on the account
	Bind               bool // user:manage somewhere (bindings at an org or project)
	EditSecrets        bool
	EditConnectors     bool
	DeleteConnectors   bool
	EditConfigurations bool
}

type scoped[T any] struct {
	Item      T
	Scope     string
	CanEdit   bool
	CanDelete bool
}

type tokenRow struct {
	protocol.Token
	Scope     string
	CanRevoke bool
}

type apiKeyRow struct {
	protocol.APIKey
	CanRevoke bool
}

type bindingRow struct {
	protocol.Binding
	Scope     string
	CanDelete bool
}

type auditView struct {
	Action   string
	Actor    string
	Resource string
	Events   []protocol.AuditEvent
	FirstURL string
	NextURL  string
}

func (u *UI) allowedSections(s *user) []section {
	var out []section
	for _, sec := range sections {
		if sec.allowed(s.policy) {
			out = append(out, sec)
		}
	}
	return out
}

func (u *UI) handleSettings(w http.ResponseWriter, r *http.Request, s *user) {
	v := settingsView{Title: "Settings", Sections: u.allowedSections(s)}
	u.render(w, r, s, http.StatusOK, "settings", page{Title: "Settings", Nav: "settings", Data: v})
}

func sectionOf(key string) *section {
	for i := range sections {
		if sections[i].Key == key {
			return &sections[i]
		}
	}
	return nil
}

// newSettingsView is the frame of a settings page of section sec.
func (u *UI) newSettingsView(s *user, sec *section) settingsView {
	p := s.policy
	return settingsView{Section: sec.Key, Title: sec.Title, Sections: u.allowedSections(s), Now: u.cfg.Now(),
		Can: settingsCan{
			ManageUsers:        p.Allows(access.UserManage, access.Account),
			Bind:               p.AllowsBelow(access.UserManage, access.Account),
			EditSecrets:        p.AllowsBelow(access.SecretEdit, access.Account),
			EditConnectors:     p.Allows(access.ConnectorEdit, access.Account),
			DeleteConnectors:   p.Allows(access.ConnectorDelete, access.Account),
			EditConfigurations: p.AllowsBelow(access.ConfigurationEdit, access.Account),
		}}
}

func (u *UI) handleSettingsSection(w http.ResponseWriter, r *http.Request, s *user) {
	key := r.PathValue("section")
	sec := sectionOf(key)
	if sec == nil {
		u.errorPage(w, r, s, http.StatusNotFound, "There is no settings page "+key+".")
		return
	}
	v := u.newSettingsView(s, sec)
	if err := u.loadSection(r, s, &v); err != nil {
		u.apiError(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "settings", page{Title: sec.Title, Nav: "settings", Data: v})
}

// loadSection fills v with its section's list, a page of it.
func (u *UI) loadSection(r *http.Request, s *user, v *settingsView) error {
	q := r.URL.Query()
	if r.Method != http.MethodGet {
		q = url.Values{} // a refused form's page shows the first page
	}
	p := pageOf(q)
	more := false
	var err error
	switch v.Section {
	case "tokens", "apikeys", "secrets", "configurations", "connectors", "limits":
		more, err = u.loadResources(r.Context(), s, v, p)
	case "users", "groups", "roles", "bindings":
		more, err = u.loadAccess(r.Context(), s, v, p)
	case "audit":
		v.Audit, err = u.auditPage(r, s, q)
	}
	v.Pager = newPager("/settings/"+v.Section, q, p, more)
	return err
}

func (u *UI) loadAccess(ctx context.Context, s *user, v *settingsView, p int) (more bool, err error) {
	switch v.Section {
	case "users":
		var l protocol.UserList
		if err = s.api.Admin(ctx, "list users", http.MethodGet, protocol.PathUsers, nil, &l); err == nil {
			v.Users, more = window(l.Users, p)
		}
	case "groups":
		var l protocol.GroupList
		if err = s.api.Admin(ctx, "list groups", http.MethodGet, protocol.PathGroups, nil, &l); err == nil {
			v.Groups, more = window(l.Groups, p)
		}
	case "roles":
		var l protocol.RoleList
		if err = s.api.Admin(ctx, "list roles", http.MethodGet, protocol.PathRoles, nil, &l); err == nil {
			v.Roles, more = window(l.Roles, p)
		}
		v.Permissions = access.All()
	case "bindings":
		var l protocol.BindingList
		if err = s.api.Admin(ctx, "list bindings", http.MethodGet, protocol.PathBindings, nil, &l); err != nil {
			return false, err
		}
		var rows []bindingRow
		for _, b := range l.Bindings {
			rows = append(rows, bindingRow{Binding: b, Scope: protocol.ScopeLabel(b.Org, b.Project),
				CanDelete: s.policy.Allows(access.UserManage, access.Scope{Org: b.Org, Project: b.Project})})
		}
		v.Bindings, more = window(rows, p)
		var roles protocol.RoleList
		if err = s.api.Admin(ctx, "list roles", http.MethodGet, protocol.PathRoles, nil, &roles); err == nil {
			v.Roles = roles.Roles
		}
	}
	return more, err
}

func (u *UI) loadResources(ctx context.Context, s *user, v *settingsView, p int) (more bool, err error) {
	at := func(org, project string) access.Scope { return access.Scope{Org: org, Project: project} }
	switch v.Section {
	case "tokens":
		var l protocol.TokenList
		if l, err = s.api.ListTokens(ctx); err == nil {
			var rows []tokenRow
			for _, t := range l.Tokens {
				rows = append(rows, tokenRow{Token: t, Scope: protocol.ScopeLabel(t.Org, t.Project),
					CanRevoke: t.Status == protocol.TokenActive && s.may(access.TokenDelete, access.Resource{Kind: "token", Name: t.Name, Scope: at(t.Org, t.Project)})})
			}
			v.Tokens, more = window(rows, p)
		}
		v.CanCreateToken = s.policy.AllowsBelow(access.DelegateEdit, access.Account)
	case "apikeys":
		var l protocol.APIKeyList
		if l, err = s.api.ListAPIKeys(ctx); err == nil {
			var rows []apiKeyRow
			for _, k := range l.APIKeys {
				rows = append(rows, apiKeyRow{APIKey: k, CanRevoke: k.Status == protocol.TokenActive &&
					(k.Owner == s.name() || s.policy.Allows(access.UserManage, access.Account))})
			}
			v.APIKeys, more = window(rows, p)
		}
	case "secrets":
		var l protocol.SecretList
		if l, err = s.api.ListSecrets(ctx); err == nil {
			var rows []scoped[protocol.Secret]
			for _, x := range l.Secrets {
				rows = append(rows, scoped[protocol.Secret]{Item: x, Scope: protocol.ScopeLabel(x.Org, x.Project),
					CanEdit: s.policy.Allows(access.SecretEdit, at(x.Org, x.Project)), CanDelete: s.policy.Allows(access.SecretDelete, at(x.Org, x.Project))})
			}
			v.Secrets, more = window(rows, p)
		}
	case "connectors":
		var l protocol.ConnectorList
		if l, err = s.api.ListConnectors(ctx); err == nil {
			v.Connectors, more = window(l.Connectors, p)
		}
	case "configurations":
		var l protocol.ConfigurationList
		if l, err = s.api.ListConfigurations(ctx); err == nil {
			var rows []scoped[protocol.Configuration]
			for _, x := range l.Configurations {
				rows = append(rows, scoped[protocol.Configuration]{Item: x, Scope: protocol.ScopeLabel(x.Org, x.Project),
					CanEdit: s.policy.Allows(access.ConfigurationEdit, at(x.Org, x.Project)), CanDelete: s.policy.Allows(access.ConfigurationDelete, at(x.Org, x.Project))})
			}
			v.Configurations, more = window(rows, p)
		}
	case "limits":
		var l protocol.DeploymentLimits
		if l, err = s.api.DeploymentLimits(ctx); err == nil {
			v.Limits = &l
		}
	}
	return more, err
}

// The audit log: pages of perPage events, newest first, by the API's
// cursor, filtered by action, actor and resource in the store (the API's
// query).
func (u *UI) auditPage(r *http.Request, s *user, q url.Values) (auditView, error) {
	v := auditView{Action: strings.ToLower(strings.TrimSpace(q.Get("action"))), Actor: strings.TrimSpace(q.Get("actor")), Resource: strings.TrimSpace(q.Get("resource"))}
	l, err := s.api.ListAudit(r.Context(), client.AuditQuery{User: v.Actor, Resource: v.Resource, Action: v.Action, Limit: perPage, After: q.Get("after")})
	if err != nil {
		return v, err
	}
	v.Events = l.Events
	next := l.Next
	link := func(after string) string {
		p := url.Values{}
		for k, s := range map[string]string{"action": v.Action, "actor": v.Actor, "resource": v.Resource, "after": after} {
			if s != "" {
				p.Set(k, s)
			}
		}
		if e := p.Encode(); e != "" {
			return "/settings/audit?" + e
		}
		return "/settings/audit"
	}
	if next != "" {
		v.NextURL = link(next)
	}
	if q.Get("after") != "" {
		v.FirstURL = link("")
	}
	return v, nil
}
