package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Deployments: the engine records each run of a deployment stage with
// BeginDeployment when the stage starts (refused, with a *LimitError, when
// the account reached one of its deployment limits) and EndDeployment
// when it ends. The limits are the account's own (PUT PathLimits) over
// the defaults (Config.DeploymentsPerHour and DeploymentsPerDay, the
// manager's); the store counts and inserts in one transaction, so they
// hold across managers that share a database.

// DeploymentStart is what the engine knows when a deployment stage starts.
type DeploymentStart struct {
	// ID is the deployment's ID; "" for a new one. A fixed ID makes a
	// second begin of the same deployment fail with store.ErrConflict.
	ID           string
	AccountID    string
	Org, Project string
	Service      string
	Environment  string
	// Version is the run's version input ("" when it has none).
	Version  string
	Pipeline string
	RunID    string
	Stage    string
	// PrincipalKind and PrincipalName say who triggered the run:
	// access.KindUser or access.KindServiceAccount and the name, or
	// "webhook" and the pipeline's name.
	PrincipalKind string
	PrincipalName string
	// RollbackOf is the deployment the run rolls back ("" for none).
	RollbackOf string
}

// LimitError refuses a deployment over one of the account's limits. Its
// message names the limit, the usage and when the next slot frees up; the
// API answers it 429 with the code deployment_limit (api.StoreError).
type LimitError struct {
	// Window is store.HourWindow or store.DayWindow.
	Window   time.Duration
	Limit    int
	Used     int
	NextFree time.Time
	msg      string
}

func (e *LimitError) Error() string { return e.msg }

// APIError is its answer: 429 deployment_limit.
func (e *LimitError) APIError() *api.Error {
	return api.NewError(http.StatusTooManyRequests, protocol.CodeDeploymentLimit, "%s", e.msg)
}

// limits returns the default limits (0: unlimited).
func (svc *Service) limits() store.DeploymentLimits {
	return store.DeploymentLimits{PerHour: max(svc.cfg.DeploymentsPerHour, 0), PerDay: max(svc.cfg.DeploymentsPerDay, 0)}
}

// BeginDeployment records a deployment starting now and returns its ID,
// or a *LimitError when the account reached one of its limits (nothing is
// recorded then).
func (svc *Service) BeginDeployment(ctx context.Context, d DeploymentStart) (string, error) {
	now := svc.now()
	id := d.ID
	if id == "" {
		id = api.NewID("dp_")
	}
	rec := store.Deployment{ID: id, AccountID: d.AccountID, Org: d.Org, Project: d.Project,
		Service: d.Service, Environment: d.Environment, Version: d.Version, Pipeline: d.Pipeline, RunID: d.RunID,
		Stage: d.Stage, PrincipalKind: d.PrincipalKind, PrincipalName: d.PrincipalName, RollbackOf: d.RollbackOf, StartedAt: now}
	_, err := svc.st.BeginDeployment(ctx, rec, svc.limits())
	var le *store.LimitError
	if errors.As(err, &le) {
		u := le.Usage
		label := "hour"
		if u.Window == store.DayWindow {
			label = "day"
		}
		svc.refusals.With(label).Inc()
		svc.log.Info("deployment refused", "account", d.AccountID, "pipeline", d.Pipeline, "run", d.RunID, "stage", d.Stage,
			"service", d.Service, "environment", d.Environment, "limit", label, "max", u.Limit, "used", u.Used, "next_free", u.NextFree)
		return "", &LimitError{Window: u.Window, Limit: u.Limit, Used: u.Used, NextFree: u.NextFree, msg: le.Message(now)}
	}
	if err != nil {
		return "", err
	}
	return rec.ID, nil
}

// EndDeployment finishes a deployment with status (protocol.Deployment-
// Succeeded, Failed, Cancelled or DeploymentRolledBack) and no record.
// Ending it again changes nothing.
func (svc *Service) EndDeployment(ctx context.Context, acct, id, status string) error {
	_, _, err := svc.st.EndDeployment(ctx, acct, id, store.DeploymentEnd{Status: status}, svc.now())
	return err
}

func deploymentView(d store.Deployment) protocol.Deployment {
	by := d.PrincipalKind
	if d.PrincipalName != "" {
		by += ":" + d.PrincipalName
	}
	return protocol.Deployment{ID: d.ID, Org: d.Org, Project: d.Project, Service: d.Service, Environment: d.Environment,
		Version: d.Version, Pipeline: d.Pipeline, RunID: d.RunID, Stage: d.Stage, TriggeredBy: by, Status: d.Status,
		StartedAt: d.StartedAt, FinishedAt: d.FinishedAt, Records: viewRecords(d.Records), RollbackOf: d.RollbackOf,
		Reason: d.Reason}
}

