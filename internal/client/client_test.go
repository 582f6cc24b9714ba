package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// seen is what the fake manager recorded about one request.
type seen struct {
	Method      string
	Path        string // escaped
	Query       string
	Auth        string
	Account     string // protocol.HeaderAccountID
	Version     string
	ContentType string
	Body        string
}

// recorder is a fake manager that records every request and answers each
// with the same status and body.
type recorder struct {
	mu     sync.Mutex
	reqs   []seen
	status int
	body   string
}

func (f *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, seen{
		Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Auth: r.Header.Get("Authorization"), Account: r.Header.Get(protocol.HeaderAccountID),
		Version:     r.Header.Get(protocol.HeaderProtocolVersion),
		ContentType: r.Header.Get("Content-Type"), Body: string(b),
	})
	status, body := f.status, f.body
	f.mu.Unlock()
	if body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set(protocol.HeaderProtocolVersion, strconv.Itoa(protocol.Version)) // as every manager answer
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (f *recorder) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

// newFake starts a recorder on a real loopback socket and a client for it.
func newFake(t *testing.T, status int, body string) (*recorder, *Client) {
	t.Helper()
	f := &recorder{status: status, body: body}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecret("s3cret")
	return f, c
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jsonEqual compares two JSON texts by value.
func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	if got == "" && want == "" {
		return
	}
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("request body %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want body %q: %v", want, err)
	}
	if d := cmp.Diff(w, g); d != "" {
		t.Errorf("request body (-want +got):\n%s", d)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "http://127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{in: "http://127.0.0.1:8080/", want: "http://127.0.0.1:8080"},
		{in: " https://legate.example.com/pre/fix/ ", want: "https://legate.example.com/pre/fix"},
		{in: "localhost:8080", wantErr: true},
		{in: "ftp://host", wantErr: true},
		{in: "http://", wantErr: true},
		{in: "http://host/?a=b", wantErr: true},
		{in: "http://user:pw@host", wantErr: true},
		{in: "http://host:bad port", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		c, err := New(tt.in, nil)
		if tt.wantErr {
			if err == nil {
				t.Errorf("New(%q) = %q, want error", tt.in, c.BaseURL())
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%q): %v", tt.in, err)
			continue
		}
		if got := c.BaseURL(); got != tt.want {
			t.Errorf("New(%q).BaseURL() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPathPrefixKept(t *testing.T) {
	t.Parallel()
	f := &recorder{status: 200, body: `{"account_id":"a"}`}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/legate/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WhoAmI(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.requests()[0].Path; got != "/legate/api/v1/whoami" {
		t.Errorf("path = %q, want /legate/api/v1/whoami", got)
	}
}

func TestMethods(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	exit := 3
	task := protocol.Task{ID: "t_1", AccountID: "acc", Type: protocol.TaskShell, Status: protocol.StatusQueued,
		ExitCode: &exit, Selectors: []string{"linux"}, CreatedAt: ts, StartedAt: &ts}
	token := protocol.Token{Name: "ci", Value: "tok_x", CreatedAt: ts, Status: protocol.TokenActive}
	spec := protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "echo hi"},
		Selectors: []string{"linux"}, Env: map[string]string{"A": "1"}, TimeoutMS: 5000}
	reg := protocol.RegisterRequest{AccountID: "acc", Token: "tok", Name: "d1", Hostname: "h", IP: "10.0.0.1", Version: "v1"}
	regSent := reg
	regSent.ProtocolVersion = protocol.Version
	regResp := protocol.RegisterResponse{ProtocolVersion: 1, InstanceID: "i_1", Session: "sess", SessionExpiresAt: ts,
		HeartbeatIntervalMS: 10000, MissedHeartbeats: 3}
	hb := protocol.Heartbeat{Seq: 7, Running: []protocol.RunningTask{{ID: "t_1", Epoch: 2}}}
	logs := protocol.LogsRequest{Epoch: 2, Chunks: []protocol.LogChunk{{Seq: 1, Time: ts, Data: "hi\n"}}}
	res := protocol.ResultRequest{Epoch: 2, Status: protocol.StatusFailed, ExitCode: &exit, LastSeq: 1}
	scopedSpec := protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "deploy"},
		Org: "eng", Project: "web", Capabilities: []string{"https://git.internal", "tcp://db:5432", "binary:kubectl"}, Connector: "k8s"}
	org := protocol.Org{Name: "eng", CreatedAt: ts}
	project := protocol.Project{Org: "eng", Name: "web", CreatedAt: ts}
	connReq := protocol.CreateConnectorRequest{Name: "k8s", URL: "https://k8s.internal:6443", Type: "kubernetes", Selectors: []string{"east"}}
	conn := protocol.Connector{Name: "k8s", URL: "https://k8s.internal:6443", Type: "kubernetes", Selectors: []string{"east"},
		LastSuccessDelegate: "build/host-a", CreatedAt: ts}
	explanation := protocol.Explanation{TaskID: "t_1", Status: protocol.StatusNotAssigned, Summary: "no delegate can run the task",
		Delegates: []protocol.DelegateVerdict{
			{InstanceID: "i_1", Name: "build", Hostname: "host-a", Reasons: []protocol.Reason{{Rule: protocol.RuleSelectors, Message: "missing selectors: gpu"}}},
			{InstanceID: "i_2", Name: "build", Hostname: "host-b", Eligible: true, Allowlisted: true, Reasons: []protocol.Reason{}},
		}}
	details := protocol.DelegateDetails{Name: "build", Instances: []protocol.DelegateDetail{{
		Delegate:  protocol.Delegate{InstanceID: "i_1", Name: "build", Hostname: "host-a", Org: "eng", RegisteredAt: ts, OverThreshold: "cpu 93% > 80%"},
		Allowlist: []protocol.CapabilityEntry{{Criteria: "https://git.internal", ExpiresAt: ts, TimeLeftMS: 3600000}},
		Denylist:  []protocol.CapabilityEntry{{Criteria: "tcp://db:5432", ExpiresAt: ts, TimeLeftMS: 60000, Error: "connection refused"}},
	}}}
	capReport := protocol.CapabilityReport{TaskID: "t_1", Results: []protocol.CapabilityResult{
		{Criteria: "tcp://db:5432", Error: "connection refused"}, {Criteria: "binary:kubectl", OK: true}}}

	tests := []struct {
		name       string
		call       func(context.Context, *Client) (any, error)
		status     int
		resp       any // answer body; nil = none
		wantMethod string
		wantPath   string
		wantQuery  string
		wantBody   any // nil = no body
		noAuth     bool
		// wantAuth and wantAccount, when set, are the Authorization and
		// account headers the call sends instead of the session.
		wantAuth, wantAccount string
	}{
		{
			name:   "WhoAmI",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.WhoAmI(ctx) },
			status: 200, resp: protocol.WhoAmI{AccountID: "acc", Version: "v1"},
			wantMethod: "GET", wantPath: "/api/v1/whoami",
		},
		{
			name:   "Health",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.Health(ctx) },
			status: 200, wantMethod: "GET", wantPath: "/healthz", noAuth: true,
		},
		{
			name:   "CreateToken",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CreateToken(ctx, "ci") },
			status: 201, resp: token,
			wantMethod: "POST", wantPath: "/api/v1/tokens", wantBody: protocol.CreateTokenRequest{Name: "ci"},
		},
		{
			name: "CreateScopedToken at project level",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateScopedToken(ctx, protocol.CreateTokenRequest{Name: "ci", Org: "eng", Project: "web"})
			},
			status: 201, resp: protocol.Token{Name: "ci", Value: "tok_x", CreatedAt: ts, Status: protocol.TokenActive, Org: "eng", Project: "web"},
			wantMethod: "POST", wantPath: "/api/v1/tokens", wantBody: protocol.CreateTokenRequest{Name: "ci", Org: "eng", Project: "web"},
		},
		{
			name: "CreateScopedToken at org level",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateScopedToken(ctx, protocol.CreateTokenRequest{Name: "ci", Org: "eng"})
			},
			status: 201, resp: token,
			wantMethod: "POST", wantPath: "/api/v1/tokens", wantBody: map[string]string{"name": "ci", "org": "eng"},
		},
		{
			name:   "ListTokens",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListTokens(ctx) },
			status: 200, resp: protocol.TokenList{Tokens: []protocol.Token{token}},
			wantMethod: "GET", wantPath: "/api/v1/tokens",
		},
		{
			name:   "RevokeToken escapes the name",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.RevokeToken(ctx, "a/b c") },
			status: 200, resp: token,
			wantMethod: "POST", wantPath: "/api/v1/tokens/a%2Fb%20c/revoke",
		},
		{
			name:   "CreateAPIKey",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CreateAPIKey(ctx, "ci") },
			status: 201, resp: protocol.APIKey{Name: "ci", Value: "lgk_x", Status: protocol.TokenActive, CreatedAt: ts, CreatedBy: "admin", OwnerKind: protocol.OwnerAccount, OwnerID: "acc"},
			wantMethod: "POST", wantPath: "/api/v1/apikeys", wantBody: protocol.CreateAPIKeyRequest{Name: "ci"},
		},
		{
			name:   "ListAPIKeys",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListAPIKeys(ctx) },
			status: 200, resp: protocol.APIKeyList{APIKeys: []protocol.APIKey{{Name: "admin", Status: protocol.TokenActive, CreatedAt: ts,
				LastUsedAt: &ts, OwnerKind: protocol.OwnerAccount, OwnerID: "acc", Current: true}}},
			wantMethod: "GET", wantPath: "/api/v1/apikeys",
		},
		{
			name:   "RevokeAPIKey escapes the name",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.RevokeAPIKey(ctx, "a/b c", false) },
			status: 200, resp: protocol.APIKey{Name: "a/b c", Status: protocol.TokenRevoked, CreatedAt: ts, RevokedAt: &ts, OwnerKind: protocol.OwnerAccount},
			wantMethod: "POST", wantPath: "/api/v1/apikeys/a%2Fb%20c/revoke", wantBody: map[string]any{},
		},
		{
			name:   "RevokeAPIKey with force",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.RevokeAPIKey(ctx, "admin", true) },
			status: 200, resp: protocol.APIKey{Name: "admin", Status: protocol.TokenRevoked, CreatedAt: ts, RevokedAt: &ts, OwnerKind: protocol.OwnerAccount},
			wantMethod: "POST", wantPath: "/api/v1/apikeys/admin/revoke", wantBody: protocol.RevokeAPIKeyRequest{Force: true},
		},
		{
			name:   "ListDelegates",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListDelegates(ctx) },
			status: 200, resp: protocol.DelegateList{Delegates: []protocol.Delegate{{InstanceID: "i_1", Name: "d1", Tags: []string{"x"}, LastHeartbeat: &ts, RegisteredAt: ts}}},
			wantMethod: "GET", wantPath: "/api/v1/delegates",
		},
		{
			name:   "DescribeDelegate escapes the name",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.DescribeDelegate(ctx, "build 1") },
			status: 200, resp: details,
			wantMethod: "GET", wantPath: "/api/v1/delegates/build%201",
		},
		{
			name:   "CreateOrg",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CreateOrg(ctx, "eng") },
			status: 201, resp: org,
			wantMethod: "POST", wantPath: "/api/v1/orgs", wantBody: map[string]string{"name": "eng"},
		},
		{
			name:   "ListOrgs",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListOrgs(ctx) },
			status: 200, resp: protocol.OrgList{Orgs: []protocol.Org{org}},
			wantMethod: "GET", wantPath: "/api/v1/orgs",
		},
		{
			name:   "DeleteOrg",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteOrg(ctx, "eng/x") },
			status: 204, wantMethod: "DELETE", wantPath: "/api/v1/orgs/eng%2Fx",
		},
		{
			name:   "CreateProject",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CreateProject(ctx, "eng", "web") },
			status: 201, resp: project,
			wantMethod: "POST", wantPath: "/api/v1/orgs/eng/projects", wantBody: map[string]string{"name": "web"},
		},
		{
			name:   "ListProjects of one org",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListProjects(ctx, "eng & ops") },
			status: 200, resp: protocol.ProjectList{Projects: []protocol.Project{project}},
			wantMethod: "GET", wantPath: "/api/v1/projects", wantQuery: "org=eng+%26+ops",
		},
		{
			name:   "ListProjects of every org",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListProjects(ctx, "") },
			status: 200, resp: protocol.ProjectList{Projects: []protocol.Project{project}},
			wantMethod: "GET", wantPath: "/api/v1/projects",
		},
		{
			name:   "DeleteProject",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteProject(ctx, "eng", "web app") },
			status: 204, wantMethod: "DELETE", wantPath: "/api/v1/orgs/eng/projects/web%20app",
		},
		{
			name:   "CreateConnector",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CreateConnector(ctx, connReq) },
			status: 201, resp: conn,
			wantMethod: "POST", wantPath: "/api/v1/connectors", wantBody: connReq,
		},
		{
			name:   "ListConnectors",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListConnectors(ctx) },
			status: 200, resp: protocol.ConnectorList{Connectors: []protocol.Connector{conn}},
			wantMethod: "GET", wantPath: "/api/v1/connectors",
		},
		{
			name:   "GetConnector",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetConnector(ctx, "k8s") },
			status: 200, resp: conn,
			wantMethod: "GET", wantPath: "/api/v1/connectors/k8s",
		},
		{
			name:   "DeleteConnector",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteConnector(ctx, "k8s") },
			status: 204, wantMethod: "DELETE", wantPath: "/api/v1/connectors/k8s",
		},
		{
			name:   "SubmitTask with scope, capabilities and connector",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.SubmitTask(ctx, scopedSpec) },
			status: 201, resp: task,
			wantMethod: "POST", wantPath: "/api/v1/tasks", wantBody: scopedSpec,
		},
		{
			name:   "ExplainTask",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ExplainTask(ctx, "t_1") },
			status: 200, resp: explanation,
			wantMethod: "GET", wantPath: "/api/v1/tasks/t_1/explain",
		},
		{
			name:   "SubmitTask",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.SubmitTask(ctx, spec) },
			status: 201, resp: task,
			wantMethod: "POST", wantPath: "/api/v1/tasks", wantBody: spec,
		},
		{
			name:   "ListTasks with filter",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListTasks(ctx, "running", 5) },
			status: 200, resp: protocol.TaskList{Tasks: []protocol.Task{task}},
			wantMethod: "GET", wantPath: "/api/v1/tasks", wantQuery: "limit=5&status=running",
		},
		{
			name:   "ListTasks without filter",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListTasks(ctx, "", 0) },
			status: 200, resp: protocol.TaskList{},
			wantMethod: "GET", wantPath: "/api/v1/tasks",
		},
		{
			name:   "GetTask",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetTask(ctx, "t_1") },
			status: 200, resp: task,
			wantMethod: "GET", wantPath: "/api/v1/tasks/t_1",
		},
		{
			name:   "CancelTask",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CancelTask(ctx, "t_1") },
			status: 200, resp: task,
			wantMethod: "POST", wantPath: "/api/v1/tasks/t_1/cancel",
		},
		{
			name:   "Register sends its token and account, not the session, as headers",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Register(ctx, reg) },
			status: 200, resp: regResp,
			wantMethod: "POST", wantPath: "/api/v1/delegate/register", wantBody: regSent,
			wantAuth: "Bearer tok", wantAccount: "acc",
		},
		{
			name:   "RefreshSession",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.RefreshSession(ctx) },
			status: 200, resp: protocol.SessionResponse{Session: "s2", SessionExpiresAt: ts},
			wantMethod: "POST", wantPath: "/api/v1/delegate/session",
		},
		{
			name:   "Poll",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Poll(ctx, 1500*time.Millisecond) },
			status: 200, resp: protocol.EventsResponse{Events: []protocol.Event{{Kind: protocol.EventTaskAvailable, TaskID: "t_1"}}},
			wantMethod: "GET", wantPath: "/api/v1/delegate/events", wantQuery: "wait_ms=1500",
		},
		{
			name:   "Heartbeat",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Heartbeat(ctx, hb) },
			status: 200, resp: protocol.HeartbeatResponse{Seq: 7, Abort: []string{"t_9"}},
			wantMethod: "POST", wantPath: "/api/v1/delegate/heartbeat", wantBody: hb,
		},
		{
			name:   "Acquire",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Acquire(ctx, "t_1") },
			status: 200, resp: protocol.AcquireResponse{TaskID: "t_1", Epoch: 2, Spec: spec, TimeoutMS: 5000},
			wantMethod: "POST", wantPath: "/api/v1/delegate/tasks/t_1/acquire", wantBody: protocol.AcquireRequest{},
		},
		{
			name: "Started",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.Started(ctx, "t_1", protocol.StartedRequest{Epoch: 2})
			},
			status: 204, wantMethod: "POST", wantPath: "/api/v1/delegate/tasks/t_1/started", wantBody: protocol.StartedRequest{Epoch: 2},
		},
		{
			name:   "SendLogs",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.SendLogs(ctx, "t_1", logs) },
			status: 204, wantMethod: "POST", wantPath: "/api/v1/delegate/tasks/t_1/logs", wantBody: logs,
		},
		{
			name:   "Result",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Result(ctx, "t_1", res) },
			status: 200, resp: task,
			wantMethod: "POST", wantPath: "/api/v1/delegate/tasks/t_1/result", wantBody: res,
		},
		{
			name:   "ReportCapabilities",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.ReportCapabilities(ctx, capReport) },
			status: 204, wantMethod: "POST", wantPath: "/api/v1/delegate/capabilities", wantBody: capReport,
		},
		{
			name: "ReportCapabilities sends an empty list, not null",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.ReportCapabilities(ctx, protocol.CapabilityReport{})
			},
			status: 204, wantMethod: "POST", wantPath: "/api/v1/delegate/capabilities", wantBody: map[string]any{"results": []any{}},
		},
		{
			name:   "Deregister",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.Deregister(ctx) },
			status: 204, wantMethod: "POST", wantPath: "/api/v1/delegate/deregister",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := ""
			if tt.resp != nil {
				body = mustJSON(t, tt.resp)
			}
			f, c := newFake(t, tt.status, body)
			got, err := tt.call(t.Context(), c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if tt.resp != nil {
				if d := cmp.Diff(tt.resp, got); d != "" {
					t.Errorf("answer (-want +got):\n%s", d)
				}
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tt.wantMethod || r.Path != tt.wantPath || r.Query != tt.wantQuery {
				t.Errorf("request = %s %s?%s, want %s %s?%s", r.Method, r.Path, r.Query, tt.wantMethod, tt.wantPath, tt.wantQuery)
			}
			if want := strconv.Itoa(protocol.Version); r.Version != want {
				t.Errorf("%s = %q, want %s", protocol.HeaderProtocolVersion, r.Version, want)
			}
			wantAuth := "Bearer s3cret"
			if tt.noAuth {
				wantAuth = ""
			}
			if tt.wantAuth != "" {
				wantAuth = tt.wantAuth
			}
			if r.Auth != wantAuth {
				t.Errorf("Authorization = %q, want %q", r.Auth, wantAuth)
			}
			if r.Account != tt.wantAccount {
				t.Errorf("%s = %q, want %q", protocol.HeaderAccountID, r.Account, tt.wantAccount)
			}
			wantBody := ""
			if tt.wantBody != nil {
				wantBody = mustJSON(t, tt.wantBody)
				if r.ContentType != "application/json" {
					t.Errorf("Content-Type = %q, want application/json", r.ContentType)
				}
			}
			jsonEqual(t, r.Body, wantBody)
		})
	}
}

