// Package scopes keeps an account's orgs, projects and connectors: their
// admin API, and the checks every other service makes against them — that
// an org and project exist (CheckScope, for tokens, configurations,
// bindings, secrets, pipelines and tasks) and, for a submitted task, its
// scope, its connector's selectors and URL, and its capabilities
// (ResolveTask).
package scopes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/store"
)

// Store is what the service reads and writes.
type Store interface {
	CreateOrg(ctx context.Context, o store.Org) error
	GetOrg(ctx context.Context, acct, name string) (store.Org, error)
	ListOrgs(ctx context.Context, acct string) ([]store.Org, error)
	DeleteOrg(ctx context.Context, acct, name string) error
	CreateProject(ctx context.Context, p store.Project) error
	GetProject(ctx context.Context, acct, org, name string) (store.Project, error)
	ListProjects(ctx context.Context, acct, org string) ([]store.Project, error)
	DeleteProject(ctx context.Context, acct, org, name string) error
	CreateConnector(ctx context.Context, c store.Connector) error
	GetConnector(ctx context.Context, acct, name string) (store.Connector, error)
	ListConnectors(ctx context.Context, acct string) ([]store.Connector, error)
	DeleteConnector(ctx context.Context, acct, name string) error
	GetInstance(ctx context.Context, id string) (store.Instance, error)
	ListTasks(ctx context.Context, f store.TaskFilter) ([]store.Task, error)
}

// Config configures a Service.
type Config struct {
	Store Store
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Service is the orgs, projects and connectors of every account.
type Service struct {
	st  Store
	now func() time.Time
}

// New returns the service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{st: cfg.Store, now: cfg.Now}
}

// Routes are the orgs', projects' and connectors' admin routes. They do
// not read the service, so they may be listed before it is built.
func (svc *Service) Routes() []api.Route {
	return []api.Route{
		{Method: "POST", Pattern: protocol.PathOrgs, Body: api.BodySmall, Admin: svc.handleCreateOrg, Rule: api.Rule{Perm: access.OrgEdit, Scope: api.AtAccount}, Audit: "org.create"},
		{Method: "GET", Pattern: protocol.PathOrgs, Admin: svc.handleListOrgs, Rule: api.Rule{Perm: access.OrgView, List: true}},
		{Method: "DELETE", Pattern: protocol.PathOrgs + "/{org}", Admin: svc.handleDeleteOrg, Rule: api.Rule{Perm: access.OrgDelete, Scope: api.AtAccount}, Audit: "org.delete"},
		{Method: "POST", Pattern: protocol.PathOrgs + "/{org}/projects", Body: api.BodySmall, Admin: svc.handleCreateProject, Rule: api.Rule{Perm: access.OrgEdit, Scope: api.AtOrgPath}, Audit: "project.create"},
		{Method: "GET", Pattern: protocol.PathProjects, Admin: svc.handleListProjects, Rule: api.Rule{Perm: access.OrgView, List: true}},
		{Method: "DELETE", Pattern: protocol.PathOrgs + "/{org}/projects/{name}", Admin: svc.handleDeleteProject, Rule: api.Rule{Perm: access.OrgDelete, Scope: api.AtOrgPath}, Audit: "project.delete"},
		{Method: "POST", Pattern: protocol.PathConnectors, Body: api.BodySmall, Admin: svc.handleCreateConnector, Rule: api.Rule{Perm: access.ConnectorEdit, Scope: api.AtAccount}, Audit: "connector.create"},
		{Method: "GET", Pattern: protocol.PathConnectors, Admin: svc.handleListConnectors, Rule: api.Rule{Perm: access.ConnectorView, List: true}},
		{Method: "GET", Pattern: protocol.PathConnectors + "/{name}", Admin: svc.handleGetConnector, Rule: api.Rule{Perm: access.ConnectorView, Scope: api.Anywhere}},
		{Method: "DELETE", Pattern: protocol.PathConnectors + "/{name}", Admin: svc.handleDeleteConnector, Rule: api.Rule{Perm: access.ConnectorDelete, Scope: api.AtAccount}, Audit: "connector.delete"},
	}
}

