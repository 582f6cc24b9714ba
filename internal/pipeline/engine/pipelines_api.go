package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/pipeline"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// The admin API of pipelines and runs (PathPipelines, PathRuns); runs
// advance in runs.go.

// pipelineScope is the scope of a pipeline route: ?org=&project=.
func pipelineScope(r *http.Request) (org, project string) {
	q := r.URL.Query()
	return strings.TrimSpace(q.Get("org")), strings.TrimSpace(q.Get("project"))
}

func pipelineLabel(name, org, project string) string {
	switch {
	case project != "":
		return "pipeline " + name + " in project " + org + "/" + project
	case org != "":
		return "pipeline " + name + " in org " + org
	}
	return "pipeline " + name
}

func pipelineView(p store.Pipeline, withSource bool) protocol.Pipeline {
	v := protocol.Pipeline{Name: p.Name, Org: p.Org, Project: p.Project, Version: p.Version, UpdatedBy: p.UpdatedBy,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
	if parsed, err := pipeline.Parse([]byte(p.Source)); err == nil {
		v.Description = parsed.Description
		if withSource {
			for _, in := range parsed.Inputs {
				v.Inputs = append(v.Inputs, protocol.PipelineInput{Name: in.Name, Description: in.Description, Default: in.Default})
			}
		}
	}
	if withSource {
		v.Source = p.Source
	}
	return v
}

func runView(r store.Run) protocol.Run {
	v := protocol.Run{ID: r.ID, Org: r.Org, Project: r.Project, Pipeline: r.Pipeline, Version: r.Version, Inputs: r.Inputs,
		Status: r.Status, CancelRequested: r.CancelRequested, Trigger: r.Trigger, TriggeredBy: r.TriggeredBy, Error: r.Error,
		Delivery: r.Delivery, CreatedAt: r.CreatedAt, FinishedAt: api.UTC(r.FinishedAt), RollbackOf: r.RollbackOf,
		Priority: protocol.PriorityOrNormal(r.Priority)}
	v.Trigger, v.RerunOf = splitTrigger(r.Trigger)
	order := map[pipeline.StepRef]int{}
	if len(r.Steps) > 0 {
		if p, err := pipeline.Parse([]byte(r.Source)); err == nil {
			for i, ref := range p.Steps() {
				order[ref] = i
			}
		}
	}
	for i, s := range r.Steps {
		o, ok := order[pipeline.StepRef{Stage: s.Stage, Step: s.Step}]
		if !ok {
			o = i
		}
		v.Steps = append(v.Steps, protocol.RunStep{Stage: s.Stage, Step: s.Step, TaskID: s.TaskID, Status: s.Status,
			Outputs: s.Outputs, Error: s.Error, StartedAt: s.StartedAt, FinishedAt: api.UTC(s.FinishedAt), Order: o})
	}
	return v
}

func (svc *Service) handleApplyPipeline(w http.ResponseWriter, r *http.Request, acct string) {
	svc.applyPipeline(w, r, acct, false)
}

// handleDryRunPipeline is PathPipelinesDryRun: an apply's checks and its
// plan, nothing stored (audited as pipeline.dry_run by its route).
func (svc *Service) handleDryRunPipeline(w http.ResponseWriter, r *http.Request, acct string) {
	svc.applyPipeline(w, r, acct, true)
}

// applyPipeline is an apply, or with dry (or the request's DryRun field,
// which clients from before the dry-run route send) only its checks and
// plan.
func (svc *Service) applyPipeline(w http.ResponseWriter, r *http.Request, acct string, dry bool) {
	var req protocol.ApplyPipelineRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	if req.DryRun && !dry {
		// Kept apart from the applies that change something, refused or not
		// (a refusal by the route's permission rule comes before the body is
		// read: it stays pipeline.apply).
		api.NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Action = "pipeline.dry_run" })
	}
	org, project := strings.TrimSpace(req.Org), strings.TrimSpace(req.Project)
	if strings.TrimSpace(req.Source) == "" {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "source is empty: give the pipeline's YAML (legate pipeline apply -f FILE)")
		return
	}
	// Every problem at once: the file's and the scope's.
	p, err := pipeline.Parse([]byte(req.Source))
	var problems []string
	if err != nil {
		problems = append(problems, err.Error())
	}
	if err := svc.scopes.CheckScope(r.Context(), acct, org, project); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", strings.Join(problems, "\n"))
		return
	}
	caller := api.CallerOf(r.Context()).Policy
	by := api.PrincipalLabel(caller.Principal)
	// An edit by someone who may not run the new text suspends the
	// pipeline's webhook: its deliveries would run the edit with the
	// enabler's rights.
	suspend, err := svc.needsOf(r.Context(), caller, acct, org, project, p, nil)
	if err != nil {
		api.StoreError(w, err, pipelineLabel(p.Name, org, project))
		return
	}
	if suspend != "" {
		suspend = "the pipeline was changed by " + by + ", who may not run it (" + suspend + ")"
	}
	if req.DryRun || dry {
		svc.planPipeline(w, r, acct, org, project, p, req.Source, suspend)
		return
	}
	stored, changed, suspended, err := svc.st.ApplyPipelineSuspending(r.Context(), store.Pipeline{AccountID: acct, Org: org, Project: project, Name: p.Name,
		Source: req.Source, UpdatedBy: by}, suspend, svc.now())
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) {
		e.Resource, e.Org, e.Project = p.Name, org, project
		e.Detail = "version " + strconv.FormatInt(stored.Version, 10)
		if !changed {
			e.Detail += " (unchanged)"
		}
		if suspended != "" {
			e.Detail += "; webhook " + suspended + " suspended: " + suspend
		}
	})
	if err != nil {
		api.StoreError(w, err, pipelineLabel(p.Name, org, project))
		return
	}
	if suspended != "" {
		svc.log.Warn("pipeline webhook suspended by an edit", "account", acct, "pipeline", p.Name, "org", org, "project", project,
			"webhook", suspended, "version", stored.Version, "by", by)
	}
	v := pipelineView(stored, true)
	v.Changed = changed
	status := http.StatusOK
	v.Plan = protocol.PlanUnchanged
	switch {
	case changed && stored.Version == 1:
		status, v.Plan = http.StatusCreated, protocol.PlanCreated
	case changed:
		v.Plan = protocol.PlanChanged
	}
	api.WriteJSON(w, status, v)
}

