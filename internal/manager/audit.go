package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// The audit log. Every admin route that changes something names its
// action in routes() (route.audit); adminAuth then records one event per
// request with m.audit: who (the principal of callerOf(ctx), and the API
// key or sign-in session it used), when, what (action, resource type and
// name), at which scope, from which address (the socket's: the manager
// trusts no forwarding header), and how it ended (success, denied by a
// permission, failed, with the HTTP status and the error's message).
// Handlers that know more than the route (the name of a created object,
// the instances an approval reached) add it with noteAudit. Sign-ins are
// public and record their own events. No record holds a secret, token or
// key value: names only.

type auditCtx struct{}

// noteAudit lets a handler complete the audit event of its request (a
// no-op for a request that is not audited).
func noteAudit(ctx context.Context, f func(e *store.AuditEvent)) {
	if e, ok := ctx.Value(auditCtx{}).(*store.AuditEvent); ok && e != nil {
		f(e)
	}
}

// audit records e: the fields left empty are filled in from the request
// (the caller from callerOf(ctx), the client's address from r, the time
// now). A record that cannot be stored is logged, not answered: the
// change it describes has been made.
func (m *Manager) audit(ctx context.Context, r *http.Request, e store.AuditEvent) {
	c := callerOf(ctx)
	if e.PrincipalKind == "" && e.Principal == "" {
		p := c.policy.Principal
		e.PrincipalKind, e.PrincipalID, e.Principal = p.Kind, p.ID, p.Name
	}
	if e.Credential == "" {
		switch {
		case c.key.ID != "":
			e.Credential, e.CredentialName = "api_key", c.key.Name
		case c.session.ID != "":
			e.Credential, e.CredentialName = "session", c.session.ID
		}
	}
	if e.ResourceType == "" {
		e.ResourceType, _, _ = strings.Cut(e.Action, ".")
	}
	if e.Address == "" && r != nil {
		e.Address = clientAddr(r)
	}
	if e.At.IsZero() {
		e.At = m.cfg.Now()
	}
	if e.Outcome == "" {
		e.Outcome = outcomeOf(e.Status)
	}
	e.ID = newID("au_")
	if len(e.Detail) > 1024 {
		e.Detail = e.Detail[:1024]
	}
	// The request may have ended (a client that hung up): the record is
	// still written.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := m.st.AddAuditEvent(wctx, e); err != nil {
		m.log.Error("record an audit event", "account", e.AccountID, "action", e.Action, "principal", e.Principal, "err", err)
	}
}

func outcomeOf(status int) string {
	switch {
	case status == http.StatusForbidden:
		return protocol.AuditDenied
	case status >= 400 || status == 0:
		return protocol.AuditFailed
	}
	return protocol.AuditSuccess
}

// auditRequest runs an audited admin request: the event is in the
// request's context for authorize and the handler to complete, and is
// recorded once the answer is written.
func (m *Manager) auditRequest(w http.ResponseWriter, r *http.Request, action, acct string, serve func(w http.ResponseWriter, r *http.Request)) {
	e := &store.AuditEvent{AccountID: acct, Action: action}
	e.ResourceType, _, _ = strings.Cut(action, ".")
	r = r.WithContext(context.WithValue(r.Context(), auditCtx{}, e))
	aw := &auditWriter{ResponseWriter: w}
	serve(aw, r)
	if aw.status == 0 {
		aw.status = http.StatusOK
	}
	e.Status = aw.status
	if aw.status >= 400 && e.Detail == "" {
		var eb protocol.ErrorBody
		if json.Unmarshal(aw.body, &eb) == nil {
			e.Detail = eb.Error.Message
		}
	}
	if e.Resource == "" {
		for _, k := range []string{"name", "id", "org"} {
			if v := r.PathValue(k); v != "" {
				e.Resource = v
				break
			}
		}
	}
	m.audit(r.Context(), r, *e)
}

// auditNamed names the resource of the request's audit event (the name
// of an object the request creates, from its body).
func auditNamed(r *http.Request, name string) {
	noteAudit(r.Context(), func(e *store.AuditEvent) { e.Resource = name })
}

// auditBinding describes a binding in the request's audit event: the
// role is the resource, the subject the detail, at the binding's scope.
func auditBinding(r *http.Request, b protocol.Binding) {
	noteAudit(r.Context(), func(e *store.AuditEvent) {
		e.Resource, e.Org, e.Project = b.Role, b.Org, b.Project
		e.Detail = strings.TrimSpace(b.SubjectKind + " " + b.Subject)
	})
}

// auditResource sets the resource of the request's audit event, unless a
// handler named it, from the resource a rule was checked on.
func auditResource(ctx context.Context, res access.Resource) {
	noteAudit(ctx, func(e *store.AuditEvent) {
		if e.Resource == "" {
			e.Resource = res.Name
		}
		if e.Org == "" && e.Project == "" {
			e.Org, e.Project = res.Scope.Org, res.Scope.Project
		}
	})
}

