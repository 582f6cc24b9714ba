package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/store"
)

// Delegate configurations. A configuration has a scope, like a token
// (account, org or project), and runs as the delegate's user on every
// delegate it applies to: so it applies only to delegates its own scope
// covers (protocol.Covers, the configuration's scope over the delegate's,
// as a task's delegate covers the task), and whose selectors (its tags,
// name and hostname) include every selector of the configuration; one
// with no selectors applies to every delegate its scope covers. A project
// configuration never reaches an account or org delegate, which runs the
// tasks of other projects; an account configuration reaches every
// delegate. When several apply, the one with the most selectors wins (the
// most specific); among those, the one whose scope is closest to the
// delegate's own (the narrowest of them: a project delegate runs its
// project's configuration rather than the account's); among those, the
// first by name. The delegate learns which one applies from its
// registration answer, and again from a configuration_changed event (then
// it asks with GET PathDelegateConfiguration) whenever that changes; it
// may report results only for configurations that apply to it.

// maxConfigurationOutput bounds the stored output excerpt: the delegate's
// excerpt plus room for the omission marker.
const maxConfigurationOutput = protocol.ConfigurationOutputExcerpt + 256

// configTarget is what decides which configurations apply to a delegate.
type configTarget struct {
	tags           []string
	name, hostname string
	org, project   string
}

func targetOf(l *live) configTarget {
	return configTarget{tags: l.tags, name: l.name, hostname: l.hostname, org: l.org, project: l.project}
}

// reaches reports whether a configuration of scope org/project may run on
// the delegate d: its scope covers the delegate's.
func reaches(org, project string, d configTarget) bool {
	return protocol.Covers(org, project, d.org, d.project)
}

// appliesTo reports whether c applies to the delegate d.
func appliesTo(c *store.Configuration, d configTarget) bool {
	return reaches(c.Org, c.Project, d) &&
		len(protocol.MissingSelectors(c.Selectors, d.tags, d.name, d.hostname)) == 0
}

// scopeDepth ranks scopes from the widest (account, 0) to the narrowest
// (project, 2). Of the configurations whose scope covers a delegate's,
// the narrowest are the closest to its own scope.
func scopeDepth(org, project string) int {
	switch {
	case org == "":
		return 0
	case project == "":
		return 1
	default:
		return 2
	}
}

// applicableConfiguration picks the configuration that applies to the
// delegate d from cs (ordered by name), or nil.
func applicableConfiguration(cs []store.Configuration, d configTarget) *store.Configuration {
	var best *store.Configuration
	for i := range cs {
		c := &cs[i]
		if !appliesTo(c, d) {
			continue
		}
		if best == nil || len(c.Selectors) > len(best.Selectors) ||
			(len(c.Selectors) == len(best.Selectors) && scopeDepth(c.Org, c.Project) > scopeDepth(best.Org, best.Project)) {
			best = c
		}
	}
	return best
}

// configurationFor returns the configuration that applies to a delegate,
// as the delegate receives it, or nil.
func (m *Service) configurationFor(ctx context.Context, acct string, d configTarget) (*protocol.AppliedConfiguration, error) {
	cs, err := m.st.ListConfigurations(ctx, acct)
	if err != nil {
		return nil, err
	}
	c := applicableConfiguration(cs, d)
	out := appliedView(c)
	if c == nil {
		return nil, nil
	}
	if names, _ := secretref.Names(c.Script); len(names) > 0 {
		// Resolved at each delivery, at the configuration's scope; the
		// write checked the writer's secret:access. A name found nowhere
		// is left out: the delegate fails the run naming it.
		values, _, err := m.st.SecretValues(ctx, acct, c.Org, c.Project, names)
		if err != nil {
			if kerr := m.secrets.SealError(err); kerr != nil {
				err = kerr
			}
			m.log.Error("cannot give a configuration its stored secrets", "configuration", c.Name, "err", err)
		}
		out.Secrets = values
	}
	return out, nil
}

func appliedView(c *store.Configuration) *protocol.AppliedConfiguration {
	if c == nil {
		return nil
	}
	return &protocol.AppliedConfiguration{Name: c.Name, Version: c.Version, Script: c.Script}
}

// configurationKey identifies a configuration version ("" for none).
func configurationKey(c *protocol.AppliedConfiguration) string {
	if c == nil {
		return ""
	}
	return c.Name + "\x00" + strconv.FormatInt(c.Version, 10)
}

