package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/store"
)

func (m *Service) handleAcquire(w http.ResponseWriter, r *http.Request, d *live) {
	resp, aerr := m.acquire(r.Context(), d, r.PathValue("id"))
	if aerr != nil {
		api.WriteAPIError(w, aerr)
		return
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

// acquire claims task id for d: the work of POST .../acquire, also done
// for each task of a WebSocket FrameAcquire.
func (m *Service) acquire(ctx context.Context, d *live, id string) (protocol.AcquireResponse, *api.Error) {
	if !validTaskID(id) {
		return protocol.AcquireResponse{}, api.NewError(http.StatusNotFound, protocol.CodeNotFound, "task not found")
	}
	_, _, draining := d.load()
	if draining {
		return protocol.AcquireResponse{}, api.NewError(http.StatusConflict, protocol.CodeNotEligible, "delegate is draining")
	}
	defer d.unpend(id)
	_, capacity, _ := d.load()
	// The rules that depend on the task are checked on the row the claim
	// reads, inside its transaction: one read per acquire.
	t, err := m.st.ClaimTask(ctx, store.Claim{
		TaskID: id, InstanceID: d.id, DelegateName: d.name, DelegateHostname: d.hostname,
		Capacity: capacity, LeaseDuration: m.leaseDuration(),
		Check: func(t store.Task) error { return acquireCheck(t, d) },
	}, m.cfg.Now())
	var refused *acquireRefusal
	var missing *store.MissingSecretsError
	switch {
	case errors.As(err, &missing) && t.AccountID == d.accountID:
		return protocol.AcquireResponse{}, m.failMissingSecrets(ctx, t, missing)
	case errors.As(err, &refused) && refused.held:
		// The same delegate asks again: the answer to its claim was lost.
		// Acquire is idempotent for the holder until the task starts.
		resp, err := acquireAnswer(t)
		if err != nil {
			m.log.Error("cannot hand a task to a delegate: its secret references do not resolve", "task", id, "err", err)
			return protocol.AcquireResponse{}, api.NewError(http.StatusInternalServerError, protocol.CodeInternal, "task %s: internal error", id)
		}
		d.setRunning(t.ID, t.Epoch, m.cfg.Now())
		return resp, nil
	case errors.As(err, &refused) && t.AccountID != d.accountID:
		return protocol.AcquireResponse{}, api.StoreAPIError(store.ErrNotFound, "task "+id)
	case errors.As(err, &refused) && refused.outOfScope:
		// Answered exactly as a task of another account: nothing leaks.
		m.refuseScope(d, callAcquire, "task", id, t.Spec.Org, t.Spec.Project)
		return protocol.AcquireResponse{}, api.StoreAPIError(store.ErrNotFound, "task "+id)
	case errors.As(err, &refused):
		return protocol.AcquireResponse{}, api.NewError(http.StatusForbidden, protocol.CodeNotEligible, "%s", refused.msg)
	case err != nil:
		if errors.Is(err, store.ErrAlreadyClaimed) || errors.Is(err, store.ErrTaskTerminal) || errors.Is(err, store.ErrNotFound) {
			m.queue.drop(id)
		}
		if kerr := m.secrets.SealError(err); kerr != nil {
			m.log.Error("cannot hand a task to a delegate: its secret values do not open", "task", id, "err", kerr)
		}
		return protocol.AcquireResponse{}, api.StoreAPIError(err, "task "+id)
	}
	m.queue.drop(id)
	resp, err := acquireAnswer(t)
	if err != nil {
		// Cannot happen: the store read every value the spec references.
		m.log.Error("cannot hand a task to a delegate: its secret references do not resolve", "task", id, "err", err)
		return protocol.AcquireResponse{}, api.NewError(http.StatusInternalServerError, protocol.CodeInternal, "task %s: internal error", id)
	}
	d.setRunning(t.ID, t.Epoch, m.cfg.Now())
	m.log.Debug("task acquired", "task", t.ID, "instance", d.id, "epoch", t.Epoch)
	m.events.Publish(ctx, events.Event{Kind: events.TaskAcquired, Account: d.accountID, TaskID: t.ID})
	return resp, nil
}

// acquireAnswer is the answer to the delegate that holds t: its spec with
// the stored secrets resolved, and their values to mask.
func acquireAnswer(t store.Task) (protocol.AcquireResponse, error) {
	resp := protocol.AcquireResponse{TaskID: t.ID, Epoch: t.Epoch, Spec: t.Spec, TimeoutMS: t.TimeoutMS}
	if !secretref.Uses(t.Spec) {
		return resp, nil
	}
	spec, mask, err := secretref.ResolveSpec(t.Spec, t.StoredSecrets)
	if err != nil {
		return protocol.AcquireResponse{}, err
	}
	resp.Spec, resp.Mask = spec, mask
	return resp, nil
}

// failMissingSecrets ends a task whose bound secrets are not as they were
// when it was created (deleted, created again, updated) or that has none
// bound (queued before bindings), and answers the delegate that tried to
// acquire it.
func (m *Service) failMissingSecrets(ctx context.Context, t store.Task, missing *store.MissingSecretsError) *api.Error {
	msg := missing.Error()
	ft, err := m.st.FinishTask(ctx, t.AccountID, t.ID, store.Result{Status: protocol.StatusFailed, Error: msg}, m.cfg.Now())
	switch {
	case err == nil:
		m.log.Warn("task failed: a secret it was bound to changed or is gone", "account", t.AccountID, "task", t.ID,
			"secrets", strings.Join(missing.Names, ","), "scope", protocol.ScopeLabel(t.Spec.Org, t.Spec.Project), "why", msg)
		m.afterManagerFinish(ctx, ft)
	case !errors.Is(err, store.ErrTaskTerminal):
		return api.StoreAPIError(err, "task "+t.ID)
	}
	m.queue.drop(t.ID)
	return api.NewError(http.StatusConflict, protocol.CodeTaskTerminal, "task %s failed: %s", t.ID, msg)
}

// acquireRefusal ends a claim before the store decides: the delegate
// already holds the task (held), the task is outside the scope of its
// token (outOfScope), or the task is not for it.
type acquireRefusal struct {
	held       bool
	outOfScope bool
	msg        string
}

func (e *acquireRefusal) Error() string {
	if e.held {
		return "already held by this delegate"
	}
	return e.msg
}

// acquireCheck applies the acquire rules that depend on the stored task:
// its account, the scope of the delegate's token, a repeated acquire by
// its holder, selectors and the deny list. Status and capacity are the
// store's to decide.
func acquireCheck(t store.Task, d *live) error {
	if t.AccountID != d.accountID {
		return &acquireRefusal{msg: "task of another account"}
	}
	if !d.covers(t.Spec.Org, t.Spec.Project) {
		return &acquireRefusal{outOfScope: true, msg: "task outside the scope of the delegate's token"}
	}
	if t.Status == protocol.StatusQueued && d.approvalState() != "" && d.approvalState() != protocol.ApprovalApproved {
		return &acquireRefusal{msg: "delegate is pending approval (legate delegates approve " + d.name + ")"}
	}
	if t.Status == protocol.StatusRunning && t.InstanceID == d.id && t.StartedAt == nil {
		return &acquireRefusal{held: true}
	}
	if t.Status != protocol.StatusQueued {
		return nil
	}
	if v := d.protocolVersion; v > 0 && v < protocol.MaskVersion && secretref.Uses(t.Spec) {
		return &acquireRefusal{msg: fmt.Sprintf("the task uses stored secrets (${secrets.NAME}), which a delegate of protocol %d cannot mask in its output: upgrade the delegate (protocol %d or later)", v, protocol.MaskVersion)}
	}
	if missing := protocol.MissingSelectors(t.Spec.Selectors, d.tags, d.name, d.hostname); len(missing) > 0 {
		return &acquireRefusal{msg: "delegate lacks selectors " + strings.Join(missing, ", ")}
	}
	if !protocol.RunsTaskType(d.taskTypes, t.Spec.Type) {
		return &acquireRefusal{msg: "delegate does not run " + t.Spec.Type + " tasks (it did not register the type; upgrade it)"}
	}
	for _, den := range t.DeniedInstances {
		if den == d.id {
			return &acquireRefusal{msg: "delegate is denied this task (it was lost while running it before)"}
		}
	}
	return nil
}

func (m *Service) handleStarted(w http.ResponseWriter, r *http.Request, d *live) {
	var req protocol.StartedRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	if aerr := m.startTask(r.Context(), d, r.PathValue("id"), req); aerr != nil {
		api.WriteAPIError(w, aerr)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// startTask records that task id's process started: the work of POST
// .../started, also done for a WebSocket FrameStarted. The store records
// it only if this delegate holds the task; only a refusal reads who does
// (holds), to say why.
func (m *Service) startTask(ctx context.Context, d *live, id string, req protocol.StartedRequest) *api.Error {
	if !validTaskID(id) {
		return api.NewError(http.StatusNotFound, protocol.CodeNotFound, "task not found")
	}
	now := m.cfg.Now()
	queued, err := m.st.StartTask(ctx, id, req.Epoch, d.holder(), now)
	if err != nil {
		if aerr := m.holds(ctx, d, id, callStarted, staleStarted); aerr != nil {
			return aerr
		}
		if errors.Is(err, store.ErrStaleLease) {
			m.metrics.staleReport(staleStarted)
		}
		return api.StoreAPIError(err, "task "+id)
	}
	m.metrics.taskStarted(queued, now)
	m.cfg.Wedged.Started(d.id, id, now)
	m.events.Publish(ctx, events.Event{Kind: events.TaskStarted, Account: d.accountID, TaskID: id})
	return nil
}

// ownsTask is holds for an HTTP handler: it writes the refusal.
func (m *Service) ownsTask(w http.ResponseWriter, r *http.Request, d *live, id, call, kind string) bool {
	if aerr := m.holds(r.Context(), d, id, call, kind); aerr != nil {
		api.WriteAPIError(w, aerr)
		return false
	}
	return true
}

// holds checks that the task belongs to the delegate's account and is
// within the scope of its token (and refuses with 404 otherwise, so task
// IDs of other accounts and scopes leak nothing; an out-of-scope one is
// counted as a scope refusal of call), and that the delegate holds it (a
// refusal counts as a stale report of kind). It reads four columns, not
// the task.
func (m *Service) holds(ctx context.Context, d *live, id, call, kind string) *api.Error {
	if !validTaskID(id) {
		return api.NewError(http.StatusNotFound, protocol.CodeNotFound, "task not found")
	}
	h, err := m.st.TaskHolder(ctx, d.accountID, id)
	if err != nil {
		return api.StoreAPIError(err, "task "+id)
	}
	if !d.covers(h.Org, h.Project) {
		m.refuseScope(d, call, "task", id, h.Org, h.Project)
		return api.StoreAPIError(store.ErrNotFound, "task "+id)
	}
	if h.InstanceID != d.id {
		return m.refuseNotHolder(d, id, h.InstanceID, kind)
	}
	return nil
}

// staleLevel is the level at which to log a report refused from a stale
// lease of task id: info when the task has ended (a user cancelled it, or
// the manager ended it and said why), as its delegate's last output and
// result arrive after that by nature; a warning otherwise (the task was
// handed out again).
func (m *Service) staleLevel(ctx context.Context, d *live, id string) slog.Level {
	if t, err := m.st.GetTask(ctx, d.accountID, id); err == nil && protocol.Terminal(t.Status) {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

func (m *Service) refuseNotHolder(d *live, id, holder, kind string) *api.Error {
	m.log.Warn("refused report from a delegate that does not hold the task", "task", id, "instance", d.id, "holder", holder)
	m.metrics.staleReport(kind)
	return api.NewError(http.StatusConflict, protocol.CodeStaleLease, "task %s is not held by this delegate", id)
}

func (m *Service) handleLogs(w http.ResponseWriter, r *http.Request, d *live) {
	var req protocol.LogsRequest
	if !decodeLogs(w, r, &req) {
		return
	}
	id := r.PathValue("id")
	if !m.ownsTask(w, r, d, id, callLogs, staleLog) {
		return
	}
	if len(req.Chunks) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	for i := range req.Chunks {
		if req.Chunks[i].Seq <= 0 {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "log chunk seq must be positive")
			return
		}
		if req.Chunks[i].Time.IsZero() {
			req.Chunks[i].Time = m.cfg.Now()
		}
	}
	if err := m.st.AppendLogs(r.Context(), id, req.Epoch, req.Chunks, m.cfg.LogCap); err != nil {
		if errors.Is(err, store.ErrStaleLease) {
			m.log.Log(r.Context(), m.staleLevel(r.Context(), d, id), "refused logs from a stale lease", "task", id, "instance", d.id, "epoch", req.Epoch)
			m.metrics.staleReport(staleLog)
		}
		if errors.Is(err, store.ErrLogClosed) {
			m.log.Warn("refused log chunks numbered past the last one of the task's result", "task", id, "instance", d.id, "epoch", req.Epoch)
			api.WriteError(w, http.StatusConflict, protocol.CodeTaskTerminal,
				"task %s already finished, and its result named its last log chunk: chunks numbered past it are refused", id)
			return
		}
		api.StoreError(w, err, "task "+id)
		return
	}
	out := make([]store.StoredChunk, len(req.Chunks))
	for i, c := range req.Chunks {
		c.Attempt = int(req.Epoch)
		out[i] = store.StoredChunk{Attempt: int(req.Epoch), Chunk: c}
	}
	m.logs.Publish(id, out)
	m.events.Publish(r.Context(), events.Event{Kind: events.TaskOutput, TaskID: id})
	w.WriteHeader(http.StatusNoContent)
}

// decodeLogs reads a log upload: JSON (protocol.LogsRequest), or log
// frames (protocol.ContentTypeLogFrames) with the epoch in a header, which
// carry output without escaping it.
func decodeLogs(w http.ResponseWriter, r *http.Request, req *protocol.LogsRequest) bool {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != protocol.ContentTypeLogFrames {
		return api.DecodeBody(w, r, req)
	}
	epoch, err := strconv.ParseInt(r.Header.Get(protocol.HeaderLogEpoch), 10, 64)
	if err != nil || epoch < 0 {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "log frames need the lease epoch in the %s header", protocol.HeaderLogEpoch)
		return false
	}
	body, ok := api.ReadBody(w, r)
	if !ok {
		return false
	}
	chunks, err := protocol.DecodeChunkFrames(body)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "invalid log frames: %v", err)
		return false
	}
	for i := range chunks {
		chunks[i].Attempt = 0 // the manager numbers attempts
	}
	req.Epoch, req.Chunks = epoch, chunks
	return true
}

// checkOutputs holds a result's outputs to the limits the delegate keeps
// (protocol.MaxOutputs, MaxOutputBytes).
func checkOutputs(outs map[string]string) error {
	if len(outs) > protocol.MaxOutputs {
		return fmt.Errorf("result has %d outputs: at most %d", len(outs), protocol.MaxOutputs)
	}
	n := 0
	for k, v := range outs {
		if k == "" {
			return errors.New("result has an output without a key")
		}
		n += len(k) + len(v) + 2
	}
	if n > protocol.MaxOutputBytes+2*protocol.MaxOutputs {
		return fmt.Errorf("result has %d bytes of outputs: at most %d", n, protocol.MaxOutputBytes)
	}
	return nil
}

func (m *Service) handleResult(w http.ResponseWriter, r *http.Request, d *live) {
	var req protocol.ResultRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	t, aerr := m.completeTask(r.Context(), d, r.PathValue("id"), req, false)
	if aerr != nil {
		api.WriteAPIError(w, aerr)
		return
	}
	api.WriteJSON(w, http.StatusOK, t)
}

// completeTask records task id's outcome: the work of POST .../result, also
// done for a WebSocket FrameResult. A repeated report of an applied result
// is answered with the stored task. With brief, the task it returns is
// store.Result.Brief's: for a caller that answers without it.
func (m *Service) completeTask(ctx context.Context, d *live, id string, req protocol.ResultRequest, brief bool) (protocol.Task, *api.Error) {
	switch req.Status {
	case protocol.StatusSucceeded, protocol.StatusFailed, protocol.StatusTimedOut, protocol.StatusCancelled:
	default:
		return protocol.Task{}, api.NewError(http.StatusBadRequest, protocol.CodeBadRequest, "result status %q is not a delegate outcome", req.Status)
	}
	if !validTaskID(id) {
		return protocol.Task{}, api.NewError(http.StatusNotFound, protocol.CodeNotFound, "task not found")
	}
	if len(req.Error) > 4096 {
		req.Error = req.Error[:4096]
	}
	if req.DelegateFault && req.Status == protocol.StatusFailed {
		if aerr := m.holds(ctx, d, id, callResult, staleResult); aerr != nil {
			return protocol.Task{}, aerr
		}
		// The delegate, not the task, failed: deny it the task and run the
		// task elsewhere if it has retries left.
		reason := fmt.Sprintf("delegate %q (host %s) could not run the task: %s", d.name, d.hostname, req.Error)
		t, requeued, err := m.st.RequeueTask(ctx, id, req.Epoch, d.id, reason, req.LastSeq, m.cfg.Now())
		if err != nil {
			if !errors.Is(err, store.ErrStaleLease) {
				return protocol.Task{}, api.StoreAPIError(err, "task "+id)
			}
			// Already applied (a repeated report) or stale: answer with the stored task.
			cur, gerr := m.st.GetTask(ctx, d.accountID, id)
			if gerr != nil || cur.Epoch != req.Epoch {
				m.metrics.staleReport(staleResult)
				return protocol.Task{}, api.StoreAPIError(err, "task "+id)
			}
			return m.taskView(cur), nil
		}
		d.dropRunning(id)
		if requeued {
			m.log.Info("task requeued after a delegate fault", "task", id, "instance", d.id, "err", req.Error)
			m.events.Publish(ctx, events.Event{Kind: events.TaskQueued, Account: t.AccountID, TaskID: t.ID, Task: &t, Widen: true})
		} else {
			m.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: d.accountID, TaskID: id})
			m.log.Info("task failed on a delegate fault, no retries left", "task", id, "instance", d.id)
		}
		m.offerQueued(ctx, d)
		return m.taskView(t), nil
	}
	if err := checkOutputs(req.Outputs); err != nil {
		return protocol.Task{}, api.NewError(http.StatusBadRequest, protocol.CodeBadRequest, "%v", err)
	}
	// The store applies the result only if this delegate holds the task;
	// only a refusal reads who does (holds), to say why.
	t, err := m.st.CompleteTask(ctx, id, req.Epoch, store.Result{
		Status: req.Status, ExitCode: req.ExitCode, Error: req.Error, HTTPResult: req.HTTPResult, LastSeq: req.LastSeq,
		Outputs: req.Outputs, Holder: d.holder(), Brief: brief,
	}, m.cfg.Now())
	if err != nil {
		if aerr := m.holds(ctx, d, id, callResult, staleResult); aerr != nil {
			return protocol.Task{}, aerr
		}
		if errors.Is(err, store.ErrStaleLease) {
			m.log.Log(ctx, m.staleLevel(ctx, d, id), "refused result from a stale lease", "task", id, "instance", d.id, "epoch", req.Epoch)
			m.metrics.staleReport(staleResult)
		}
		return protocol.Task{}, api.StoreAPIError(err, "task "+id)
	}
	wasFull := d.full()
	d.dropRunning(id)
	m.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: d.accountID, TaskID: id})
	m.log.Info("task finished", "task", id, "status", t.Status, "instance", d.id)
	// A task that succeeded for a connector made its delegate the
	// connector's last success in CompleteTask's transaction.
	if t.Status == protocol.StatusSucceeded && len(t.Spec.Capabilities) > 0 {
		// A task that succeeded proves its capabilities on this delegate:
		// each success resets the allowlist TTL, with no extra round trip.
		rs := make([]protocol.CapabilityResult, len(t.Spec.Capabilities))
		for i, c := range t.Spec.Capabilities {
			rs[i] = protocol.CapabilityResult{Criteria: c, OK: true}
		}
		if err := m.recordCapabilities(ctx, d.id, rs); err != nil {
			m.log.Warn("refresh allowlist", "instance", d.id, "err", err)
		}
	}
	// Capacity freed: offer what is waiting. A delegate that was not full
	// could already take every queued task it is eligible for (those were
	// offered when they were queued, and widened if not acquired), so only
	// a delegate whose capacity was the obstacle is offered the queue.
	if wasFull {
		m.offerQueued(ctx, d)
	}
	return m.taskView(t), nil
}