// planPipeline answers a dry run of an apply that passed its checks: what
// the apply would do to the stored pipeline, and nothing stored. It is
// audited as pipeline.dry_run, apart from the applies that change
// something. suspend is why the apply would suspend the pipeline's
// webhook, if it has one ("" when it would not).
func (svc *Service) planPipeline(w http.ResponseWriter, r *http.Request, acct, org, project string, p *pipeline.Pipeline, src, suspend string) {
	v := protocol.Pipeline{Name: p.Name, Description: p.Description, Org: org, Project: project, Version: 1,
		Plan: protocol.PlanCreated, Changed: true, DryRun: true}
	switch cur, err := svc.st.GetPipeline(r.Context(), acct, org, project, p.Name); {
	case err == nil:
		v.Version, v.Plan, v.Changed = cur.Version, protocol.PlanUnchanged, false
		if v.Changes = pipeline.Changes([]byte(cur.Source), []byte(src)); v.Changes != nil {
			v.Version, v.Plan, v.Changed = cur.Version+1, protocol.PlanChanged, true
		}
		v.CreatedAt, v.UpdatedAt, v.UpdatedBy = cur.CreatedAt, cur.UpdatedAt, cur.UpdatedBy
	case !errors.Is(err, store.ErrNotFound):
		api.StoreError(w, err, pipelineLabel(p.Name, org, project))
		return
	}
	if v.Plan == protocol.PlanChanged && suspend != "" {
		switch h, err := svc.st.WebhookOf(r.Context(), acct, org, project, p.Name); {
		case err == nil && h.SuspendedReason == "":
			v.Changes = append(v.Changes, "its webhook would be suspended: "+suspend)
		case err != nil && !errors.Is(err, store.ErrNotFound):
			api.StoreError(w, err, "the webhook of "+pipelineLabel(p.Name, org, project))
			return
		}
	}
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) {
		e.Resource, e.Org, e.Project = p.Name, org, project
		e.Detail = "would be " + v.Plan + " (nothing stored)"
	})
	api.WriteJSON(w, http.StatusOK, v)
}