// CheckScope verifies that the org (and project) exist; a project needs an org.
func (svc *Service) CheckScope(ctx context.Context, acct, org, project string) error {
	if project != "" && org == "" {
		return errors.New("a project needs its org (--org)")
	}
	if org == "" {
		return nil
	}
	if _, err := svc.st.GetOrg(ctx, acct, org); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("unknown org %q (legate org create %s)", org, org)
		}
		return err
	}
	if project == "" {
		return nil
	}
	if _, err := svc.st.GetProject(ctx, acct, org, project); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("unknown project %q in org %q (legate project create --org %s %s)", project, org, org, project)
		}
		return err
	}
	return nil
}

// normalizeCapability checks a capability and returns its criteria key.
func normalizeCapability(c string) (string, error) {
	c = strings.TrimSpace(c)
	if err := protocol.CheckText("capability", c, 2048); err != nil {
		return "", err
	}
	switch {
	case strings.HasPrefix(c, "http://"), strings.HasPrefix(c, "https://"):
		u, err := url.Parse(c)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("capability %q: not a valid URL", c)
		}
		return c, nil
	case strings.HasPrefix(c, "tcp://"):
		host, port, err := net.SplitHostPort(strings.TrimPrefix(c, "tcp://"))
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("capability %q: want tcp://host:port", c)
		}
		return "tcp://" + strings.ToLower(net.JoinHostPort(host, port)), nil
	case strings.HasPrefix(c, "binary:"):
		name := strings.TrimPrefix(c, "binary:")
		if name == "" || strings.ContainsAny(name, "/ \t") {
			return "", fmt.Errorf("capability %q: want binary:NAME (a name on PATH)", c)
		}
		return c, nil
	}
	return "", fmt.Errorf("capability %q: use http://…, https://…, tcp://host:port or binary:NAME", c)
}

// ResolveTask checks the task's org/project, applies its
// connector (selectors unless the task has its own; URL as a capability)
// and normalizes its capabilities.
func (svc *Service) ResolveTask(ctx context.Context, acct string, s *protocol.TaskSpec) error {
	s.Org, s.Project = strings.TrimSpace(s.Org), strings.TrimSpace(s.Project)
	if err := svc.CheckScope(ctx, acct, s.Org, s.Project); err != nil {
		return err
	}
	if err := checkOwnCluster(s); err != nil {
		return err
	}
	if err := checkOwnProvider(s); err != nil {
		return err
	}
	caps := append([]string{}, s.Capabilities...)
	if s.Connector != "" {
		c, err := svc.st.GetConnector(ctx, acct, s.Connector)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("unknown connector %q (legate connector list)", s.Connector)
			}
			return err
		}
		if len(s.Selectors) == 0 {
			s.Selectors = protocol.NormalizeSelectors(c.Selectors)
		}
		if isKubeConnector(c) {
			if err := applyKubeConnector(s, c); err != nil {
				return err
			}
			caps = append(caps, kubeCapability(c))
		} else if isPromConnector(c) {
			if err := applyPromConnector(s, c); err != nil {
				return err
			}
			caps = append(caps, promCapability(c))
		} else {
			caps = append(caps, c.URL)
		}
	}
	if len(caps) > 20 {
		return errors.New("too many capabilities (at most 20)")
	}
	seen := map[string]bool{}
	s.Capabilities = nil
	for _, c := range caps {
		n, err := normalizeCapability(c)
		if err != nil {
			return err
		}
		if !seen[n] {
			seen[n] = true
			s.Capabilities = append(s.Capabilities, n)
		}
	}
	return nil
}

func (svc *Service) handleCreateOrg(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateOrgRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	api.AuditNamed(r, req.Name)
	if err := protocol.CheckName("org", req.Name); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	o := store.Org{AccountID: acct, Name: req.Name, CreatedAt: svc.now()}
	if err := svc.st.CreateOrg(r.Context(), o); err != nil {
		api.StoreError(w, err, "org "+strconv.Quote(req.Name))
		return
	}
	api.WriteJSON(w, http.StatusCreated, protocol.Org{Name: o.Name, CreatedAt: o.CreatedAt.UTC()})
}