// handleCapabilities records a delegate's capability validation results.
// When a validation prompted by a task failed, the task is offered to
// other delegates at once.
func (m *Service) handleCapabilities(w http.ResponseWriter, r *http.Request, d *live) {
	var rep protocol.CapabilityReport
	if !api.DecodeBody(w, r, &rep) {
		return
	}
	if len(rep.Results) > 1000 {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "at most 1000 results per report")
		return
	}
	failed := false
	for i, res := range rep.Results {
		if strings.TrimSpace(res.Criteria) == "" || len(res.Criteria) > 2048 {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "result %d: criteria must be 1-2048 characters", i)
			return
		}
		if len(res.Error) > 1024 {
			rep.Results[i].Error = res.Error[:1024]
		}
		failed = failed || !res.OK
	}
	if err := m.recordCapabilities(r.Context(), d.id, rep.Results); err != nil {
		m.log.Error("record capabilities", "instance", d.id, "err", err)
		api.StoreError(w, err, "capability results")
		return
	}
	if failed && validTaskID(rep.TaskID) {
		// A task of another account or outside the delegate's scope is
		// ignored, as an unknown one is.
		t, err := m.st.GetTask(r.Context(), d.accountID, rep.TaskID)
		switch {
		case err != nil:
		case !d.covers(t.Spec.Org, t.Spec.Project):
			m.refuseScope(d, callCapabilities, "task", t.ID, t.Spec.Org, t.Spec.Project)
		case t.Status == protocol.StatusQueued:
			m.offerTask(r.Context(), t, true)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// reconcileRestart handles the tasks a restarted delegate process no
// longer runs: the store says this instance runs them, the new process
// does not list them, so they died with the old process. Each is run
// elsewhere (this instance denied) if it has retries left, or fails with
// an error that says so — at once, not after its lease.
func (m *Service) reconcileRestart(ctx context.Context, d *live, running []protocol.RunningTask) {
	ts, err := m.st.RunningTasksOf(ctx, d.id)
	if err != nil {
		m.log.Warn("reconcile restarted delegate", "instance", d.id, "err", err)
		return
	}
	listed := make(map[string]bool, len(running))
	for _, rt := range running {
		listed[rt.ID] = true
	}
	for _, t := range ts {
		if listed[t.ID] {
			continue
		}
		reason := fmt.Sprintf("delegate %q (host %s) restarted while running the task", d.name, d.hostname)
		// The process that ran it is gone: its output ends with what
		// is stored (lastSeq 0 closes the log of a task that fails).
		nt, requeued, err := m.st.RequeueTask(ctx, t.ID, t.Epoch, d.id, reason, 0, m.cfg.Now())
		if err != nil {
			continue // finished or moved meanwhile
		}
		d.dropRunning(t.ID)
		if requeued {
			m.log.Info("task requeued: its delegate restarted", "task", t.ID, "instance", d.id)
			m.events.Publish(ctx, events.Event{Kind: events.TaskQueued, Account: nt.AccountID, TaskID: nt.ID, Task: &nt})
		} else {
			m.log.Info("task failed: its delegate restarted", "task", t.ID, "instance", d.id)
			m.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: d.accountID, TaskID: t.ID})
		}
	}
}
