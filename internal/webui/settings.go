package webui

import (
	"net/http"
	"net/url"
	"strings"

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
	{"roles", "Roles", below(access.UserView)},
	{"bindings", "Role bindings", below(access.UserView)},
	{"secrets", "Secrets", below(access.SecretView)},
	{"connectors", "Connectors", below(access.ConnectorView)},
	{"configurations", "Delegate configurations", below(access.ConfigurationView)},
	{"audit", "Audit log", func(p *access.Policy) bool { return p.Allows(access.AuditView, access.Account) }},
}

// settingsView is what every settings page gets.
type settingsView struct {
	Section  string
	Title    string
	Sections []section
	Pager    pager
	// One of these is set, by Section.
	Tokens         []tokenRow
	CanCreateToken bool
	NewToken       *protocol.Token
	APIKeys        []apiKeyRow
	Users          []protocol.User
	Roles          []protocol.Role
	Bindings       []bindingRow
	Secrets        []scoped[protocol.Secret]
	Connectors     []protocol.Connector
	Configurations []scoped[protocol.Configuration]
	Audit          auditView
}

type scoped[T any] struct {
	Item  T
	Scope string
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
	Scope string
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

func (u *UI) handleSettingsSection(w http.ResponseWriter, r *http.Request, s *user) {
	key := r.PathValue("section")
	var sec *section
	for i := range sections {
		if sections[i].Key == key {
			sec = &sections[i]
		}
	}
	if sec == nil {
		u.errorPage(w, r, s, http.StatusNotFound, "There is no settings page "+key+".")
		return
	}
	v := settingsView{Section: key, Title: sec.Title, Sections: u.allowedSections(s)}
	q := r.URL.Query()
	p := pageOf(q)
	base := "/settings/" + key
	more := false
	ctx := r.Context()
	var err error
	switch key {
	case "tokens":
		var l protocol.TokenList
		if l, err = s.api.ListTokens(ctx); err == nil {
			var rows []tokenRow
			for _, t := range l.Tokens {
				rows = append(rows, tokenRow{Token: t, Scope: protocol.ScopeLabel(t.Org, t.Project),
					CanRevoke: t.Status == protocol.TokenActive && s.may(access.TokenDelete, access.Resource{Kind: "token", Name: t.Name, Scope: access.Scope{Org: t.Org, Project: t.Project}})})
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
	case "users":
		var l protocol.UserList
		if err = s.api.Admin(ctx, "list users", http.MethodGet, protocol.PathUsers, nil, &l); err == nil {
			v.Users, more = window(l.Users, p)
		}
	case "roles":
		var l protocol.RoleList
		if err = s.api.Admin(ctx, "list roles", http.MethodGet, protocol.PathRoles, nil, &l); err == nil {
			v.Roles, more = window(l.Roles, p)
		}
	case "bindings":
		var l protocol.BindingList
		if err = s.api.Admin(ctx, "list bindings", http.MethodGet, protocol.PathBindings, nil, &l); err == nil {
			var rows []bindingRow
			for _, b := range l.Bindings {
				rows = append(rows, bindingRow{Binding: b, Scope: protocol.ScopeLabel(b.Org, b.Project)})
			}
			v.Bindings, more = window(rows, p)
		}
	case "secrets":
		var l protocol.SecretList
		if l, err = s.api.ListSecrets(ctx); err == nil {
			var rows []scoped[protocol.Secret]
			for _, x := range l.Secrets {
				rows = append(rows, scoped[protocol.Secret]{x, protocol.ScopeLabel(x.Org, x.Project)})
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
				rows = append(rows, scoped[protocol.Configuration]{x, protocol.ScopeLabel(x.Org, x.Project)})
			}
			v.Configurations, more = window(rows, p)
		}
	case "audit":
		v.Audit, err = u.auditPage(r, s, q)
	}
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	v.Pager = newPager(base, q, p, more)
	u.render(w, r, s, http.StatusOK, "settings", page{Title: sec.Title, Nav: "settings", Data: v})
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

func (u *UI) handleCreateToken(w http.ResponseWriter, r *http.Request, s *user) {
	req := protocol.CreateTokenRequest{Name: strings.TrimSpace(r.PostFormValue("name")), Org: strings.TrimSpace(r.PostFormValue("org")), Project: strings.TrimSpace(r.PostFormValue("project"))}
	t, err := s.api.CreateScopedToken(r.Context(), req)
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	// The value shows once, on this answer (not cached, not in a URL).
	v := settingsView{Section: "tokens", Title: "Delegate tokens", Sections: u.allowedSections(s), NewToken: &t}
	u.render(w, r, s, http.StatusOK, "settings", page{Title: "Token created", Nav: "settings", Data: v,
		Notice: "Token " + t.Name + " created: copy its value now, it is not shown again."})
}

func (u *UI) handleRevokeToken(w http.ResponseWriter, r *http.Request, s *user) {
	name := r.PathValue("name")
	if _, err := s.api.RevokeToken(r.Context(), name); err != nil {
		u.apiError(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/settings/tokens?notice="+url.QueryEscape("Token "+name+" revoked."), http.StatusSeeOther)
}

func (u *UI) handleRevokeAPIKey(w http.ResponseWriter, r *http.Request, s *user) {
	name := r.PathValue("name")
	if _, err := s.api.RevokeAPIKey(r.Context(), name, false); err != nil {
		u.apiError(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/settings/apikeys?notice="+url.QueryEscape("API key "+name+" revoked."), http.StatusSeeOther)
}