func TestNoSecretNoAuthorization(t *testing.T) {
	t.Parallel()
	f, c := newFake(t, 200, `{}`)
	c.SetSecret("")
	if _, err := c.WhoAmI(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.requests()[0].Auth; got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
}

func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		body     string
		wantCode protocol.Code
		wantMsg  string
	}{
		{"protocol error", 409, `{"error":{"code":"conflict","message":"token ci already exists"}}`, protocol.CodeConflict, "token ci already exists"},
		{"unauthenticated", 401, `{"error":{"code":"unauthenticated","message":"bad key"}}`, protocol.CodeUnauthenticated, "bad key"},
		{"stale lease", 409, `{"error":{"code":"stale_lease","message":"stale"}}`, protocol.CodeStaleLease, "stale"},
		{"HTML of the manager", 502, `<html>bad gateway</html>`, protocol.CodeUnavailable, "<html>bad gateway</html>"},
		{"plain text 404", 404, "404 page not found\n", protocol.CodeBadRequest, "404 page not found"},
		{"empty 500", 500, "", protocol.CodeUnavailable, "HTTP 500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, c := newFake(t, tt.status, tt.body)
			_, err := c.GetTask(t.Context(), "t_1")
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *protocol.Error", err, err)
			}
			want := &protocol.Error{Code: tt.wantCode, Message: tt.wantMsg, Status: tt.status}
			if d := cmp.Diff(want, pe); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
			if !IsCode(err, tt.wantCode) {
				t.Errorf("IsCode(%v, %s) = false", err, tt.wantCode)
			}
			if !strings.Contains(err.Error(), "get task") {
				t.Errorf("error %q does not say what failed", err)
			}
		})
	}
}