// configuringLabel is how heartbeats and listings name a configuration run.
func configuringLabel(name string, version int64) string {
	return name + " v" + strconv.FormatInt(version, 10)
}

// reconfigure tells this manager's delegates of the account whose
// applicable configuration changed to fetch it again.
func (m *Service) reconfigure(ctx context.Context, acct string) {
	ls := m.hub.account(acct)
	if len(ls) == 0 {
		return
	}
	cs, err := m.st.ListConfigurations(ctx, acct)
	if err != nil {
		m.log.Warn("list configurations", "account", acct, "err", err)
		return
	}
	for _, l := range ls {
		if l.awaitingApproval() {
			continue // told once approved
		}
		key := configurationKey(appliedView(applicableConfiguration(cs, targetOf(l))))
		l.mu.Lock()
		changed := !l.cfgKnown || l.cfgKey != key
		l.cfgKey, l.cfgKnown = key, true
		old := l.protocolVersion != 0 && l.protocolVersion < 3
		l.mu.Unlock()
		if changed && !old && !l.isGone() {
			l.push(protocol.Event{Kind: protocol.EventConfigurationChanged})
		}
	}
}

// configurationChanged reaches every delegate of the account, here and,
// through a broadcast, on the other managers.
func (m *Service) configurationChanged(ctx context.Context, acct string) {
	m.reconfigure(ctx, acct)
	m.bus.Broadcast(ctx, cluster.Event{Kind: cluster.Config, Account: acct})
}

// --- delegate API --------------------------------------------------------------

func (m *Service) handleDelegateConfiguration(w http.ResponseWriter, r *http.Request, d *live) {
	if d.awaitingApproval() {
		api.WriteJSON(w, http.StatusOK, protocol.DelegateConfigurationResponse{})
		return
	}
	applied, err := m.configurationFor(r.Context(), d.accountID, targetOf(d))
	if err != nil {
		m.log.Error("find the delegate's configuration", "instance", d.id, "err", err)
		api.StoreError(w, err, "delegate configurations")
		return
	}
	d.mu.Lock()
	d.cfgKey, d.cfgKnown = configurationKey(applied), true
	d.mu.Unlock()
	api.WriteJSON(w, http.StatusOK, protocol.DelegateConfigurationResponse{Configuration: applied})
}

func (m *Service) handleConfigurationResult(w http.ResponseWriter, r *http.Request, d *live) {
	var req protocol.ConfigurationResult
	if !api.DecodeBody(w, r, &req) {
		return
	}
	switch {
	case req.Name == "" || len(req.Name) > 63:
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "configuration name is required (1-63 characters)")
		return
	case req.Version < 1:
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "configuration version must be positive")
		return
	case req.OutputBytes < 0:
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "output_bytes must not be negative")
		return
	}
	// Only a configuration that applies to the delegate (and a version of
	// it that exists) takes a result; any other is answered as one that
	// does not exist, so configurations of other scopes leak nothing. A
	// configuration changed while it ran still applies; one deleted
	// meanwhile, or no longer applying, takes no result.
	notApplied := func() {
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound,
			"configuration %q version %d does not apply to this delegate", req.Name, req.Version)
	}
	c, err := m.st.GetConfiguration(r.Context(), d.accountID, req.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		notApplied()
		return
	case err != nil:
		api.StoreError(w, err, "configuration "+strconv.Quote(req.Name))
		return
	case !appliesTo(&c, targetOf(d)):
		if !reaches(c.Org, c.Project, targetOf(d)) {
			m.refuseScope(d, callConfigurationResult, "configuration", c.Name, c.Org, c.Project)
		} else {
			m.log.Warn("refused a configuration result: the configuration does not apply to the delegate",
				"configuration", c.Name, "instance", d.id, "name", d.name, "hostname", d.hostname)
		}
		notApplied()
		return
	case req.Version > c.Version:
		notApplied()
		return
	}
	now := m.cfg.Now()
	if req.FinishedAt.IsZero() || req.FinishedAt.After(now.Add(time.Minute)) {
		req.FinishedAt = now
	}
	if req.StartedAt.IsZero() || req.StartedAt.After(req.FinishedAt) {
		req.StartedAt = req.FinishedAt
	}
	res := store.ConfigurationResult{
		InstanceID: d.id, Configuration: req.Name, Version: req.Version, ExitCode: req.ExitCode,
		Error: protocol.Truncate(req.Error, 1024), Output: protocol.Truncate(req.Output, maxConfigurationOutput),
		OutputBytes: max(req.OutputBytes, int64(len(req.Output))), StartedAt: req.StartedAt, FinishedAt: req.FinishedAt,
		Org: c.Org, Project: c.Project,
	}
	if err := m.st.RecordConfigurationResult(r.Context(), res); err != nil {
		m.log.Error("record configuration result", "instance", d.id, "err", err)
		api.StoreError(w, err, "configuration result")
		return
	}
	exit := "none"
	if req.ExitCode != nil {
		exit = strconv.Itoa(*req.ExitCode)
	}
	m.log.Info("delegate ran its configuration", "instance", d.id, "name", d.name, "hostname", d.hostname,
		"configuration", req.Name, "version", req.Version, "exit_code", exit, "err", req.Error)
	w.WriteHeader(http.StatusNoContent)
}