func (svc *Service) handleListOrgs(w http.ResponseWriter, r *http.Request, acct string) {
	os, err := svc.st.ListOrgs(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "orgs")
		return
	}
	pol := api.CallerOf(r.Context()).Policy
	out := protocol.OrgList{Orgs: make([]protocol.Org, 0, len(os))}
	for _, o := range os {
		if !pol.AllowsBelow(access.OrgView, access.Scope{Org: o.Name}) {
			continue
		}
		out.Orgs = append(out.Orgs, protocol.Org{Name: o.Name, CreatedAt: o.CreatedAt.UTC()})
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// unfinishedTasksIn counts queued and running tasks of an org (and project).
func (svc *Service) unfinishedTasksIn(ctx context.Context, acct, org, project string) (int, error) {
	n := 0
	for _, status := range []string{protocol.StatusQueued, protocol.StatusRunning} {
		ts, err := svc.st.ListTasks(ctx, store.TaskFilter{AccountID: acct, Status: status, Limit: 1000})
		if err != nil {
			return 0, err
		}
		for _, t := range ts {
			if t.Spec.Org == org && (project == "" || t.Spec.Project == project) {
				n++
			}
		}
	}
	return n, nil
}

func (svc *Service) handleDeleteOrg(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("org")
	if n, err := svc.unfinishedTasksIn(r.Context(), acct, name, ""); err != nil {
		api.StoreError(w, err, "tasks")
		return
	} else if n > 0 {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "org %q has %d queued or running task(s); wait for them or cancel them first", name, n)
		return
	}
	if err := svc.st.DeleteOrg(r.Context(), acct, name); err != nil {
		if errors.Is(err, store.ErrInUse) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "org %q still has projects, active tokens or configurations; delete or revoke them first (legate project list, legate token list, legate configuration list)", name)
			return
		}
		api.StoreError(w, err, "org "+strconv.Quote(name))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (svc *Service) handleCreateProject(w http.ResponseWriter, r *http.Request, acct string) {
	org := r.PathValue("org")
	var req protocol.CreateProjectRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	api.AuditNamed(r, req.Name)
	if err := protocol.CheckName("project", req.Name); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	p := store.Project{AccountID: acct, Org: org, Name: req.Name, CreatedAt: svc.now()}
	if err := svc.st.CreateProject(r.Context(), p); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "unknown org %q (legate org create %s)", org, org)
			return
		}
		api.StoreError(w, err, "project "+strconv.Quote(req.Name))
		return
	}
	api.WriteJSON(w, http.StatusCreated, protocol.Project{Org: org, Name: p.Name, CreatedAt: p.CreatedAt.UTC()})
}

