package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/pipeline"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// One deployment with its records, "what runs where", and the rollback
// of a service in an environment to its previous good version.

// atDeployment: the scope of the deployment the path names.
func (svc *Service) atDeployment() api.ScopeSource {
	return api.ScopeSource{Name: "deployment", Resolve: func(r *http.Request, acct string) ([]access.Resource, error) {
		d, err := svc.st.GetDeployment(r.Context(), acct, r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return api.Res("deployment", d.ID, access.Scope{Org: d.Org, Project: d.Project}), nil
	}}
}

func (svc *Service) handleGetDeployment(w http.ResponseWriter, r *http.Request, acct string) {
	d, err := svc.st.GetDeployment(r.Context(), acct, r.PathValue("id"))
	if err != nil {
		api.StoreError(w, err, "deployment "+r.PathValue("id"))
		return
	}
	v := deploymentView(d)
	v.Verifications = viewVerifications(d.Verifications)
	api.WriteJSON(w, http.StatusOK, v)
}

// viewVerifications decodes a deployment's verifications (none when they
// do not decode: they were checked when kept).
func viewVerifications(s string) []protocol.DeploymentVerification {
	if s == "" {
		return nil
	}
	var out []protocol.DeploymentVerification
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil
	}
	return out
}

// viewRecords decodes a deployment's records (none when they do not
// decode: they were checked when kept).
func viewRecords(s string) []protocol.DeployRecord {
	if s == "" {
		return nil
	}
	var out []protocol.DeployRecord
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil
	}
	return out
}

// visibleCurrent returns what runs where among what f keeps, as far as
// the caller may view it.
func (svc *Service) visibleCurrent(r *http.Request, f store.CurrentFilter) ([]store.CurrentDeployment, error) {
	pol := api.CallerOf(r.Context()).Policy
	f.Scopes = api.ViewScopes(pol, access.PipelineView)
	cur, err := svc.st.CurrentDeployments(r.Context(), f)
	if err != nil {
		return nil, err
	}
	out := cur[:0]
	for _, c := range cur {
		if pol.Allows(access.PipelineView, access.Scope{Org: c.Current.Org, Project: c.Current.Project}) {
			out = append(out, c)
		}
	}
	return out, nil
}

func currentView(c store.CurrentDeployment) protocol.CurrentDeployment {
	v := protocol.CurrentDeployment{Service: c.Current.Service, Environment: c.Current.Environment, Org: c.Current.Org,
		Project: c.Current.Project, Current: deploymentView(c.Current)}
	if c.Previous != nil {
		p := deploymentView(*c.Previous)
		v.Previous = &p
	}
	return v
}

