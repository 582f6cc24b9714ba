package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// auditLog keeps the events an Auditor records (the manager's tests
// record into real SQLite and PostgreSQL stores).
type auditLog struct {
	mu     sync.Mutex
	events []store.AuditEvent
}

func (l *auditLog) AddAuditEvent(_ context.Context, e store.AuditEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	return nil
}

// testServer serves routes with a Server whose callers are named by
// their bearer: "runner" may run tasks in org o1, "admin" everything,
// anything else is refused.
func testServer(t *testing.T, routes []Route) (*httptest.Server, *auditLog) {
	t.Helper()
	log := &auditLog{}
	now := func() time.Time { return time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC) }
	s := NewServer(Config{
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, UnauthenticatedBodies: 1,
		Authenticate: func(w http.ResponseWriter, r *http.Request) (Caller, string, bool) {
			p := access.Principal{Kind: access.KindUser, ID: "u_" + Bearer(r), Name: Bearer(r)}
			switch Bearer(r) {
			case "runner":
				return Caller{Policy: &access.Policy{Principal: p, Bindings: []access.Binding{{Role: access.RoleAccountAdmin, SubjectKind: access.KindUser, SubjectID: p.ID, Scope: access.Scope{Org: "o1"}}}}}, "acct", true
			case "admin":
				return Caller{Policy: &access.Policy{Principal: p, Bindings: []access.Binding{{Role: access.RoleAccountAdmin, SubjectKind: access.KindUser, SubjectID: p.ID}}}}, "acct", true
			}
			WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "who are you")
			return Caller{}, "", false
		},
		Audit: &Auditor{Store: log, Now: now, Log: slog.New(slog.DiscardHandler)},
		Log:   slog.New(slog.DiscardHandler),
	})
	mux := http.NewServeMux()
	s.Handle(mux, routes)
	srv := httptest.NewServer(VersionCheck(mux))
	t.Cleanup(srv.Close)
	return srv, log
}

func do(t *testing.T, srv *httptest.Server, method, path, key, body string) (int, protocol.Error) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb protocol.ErrorBody
	_ = json.Unmarshal(b, &eb)
	return resp.StatusCode, eb.Error
}

// TestServerAppliesRouteRules: a body over the route's limit is refused
// unread, an admin route refuses who has no credentials and who lacks
// the permission at the body's scope, and an audited route records each
// outcome with the caller and the scope it was checked at.
func TestServerAppliesRouteRules(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request, acct string) {
		var v struct{ Name string }
		if !DecodeBody(w, r, &v) {
			return
		}
		AuditNamed(r, v.Name)
		WriteJSON(w, http.StatusCreated, map[string]string{"account": acct, "name": v.Name})
	}
	srv, log := testServer(t, []Route{
		{Method: "POST", Pattern: "/api/v1/tasks", Body: 64, Admin: echo, Rule: Rule{Perm: access.TaskRun, Scope: AtBody}, Audit: "task.create"},
		{Method: "POST", Pattern: "/open", Body: 8, Public: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }},
	})
	for _, tc := range []struct {
		what, path, key, body string
		status                int
		code                  protocol.Code
	}{
		{"public, within its limit", "/open", "", "12345678", http.StatusNoContent, ""},
		{"public, past its limit", "/open", "", "123456789", http.StatusRequestEntityTooLarge, protocol.CodeBadRequest},
		{"no credentials", "/api/v1/tasks", "", `{"name":"a"}`, http.StatusUnauthorized, protocol.CodeUnauthenticated},
		{"in its org", "/api/v1/tasks", "runner", `{"name":"a","org":"o1"}`, http.StatusCreated, ""},
		{"in another org", "/api/v1/tasks", "runner", `{"name":"b","org":"o2"}`, http.StatusForbidden, protocol.CodeForbidden},
		{"past the limit", "/api/v1/tasks", "admin", `{"name":"` + strings.Repeat("x", 64) + `"}`, http.StatusRequestEntityTooLarge, protocol.CodeBadRequest},
		{"not JSON", "/api/v1/tasks", "admin", `{`, http.StatusBadRequest, protocol.CodeBadRequest},
	} {
		status, e := do(t, srv, "POST", tc.path, tc.key, tc.body)
		if status != tc.status || e.Code != tc.code {
			t.Errorf("%s: %d %s (%s), want %d %s", tc.what, status, e.Code, e.Message, tc.status, tc.code)
		}
	}
	type rec struct{ Principal, Resource, Org, Outcome string }
	var got []rec
	for _, e := range log.events {
		got = append(got, rec{e.Principal, e.Resource, e.Org, e.Outcome})
	}
	// A body refused for its size is refused before the route's handler
	// and its audit; a malformed one is audited as failed.
	want := []rec{
		{"runner", "a", "o1", protocol.AuditSuccess},
		{"runner", "b", "o2", protocol.AuditDenied},
		{"admin", "", "", protocol.AuditFailed},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

// TestVersionCheck refuses a client older than the manager serves and a
// header that is not a number, and serves one that sends none.
func TestVersionCheck(t *testing.T) {
	srv, _ := testServer(t, []Route{{Method: "GET", Pattern: "/ok", Public: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }}})
	for _, tc := range []struct {
		header string
		status int
	}{{"", http.StatusNoContent}, {"x", http.StatusBadRequest}, {"0", http.StatusBadRequest}} {
		req, _ := http.NewRequest("GET", srv.URL+"/ok", nil)
		if tc.header != "" {
			req.Header.Set(protocol.HeaderProtocolVersion, tc.header)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("version %q: %d, want %d", tc.header, resp.StatusCode, tc.status)
		}
	}
}

type limited struct{}

func (limited) Error() string { return "over the limit" }
func (limited) APIError() *Error {
	return NewError(http.StatusTooManyRequests, protocol.CodeDeploymentLimit, "over the limit")
}

func TestStoreAPIError(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   protocol.Code
	}{
		{store.ErrNotFound, http.StatusNotFound, protocol.CodeNotFound},
		{store.ErrConflict, http.StatusConflict, protocol.CodeConflict},
		{store.ErrStaleLease, http.StatusConflict, protocol.CodeStaleLease},
		{errors.Join(errors.New("context"), limited{}), http.StatusTooManyRequests, protocol.CodeDeploymentLimit},
		{errors.New("disk on fire"), http.StatusInternalServerError, protocol.CodeInternal},
	} {
		e := StoreAPIError(tc.err, "thing")
		if e.Status != tc.status || e.Code != tc.code {
			t.Errorf("%v: %d %s, want %d %s", tc.err, e.Status, e.Code, tc.status, tc.code)
		}
		if strings.Contains(e.Msg, "disk on fire") {
			t.Errorf("%v: the answer shows the internal error: %q", tc.err, e.Msg)
		}
	}
}

func TestRuleDoc(t *testing.T) {
	also := func(*http.Request, string) ([]Need, error) { return nil, nil }
	for _, tc := range []struct {
		rule Rule
		want string
	}{
		{Rule{Self: true}, "self"},
		{Rule{Perm: access.TaskView, List: true}, "list `task:view`"},
		{Rule{Perm: access.TaskRun, Scope: AtBody, Also: also}, "`task:run` at body (+ uses)"},
		{Rule{Perm: access.UserView, Scope: Anywhere}, "`user:view` at any scope"},
	} {
		if got := tc.rule.Doc(); got != tc.want {
			t.Errorf("Doc() = %q, want %q", got, tc.want)
		}
	}
}