// auditWriter keeps the status of an answer, and the start of its body
// when it is an error (its message goes in the record).
type auditWriter struct {
	http.ResponseWriter
	status int
	body   []byte
}

func (a *auditWriter) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *auditWriter) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if a.status >= 400 && len(a.body) < 2048 {
		a.body = append(a.body, p[:min(len(p), 2048-len(a.body))]...)
	}
	return a.ResponseWriter.Write(p)
}

func (a *auditWriter) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (a *auditWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

func (a *auditWriter) recordAPIError(code protocol.Code) {
	if rec, ok := a.ResponseWriter.(errorRecorder); ok {
		rec.recordAPIError(code)
	}
}

// auditPage is the largest page GET PathAudit answers.
const auditPage = 1000

func (m *Manager) handleListAudit(w http.ResponseWriter, r *http.Request, acct string) {
	q := r.URL.Query()
	f := store.AuditFilter{AccountID: acct, Principal: strings.TrimSpace(q.Get("user")), Limit: 100}
	if s := strings.TrimSpace(q.Get("since")); s != "" {
		since, err := parseSince(s, m.cfg.Now())
		if err != nil {
			badRequest(w, "%s", err.Error())
			return
		}
		f.Since = since
	}
	if s := strings.TrimSpace(q.Get("resource")); s != "" {
		f.ResourceType, f.Resource, _ = strings.Cut(s, "/")
	}
	if s := strings.TrimSpace(q.Get("action")); s != "" {
		exact, prefix, err := parseAuditAction(s)
		if err != nil {
			badRequest(w, "%s", err.Error())
			return
		}
		f.Action, f.ActionPrefix = exact, prefix
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > auditPage {
			badRequest(w, "limit=%q: use a number from 1 to %d", s, auditPage)
			return
		}
		f.Limit = n
	}
	if s := q.Get("after"); s != "" {
		c, err := parseAuditCursor(s)
		if err != nil {
			badRequest(w, "%s", err.Error())
			return
		}
		f.After = &c
	}
	// One more than the page says whether there is a next one.
	want := f.Limit
	f.Limit++
	es, err := m.st.ListAuditEvents(r.Context(), f)
	if err != nil {
		storeError(w, err, "audit log")
		return
	}
	out := protocol.AuditList{Events: make([]protocol.AuditEvent, 0, min(len(es), want))}
	for i, e := range es {
		if i == want {
			last := es[i-1]
			out.Next = strconv.FormatInt(last.At.UnixMicro(), 10) + "_" + last.ID
			break
		}
		out.Events = append(out.Events, e.Event())
	}
	writeJSON(w, http.StatusOK, out)
}

// parseAuditAction reads the action filter of GET PathAudit: an action,
// which keeps it and the actions beneath it (task.cancel; task keeps
// task.create, task.cancel, ...), or the start of actions when it ends
// with "." or "*" (task. and task.* keep task.create, task.cancel, ...).
func parseAuditAction(s string) (exact, prefix string, err error) {
	name, star := strings.CutSuffix(s, "*")
	if len(name) > 100 || strings.ContainsFunc(name, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.' && r != '_' && r != '-'
	}) || (star && name == "") {
		return "", "", fmt.Errorf("action=%q: use an action (task.cancel; task for every task action) or the start of actions ending with . or * (task.): lowercase letters, digits, '.', '_' and '-'", s)
	}
	if star || strings.HasSuffix(name, ".") {
		return "", name, nil
	}
	return name, "", nil
}

// parseSince reads a time (RFC 3339) or a duration back from now (24h,
// 90m, 7d).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 && n <= 100000 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, errors.New("since=" + strconv.Quote(s) + ": use a time (2026-11-23T08:00:00Z) or a duration back from now (24h, 7d)")
}

func parseAuditCursor(s string) (store.AuditCursor, error) {
	at, id, ok := strings.Cut(s, "_")
	us, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return store.AuditCursor{}, errors.New("after=" + strconv.Quote(s) + ": not a cursor this manager gave (use the next field of the previous page)")
	}
	return store.AuditCursor{At: time.UnixMicro(us), ID: id}, nil
}

// auditPruneBatch bounds one pruning transaction of the audit log.
const auditPruneBatch = 5000

// pruneAudit removes the audit records older than the retention, in
// batches (a no-op when the log is kept forever).
func (m *Manager) pruneAudit(ctx context.Context, now time.Time) int {
	if m.cfg.AuditRetention < 0 {
		return 0
	}
	total := 0
	for range pruneMaxBatches {
		n, err := m.st.PruneAuditEvents(ctx, now.Add(-m.cfg.AuditRetention), auditPruneBatch)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("prune the audit log", "err", err)
			}
			break
		}
		total += n
		if n < auditPruneBatch {
			break
		}
	}
	if total > 0 {
		m.log.Info("pruned the audit log", "records", total, "retention", m.cfg.AuditRetention)
	}
	return total
}