func (svc *Service) handleCurrentDeployments(w http.ResponseWriter, r *http.Request, acct string) {
	q := r.URL.Query()
	cur, err := svc.visibleCurrent(r, store.CurrentFilter{AccountID: acct, Service: q.Get("service"), Environment: q.Get("environment")})
	if err != nil {
		api.StoreError(w, err, "current deployments")
		return
	}
	out := protocol.CurrentDeployments{Current: make([]protocol.CurrentDeployment, 0, len(cur))}
	for _, c := range cur {
		out.Current = append(out.Current, currentView(c))
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// rollbackTarget finds what runs now for the request and the succeeded
// deployment to go back to, or the answer that says why there is none.
func (svc *Service) rollbackTarget(r *http.Request, acct string, req protocol.RollbackRequest) (cur, to store.Deployment, _ *api.Error) {
	what := "service " + req.Service + " in environment " + req.Environment
	f := store.CurrentFilter{AccountID: acct, Service: req.Service, Environment: req.Environment}
	if req.Org != "" || req.Project != "" {
		f.Scoped, f.Org, f.Project = true, req.Org, req.Project
	}
	found, err := svc.visibleCurrent(r, f)
	if err != nil {
		return cur, to, api.StoreAPIError(err, what)
	}
	switch len(found) {
	case 0:
		return cur, to, api.NewError(http.StatusNotFound, protocol.CodeNotFound,
			"%s has no succeeded deployment you may view: nothing to roll back (legate deployments current lists what runs where)", what)
	case 1:
	default:
		var scopes []string
		for _, c := range found {
			scopes = append(scopes, scopeText(c.Current.Org, c.Current.Project))
		}
		return cur, to, api.NewError(http.StatusBadRequest, protocol.CodeBadRequest,
			"%s is deployed from several scopes (%s): choose one with --org and --project", what, strings.Join(scopes, ", "))
	}
	cur = found[0].Current
	if req.To == "" {
		if found[0].Previous == nil {
			return cur, to, api.NewError(http.StatusConflict, protocol.CodeConflict,
				"nothing to roll back to: %s has no succeeded deployment of another version before %s (version %q)", what, cur.ID, cur.Version)
		}
		return cur, *found[0].Previous, nil
	}
	to, err = svc.st.GetDeployment(r.Context(), acct, req.To)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return cur, to, api.NewError(http.StatusNotFound, protocol.CodeNotFound, "deployment %s does not exist: --to takes a deployment ID (legate deployments list)", req.To)
	case err != nil:
		return cur, to, api.StoreAPIError(err, "deployment "+req.To)
	case to.Service != cur.Service || to.Environment != cur.Environment || to.Org != cur.Org || to.Project != cur.Project:
		return cur, to, api.NewError(http.StatusBadRequest, protocol.CodeBadRequest, "deployment %s deployed service %s to %s (%s), not %s (%s): give one of %s",
			to.ID, to.Service, to.Environment, scopeText(to.Org, to.Project), what, scopeText(cur.Org, cur.Project), what)
	case to.Status != store.DeploymentSucceeded:
		return cur, to, api.NewError(http.StatusBadRequest, protocol.CodeBadRequest, "deployment %s is %s: roll back to a succeeded deployment", to.ID, to.Status)
	case to.ID == cur.ID:
		return cur, to, api.NewError(http.StatusConflict, protocol.CodeConflict, "deployment %s is what runs now: nothing to roll back", to.ID)
	}
	return cur, to, nil
}

func scopeText(org, project string) string {
	switch {
	case project != "":
		return "project " + org + "/" + project
	case org != "":
		return "org " + org
	}
	return "the account"
}

// handleRollback re-deploys the version of an earlier good deployment:
// a new run of its pipeline (as stored now) with the inputs of that
// deployment's run, triggered by the caller, marked as a rollback of
// the current deployment. The caller needs what running the pipeline
// needs.
func (svc *Service) handleRollback(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.RollbackRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Service, req.Environment = strings.TrimSpace(req.Service), strings.TrimSpace(req.Environment)
	if req.Service == "" || req.Environment == "" {
		api.BadRequest(w, "give the service and the environment to roll back: legate deployments rollback SERVICE ENVIRONMENT")
		return
	}
	cur, to, aerr := svc.rollbackTarget(r, acct, req)
	if aerr != nil {
		api.WriteAPIError(w, aerr)
		return
	}
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) {
		e.Resource, e.Org, e.Project = req.Service+"/"+req.Environment, cur.Org, cur.Project
	})
	old, err := svc.st.GetRun(r.Context(), acct, to.RunID)
	if errors.Is(err, store.ErrNotFound) {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "the run %s of deployment %s is no longer kept, so its inputs are unknown: run pipeline %s with version %q yourself",
			to.RunID, to.ID, to.Pipeline, to.Version)
		return
	}
	if err != nil {
		api.StoreError(w, err, "run "+to.RunID)
		return
	}
	label := pipelineLabel(to.Pipeline, to.Org, to.Project)
	stored, err := svc.st.GetPipeline(r.Context(), acct, to.Org, to.Project, to.Pipeline)
	if err != nil {
		api.StoreError(w, err, label)
		return
	}
	p, err := pipeline.Parse([]byte(stored.Source))
	if err != nil {
		api.BadRequest(w, "%s (version %d) no longer parses: %v", label, stored.Version, err)
		return
	}
	if !deploysTo(p, to.Service, to.Environment) {
		api.BadRequest(w, "%s (version %d) no longer deploys service %s to %s: roll back with the pipeline that does", label, stored.Version, to.Service, to.Environment)
		return
	}
	caller := api.CallerOf(r.Context()).Policy
	reason, err := svc.needsOf(r.Context(), caller, acct, to.Org, to.Project, p, old.Inputs)
	if err != nil {
		api.StoreError(w, err, label)
		return
	}
	if reason != "" {
		api.WriteError(w, http.StatusForbidden, protocol.CodeForbidden, "rolling back runs %s (version %d): %s", label, stored.Version, reason)
		return
	}
	pr := caller.Principal
	rs := RunStart{AccountID: acct, Org: to.Org, Project: to.Project, Pipeline: to.Pipeline, Inputs: old.Inputs,
		Trigger: protocol.TriggerRollback, TriggeredBy: api.PrincipalLabel(pr), ActsKind: pr.Kind, ActsID: pr.ID,
		Stored: &stored, RollbackOf: cur.ID}
	if pr.Kind == protocol.OwnerAccount {
		rs.ActsID = acct
	}
	run, err := svc.StartRun(r.Context(), rs)
	var refused *errRunRefused
	switch {
	case errors.As(err, &refused):
		api.BadRequest(w, "the inputs of run %s (deployment %s) no longer validate against %s (version %d): %v; run the pipeline with inputs that do",
			old.ID, to.ID, label, stored.Version, refused.err)
		return
	case err != nil && run.ID == "":
		api.StoreError(w, err, label)
		return
	case err != nil:
		svc.log.Warn("advance a new pipeline run", "run", run.ID, "err", err)
	}
	detail := fmt.Sprintf("run %s rolls back %s (version %q) to %s (version %q)", run.ID, cur.ID, cur.Version, to.ID, to.Version)
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Detail = detail })
	svc.log.Info("deployment rollback", "account", acct, "service", to.Service, "environment", to.Environment, "detail", detail)
	api.WriteJSON(w, http.StatusCreated, runView(run))
}

// deploysTo reports whether a stage of p deploys service to environment.
func deploysTo(p *pipeline.Pipeline, service, environment string) bool {
	for i := range p.Stages {
		if p.Stages[i].Service == service && p.Stages[i].Environment == environment {
			return true
		}
	}
	return false
}
