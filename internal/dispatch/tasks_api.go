package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// taskView is the API form of a task: secret values never leave the manager.
func (m *Service) taskView(t store.Task) protocol.Task {
	v := protocol.Task{
		ID: t.ID, AccountID: t.AccountID, Type: t.Spec.Type, Status: t.Status, ExitCode: t.ExitCode,
		Error: t.Error, Selectors: t.Spec.Selectors, Env: t.Spec.Env, Shell: t.Spec.Shell,
		HTTP: t.Spec.HTTP, Container: t.Spec.Container, Kubernetes: t.Spec.Kubernetes, Helm: t.Spec.Helm, Verify: t.Spec.Verify, HTTPResult: t.HTTPResult, TimeoutMS: t.TimeoutMS,
		QueueTimeoutMS: t.QueueTimeoutMS, Retries: t.Retries, Attempts: t.Attempts,
		Org: t.Spec.Org, Project: t.Spec.Project, Capabilities: t.Spec.Capabilities, Connector: t.Spec.Connector,
		Priority: protocol.PriorityOrNormal(t.Spec.Priority), DelegateName: t.DelegateName, DelegateHostname: t.DelegateHostname, InstanceID: t.InstanceID,
		CreatedAt: t.CreatedAt.UTC(), AcquiredAt: api.UTC(t.AcquiredAt), StartedAt: api.UTC(t.StartedAt),
		FinishedAt: api.UTC(t.FinishedAt), CreatedBy: t.CreatedBy,
	}
	if v.Selectors == nil {
		v.Selectors = []string{}
	}
	v.SecretEnvNames = t.WithoutSecretValues().SecretNames
	return v
}

// isEnvName reports whether s is a valid environment variable name
// (^[A-Za-z_][A-Za-z0-9_]*$).
func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == '_' || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z') || (i > 0 && '0' <= c && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// validateSpec checks and normalizes a submitted task.
func (m *Service) validateSpec(s *protocol.TaskSpec) error {
	// The task type and its payload (each type checks its own).
	if err := s.CheckPayload(); err != nil {
		return err
	}
	for k := range s.Env {
		if !isEnvName(k) {
			return errors.New("invalid environment variable name " + strconv.Quote(k))
		}
	}
	for k, v := range s.SecretEnv {
		if !isEnvName(k) {
			return errors.New("invalid secret environment variable name " + strconv.Quote(k))
		}
		if v == "" {
			return errors.New("secret " + k + " is empty")
		}
	}
	if len(s.Selectors) > 50 {
		return errors.New("too many selectors (at most 50)")
	}
	s.Selectors = protocol.NormalizeSelectors(s.Selectors)
	if err := protocol.CheckSelectors(s.Selectors); err != nil {
		return err
	}
	// A duration beyond the bound would overflow time.Duration further on
	// (ending the task at once, or never).
	for _, f := range []struct {
		name string
		v    *int64
		def  time.Duration
	}{{"timeout_ms", &s.TimeoutMS, m.cfg.DefaultTaskTimeout}, {"queue_timeout_ms", &s.QueueTimeoutMS, m.cfg.DefaultQueueTimeout}} {
		if *f.v < 0 || *f.v > protocol.MaxTaskTimeoutMS {
			return fmt.Errorf("%s %d is out of range: use 1 to %d (7 days), or 0 for the manager's default (%s)",
				f.name, *f.v, protocol.MaxTaskTimeoutMS, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def.Milliseconds()
		}
	}
	if s.Retries < 0 || s.Retries > protocol.MaxTaskRetries {
		return fmt.Errorf("retries %d is out of range: use 0 to %d", s.Retries, protocol.MaxTaskRetries)
	}
	var err error
	s.Priority, err = protocol.ResolvePriority(s.Priority)
	return err
}

func (m *Service) handleSubmitTask(w http.ResponseWriter, r *http.Request, acct string) {
	var spec protocol.TaskSpec
	if !api.DecodeBody(w, r, &spec) {
		return
	}
	if f := spec.SetsWorkspace(); f != "" {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			"%s: set by the manager for the steps of a pipeline stage that share an empty_dir; a task cannot set it (leave it out)", f)
		return
	}
	if err := m.scopes.FillConnectorProvider(r.Context(), acct, &spec); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	if err := m.validateSpec(&spec); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	if err := m.scopes.ResolveTask(r.Context(), acct, &spec); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	// The one check of its secret references, on the spec as it will be
	// stored; what they resolve to now is what the task will get.
	caller := api.CallerOf(r.Context()).Policy
	bindings, err := m.secrets.Bind(r.Context(), acct, spec, func(context.Context) (*access.Policy, error) { return caller, nil })
	if err != nil {
		m.refuseSecrets(w, r, acct, caller, err)
		return
	}
	now := m.cfg.Now()
	t := store.Task{
		ID: api.NewID("t_"), AccountID: acct, Spec: spec, Status: protocol.StatusQueued,
		TimeoutMS: spec.TimeoutMS, QueueTimeoutMS: spec.QueueTimeoutMS, Retries: spec.Retries,
		CreatedAt: now, QueueDeadline: now.Add(time.Duration(spec.QueueTimeoutMS) * time.Millisecond),
		CreatedBy: api.PrincipalLabel(caller.Principal), SecretBindings: bindings,
	}
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) {
		e.Resource, e.Org, e.Project = t.ID, spec.Org, spec.Project
		if spec.Connector != "" {
			e.Detail = "connector " + spec.Connector
		}
	})
	if err := m.st.CreateTask(r.Context(), t); err != nil {
		m.log.Error("create task", "err", err)
		api.StoreError(w, err, "task")
		return
	}
	t = t.WithoutSecretValues() // the store keeps them sealed; memory keeps none
	m.events.Publish(r.Context(), events.Event{Kind: events.TaskQueued, Account: acct, TaskID: t.ID, Task: &t})
	api.WriteJSON(w, http.StatusCreated, m.taskView(t))
}

