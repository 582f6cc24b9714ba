package dispatch

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Access control: every admin route names, in Routes(), the permission it
// needs and where the scope it is checked at comes from (an api.Rule).
// identity.Service.Authenticate resolves the caller (API key → its owner;
// sign-in session → its user) and refuses disabled users and revoked
// keys; api.Server checks the rule with package access. Listings are
// filtered by their handlers with the caller's policy instead of refused.

// The scope sources that read the object a route names (api has those
// that need only the request).

// atTask: the scope of the task the path names.
func (m *Service) atTask() api.ScopeSource {
	return api.ScopeSource{Name: "task", Resolve: func(r *http.Request, acct string) ([]access.Resource, error) {
		t, err := m.st.GetTask(r.Context(), acct, r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return api.Res("task", t.ID, access.Scope{Org: t.Spec.Org, Project: t.Spec.Project}), nil
	}}
}

// atToken: the scope of the token the path names.
func (m *Service) atToken() api.ScopeSource {
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
func (m *Service) atDelegate() api.ScopeSource {
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
func (m *Service) atConfiguration() api.ScopeSource {
	return api.ScopeSource{Name: "configuration", Resolve: func(r *http.Request, acct string) ([]access.Resource, error) {
		c, err := m.st.GetConfiguration(r.Context(), acct, r.PathValue("name"))
		if err != nil {
			return nil, err
		}
		return api.Res("configuration", c.Name, access.Scope{Org: c.Org, Project: c.Project}), nil
	}}
}

// taskUses: a task that uses a connector needs connector:access at the
// task's scope. Its stored secrets are checked by the handler, on the
// spec as it will be stored (Secrets.Bind), where they are bound.
func (m *Service) taskUses(r *http.Request, acct string) ([]api.Need, error) {
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
	if len(spec.Container.HostAccess()) > 0 {
		out = append(out, api.Need{Perm: access.TaskPrivileged, Res: access.Resource{Kind: "task",
			Scope: access.Scope{Org: strings.TrimSpace(spec.Org), Project: strings.TrimSpace(spec.Project)}}})
	}
	return out, nil
}
