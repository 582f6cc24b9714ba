package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// The audit log. Every admin route that changes something names its
// action (Route.Audit); the Server then records one event per request
// with an Auditor: who (the principal of CallerOf(ctx), and the API key
// or sign-in session it used), when, what (action, resource type and
// name), at which scope, from which address (the socket's: the manager
// trusts no forwarding header), and how it ended (success, denied by a
// permission, failed, with the HTTP status and the error's message).
// Handlers that know more than the route (the name of a created object,
// the instances an approval reached) add it with NoteAudit. Sign-ins are
// public and record their own events. No record holds a secret, token or
// key value: names only.

// AuditStore is where an Auditor writes.
type AuditStore interface {
	AddAuditEvent(ctx context.Context, e store.AuditEvent) error
}

// Auditor records audit events.
type Auditor struct {
	Store AuditStore
	Now   func() time.Time
	Log   *slog.Logger
}

type auditCtx struct{}

// NoteAudit lets a handler complete the audit event of its request (a
// no-op for a request that is not audited).
func NoteAudit(ctx context.Context, f func(e *store.AuditEvent)) {
	if e, ok := ctx.Value(auditCtx{}).(*store.AuditEvent); ok && e != nil {
		f(e)
	}
}

// Record records e: the fields left empty are filled in from the request
// (the caller from CallerOf(ctx), the client's address from r, the time
// now). A record that cannot be stored is logged, not answered: the
// change it describes has been made.
func (a *Auditor) Record(ctx context.Context, r *http.Request, e store.AuditEvent) {
	c := CallerOf(ctx)
	if e.PrincipalKind == "" && e.Principal == "" {
		p := c.Policy.Principal
		e.PrincipalKind, e.PrincipalID, e.Principal = p.Kind, p.ID, p.Name
	}
	if e.Credential == "" {
		switch {
		case c.Key.ID != "":
			e.Credential, e.CredentialName = "api_key", c.Key.Name
		case c.Session.ID != "":
			e.Credential, e.CredentialName = "session", c.Session.ID
		}
	}
	if e.ResourceType == "" {
		e.ResourceType, _, _ = strings.Cut(e.Action, ".")
	}
	if e.Address == "" && r != nil {
		e.Address = ClientAddr(r)
	}
	if e.At.IsZero() {
		e.At = a.Now()
	}
	if e.Outcome == "" {
		e.Outcome = outcomeOf(e.Status)
	}
	e.ID = NewID("au_")
	if len(e.Detail) > 1024 {
		e.Detail = e.Detail[:1024]
	}
	// The request may have ended (a client that hung up): the record is
	// still written.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := a.Store.AddAuditEvent(wctx, e); err != nil {
		a.Log.Error("record an audit event", "account", e.AccountID, "action", e.Action, "principal", e.Principal, "err", err)
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

// request runs an audited admin request: the event is in the request's
// context for Authorize and the handler to complete, and is recorded
// once the answer is written.
func (a *Auditor) request(w http.ResponseWriter, r *http.Request, action, acct string, serve func(w http.ResponseWriter, r *http.Request)) {
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
	a.Record(r.Context(), r, *e)
}

// AuditNamed names the resource of the request's audit event (the name
// of an object the request creates, from its body).
func AuditNamed(r *http.Request, name string) {
	NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Resource = name })
}

// AuditBinding describes a binding in the request's audit event: the
// role is the resource, the subject the detail, at the binding's scope.
func AuditBinding(r *http.Request, b protocol.Binding) {
	NoteAudit(r.Context(), func(e *store.AuditEvent) {
		e.Resource, e.Org, e.Project = b.Role, b.Org, b.Project
		e.Detail = strings.TrimSpace(b.SubjectKind + " " + b.Subject)
	})
}

// auditResource sets the resource of the request's audit event, unless a
// handler named it, from the resource a rule was checked on.
func auditResource(ctx context.Context, res access.Resource) {
	NoteAudit(ctx, func(e *store.AuditEvent) {
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

func (a *auditWriter) RecordAPIError(code protocol.Code) {
	if rec, ok := a.ResponseWriter.(ErrorRecorder); ok {
		rec.RecordAPIError(code)
	}
}
