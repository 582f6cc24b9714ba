package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
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

// isTokenName reports whether s is a valid name of a token, org, project
// or connector (protocol.ValidName).
func isTokenName(s string) bool { return protocol.ValidName(s) }

func tokenView(t store.Token) protocol.Token {
	v := protocol.Token{Name: t.Name, CreatedAt: t.CreatedAt.UTC(), RevokedAt: utcPtr(t.RevokedAt), Status: protocol.TokenActive, Org: t.Org, Project: t.Project,
		RequireApproval: t.RequireApproval}
	if t.RevokedAt != nil {
		v.Status = protocol.TokenRevoked
	}
	return v
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (m *Service) handleCreateToken(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateTokenRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	if !isTokenName(req.Name) {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "token name %q is invalid: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", req.Name)
		return
	}
	if err := m.checkScope(r.Context(), acct, req.Org, req.Project); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	value := api.NewSecret("", 24)
	t := store.Token{ID: api.NewID("k_"), AccountID: acct, Name: req.Name, Hash: api.HashSecret(value), CreatedAt: m.cfg.Now(),
		Org: req.Org, Project: req.Project, RequireApproval: req.RequireApproval}
	if err := m.st.CreateToken(r.Context(), t); err != nil {
		if errors.Is(err, store.ErrConflict) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "a token named %q already exists (its value is shown only when it is created, and a revoked token keeps its name): choose another name", req.Name)
			return
		}
		api.StoreError(w, err, "token")
		return
	}
	v := tokenView(t)
	v.Value = value
	api.WriteJSON(w, http.StatusCreated, v)
}

func (m *Service) handleListTokens(w http.ResponseWriter, r *http.Request, acct string) {
	ts, err := m.st.ListTokens(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "tokens")
		return
	}
	pol := api.CallerOf(r.Context()).Policy
	out := protocol.TokenList{Tokens: make([]protocol.Token, 0, len(ts))}
	for _, t := range ts {
		if !pol.Allows(access.TokenView, access.Scope{Org: t.Org, Project: t.Project}) {
			continue
		}
		out.Tokens = append(out.Tokens, tokenView(t))
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (m *Service) handleRevokeToken(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	t, err := m.st.RevokeToken(r.Context(), acct, name, m.cfg.Now())
	if err != nil {
		api.StoreError(w, err, "token "+strconv.Quote(name))
		return
	}
	m.markTokenRevoked(t.ID)
	// Disconnect every delegate that registered with it, promptly, here
	// and on the other managers.
	n := m.disconnectToken(acct, t.ID, "the delegate token "+strconv.Quote(t.Name)+" was revoked")
	m.bus.Broadcast(r.Context(), cluster.Event{Kind: cluster.Revoke, Account: acct, Token: t.ID})
	m.log.Info("token revoked", "account", acct, "token", t.Name, "disconnected", n)
	api.WriteJSON(w, http.StatusOK, tokenView(t))
}

func (m *Service) handleListDelegates(w http.ResponseWriter, r *http.Request, acct string) {
	q, err := protocol.ParseDelegateQuery(r.URL.Query())
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	if !q.Paged() {
		ds, err := m.delegateList(r.Context(), acct, q.All)
		if err != nil {
			api.StoreError(w, err, "delegates")
			return
		}
		api.WriteJSON(w, http.StatusOK, protocol.DelegateList{Delegates: ds})
		return
	}
	page, err := m.delegatePage(r.Context(), acct, q)
	if err != nil {
		api.StoreError(w, err, "delegates")
		return
	}
	api.WriteJSON(w, http.StatusOK, page)
}

// delegateList is every instance of the account as the API shows it: the
// stored row with the live state of this manager laid over it. Instances
// that deregistered are left out unless all is set.
func (m *Service) delegateList(ctx context.Context, acct string, all bool) ([]protocol.Delegate, error) {
	ins, err := m.st.ListInstances(ctx, acct)
	if err != nil {
		return nil, err
	}
	results, err := m.st.ConfigurationResults(ctx, acct)
	if err != nil {
		return nil, err
	}
	tokenNames, err := m.tokenNames(ctx, acct)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.Delegate, 0, len(ins))
	for _, in := range ins {
		if in.DeregisteredAt != nil && !all {
			continue
		}
		out = append(out, m.instanceView(in, tokenNames, results))
	}
	sortDelegates(out)
	if err := m.upgrades.View(ctx, acct, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

func sortDelegates(out []protocol.Delegate) {
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Hostname < b.Hostname
	})
}