func (svc *Service) handleListPipelines(w http.ResponseWriter, r *http.Request, acct string) {
	ps, err := svc.st.ListPipelines(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "pipelines")
		return
	}
	pol := api.CallerOf(r.Context()).Policy
	out := protocol.PipelineList{Pipelines: []protocol.Pipeline{}}
	for _, p := range ps {
		if pol.Allows(access.PipelineView, access.Scope{Org: p.Org, Project: p.Project}) {
			out.Pipelines = append(out.Pipelines, pipelineView(p, false))
		}
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (svc *Service) handleGetPipeline(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := pipelineScope(r)
	p, err := svc.st.GetPipeline(r.Context(), acct, org, project, name)
	if err != nil {
		api.StoreError(w, err, pipelineLabel(name, org, project))
		return
	}
	v := pipelineView(p, true)
	switch h, err := svc.st.WebhookOf(r.Context(), acct, org, project, name); {
	case err == nil:
		v.Webhook = webhookView(h)
	case !errors.Is(err, store.ErrNotFound):
		api.StoreError(w, err, "the webhook of "+pipelineLabel(name, org, project))
		return
	}
	api.WriteJSON(w, http.StatusOK, v)
}

func (svc *Service) handleDeletePipeline(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := pipelineScope(r)
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Resource, e.Org, e.Project = name, org, project })
	if err := svc.st.DeletePipeline(r.Context(), acct, org, project, name); err != nil {
		api.StoreError(w, err, pipelineLabel(name, org, project))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (svc *Service) handleRunPipeline(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := pipelineScope(r)
	var req protocol.RunPipelineRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	if req.Priority != 0 {
		if _, err := protocol.ResolvePriority(req.Priority); err != nil {
			api.BadRequest(w, "%v", err)
			return
		}
	}
	// The route's rule checked what the version it read uses; an edit may
	// have stored another since, so the version that runs is checked here
	// again and passed on.
	caller := api.CallerOf(r.Context()).Policy
	stored, err := svc.st.GetPipeline(r.Context(), acct, org, project, name)
	if err != nil {
		api.StoreError(w, err, pipelineLabel(name, org, project))
		return
	}
	if p, perr := pipeline.Parse([]byte(stored.Source)); perr == nil {
		reason, err := svc.needsOf(r.Context(), caller, acct, org, project, p, req.Inputs)
		if err != nil {
			api.StoreError(w, err, pipelineLabel(name, org, project))
			return
		}
		if reason != "" {
			api.WriteError(w, http.StatusForbidden, protocol.CodeForbidden, "%s (version %d): %s", pipelineLabel(name, org, project), stored.Version, reason)
			return
		}
	}
	pr := caller.Principal
	rs := RunStart{AccountID: acct, Org: org, Project: project, Pipeline: name, Inputs: req.Inputs,
		Trigger: "manual", TriggeredBy: api.PrincipalLabel(pr), ActsKind: pr.Kind, ActsID: pr.ID, Stored: &stored, Priority: req.Priority}
	if pr.Kind == protocol.OwnerAccount {
		rs.ActsID = acct
	}
	run, err := svc.StartRun(r.Context(), rs)
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) {
		e.Resource, e.Org, e.Project = name, org, project
		if run.ID != "" {
			e.Detail = "run " + run.ID
		}
	})
	var refused *errRunRefused
	switch {
	case errors.As(err, &refused):
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", refused.Error())
		return
	case err != nil && run.ID == "":
		api.StoreError(w, err, pipelineLabel(name, org, project))
		return
	case err != nil:
		// The run exists; the engine's loop advances it again.
		svc.log.Warn("advance a new pipeline run", "run", run.ID, "err", err)
	}
	api.WriteJSON(w, http.StatusCreated, runView(run))
}