// --- admin API -------------------------------------------------------------------

func configurationView(c store.Configuration) protocol.Configuration {
	sel := c.Selectors
	if sel == nil {
		sel = []string{}
	}
	return protocol.Configuration{Name: c.Name, Script: c.Script, Selectors: sel, Version: c.Version,
		Org: c.Org, Project: c.Project, CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC()}
}

func (m *Service) handleCreateConfiguration(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateConfigurationRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	if err := protocol.CheckName("configuration", req.Name); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	sel, msg := protocol.CheckConfiguration(req.Script, req.Selectors)
	if msg != "" {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", msg)
		return
	}
	req.Org, req.Project = strings.TrimSpace(req.Org), strings.TrimSpace(req.Project)
	if err := m.scopes.CheckScope(r.Context(), acct, req.Org, req.Project); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	if !m.checkScriptSecrets(w, r, acct, req.Org, req.Project, req.Script, "configuration") {
		return
	}
	c, err := m.st.CreateConfiguration(r.Context(), store.Configuration{AccountID: acct, Name: req.Name, Script: req.Script,
		Selectors: sel, Org: req.Org, Project: req.Project, CreatedAt: m.cfg.Now()})
	if err != nil {
		api.StoreError(w, err, "configuration "+strconv.Quote(req.Name))
		return
	}
	m.log.Info("configuration created", "account", acct, "configuration", c.Name, "selectors", c.Selectors,
		"scope", protocol.ScopeLabel(c.Org, c.Project))
	m.configurationChanged(r.Context(), acct)
	v := configurationView(c)
	v.Notice = m.reachNotice(r.Context(), acct, c)
	api.WriteJSON(w, http.StatusCreated, v)
}

// checkScriptSecrets checks the stored secrets a configuration script
// references as a task's are checked (secrets.Bind): each must resolve at
// the scope of what holds it (what: "configuration", "delegate token") and
// the caller must hold secret:access on it. It answers and returns false when they do not.
func (m *Service) checkScriptSecrets(w http.ResponseWriter, r *http.Request, acct, org, project, script, what string) bool {
	if !secretref.Has(script) {
		return true
	}
	spec := protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: script}, Org: org, Project: project}
	caller := api.CallerOf(r.Context()).Policy
	_, err := m.secrets.Bind(secretref.ReferredBy(r.Context(), what), acct, spec, func(context.Context) (*access.Policy, error) { return caller, nil })
	if err != nil {
		m.refuseSecrets(w, r, acct, caller, err)
		return false
	}
	return true
}