func TestNetworkError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := New(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListTasks(t.Context(), "", 0)
	if err == nil {
		t.Fatal("no error from a closed server")
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		t.Errorf("network error %v decoded as a protocol error", err)
	}
	if !strings.Contains(err.Error(), "list tasks") {
		t.Errorf("error %q does not say what failed", err)
	}
}

func TestBadJSONAnswer(t *testing.T) {
	t.Parallel()
	_, c := newFake(t, 200, `{"id": 12`)
	if _, err := c.GetTask(t.Context(), "t_1"); err == nil || !strings.Contains(err.Error(), "decode") {
		t.Errorf("err = %v, want a decode error", err)
	}
}

func TestAnswerSizeLimit(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id":"`)
		_, _ = io.Copy(w, io.LimitReader(zeros{}, MaxBodyBytes))
		_, _ = io.WriteString(w, `"}`)
	}))
	t.Cleanup(srv.Close)
	c, _ := New(srv.URL, nil)
	if _, err := c.GetTask(t.Context(), "t_1"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("err = %v, want a size error", err)
	}
}

// zeros is an endless reader of '0'.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

func TestEmptyIDRefused(t *testing.T) {
	t.Parallel()
	f, c := newFake(t, 200, `{}`)
	ctx := t.Context()
	errs := []error{}
	_, err := c.GetTask(ctx, "")
	errs = append(errs, err)
	_, err = c.Acquire(ctx, "")
	errs = append(errs, err)
	errs = append(errs, c.Started(ctx, "", protocol.StartedRequest{}))
	_, err = c.RevokeToken(ctx, "")
	errs = append(errs, err)
	_, err = c.RevokeAPIKey(ctx, "", true)
	errs = append(errs, err)
	_, err = c.CreateScopedToken(ctx, protocol.CreateTokenRequest{Name: "ci", Project: "web"})
	errs = append(errs, err)
	_, err = c.CreateOrg(ctx, "")
	errs = append(errs, err)
	errs = append(errs, c.DeleteOrg(ctx, ""))
	_, err = c.CreateProject(ctx, "", "web")
	errs = append(errs, err)
	_, err = c.CreateProject(ctx, "eng", "")
	errs = append(errs, err)
	errs = append(errs, c.DeleteProject(ctx, "", "web"))
	errs = append(errs, c.DeleteProject(ctx, "eng", ""))
	_, err = c.CreateConnector(ctx, protocol.CreateConnectorRequest{URL: "https://x"})
	errs = append(errs, err)
	_, err = c.GetConnector(ctx, "")
	errs = append(errs, err)
	errs = append(errs, c.DeleteConnector(ctx, ""))
	_, err = c.ExplainTask(ctx, "")
	errs = append(errs, err)
	_, err = c.DescribeDelegate(ctx, "")
	errs = append(errs, err)
	_, err = c.UpdateRole(ctx, "", protocol.UpdateRoleRequest{})
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Errorf("call %d with an empty ID: no error", i)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent, want 0", n)
	}
}