func (svc *Service) handleListRuns(w http.ResponseWriter, r *http.Request, acct string) {
	q := r.URL.Query()
	f := store.RunFilter{Pipeline: q.Get("pipeline"), Status: q.Get("status")}
	if f.Status != "" && !slices.Contains([]string{store.RunRunning, store.RunSucceeded, store.RunFailed, store.RunCancelled}, f.Status) {
		api.BadRequest(w, "unknown run status %q: use running, succeeded, failed or cancelled", f.Status)
		return
	}
	if q.Has("org") || q.Has("project") {
		// The runs of the pipeline of that scope (a name may be in several).
		if f.Pipeline == "" {
			api.BadRequest(w, "org and project narrow the runs of one pipeline: pass pipeline too")
			return
		}
		f.InScope, f.Org, f.Project = true, q.Get("org"), q.Get("project")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "limit must be between 1 and 1000")
			return
		}
		f.Limit = n
	}
	if page := q.Get("page"); page != "" {
		// The cursor is the last run of the previous page.
		last, err := svc.st.GetRun(r.Context(), acct, page)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				api.BadRequest(w, "page %q is not a run of this account: pass the next of a listing", page)
				return
			}
			api.StoreError(w, err, "runs")
			return
		}
		f.Before = &store.RunCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	// The store keeps only what the caller may view, before the limit, so
	// a page is full whenever enough runs exist.
	pol := api.CallerOf(r.Context()).Policy
	f.Scopes = api.ViewScopes(pol, access.PipelineView)
	runs, err := svc.st.ListRuns(r.Context(), acct, f)
	if err != nil {
		api.StoreError(w, err, "runs")
		return
	}
	out := protocol.RunList{Runs: []protocol.Run{}}
	for _, run := range runs {
		if pol.Allows(access.PipelineView, access.Scope{Org: run.Org, Project: run.Project}) {
			out.Runs = append(out.Runs, runView(run))
		}
	}
	// A full page: the next may hold more (the store's default page is 100).
	if len(runs) > 0 && len(runs) == cmp.Or(f.Limit, 100) {
		out.Next = runs[len(runs)-1].ID
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (svc *Service) handleGetRun(w http.ResponseWriter, r *http.Request, acct string) {
	run, err := svc.st.GetRun(r.Context(), acct, r.PathValue("id"))
	if err != nil {
		api.StoreError(w, err, "run "+r.PathValue("id"))
		return
	}
	api.WriteJSON(w, http.StatusOK, runView(run))
}

func (svc *Service) handleCancelRun(w http.ResponseWriter, r *http.Request, acct string) {
	id := r.PathValue("id")
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Resource = id })
	cur, err := svc.st.GetRun(r.Context(), acct, id)
	if err != nil {
		api.StoreError(w, err, "run "+id)
		return
	}
	if cur.Status != store.RunRunning {
		api.WriteError(w, http.StatusConflict, protocol.CodeTaskTerminal, "run %s already finished (%s)", id, cur.Status)
		return
	}
	run, err := svc.CancelRun(r.Context(), acct, id)
	if err != nil {
		api.StoreError(w, err, "run "+id)
		return
	}
	api.WriteJSON(w, http.StatusOK, runView(run))
}