// tokenNames maps the account's token IDs to their names.
func (m *Service) tokenNames(ctx context.Context, acct string) (map[string]string, error) {
	tokens, err := m.st.ListTokens(ctx, acct)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, t := range tokens {
		names[t.ID] = t.Name
	}
	return names, nil
}

// instanceView is one stored instance as the API shows it, with the live
// state of this manager laid over it (upgrade fields aside: the upgrades
// service's View).
func (m *Service) instanceView(in store.Instance, tokenNames map[string]string, results map[string]store.ConfigurationResult) protocol.Delegate {
	now := m.cfg.Now()
	v := protocol.Delegate{
		InstanceID: in.ID, Name: in.Name, Hostname: in.Hostname, IP: in.IP, Tags: in.Tags,
		Version: in.Version, Type: in.Type, TokenName: tokenNames[in.TokenID],
		Status: protocol.DelegateDisconnected, Connection: in.Connection,
		LastHeartbeat: utcPtr(in.LastHeartbeat), Capacity: in.Capacity, Draining: in.Draining,
		RegisteredAt: in.RegisteredAt.UTC(), Org: in.Org, Project: in.Project,
		Description: in.Description, Approval: in.Approval, Upgrade: in.UpgradeMode,
	}
	d := m.hub.get(in.ID)
	if d != nil && !d.isGone() {
		v.Approval = d.approvalState()
	}
	if res, ok := results[in.ID]; ok {
		v.Configuration = res.Configuration
	}
	if v.Tags == nil {
		v.Tags = []string{}
	}
	if d != nil && !d.isGone() && in.DeregisteredAt == nil {
		view := delegateView(d)
		seen := view.LastSeen.UTC()
		v.LastHeartbeat = &seen
		v.RunningTasks, v.Capacity, v.Draining, v.OverThreshold = view.Running, view.Capacity, view.Draining, view.OverThreshold
		v.Configuring = view.Configuring
		v.Connection = d.connectionKind()
		d.mu.Lock()
		v.Perf = d.perf
		d.mu.Unlock()
		if now.Sub(seen) <= m.window() {
			v.Status = protocol.DelegateConnected
		}
	}
	if v.Status == protocol.DelegateDisconnected && m.st.Shared() && d == nil &&
		in.DeregisteredAt == nil && in.LastHeartbeat != nil && now.Sub(*in.LastHeartbeat) <= m.window() {
		// Connected to another manager on this database, which records
		// its liveness every half heartbeat interval.
		v.Status = protocol.DelegateConnected
	}
	if in.DeregisteredAt != nil {
		v.Status = protocol.DelegateDeregistered
	}
	if v.Status != protocol.DelegateConnected {
		v.Connection, v.Perf = "", nil
	}
	return v
}

