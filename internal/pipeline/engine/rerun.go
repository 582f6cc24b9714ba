package engine

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/pipeline"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// A re-run runs a run's pipeline again: with the run's definition (the
// version it ran, not the pipeline's current one, so that a re-run of a
// failed run repeats what failed) and the run's inputs, some of them
// replaced. It needs what running the pipeline needs (pipeline:execute at
// its scope, and what its steps use), checked on that definition.
//
// The run it re-runs is kept in the new run's trigger ("rerun:" + its ID,
// in the column a run's trigger has always had): runView answers it as
// Trigger "rerun" and RerunOf.

// rerunTriggerPrefix starts the stored trigger of a re-run.
const rerunTriggerPrefix = protocol.TriggerRerun + ":"

// splitTrigger returns a stored trigger as the API answers it: the
// trigger and, for a re-run, the run it re-runs.
func splitTrigger(stored string) (trigger, rerunOf string) {
	if id, ok := strings.CutPrefix(stored, rerunTriggerPrefix); ok {
		return protocol.TriggerRerun, id
	}
	return stored, ""
}

// atRunPipeline: the pipeline of the run the path names, at its scope.
func (svc *Service) atRunPipeline() api.ScopeSource {
	return api.ScopeSource{Name: "run's pipeline", Resolve: func(r *http.Request, acct string) ([]access.Resource, error) {
		run, err := svc.st.GetRun(r.Context(), acct, r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return api.Res("pipeline", run.Pipeline, access.Scope{Org: run.Org, Project: run.Project}), nil
	}}
}

// rerunInputs are the run's inputs with those of req in their place.
func rerunInputs(run store.Run, req protocol.RerunRequest) map[string]string {
	in := maps.Clone(run.Inputs)
	if in == nil {
		in = map[string]string{}
	}
	maps.Copy(in, req.Inputs)
	return in
}

// rerunUses is what a re-run needs besides pipeline:execute: what the
// run's definition uses with the re-run's inputs (see pipelineUses).
func (svc *Service) rerunUses(r *http.Request, acct string) ([]api.Need, error) {
	run, err := svc.st.GetRun(r.Context(), acct, r.PathValue("id"))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil // the handler answers 404
		}
		return nil, err
	}
	return svc.requestNeeds(r, acct, run.Org, run.Project, run.Source, func(body []byte) map[string]string {
		var req protocol.RerunRequest
		_ = json.Unmarshal(body, &req) // the handler reports a bad body
		return rerunInputs(run, req)
	})
}

func (svc *Service) handleRerun(w http.ResponseWriter, r *http.Request, acct string) {
	id := r.PathValue("id")
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Resource = id })
	var req protocol.RerunRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	orig, err := svc.st.GetRun(r.Context(), acct, id)
	if err != nil {
		api.StoreError(w, err, "run "+id)
		return
	}
	label := pipelineLabel(orig.Pipeline, orig.Org, orig.Project)
	// A deleted pipeline is not run again, even with an old definition.
	cur, err := svc.st.GetPipeline(r.Context(), acct, orig.Org, orig.Project, orig.Pipeline)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "%s no longer exists: run %s cannot be re-run (apply the pipeline again, then run it)", label, id)
			return
		}
		api.StoreError(w, err, label)
		return
	}
	// Nor is one deleted and created again under its name: the run's
	// definition belongs to the pipeline that was deleted. The pipeline
	// the run ran was created before the run; one created after it, or
	// whose versions have not reached the run's, is another pipeline.
	if cur.CreatedAt.After(orig.CreatedAt) || cur.Version < orig.Version {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "%s was deleted and created again since run %s: the run's definition is the deleted pipeline's and is not run again (start a run of the current pipeline instead)", label, id)
		return
	}
	inputs := rerunInputs(orig, req)
	caller := api.CallerOf(r.Context()).Policy
	if p, perr := pipeline.Parse([]byte(orig.Source)); perr == nil {
		reason, err := svc.needsOf(r.Context(), caller, acct, orig.Org, orig.Project, p, inputs)
		if err != nil {
			api.StoreError(w, err, label)
			return
		}
		if reason != "" {
			api.WriteError(w, http.StatusForbidden, protocol.CodeForbidden, "%s (version %d): %s", label, orig.Version, reason)
			return
		}
	}
	pr := caller.Principal
	stored := store.Pipeline{AccountID: acct, Org: orig.Org, Project: orig.Project, Name: orig.Pipeline, Version: orig.Version, Source: orig.Source}
	rs := RunStart{AccountID: acct, Org: orig.Org, Project: orig.Project, Pipeline: orig.Pipeline, Inputs: inputs,
		Trigger: rerunTriggerPrefix + orig.ID, TriggeredBy: api.PrincipalLabel(pr), ActsKind: pr.Kind, ActsID: pr.ID,
		Stored: &stored, Priority: orig.Priority}
	if pr.Kind == protocol.OwnerAccount {
		rs.ActsID = acct
	}
	run, err := svc.StartRun(r.Context(), rs)
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) {
		e.Resource, e.Org, e.Project = id, orig.Org, orig.Project
		if run.ID != "" {
			e.Detail = "run " + run.ID + " of " + label + " (version " + strconv.FormatInt(orig.Version, 10) + ")"
		}
	})
	var refused *errRunRefused
	switch {
	case errors.As(err, &refused):
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", refused.Error())
		return
	case err != nil && run.ID == "":
		api.StoreError(w, err, label)
		return
	case err != nil:
		svc.log.Warn("advance a new pipeline run", "run", run.ID, "err", err)
	}
	api.WriteJSON(w, http.StatusCreated, runView(run))
}