// TestPollOutlastsRequestTimeout checks that a long poll may take longer than
// an ordinary call's timeout, while an ordinary call may not.
func TestPollOutlastsRequestTimeout(t *testing.T) {
	t.Parallel()
	const wait = time.Second
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `{"events":[]}`)
	}))
	t.Cleanup(srv.Close)
	c, _ := New(srv.URL, nil)
	c.timeout = 700 * time.Millisecond
	if _, err := c.Poll(t.Context(), wait); err != nil {
		t.Errorf("Poll: %v", err)
	}
	if _, err := c.GetTask(t.Context(), "t_1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GetTask on a slow manager: err = %v, want deadline exceeded", err)
	}
}

func TestSetSecretConcurrent(t *testing.T) {
	t.Parallel()
	f, c := newFake(t, 204, "")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 5 {
				if i%2 == 0 {
					c.SetSecret("s" + string(rune('a'+j)))
				} else if err := c.Deregister(t.Context()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, r := range f.requests() {
		if !strings.HasPrefix(r.Auth, "Bearer s") {
			t.Errorf("Authorization = %q", r.Auth)
		}
	}
}

// TestDeleteErrors checks that the manager's refusals of a delete come back
// as protocol errors the caller can tell apart.
func TestDeleteErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		call   func(context.Context, *Client) error
		want   protocol.Code
	}{
		{"org in use", 409, `{"error":{"code":"conflict","message":"org eng has 2 projects"}}`,
			func(ctx context.Context, c *Client) error { return c.DeleteOrg(ctx, "eng") }, protocol.CodeConflict},
		{"unknown org", 404, `{"error":{"code":"not_found","message":"org eng not found"}}`,
			func(ctx context.Context, c *Client) error { return c.DeleteOrg(ctx, "eng") }, protocol.CodeNotFound},
		{"project of an unknown org", 404, `{"error":{"code":"not_found","message":"org eng not found"}}`,
			func(ctx context.Context, c *Client) error { _, err := c.CreateProject(ctx, "eng", "web"); return err }, protocol.CodeNotFound},
		{"unknown delegate", 404, `{"error":{"code":"not_found","message":"no delegate named gpu"}}`,
			func(ctx context.Context, c *Client) error { _, err := c.DescribeDelegate(ctx, "gpu"); return err }, protocol.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, c := newFake(t, tt.status, tt.body)
			if err := tt.call(t.Context(), c); !IsCode(err, tt.want) {
				t.Errorf("err = %v, want code %s", err, tt.want)
			}
		})
	}
}