// delegatePage is the page of the account's delegates q selects: the
// store reads the page's rows only (name, tag and scope filters and the
// cursor in SQL), and the live filters (connected, approval) are applied
// here, reading further names while they leave the page short.
func (m *Service) delegatePage(ctx context.Context, acct string, q protocol.DelegateQuery) (protocol.DelegateList, error) {
	out := protocol.DelegateList{Delegates: []protocol.Delegate{}}
	tokenNames, err := m.tokenNames(ctx, acct)
	if err != nil {
		return out, err
	}
	sq := store.InstanceQuery{AccountID: acct, After: q.Page, NameContains: q.Name, Tag: q.Tag, Deregistered: q.All}
	if q.Org != "" {
		sq.Scopes = []store.ScopeFilter{{Org: q.Org, Project: q.Project}}
	}
	live := q.Connected != nil || q.Approval != ""
	if q.Limit > 0 {
		// One more name than the page: a next page exists when it matches.
		sq.Names = q.Limit + 1
		if live {
			sq.Names = max(sq.Names, 2*q.Limit)
		}
	}
	names := 0
	for {
		ins, err := m.st.ListInstancePage(ctx, sq)
		if err != nil {
			return out, err
		}
		ids := make([]string, len(ins))
		for i, in := range ins {
			ids[i] = in.ID
		}
		results, err := m.st.ConfigurationResultsOf(ctx, ids)
		if err != nil {
			return out, err
		}
		last := ""
		for _, in := range ins {
			if in.Name != last {
				last = in.Name
				sq.After = in.Name
			}
			v := m.instanceView(in, tokenNames, results)
			if q.Connected != nil && (v.Status == protocol.DelegateConnected) != *q.Connected ||
				q.Approval != "" && v.Approval != q.Approval {
				continue
			}
			if n := len(out.Delegates); n == 0 || out.Delegates[n-1].Name != v.Name {
				if q.Limit > 0 && names == q.Limit {
					// A name past the page matches: there is a next page.
					out.Next = out.Delegates[n-1].Name
					return out, m.upgrades.PageView(ctx, acct, out.Delegates)
				}
				names++
			}
			out.Delegates = append(out.Delegates, v)
		}
		if sq.Names == 0 || countNames(ins) < sq.Names {
			break // every name was read
		}
	}
	return out, m.upgrades.PageView(ctx, acct, out.Delegates)
}

// delegateGroup is every instance of the delegate named name (case
// ignored), stopped ones too, as the API shows them: it reads only that
// group's rows, so describing a delegate costs the same with 10 or 10,000
// delegates in the account.
func (m *Service) delegateGroup(ctx context.Context, acct, name string) ([]protocol.Delegate, error) {
	tokenNames, err := m.tokenNames(ctx, acct)
	if err != nil {
		return nil, err
	}
	ins, err := m.st.ListInstancePage(ctx, store.InstanceQuery{AccountID: acct, Name: name, Deregistered: true})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
	}
	results, err := m.st.ConfigurationResultsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.Delegate, 0, len(ins))
	for _, in := range ins {
		out = append(out, m.instanceView(in, tokenNames, results))
	}
	sortDelegates(out)
	return out, m.upgrades.PageView(ctx, acct, out)
}

// countNames counts the names of instances in name order.
func countNames(ins []store.Instance) int {
	n := 0
	for i, in := range ins {
		if i == 0 || ins[i-1].Name != in.Name {
			n++
		}
	}
	return n
}