func (m *Service) handleListConfigurations(w http.ResponseWriter, r *http.Request, acct string) {
	cs, err := m.st.ListConfigurations(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "configurations")
		return
	}
	pol := api.CallerOf(r.Context()).Policy
	out := protocol.ConfigurationList{Configurations: make([]protocol.Configuration, 0, len(cs))}
	for _, c := range cs {
		if !pol.Allows(access.ConfigurationView, access.Scope{Org: c.Org, Project: c.Project}) {
			continue
		}
		out.Configurations = append(out.Configurations, configurationView(c))
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (m *Service) handleGetConfiguration(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	c, err := m.st.GetConfiguration(r.Context(), acct, name)
	if err != nil {
		api.StoreError(w, err, "configuration "+strconv.Quote(name))
		return
	}
	api.WriteJSON(w, http.StatusOK, configurationView(c))
}

func (m *Service) handleUpdateConfiguration(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	var req protocol.UpdateConfigurationRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	if req.Script == nil && req.Selectors == nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "nothing to update: give a script or selectors")
		return
	}
	u := store.ConfigurationUpdate{Script: req.Script}
	script := "x" // only the selectors are checked when the script stays
	if req.Script != nil {
		script = *req.Script
	}
	var sel []string
	if req.Selectors != nil {
		sel = *req.Selectors
	}
	norm, msg := protocol.CheckConfiguration(script, sel)
	if msg != "" {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", msg)
		return
	}
	if req.Selectors != nil {
		u.Selectors = &norm
	}
	if req.Script != nil && secretref.Has(script) {
		old, err := m.st.GetConfiguration(r.Context(), acct, name)
		if err != nil {
			api.StoreError(w, err, "configuration "+strconv.Quote(name))
			return
		}
		if !m.checkScriptSecrets(w, r, acct, old.Org, old.Project, script, "configuration") {
			return
		}
	}
	c, err := m.st.UpdateConfiguration(r.Context(), acct, name, u, m.cfg.Now())
	if err != nil {
		api.StoreError(w, err, "configuration "+strconv.Quote(name))
		return
	}
	m.log.Info("configuration updated", "account", acct, "configuration", c.Name, "version", c.Version)
	m.configurationChanged(r.Context(), acct)
	v := configurationView(c)
	v.Notice = m.reachNotice(r.Context(), acct, c)
	api.WriteJSON(w, http.StatusOK, v)
}

func (m *Service) handleDeleteConfiguration(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	if err := m.st.DeleteConfiguration(r.Context(), acct, name); err != nil {
		api.StoreError(w, err, "configuration "+strconv.Quote(name))
		return
	}
	m.log.Info("configuration deleted", "account", acct, "configuration", name)
	m.configurationChanged(r.Context(), acct)
	w.WriteHeader(http.StatusNoContent)
}

// noticeExamples is how many delegates a reach notice names.
const noticeExamples = 3

// reachNotice explains, for the answer of a write, why c reaches none of
// the registered delegates its selectors match: their tokens' scope is
// one c's does not cover (a project's configuration naming an account
// delegate). "" when it reaches one, or when none matches at all. The
// write stands: delegates of its scope may register later.
func (m *Service) reachNotice(ctx context.Context, acct string, c store.Configuration) string {
	ins, err := m.st.ListInstances(ctx, acct)
	if err != nil {
		m.log.Warn("list delegates to explain a configuration's reach", "account", acct, "err", err)
		return ""
	}
	var outside []string
	for _, in := range ins {
		if in.DeregisteredAt != nil {
			continue
		}
		d := configTarget{tags: in.Tags, name: in.Name, hostname: in.Hostname, org: in.Org, project: in.Project}
		if len(protocol.MissingSelectors(c.Selectors, d.tags, d.name, d.hostname)) != 0 {
			continue
		}
		if reaches(c.Org, c.Project, d) {
			return ""
		}
		if ex := strconv.Quote(in.Name) + " (" + protocol.ScopeLabel(in.Org, in.Project) + ")"; !slices.Contains(outside, ex) {
			outside = append(outside, ex)
		}
	}
	if len(outside) == 0 {
		return ""
	}
	scope := protocol.ScopeLabel(c.Org, c.Project)
	names := strings.Join(outside[:min(len(outside), noticeExamples)], ", ")
	if len(outside) > noticeExamples {
		names += ", …"
	}
	return fmt.Sprintf("it reaches no registered delegate: the %d delegate(s) its selectors match (%s) are registered with "+
		"tokens of scopes that %s does not cover, and a configuration runs only on delegates whose token's scope it covers; "+
		"register the delegates it is meant for with a token of %s, or write it at their scope", len(outside), names, scope, scope)
}

// configurationResultView is the API form of a stored result for a
// caller with pol. The output is what the configuration printed (a
// "docker login -p …" shows its password): it goes only to a caller who
// may view the configuration (configuration:view at its scope); others
// see that it ran and how it ended.
func configurationResultView(r store.ConfigurationResult, pol *access.Policy) *protocol.ConfigurationResult {
	v := &protocol.ConfigurationResult{
		Name: r.Configuration, Version: r.Version, ExitCode: r.ExitCode, Error: r.Error,
		Output: r.Output, OutputBytes: r.OutputBytes, StartedAt: r.StartedAt.UTC(), FinishedAt: r.FinishedAt.UTC(),
	}
	if pol == nil || !pol.Allows(access.ConfigurationView, access.Scope{Org: r.Org, Project: r.Project}) {
		v.Output, v.OutputWithheld = "", true
	}
	return v
}