// A page cursor is the last deployment of the previous page:
// "MICROS_ID" (its start in Unix microseconds and its ID).
func deploymentCursor(d store.Deployment) string {
	return strconv.FormatInt(d.StartedAt.UnixMicro(), 10) + "_" + d.ID
}

func parseDeploymentCursor(s string) (*store.Deployment, error) {
	us, id, ok := strings.Cut(s, "_")
	v, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, fmt.Errorf("page %q is not the next of a deployment listing", s)
	}
	return &store.Deployment{ID: id, StartedAt: time.UnixMicro(v).UTC()}, nil
}

func (svc *Service) handleListDeployments(w http.ResponseWriter, r *http.Request, acct string) {
	q := r.URL.Query()
	f := store.DeploymentFilter{AccountID: acct, Service: q.Get("service"), Environment: q.Get("environment"), Limit: 100}
	if v := q.Get("since"); v != "" {
		t, err := api.ParseSince(v, svc.now())
		if err != nil {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%v", err)
			return
		}
		f.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "limit must be between 1 and 1000")
			return
		}
		f.Limit = n
	}
	if v := q.Get("page"); v != "" {
		b, err := parseDeploymentCursor(v)
		if err != nil {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%v", err)
			return
		}
		f.Before = b
	}
	// As for tasks: the store keeps only what the caller may view, before
	// the limit.
	pol := api.CallerOf(r.Context()).Policy
	f.Scopes = api.ViewScopes(pol, access.PipelineView)
	ds, err := svc.st.ListDeployments(r.Context(), f)
	if err != nil {
		api.StoreError(w, err, "deployments")
		return
	}
	out := protocol.DeploymentList{Deployments: make([]protocol.Deployment, 0, len(ds))}
	for _, d := range ds {
		if pol.Allows(access.PipelineView, access.Scope{Org: d.Org, Project: d.Project}) {
			out.Deployments = append(out.Deployments, deploymentView(d))
		}
	}
	if len(ds) == f.Limit {
		out.Next = deploymentCursor(ds[len(ds)-1])
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func limitUsage(u store.WindowUsage) protocol.LimitUsage {
	out := protocol.LimitUsage{Limit: u.Limit, Used: u.Used}
	if u.Full() {
		t := u.NextFree
		out.NextFree = &t
	}
	return out
}

// limitsView reads the account's limits and their usage now.
func (svc *Service) limitsView(ctx context.Context, acct string) (protocol.DeploymentLimits, error) {
	now := svc.now()
	def := svc.limits()
	u, err := svc.st.DeploymentUsage(ctx, acct, def, now)
	if err != nil {
		return protocol.DeploymentLimits{}, err
	}
	return protocol.DeploymentLimits{PerHour: limitUsage(u.Hour), PerDay: limitUsage(u.Day),
		DefaultPerHour: def.PerHour, DefaultPerDay: def.PerDay, Custom: u.Custom, Now: now.UTC()}, nil
}

// handleGetLimits answers the account's limits and usage to every caller:
// whoever may run a pipeline, at any scope, needs to know how many
// deployments are left; the numbers say nothing about what they deploy.
func (svc *Service) handleGetLimits(w http.ResponseWriter, r *http.Request, acct string) {
	v, err := svc.limitsView(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "deployment limits")
		return
	}
	api.WriteJSON(w, http.StatusOK, v)
}

func (svc *Service) handleSetLimits(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.SetLimitsRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	if req.PerHour == nil && req.PerDay == nil && !req.Reset {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "nothing to set: give per_hour, per_day or reset")
		return
	}
	for _, l := range []struct {
		name string
		v    *int
	}{{"per_hour", req.PerHour}, {"per_day", req.PerDay}} {
		if l.v != nil && (*l.v < 0 || *l.v > protocol.MaxDeploymentLimit) {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s must be between 0 (unlimited) and %d, not %d", l.name, protocol.MaxDeploymentLimit, *l.v)
			return
		}
	}
	st, err := svc.st.SetDeploymentLimits(r.Context(), acct, req.PerHour, req.PerDay, req.Reset, svc.now())
	if err != nil {
		api.StoreError(w, err, "deployment limits")
		return
	}
	eff := st.Apply(svc.limits())
	detail := fmt.Sprintf("per hour %s, per day %s", limitText(eff.PerHour, st.PerHour == nil), limitText(eff.PerDay, st.PerDay == nil))
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Detail = detail })
	svc.log.Info("deployment limits set", "account", acct, "limits", detail)
	v, err := svc.limitsView(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "deployment limits")
		return
	}
	api.WriteJSON(w, http.StatusOK, v)
}

func limitText(n int, isDefault bool) string {
	s := strconv.Itoa(n)
	if n == 0 {
		s = "unlimited"
	}
	if isDefault {
		s += " (default)"
	}
	return s
}