// taskView is the API form of a task: secret values never leave the manager.
func (m *Service) taskView(t store.Task) protocol.Task {
	v := protocol.Task{
		ID: t.ID, AccountID: t.AccountID, Type: t.Spec.Type, Status: t.Status, ExitCode: t.ExitCode,
		Error: t.Error, Selectors: t.Spec.Selectors, Env: t.Spec.Env, Shell: t.Spec.Shell,
		HTTP: t.Spec.HTTP, Container: t.Spec.Container, HTTPResult: t.HTTPResult, TimeoutMS: t.TimeoutMS,
		QueueTimeoutMS: t.QueueTimeoutMS, Retries: t.Retries, Attempts: t.Attempts,
		Org: t.Spec.Org, Project: t.Spec.Project, Capabilities: t.Spec.Capabilities, Connector: t.Spec.Connector,
		DelegateName: t.DelegateName, DelegateHostname: t.DelegateHostname, InstanceID: t.InstanceID,
		CreatedAt: t.CreatedAt.UTC(), AcquiredAt: utcPtr(t.AcquiredAt), StartedAt: utcPtr(t.StartedAt),
		FinishedAt: utcPtr(t.FinishedAt), CreatedBy: t.CreatedBy,
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
	if err := checkSelectors(s.Selectors); err != nil {
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
	return nil
}

func (m *Service) handleSubmitTask(w http.ResponseWriter, r *http.Request, acct string) {
	var spec protocol.TaskSpec
	if !api.DecodeBody(w, r, &spec) {
		return
	}
	if f := spec.Container.SetsWorkspace(); f != "" {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			"%s: set by the manager for the steps of a pipeline stage that share an empty_dir; a task cannot set it (leave it out)", f)
		return
	}
	if err := m.validateSpec(&spec); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	if err := m.resolveScopeAndConnector(r.Context(), acct, &spec); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	if err := m.secrets.CheckRefs(r.Context(), acct, spec); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	now := m.cfg.Now()
	t := store.Task{
		ID: api.NewID("t_"), AccountID: acct, Spec: spec, Status: protocol.StatusQueued,
		TimeoutMS: spec.TimeoutMS, QueueTimeoutMS: spec.QueueTimeoutMS, Retries: spec.Retries,
		CreatedAt: now, QueueDeadline: now.Add(time.Duration(spec.QueueTimeoutMS) * time.Millisecond),
		CreatedBy: api.PrincipalLabel(api.CallerOf(r.Context()).Policy.Principal),
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
	t, err := m.st.FinishTask(r.Context(), acct, id, store.Result{Status: protocol.StatusCancelled, Error: "cancelled by user"}, m.cfg.Now())
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

// handleTaskLogs streams a task's output as NDJSON (or as log frames, to
// a client that accepts protocol.ContentTypeLogFrames): stored chunks
// first, then (with follow=1) live chunks, and last the task once it is
// terminal.
func (m *Service) handleTaskLogs(w http.ResponseWriter, r *http.Request, acct string) {
	id := r.PathValue("id")
	follow, cur, err := logsQuery(r.URL.Query())
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	ctx := r.Context()
	if _, err := m.st.GetTask(ctx, acct, id); err != nil {
		api.StoreError(w, err, "task "+id)
		return
	}
	s := &logStream{m: m, acct: acct, id: id, cur: cur, w: w, enc: json.NewEncoder(w),
		frames: strings.Contains(r.Header.Get("Accept"), protocol.ContentTypeLogFrames)}
	s.flusher, _ = w.(http.Flusher)
	if follow {
		// Subscribed before the stored output is read, so that nothing
		// falls between the two.
		s.sub = m.logs.subscribe(id)
		// s.sub changes when a lagged follow subscribes again.
		defer func() { m.logs.unsubscribe(id, s.sub) }()
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if s.frames {
		w.Header().Set("Content-Type", protocol.ContentTypeLogFrames)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if !s.drain(ctx) {
		return
	}
	if follow {
		s.follow(ctx)
		return
	}
	s.end(ctx)
}

// logsQuery reads a task log request's parameters: follow, and the cursor
// to start after (after_attempt, after_seq).
func logsQuery(q url.Values) (follow bool, cur store.LogCursor, err error) {
	follow = q.Get("follow") == "1" || q.Get("follow") == "true"
	if v := q.Get("after_attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return false, cur, errors.New("after_attempt must be a non-negative integer")
		}
		cur.Attempt = n
	}
	if v := q.Get("after_seq"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return false, cur, errors.New("after_seq must be a non-negative integer")
		}
		cur.Seq = n
	}
	return follow, cur, nil
}

// logStream writes one task log answer. Its methods return false when the
// answer cannot go on (the client left, or the store failed).
type logStream struct {
	m       *Service
	acct    string
	id      string
	cur     store.LogCursor // the last chunk sent
	w       http.ResponseWriter
	enc     *json.Encoder
	flusher http.Flusher // nil when the writer cannot flush
	sub     *follower    // nil unless following
	// frames: the answer is log frames, not NDJSON; buf holds the header
	// of the frame being written.
	frames bool
	buf    []byte
}

// send writes one chunk and moves the cursor past it.
func (s *logStream) send(c store.StoredChunk) bool {
	ch := c.Chunk
	ch.Attempt = c.Attempt
	if s.frames {
		s.buf = protocol.AppendChunkFrameHeader(s.buf[:0], ch)
		if _, err := s.w.Write(s.buf); err != nil {
			return false
		}
		if _, err := io.WriteString(s.w, ch.Data); err != nil {
			return false
		}
	} else if err := s.enc.Encode(protocol.LogStreamLine{Chunk: &ch}); err != nil {
		return false
	}
	s.cur = store.LogCursor{Attempt: c.Attempt, Seq: c.Chunk.Seq}
	return true
}

func (s *logStream) flush() {
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

// after reports whether c comes after the cursor (was not sent yet).
func (s *logStream) after(c store.StoredChunk) bool {
	return c.Attempt > s.cur.Attempt || (c.Attempt == s.cur.Attempt && c.Chunk.Seq > s.cur.Seq)
}

// drain sends everything stored after the cursor.
func (s *logStream) drain(ctx context.Context) bool {
	const page = 500
	for {
		cs, err := s.m.st.ReadLogs(ctx, s.id, s.cur, page)
		if err != nil {
			s.m.log.Error("read logs", "task", s.id, "err", err)
			return false
		}
		for _, c := range cs {
			if !s.send(c) {
				return false
			}
		}
		s.flush()
		if len(cs) < page {
			return true
		}
	}
}

// end sends the task, which ends the answer.
func (s *logStream) end(ctx context.Context) {
	t, err := s.m.st.GetTask(ctx, s.acct, s.id)
	if err != nil {
		return
	}
	v := s.m.taskView(t)
	if s.frames {
		b, err := json.Marshal(protocol.LogStreamLine{Task: &v})
		if err == nil {
			_, _ = s.w.Write(protocol.AppendLogFrame(nil, protocol.FrameLine, b))
		}
		return
	}
	_ = s.enc.Encode(protocol.LogStreamLine{Task: &v})
}

// sendQueued sends what waits on the log bus. A follower does so before
// it reads the store: the chunks the cap dropped are only there (an
// upload that carries more than the tail never writes them).
func (s *logStream) sendQueued() bool {
	select {
	case c := <-s.sub.ch:
		return s.sendLive(c)
	default:
		return true
	}
}

// sendLive sends the chunk c from the log bus and what else waits there,
// skipping those already sent from the store.
func (s *logStream) sendLive(c store.StoredChunk) bool {
	for {
		s.sub.took(c)
		if s.after(c) && !s.send(c) {
			return false
		}
		select {
		case c = <-s.sub.ch:
			continue
		default:
		}
		s.flush()
		return true
	}
}

// follow sends output as it arrives until the task ends (then the rest of
// its stored output and the task), the client leaves or the manager
// stops. Output comes on the log bus when its delegate sends it to this
// manager; when it comes through another manager, that manager's
// notification, or at the latest the next poll, has it read from the
// store.
func (s *logStream) follow(ctx context.Context) {
	poll := time.NewTicker(s.m.cfg.FollowPollInterval)
	defer poll.Stop()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	// live: output came on the bus since the last poll. The poll is for
	// output that comes through another manager; while this manager's bus
	// brings it, the poll does not read the store, which holds an upload's
	// stored chunks before the bus has them all (it skips the chunks the
	// cap drops: read from the store first, the stored ones would pass
	// the cursor over them).
	live := false
	for check := true; ; {
		if check {
			// A terminal task whose stored log is drained is complete.
			t, err := s.m.st.GetTask(ctx, s.acct, s.id)
			if err == nil && protocol.Terminal(t.Status) {
				if s.drain(ctx) {
					s.end(ctx)
				}
				return
			}
		}
		// Output does not end a task: only the other paths check.
		check = true
		select {
		case c := <-s.sub.ch:
			if !s.sendLive(c) {
				return
			}
			check, live = false, true
		case <-s.sub.stored:
			if !s.sendQueued() || !s.drain(ctx) {
				return
			}
			check = false
		case <-s.sub.lagged:
			// Fell behind: send what the bus holds, read the rest from the
			// store, and subscribe again.
			if !s.sendQueued() {
				return
			}
			s.sub = s.m.logs.resubscribe(s.id, s.sub)
			if !s.drain(ctx) {
				return
			}
		case <-s.sub.done:
			if !s.sendQueued() {
				return
			}
		case <-poll.C:
			if live {
				live = false
				continue
			}
			if !s.sendQueued() || !s.drain(ctx) {
				return
			}
		case <-keepAlive.C:
			alive := []byte("\n")
			if s.frames {
				alive = protocol.AppendLogFrame(nil, protocol.FrameKeepAlive, nil)
			}
			if _, err := s.w.Write(alive); err != nil {
				return
			}
			s.flush()
		case <-s.m.stopping:
			return
		case <-ctx.Done():
			return
		}
	}
}
