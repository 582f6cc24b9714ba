package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/store"
)

// nameRE-style rule shared by orgs, projects and connectors.
func validName(kind, name string) error {
	if !isTokenName(name) {
		return fmt.Errorf("%s name %q is invalid: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", kind, name)
	}
	return nil
}

// checkScope verifies that the org (and project) exist; a project needs an org.
func (m *Service) checkScope(ctx context.Context, acct, org, project string) error {
	if project != "" && org == "" {
		return errors.New("a project needs its org (--org)")
	}
	if org == "" {
		return nil
	}
	if _, err := m.st.GetOrg(ctx, acct, org); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("unknown org %q (legate org create %s)", org, org)
		}
		return err
	}
	if project == "" {
		return nil
	}
	if _, err := m.st.GetProject(ctx, acct, org, project); err != nil {
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
	if err := checkText("capability", c, 2048); err != nil {
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

// resolveScopeAndConnector checks the task's org/project, applies its
// connector (selectors unless the task has its own; URL as a capability)
// and normalizes its capabilities.
func (m *Service) resolveScopeAndConnector(ctx context.Context, acct string, s *protocol.TaskSpec) error {
	s.Org, s.Project = strings.TrimSpace(s.Org), strings.TrimSpace(s.Project)
	if err := m.checkScope(ctx, acct, s.Org, s.Project); err != nil {
		return err
	}
	caps := append([]string{}, s.Capabilities...)
	if s.Connector != "" {
		c, err := m.st.GetConnector(ctx, acct, s.Connector)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("unknown connector %q (legate connector list)", s.Connector)
			}
			return err
		}
		if len(s.Selectors) == 0 {
			s.Selectors = protocol.NormalizeSelectors(c.Selectors)
		}
		caps = append(caps, c.URL)
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

func (m *Service) handleCreateOrg(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateOrgRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	api.AuditNamed(r, req.Name)
	if err := validName("org", req.Name); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	o := store.Org{AccountID: acct, Name: req.Name, CreatedAt: m.cfg.Now()}
	if err := m.st.CreateOrg(r.Context(), o); err != nil {
		api.StoreError(w, err, "org "+strconv.Quote(req.Name))
		return
	}
	api.WriteJSON(w, http.StatusCreated, protocol.Org{Name: o.Name, CreatedAt: o.CreatedAt.UTC()})
}

func (m *Service) handleListOrgs(w http.ResponseWriter, r *http.Request, acct string) {
	os, err := m.st.ListOrgs(r.Context(), acct)
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
func (m *Service) unfinishedTasksIn(ctx context.Context, acct, org, project string) (int, error) {
	n := 0
	for _, status := range []string{protocol.StatusQueued, protocol.StatusRunning} {
		ts, err := m.st.ListTasks(ctx, store.TaskFilter{AccountID: acct, Status: status, Limit: 1000})
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

func (m *Service) handleDeleteOrg(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("org")
	if n, err := m.unfinishedTasksIn(r.Context(), acct, name, ""); err != nil {
		api.StoreError(w, err, "tasks")
		return
	} else if n > 0 {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "org %q has %d queued or running task(s); wait for them or cancel them first", name, n)
		return
	}
	if err := m.st.DeleteOrg(r.Context(), acct, name); err != nil {
		if errors.Is(err, store.ErrInUse) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "org %q still has projects, active tokens or configurations; delete or revoke them first (legate project list, legate token list, legate configuration list)", name)
			return
		}
		api.StoreError(w, err, "org "+strconv.Quote(name))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (m *Service) handleCreateProject(w http.ResponseWriter, r *http.Request, acct string) {
	org := r.PathValue("org")
	var req protocol.CreateProjectRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	api.AuditNamed(r, req.Name)
	if err := validName("project", req.Name); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	p := store.Project{AccountID: acct, Org: org, Name: req.Name, CreatedAt: m.cfg.Now()}
	if err := m.st.CreateProject(r.Context(), p); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "unknown org %q (legate org create %s)", org, org)
			return
		}
		api.StoreError(w, err, "project "+strconv.Quote(req.Name))
		return
	}
	api.WriteJSON(w, http.StatusCreated, protocol.Project{Org: org, Name: p.Name, CreatedAt: p.CreatedAt.UTC()})
}

func (m *Service) handleListProjects(w http.ResponseWriter, r *http.Request, acct string) {
	org := r.URL.Query().Get("org")
	if org != "" {
		if _, err := m.st.GetOrg(r.Context(), acct, org); err != nil {
			api.StoreError(w, err, "org "+strconv.Quote(org))
			return
		}
	}
	ps, err := m.st.ListProjects(r.Context(), acct, org)
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

func (m *Service) handleDeleteProject(w http.ResponseWriter, r *http.Request, acct string) {
	org, name := r.PathValue("org"), r.PathValue("name")
	if n, err := m.unfinishedTasksIn(r.Context(), acct, org, name); err != nil {
		api.StoreError(w, err, "tasks")
		return
	} else if n > 0 {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "project %q has %d queued or running task(s); wait for them or cancel them first", name, n)
		return
	}
	if err := m.st.DeleteProject(r.Context(), acct, org, name); err != nil {
		if errors.Is(err, store.ErrInUse) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "project %q still has active tokens or configurations; revoke or delete them first (legate token list, legate configuration list)", name)
			return
		}
		api.StoreError(w, err, "project "+strconv.Quote(name))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (m *Service) connectorView(ctx context.Context, c store.Connector) protocol.Connector {
	v := protocol.Connector{Name: c.Name, URL: c.URL, Type: c.Type, Selectors: c.Selectors, CreatedAt: c.CreatedAt.UTC()}
	if v.Selectors == nil {
		v.Selectors = []string{}
	}
	if c.LastSuccessInstance != "" {
		if in, err := m.st.GetInstance(ctx, c.LastSuccessInstance); err == nil {
			v.LastSuccessDelegate = in.Name + "/" + in.Hostname
		}
	}
	return v
}

func (m *Service) handleCreateConnector(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateConnectorRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	api.AuditNamed(r, req.Name)
	if err := validName("connector", req.Name); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	for _, err := range []error{
		checkText("connector url", strings.TrimSpace(req.URL), 2048),
		checkText("connector type", strings.TrimSpace(req.Type), maxLabelLen),
		checkSelectors(protocol.NormalizeSelectors(req.Selectors)),
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
	c := store.Connector{AccountID: acct, Name: req.Name, URL: u.String(), Type: strings.TrimSpace(req.Type),
		Selectors: protocol.NormalizeSelectors(req.Selectors), CreatedAt: m.cfg.Now()}
	if err := m.st.CreateConnector(r.Context(), c); err != nil {
		api.StoreError(w, err, "connector "+strconv.Quote(req.Name))
		return
	}
	api.WriteJSON(w, http.StatusCreated, m.connectorView(r.Context(), c))
}

func (m *Service) handleListConnectors(w http.ResponseWriter, r *http.Request, acct string) {
	cs, err := m.st.ListConnectors(r.Context(), acct)
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
		out.Connectors = append(out.Connectors, m.connectorView(r.Context(), c))
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (m *Service) handleGetConnector(w http.ResponseWriter, r *http.Request, acct string) {
	c, err := m.st.GetConnector(r.Context(), acct, r.PathValue("name"))
	if err != nil {
		api.StoreError(w, err, "connector "+strconv.Quote(r.PathValue("name")))
		return
	}
	api.WriteJSON(w, http.StatusOK, m.connectorView(r.Context(), c))
}

func (m *Service) handleDeleteConnector(w http.ResponseWriter, r *http.Request, acct string) {
	if err := m.st.DeleteConnector(r.Context(), acct, r.PathValue("name")); err != nil {
		api.StoreError(w, err, "connector "+strconv.Quote(r.PathValue("name")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (m *Service) handleExplainTask(w http.ResponseWriter, r *http.Request, acct string) {
	t, err := m.st.GetTask(r.Context(), acct, r.PathValue("id"))
	if err != nil {
		api.StoreError(w, err, "task "+r.PathValue("id"))
		return
	}
	summary, verdicts, err := m.explain(r.Context(), t)
	if err != nil {
		api.StoreError(w, err, "delegates")
		return
	}
	if verdicts == nil {
		verdicts = []protocol.DelegateVerdict{}
	}
	switch {
	case protocol.Terminal(t.Status):
		summary = fmt.Sprintf("task is %s (ran on %s); as delegates stand now: %s", t.Status, orNone(t.DelegateName), summary)
	case t.Status == protocol.StatusRunning:
		summary = fmt.Sprintf("task is running on %s (%s); as delegates stand now: %s", t.DelegateName, t.DelegateHostname, summary)
	}
	api.WriteJSON(w, http.StatusOK, protocol.Explanation{TaskID: t.ID, Status: t.Status, Summary: summary, Delegates: verdicts})
}

func orNone(s string) string {
	if s == "" {
		return "no delegate"
	}
	return s
}

func (m *Service) handleDescribeDelegate(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	ds, err := m.delegateGroup(r.Context(), acct, name)
	if err != nil {
		api.StoreError(w, err, "delegates")
		return
	}
	cs, err := m.st.ListConfigurations(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "configurations")
		return
	}
	results, err := m.st.ConfigurationResults(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "configuration results")
		return
	}
	now := m.cfg.Now()
	out := protocol.DelegateDetails{Name: name, Instances: []protocol.DelegateDetail{}}
	for _, d := range ds {
		if !strings.EqualFold(d.Name, name) {
			continue
		}
		det := protocol.DelegateDetail{Delegate: d, Allowlist: []protocol.CapabilityEntry{}, Denylist: []protocol.CapabilityEntry{}}
		target := configTarget{tags: d.Tags, name: d.Name, hostname: d.Hostname, org: d.Org, project: d.Project}
		if c := applicableConfiguration(cs, target); c != nil {
			det.ConfigurationApplies = &protocol.ConfigurationRef{Name: c.Name, Version: c.Version}
		}
		if res, ok := results[d.InstanceID]; ok {
			det.ConfigurationResult = configurationResultView(res)
		}
		allow, deny := m.caps.Entries(d.InstanceID, now)
		for _, e := range allow {
			det.Allowlist = append(det.Allowlist, protocol.CapabilityEntry{Criteria: e.Criteria, ExpiresAt: e.ExpiresAt.UTC(), TimeLeftMS: e.ExpiresAt.Sub(now).Milliseconds()})
		}
		for _, e := range deny {
			det.Denylist = append(det.Denylist, protocol.CapabilityEntry{Criteria: e.Criteria, ExpiresAt: e.ExpiresAt.UTC(), TimeLeftMS: e.ExpiresAt.Sub(now).Milliseconds(), Error: e.Error})
		}
		out.Instances = append(out.Instances, det)
	}
	if len(out.Instances) == 0 {
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "no delegate named %q in this account", name)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}