func (svc *Service) handleListProjects(w http.ResponseWriter, r *http.Request, acct string) {
	org := r.URL.Query().Get("org")
	if org != "" {
		if _, err := svc.st.GetOrg(r.Context(), acct, org); err != nil {
			api.StoreError(w, err, "org "+strconv.Quote(org))
			return
		}
	}
	ps, err := svc.st.ListProjects(r.Context(), acct, org)
	if err != nil {
		api.StoreError(w, err, "projects")
		return
	}
	pol := api.CallerOf(r.Context()).Policy
	out := protocol.ProjectList{Projects: make([]protocol.Project, 0, len(ps))}
	for _, p := range ps {
		if !pol.Allows(access.OrgView, access.Scope{Org: p.Org, Project: p.Name}) {
			continue
		}
		out.Projects = append(out.Projects, protocol.Project{Org: p.Org, Name: p.Name, CreatedAt: p.CreatedAt.UTC()})
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (svc *Service) handleDeleteProject(w http.ResponseWriter, r *http.Request, acct string) {
	org, name := r.PathValue("org"), r.PathValue("name")
	if n, err := svc.unfinishedTasksIn(r.Context(), acct, org, name); err != nil {
		api.StoreError(w, err, "tasks")
		return
	} else if n > 0 {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "project %q has %d queued or running task(s); wait for them or cancel them first", name, n)
		return
	}
	if err := svc.st.DeleteProject(r.Context(), acct, org, name); err != nil {
		if errors.Is(err, store.ErrInUse) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "project %q still has active tokens or configurations; revoke or delete them first (legate token list, legate configuration list)", name)
			return
		}
		api.StoreError(w, err, "project "+strconv.Quote(name))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (svc *Service) connectorView(ctx context.Context, c store.Connector) protocol.Connector {
	v := protocol.Connector{Name: c.Name, URL: c.URL, Type: c.Type, Selectors: c.Selectors, CAPEM: c.CAPEM, TokenSecret: c.TokenSecret,
		Username: c.Username, PasswordSecret: c.PasswordSecret, CreatedAt: c.CreatedAt.UTC()}
	if v.Selectors == nil {
		v.Selectors = []string{}
	}
	if c.LastSuccessInstance != "" {
		if in, err := svc.st.GetInstance(ctx, c.LastSuccessInstance); err == nil {
			v.LastSuccessDelegate = in.Name + "/" + in.Hostname
		}
	}
	return v
}

func (svc *Service) handleCreateConnector(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateConnectorRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name, req.Type = strings.TrimSpace(req.Name), strings.TrimSpace(req.Type)
	api.AuditNamed(r, req.Name)
	if err := protocol.CheckName("connector", req.Name); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	for _, err := range []error{
		protocol.CheckText("connector url", strings.TrimSpace(req.URL), 2048),
		protocol.CheckText("connector type", strings.TrimSpace(req.Type), protocol.MaxLabelLen),
		protocol.CheckSelectors(protocol.NormalizeSelectors(req.Selectors)),
		checkKubeConnector(&req),
		checkPromConnector(&req),
	} {
		if err != nil {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
			return
		}
	}
	if secretref.Has(req.URL) {
		// The URL is stored and shown as it is, and probed by delegates as
		// a capability: it must not carry credentials.
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			"a connector's url cannot reference a secret: it is shown by legate connector get and probed by delegates as it is; put credentials in the task that uses the connector (a header or environment value with ${secrets.NAME})")
		return
	}
	u, err := url.Parse(strings.TrimSpace(req.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "connector url must be an absolute http:// or https:// URL")
		return
	}
	c := store.Connector{AccountID: acct, Name: req.Name, URL: u.String(), Type: req.Type,
		Selectors: protocol.NormalizeSelectors(req.Selectors), CAPEM: req.CAPEM, TokenSecret: req.TokenSecret,
		Username: req.Username, PasswordSecret: req.PasswordSecret, CreatedAt: svc.now()}
	if err := svc.st.CreateConnector(r.Context(), c); err != nil {
		api.StoreError(w, err, "connector "+strconv.Quote(req.Name))
		return
	}
	api.WriteJSON(w, http.StatusCreated, svc.connectorView(r.Context(), c))
}

func (svc *Service) handleListConnectors(w http.ResponseWriter, r *http.Request, acct string) {
	cs, err := svc.st.ListConnectors(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "connectors")
		return
	}
	out := protocol.ConnectorList{Connectors: make([]protocol.Connector, 0, len(cs))}
	// Connectors are account objects that a task at any scope may use
	// (with connector:access there): whoever may view connectors at some
	// scope sees them all, as a project member must to know what its
	// tasks can use.
	if !api.CallerOf(r.Context()).Policy.AllowsBelow(access.ConnectorView, access.Account) {
		cs = nil
	}
	for _, c := range cs {
		out.Connectors = append(out.Connectors, svc.connectorView(r.Context(), c))
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (svc *Service) handleGetConnector(w http.ResponseWriter, r *http.Request, acct string) {
	c, err := svc.st.GetConnector(r.Context(), acct, r.PathValue("name"))
	if err != nil {
		api.StoreError(w, err, "connector "+strconv.Quote(r.PathValue("name")))
		return
	}
	api.WriteJSON(w, http.StatusOK, svc.connectorView(r.Context(), c))
}

func (svc *Service) handleDeleteConnector(w http.ResponseWriter, r *http.Request, acct string) {
	if err := svc.st.DeleteConnector(r.Context(), acct, r.PathValue("name")); err != nil {
		api.StoreError(w, err, "connector "+strconv.Quote(r.PathValue("name")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