// refuseSecrets answers a task whose secret references Bind refused.
func (m *Service) refuseSecrets(w http.ResponseWriter, r *http.Request, acct string, caller *access.Policy, err error) {
	var se interface{ HTTPStatus() int }
	if !errors.As(err, &se) {
		api.StoreError(w, err, "the task's secrets")
		return
	}
	code := protocol.CodeBadRequest
	if se.HTTPStatus() == http.StatusForbidden {
		code = protocol.CodeForbidden
		m.log.Info("request refused", "account", acct, "principal", caller.Principal.Name, "permission", access.SecretAccess,
			"route", r.Method+" "+r.URL.Path, "err", err)
	}
	api.WriteError(w, se.HTTPStatus(), code, "%s", err.Error())
}

func (m *Service) handleListTasks(w http.ResponseWriter, r *http.Request, acct string) {
	q := r.URL.Query()
	f := store.TaskFilter{AccountID: acct, Status: q.Get("status")}
	if f.Status != "" && !protocol.ValidStatus(f.Status) {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "unknown status %q", f.Status)
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "limit must be between 1 and 1000")
			return
		}
		f.Limit = n
	}
	f.Delegate = strings.TrimSpace(q.Get("delegate"))
	if sc := q.Get(protocol.QueryScope); sc != "" {
		org, project, err := protocol.ParseScope(sc)
		if err != nil {
			api.BadRequest(w, "query parameter %s=%q: %v", protocol.QueryScope, sc, err)
			return
		}
		f.Within = &store.ScopeFilter{Org: org, Project: project}
	}
	if page := q.Get("page"); page != "" {
		// The cursor is the last task of the previous page.
		last, err := m.st.GetTask(r.Context(), acct, page)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				api.BadRequest(w, "page %q is not a task of this account: pass the next of a listing", page)
				return
			}
			api.StoreError(w, err, "tasks")
			return
		}
		f.Before = &store.TaskCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	// The store keeps only what the caller may view, before the limit:
	// filtering the page afterwards would return fewer than limit tasks
	// (none, often) while more exist.
	pol := api.CallerOf(r.Context()).Policy
	f.Scopes = api.ViewScopes(pol, access.TaskView)
	ts, err := m.st.ListTasks(r.Context(), f)
	if err != nil {
		api.StoreError(w, err, "tasks")
		return
	}
	out := protocol.TaskList{Tasks: make([]protocol.Task, 0, len(ts))}
	for _, t := range ts {
		if !pol.Allows(access.TaskView, access.Scope{Org: t.Spec.Org, Project: t.Spec.Project}) {
			continue
		}
		out.Tasks = append(out.Tasks, m.taskView(t))
	}
	// A full page: the next may hold more (the store's default page is 100).
	if len(ts) > 0 && len(ts) == cmp.Or(f.Limit, 100) {
		out.Next = ts[len(ts)-1].ID
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (m *Service) handleGetTask(w http.ResponseWriter, r *http.Request, acct string) {
	t, err := m.st.GetTask(r.Context(), acct, r.PathValue("id"))
	if err != nil {
		api.StoreError(w, err, "task "+r.PathValue("id"))
		return
	}
	api.WriteJSON(w, http.StatusOK, m.taskView(t))
}

func (m *Service) handleCancelTask(w http.ResponseWriter, r *http.Request, acct string) {
	id := r.PathValue("id")
	t, err := m.st.FinishTask(r.Context(), acct, id, store.Result{Status: protocol.StatusCancelled, Error: strings.TrimSpace("cancelled by " + api.PrincipalLabel(api.CallerOf(r.Context()).Policy.Principal))}, m.cfg.Now())
	if err != nil {
		if errors.Is(err, store.ErrTaskTerminal) {
			if cur, gerr := m.st.GetTask(r.Context(), acct, id); gerr == nil {
				api.WriteError(w, http.StatusConflict, protocol.CodeTaskTerminal, "task %s already finished (%s)", id, cur.Status)
				return
			}
		}
		api.StoreError(w, err, "task "+id)
		return
	}
	m.afterManagerFinish(r.Context(), t)
	api.WriteJSON(w, http.StatusOK, m.taskView(t))
}

// afterManagerFinish tells the delegate holding a task the manager ended
// (cancel, timeout) to stop it, and wakes the task's followers.
func (m *Service) afterManagerFinish(ctx context.Context, t store.Task) {
	m.queue.drop(t.ID)
	if t.InstanceID != "" {
		if d := m.hub.get(t.InstanceID); d != nil {
			d.dropRunning(t.ID)
			d.push(protocol.Event{Kind: protocol.EventAbort, TaskID: t.ID, Reason: t.Status})
		} else {
			// Its delegate may be connected to another manager.
			m.bus.Broadcast(ctx, cluster.Event{Kind: cluster.Abort, Account: t.AccountID, Task: t.ID, Instance: t.InstanceID})
		}
	}
	m.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: t.AccountID, TaskID: t.ID})
}