// atRun: the scope of the run the path names.
func (svc *Service) atRun() api.ScopeSource {
	return api.ScopeSource{Name: "run", Resolve: func(r *http.Request, acct string) ([]access.Resource, error) {
		run, err := svc.st.GetRun(r.Context(), acct, r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return api.Res("run", run.ID, access.Scope{Org: run.Org, Project: run.Project}), nil
	}}
}

// mayNotRun says why pol may not run the stored pipeline of that scope and
// name ("" when it may); see needsOf.
func (svc *Service) mayNotRun(ctx context.Context, pol *access.Policy, acct, org, project, name string) (string, error) {
	stored, err := svc.st.GetPipeline(ctx, acct, org, project, name)
	if err != nil {
		return "", err
	}
	p, err := pipeline.Parse([]byte(stored.Source))
	if err != nil {
		return fmt.Sprintf("version %d no longer parses: %v", stored.Version, err), nil
	}
	return svc.needsOf(ctx, pol, acct, org, project, p, nil)
}

// needsOf says which permission pol lacks to run p at that scope, as a
// manual run would be checked (pipeline:execute, then what its steps
// use), or "" when it has them all.
func (svc *Service) needsOf(ctx context.Context, pol *access.Policy, acct, org, project string, p *pipeline.Pipeline, inputs map[string]string) (string, error) {
	sc := access.Scope{Org: org, Project: project}
	needs := []api.Need{{Perm: access.PipelineExecute, Res: access.Resource{Kind: "pipeline", Name: p.Name, Scope: sc}}}
	more, err := svc.pipelineNeeds(ctx, acct, org, project, p, inputs)
	if err != nil {
		return "", err
	}
	for _, n := range append(needs, more...) {
		if err := pol.Check(n.Perm, n.Res); err != nil {
			return err.Error(), nil
		}
	}
	return "", nil
}

// pipelineUses: running a pipeline needs, as submitting each of its steps
// as a task would, connector:access on every connector a step uses and
// secret:access on every stored secret a step references, at the
// pipeline's scope: checked here, before the run starts, on each step's
// spec with the run's inputs in (pipelineNeeds). Each step's final spec,
// outputs in, is checked again when its task is created.
func (svc *Service) pipelineUses(r *http.Request, acct string) ([]api.Need, error) {
	org, project := pipelineScope(r)
	stored, err := svc.st.GetPipeline(r.Context(), acct, org, project, r.PathValue("name"))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil // the handler answers 404
		}
		return nil, err
	}
	return svc.requestNeeds(r, acct, org, project, stored.Source, func(body []byte) map[string]string {
		var req protocol.RunPipelineRequest
		_ = json.Unmarshal(body, &req) // the handler reports a bad body
		return req.Inputs
	})
}

// requestNeeds is what running the definition source with the inputs of
// the request's body (read without consuming it) needs: pipelineNeeds. A
// definition that does not parse needs nothing here: the handler
// refuses it.
func (svc *Service) requestNeeds(r *http.Request, acct, org, project, source string, inputs func(body []byte) map[string]string) ([]api.Need, error) {
	p, err := pipeline.Parse([]byte(source))
	if err != nil {
		return nil, nil
	}
	body, err := api.PeekBody(r)
	if err != nil {
		return nil, err
	}
	return svc.pipelineNeeds(r.Context(), acct, org, project, p, inputs(body))
}

// pipelineNeeds is what running p with the given inputs needs: each step's
// spec as it will be (PreviewSpec: inputs in, outputs not known yet) for
// every type of step, through the same decision as a task's (SecretNeeds).
// Inputs the run refuses add nothing here (the run is refused). Without
// inputs (an apply, an enable) each input is its default or empty, so what
// the text itself references is still found.
func (svc *Service) pipelineNeeds(ctx context.Context, acct, org, project string, p *pipeline.Pipeline, given map[string]string) ([]api.Need, error) {
	inputs, err := p.ResolveInputs(given)
	if given == nil {
		inputs, err = p.PlaceholderInputs(), nil
	}
	if err != nil {
		return nil, nil
	}
	sc := access.Scope{Org: org, Project: project}
	var out []api.Need
	seen := map[string]bool{}
	for _, ref := range p.Steps() {
		spec, err := p.PreviewSpec(ref, inputs)
		if err != nil {
			continue // the step fails when it starts, saying why
		}
		spec.Org, spec.Project = org, project
		_ = svc.scopes.ApplyConnectorCluster(ctx, acct, &spec) // a refusal fails the step when it starts
		if len(spec.Container.HostAccess()) > 0 && !seen["privileged"] {
			seen["privileged"] = true
			out = append(out, api.Need{Perm: access.TaskPrivileged, Res: access.Resource{Kind: "task", Scope: sc}})
		}
		if spec.Connector != "" && !seen["c/"+spec.Connector] {
			seen["c/"+spec.Connector] = true
			out = append(out, api.Need{Perm: access.ConnectorAccess, Res: access.Resource{Kind: "connector", Name: spec.Connector, Scope: sc}})
		}
		secrets, err := svc.secrets.SecretNeeds(ctx, acct, spec)
		if err != nil {
			return nil, err
		}
		for _, n := range secrets {
			if k := "s/" + n.Res.Name + "/" + n.Res.Scope.Key(); !seen[k] {
				seen[k] = true
				out = append(out, n)
			}
		}
	}
	return out, nil
}
