package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

// testNow is the fixed clock of the tests.
var testNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const testKey = "adm_key"

// testBuild is the build information of the tests' CLI.
var testBuild = BuildInfo{Version: "v1.2.3", Commit: "0123456789abcdef", Modified: true, GoVersion: "go1.26.0", Platform: "linux/amd64"}

// outcomeSpec says how the fake manager runs submitted tasks.
type outcomeSpec struct {
	chunks   []string
	status   string
	exitCode *int
	errText  string
	// block makes the log stream hang after the chunks until the client
	// goes away (for Ctrl-C tests).
	block bool
}

// fakeManager implements the admin endpoints the CLI uses, on a real
// loopback socket.
type fakeManager struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	outcome   outcomeSpec
	tokens    []protocol.Token
	delegates []protocol.Delegate
	tasks     map[string]protocol.Task
	specs     []protocol.TaskSpec
	cancels   []string
	listQuery string
	// delegateQueries are the raw queries of delegate listings.
	delegateQueries []string

	orgs         []protocol.Org
	projects     []protocol.Project
	projectQuery []string // raw queries of project listings
	tokenReqs    []protocol.CreateTokenRequest
	connectors   []protocol.Connector
	connReqs     []protocol.CreateConnectorRequest
	explanations map[string]protocol.Explanation
	explainCalls int
	details      map[string]protocol.DelegateDetails
	confs        fakeConfigurations
	apiKeys      []protocol.APIKey
	revokeReqs   []protocol.RevokeAPIKeyRequest
	keyReqs      []protocol.CreateAPIKeyRequest
}

func newFakeManager(t *testing.T, o outcomeSpec) *fakeManager {
	t.Helper()
	m := &fakeManager{t: t, outcome: o, tasks: map[string]protocol.Task{},
		explanations: map[string]protocol.Explanation{}, details: map[string]protocol.DelegateDetails{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/tokens", m.createToken)
	mux.HandleFunc("GET /api/v1/tokens", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		writeJSON(w, 200, protocol.TokenList{Tokens: m.tokens})
	})
	mux.HandleFunc("POST /api/v1/tokens/{name}/revoke", m.revokeToken)
	mux.HandleFunc("GET /api/v1/delegates", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.delegateQueries = append(m.delegateQueries, r.URL.RawQuery)
		all := r.URL.Query().Get(protocol.QueryAll) == "true"
		list := protocol.DelegateList{Delegates: []protocol.Delegate{}}
		if r.URL.Query().Get(protocol.QueryLimit) != "" {
			list.Next = "east"
		}
		for _, d := range m.delegates {
			if all || d.Status != protocol.DelegateDeregistered {
				list.Delegates = append(list.Delegates, d)
			}
		}
		if m.delegates == nil {
			list.Delegates = nil
		}
		writeJSON(w, 200, list)
	})
	mux.HandleFunc("GET /api/v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, protocol.WhoAmI{AccountID: "acc", Version: "v9.9.9"})
	})
	mux.HandleFunc("GET /api/v1/users", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, protocol.UserList{Users: []protocol.User{
			{Name: "admin", Kind: protocol.PrincipalUser}, {Name: "alice", Kind: protocol.PrincipalUser},
			{Name: "gone", Kind: protocol.PrincipalUser, Disabled: true}, {Name: "ci-bot", Kind: protocol.PrincipalServiceAccount}}})
	})
	mux.HandleFunc("DELETE /api/v1/delegates/{name}", m.deleteDelegate)
	mux.HandleFunc("POST /api/v1/tasks", m.submit)
	mux.HandleFunc("GET /api/v1/tasks", m.list)
	mux.HandleFunc("GET /api/v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		if t, ok := m.task(w, r); ok {
			writeJSON(w, 200, t)
		}
	})
	mux.HandleFunc("POST /api/v1/tasks/{id}/cancel", m.cancel)
	mux.HandleFunc("GET /api/v1/tasks/{id}/explain", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.explainCalls++
		e, ok := m.explanations[r.PathValue("id")]
		if !ok {
			writeError(w, 404, protocol.CodeNotFound, "task "+r.PathValue("id")+" not found")
			return
		}
		writeJSON(w, 200, e)
	})
	mux.HandleFunc("GET /api/v1/delegates/{name}", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		d, ok := m.details[r.PathValue("name")]
		if !ok {
			writeError(w, 404, protocol.CodeNotFound, "no delegate named "+r.PathValue("name"))
			return
		}
		writeJSON(w, 200, d)
	})
	m.scopeRoutes(mux)
	m.connectorRoutes(mux)
	m.configurationRoutes(mux)
	m.apiKeyRoutes(mux)
	mux.HandleFunc("GET /api/v1/tasks/{id}/logs", m.logs)
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(protocol.HeaderProtocolVersion) != strconv.Itoa(protocol.Version) {
			writeError(w, 400, protocol.CodeVersion, "no protocol version")
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			writeError(w, 401, protocol.CodeUnauthenticated, "invalid API key")
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code protocol.Code, msg string) {
	writeJSON(w, status, protocol.ErrorBody{Error: protocol.Error{Code: code, Message: msg}})
}

func (m *fakeManager) createToken(w http.ResponseWriter, r *http.Request) {
	var req protocol.CreateTokenRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name == "" {
		writeError(w, 400, protocol.CodeBadRequest, "name required")
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.tokens {
		if t.Name == req.Name {
			writeError(w, 409, protocol.CodeConflict, "token "+req.Name+" already exists")
			return
		}
	}
	m.tokenReqs = append(m.tokenReqs, req)
	tok := protocol.Token{Name: req.Name, CreatedAt: testNow.Add(-time.Minute), Status: protocol.TokenActive,
		Org: req.Org, Project: req.Project, InitSecrets: req.InitSecrets}
	m.tokens = append(m.tokens, tok)
	tok.Value = "tok_secret_" + req.Name
	writeJSON(w, 201, tok)
}

// deleteDelegate removes the delegates of a name, refusing connected ones
// as the manager does.
func (m *fakeManager) deleteDelegate(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := r.PathValue("name")
	out := protocol.DeletedDelegate{Name: name}
	var keep []protocol.Delegate
	for _, d := range m.delegates {
		if d.Name != name {
			keep = append(keep, d)
			continue
		}
		if d.Status == protocol.DelegateConnected {
			writeError(w, 409, protocol.CodeConflict, "delegate "+strconv.Quote(name)+" has 1 connected instance ("+d.Hostname+"): stop it first")
			return
		}
		out.Instances = append(out.Instances, d)
	}
	if len(out.Instances) == 0 {
		writeError(w, 404, protocol.CodeNotFound, "no delegate named "+strconv.Quote(name)+" in this account")
		return
	}
	m.delegates = keep
	writeJSON(w, 200, out)
}

func (m *fakeManager) revokeToken(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, t := range m.tokens {
		if t.Name == r.PathValue("name") {
			at := testNow
			m.tokens[i].RevokedAt, m.tokens[i].Status = &at, protocol.TokenRevoked
			writeJSON(w, 200, m.tokens[i])
			return
		}
	}
	writeError(w, 404, protocol.CodeNotFound, "token not found")
}

// apiKeyRoutes serves API keys; the key of the tests is "admin".
func (m *fakeManager) apiKeyRoutes(mux *http.ServeMux) {
	m.apiKeys = []protocol.APIKey{{Name: "admin", Status: protocol.TokenActive, CreatedAt: testNow.Add(-time.Hour),
		LastUsedAt: &testNow, OwnerKind: protocol.PrincipalUser, OwnerID: "u_acc", Owner: "admin", Current: true}}
	mux.HandleFunc("POST /api/v1/apikeys", func(w http.ResponseWriter, r *http.Request) {
		var req protocol.CreateAPIKeyRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name == "" {
			writeError(w, 400, protocol.CodeBadRequest, "name required")
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, k := range m.apiKeys {
			if k.Name == req.Name {
				writeError(w, 409, protocol.CodeConflict, "an API key named "+strconv.Quote(req.Name)+" already exists")
				return
			}
		}
		m.keyReqs = append(m.keyReqs, req)
		k := protocol.APIKey{Name: req.Name, Status: protocol.TokenActive, CreatedAt: testNow.Add(-time.Minute), CreatedBy: "admin",
			OwnerKind: protocol.PrincipalUser, OwnerID: "u_acc", Owner: "admin"}
		switch req.Owner {
		case "", "admin":
		case "ci-bot":
			k.OwnerKind, k.OwnerID, k.Owner = protocol.PrincipalServiceAccount, "u_ci", "ci-bot"
		default:
			writeError(w, 404, protocol.CodeNotFound, "user "+strconv.Quote(req.Owner)+" not found")
			return
		}
		m.apiKeys = append(m.apiKeys, k)
		k.Value = "lgk_secret_" + req.Name
		writeJSON(w, 201, k)
	})
	mux.HandleFunc("GET /api/v1/apikeys", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		writeJSON(w, 200, protocol.APIKeyList{APIKeys: m.apiKeys})
	})
	mux.HandleFunc("POST /api/v1/apikeys/{name}/revoke", func(w http.ResponseWriter, r *http.Request) {
		var req protocol.RevokeAPIKeyRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeError(w, 400, protocol.CodeBadRequest, err.Error())
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.revokeReqs = append(m.revokeReqs, req)
		for i, k := range m.apiKeys {
			if k.Name != r.PathValue("name") {
				continue
			}
			if k.Current && !req.Force {
				writeError(w, 409, protocol.CodeConflict, "API key \"admin\" is the key this request uses and the account's last active key: ... or revoke anyway with --force")
				return
			}
			at := testNow
			m.apiKeys[i].Status, m.apiKeys[i].RevokedAt, m.apiKeys[i].RevokedBy = protocol.TokenRevoked, &at, "admin"
			writeJSON(w, 200, m.apiKeys[i])
			return
		}
		writeError(w, 404, protocol.CodeNotFound, "API key "+strconv.Quote(r.PathValue("name"))+" not found")
	})
}

func (m *fakeManager) submit(w http.ResponseWriter, r *http.Request) {
	var spec protocol.TaskSpec
	if err := json.NewDecoder(r.Body).Decode(&spec); err != nil {
		writeError(w, 400, protocol.CodeBadRequest, err.Error())
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.specs = append(m.specs, spec)
	id := fmt.Sprintf("t_%d", len(m.specs))
	t := protocol.Task{ID: id, Type: spec.Type, Status: protocol.StatusQueued, Shell: spec.Shell, HTTP: spec.HTTP,
		Selectors: spec.Selectors, CreatedAt: testNow, Org: spec.Org, Project: spec.Project,
		Capabilities: spec.Capabilities, Connector: spec.Connector, Env: spec.Env,
		QueueTimeoutMS: spec.QueueTimeoutMS}
	m.tasks[id] = t
	writeJSON(w, 201, t)
}

func (m *fakeManager) list(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listQuery = r.URL.RawQuery
	var out protocol.TaskList
	for i := range len(m.tasks) {
		t := m.tasks[fmt.Sprintf("t_%d", len(m.tasks)-i)]
		if s := r.URL.Query().Get("status"); s == "" || s == t.Status {
			out.Tasks = append(out.Tasks, t)
		}
	}
	writeJSON(w, 200, out)
}

func (m *fakeManager) task(w http.ResponseWriter, r *http.Request) (protocol.Task, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tasks[r.PathValue("id")]
	if !ok {
		writeError(w, 404, protocol.CodeNotFound, "task "+r.PathValue("id")+" not found")
	}
	return t, ok
}

func (m *fakeManager) cancel(w http.ResponseWriter, r *http.Request) {
	t, ok := m.task(w, r)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cancels = append(m.cancels, t.ID)
	t.Status = protocol.StatusCancelled
	m.tasks[t.ID] = t
	writeJSON(w, 200, t)
}

// logs streams the outcome's chunks one by one, then the finished task.
func (m *fakeManager) logs(w http.ResponseWriter, r *http.Request) {
	t, ok := m.task(w, r)
	if !ok {
		return
	}
	m.mu.Lock()
	o := m.outcome
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for i, data := range o.chunks {
		_ = enc.Encode(protocol.LogStreamLine{Chunk: &protocol.LogChunk{Seq: int64(i + 1), Attempt: 1, Time: testNow, Data: data}})
		_, _ = io.WriteString(w, "\n") // keep-alive
		w.(http.Flusher).Flush()
	}
	if o.block {
		<-r.Context().Done()
		return
	}
	start, end := testNow.Add(time.Second), testNow.Add(2500*time.Millisecond)
	t.Status, t.ExitCode, t.Error = o.status, o.exitCode, o.errText
	t.StartedAt, t.FinishedAt = &start, &end
	t.DelegateName, t.DelegateHostname = "d1", "host1"
	m.mu.Lock()
	m.tasks[t.ID] = t
	m.mu.Unlock()
	_ = enc.Encode(protocol.LogStreamLine{Task: &t})
}

// scopeRoutes serves orgs and projects.
func (m *fakeManager) scopeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/orgs", func(w http.ResponseWriter, r *http.Request) {
		var req protocol.CreateOrgRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name == "" {
			writeError(w, 400, protocol.CodeBadRequest, "name required")
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, o := range m.orgs {
			if o.Name == req.Name {
				writeError(w, 409, protocol.CodeConflict, "org "+req.Name+" already exists")
				return
			}
		}
		o := protocol.Org{Name: req.Name, CreatedAt: testNow.Add(-2 * time.Minute)}
		m.orgs = append(m.orgs, o)
		writeJSON(w, 201, o)
	})
	mux.HandleFunc("GET /api/v1/orgs", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		writeJSON(w, 200, protocol.OrgList{Orgs: m.orgs})
	})
	mux.HandleFunc("DELETE /api/v1/orgs/{org}", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		name := r.PathValue("org")
		for _, p := range m.projects {
			if p.Org == name {
				writeError(w, 409, protocol.CodeConflict, "org "+name+" is in use by project "+p.Name)
				return
			}
		}
		for i, o := range m.orgs {
			if o.Name == name {
				m.orgs = append(m.orgs[:i], m.orgs[i+1:]...)
				w.WriteHeader(204)
				return
			}
		}
		writeError(w, 404, protocol.CodeNotFound, "org "+name+" not found")
	})
	mux.HandleFunc("POST /api/v1/orgs/{org}/projects", func(w http.ResponseWriter, r *http.Request) {
		var req protocol.CreateProjectRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name == "" {
			writeError(w, 400, protocol.CodeBadRequest, "name required")
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		org := r.PathValue("org")
		if !m.hasOrg(org) {
			writeError(w, 404, protocol.CodeNotFound, "org "+org+" not found")
			return
		}
		p := protocol.Project{Org: org, Name: req.Name, CreatedAt: testNow.Add(-time.Minute)}
		m.projects = append(m.projects, p)
		writeJSON(w, 201, p)
	})
	mux.HandleFunc("GET /api/v1/projects", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.projectQuery = append(m.projectQuery, r.URL.RawQuery)
		var out protocol.ProjectList
		for _, p := range m.projects {
			if org := r.URL.Query().Get("org"); org == "" || org == p.Org {
				out.Projects = append(out.Projects, p)
			}
		}
		writeJSON(w, 200, out)
	})
	mux.HandleFunc("DELETE /api/v1/orgs/{org}/projects/{name}", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, p := range m.projects {
			if p.Org == r.PathValue("org") && p.Name == r.PathValue("name") {
				m.projects = append(m.projects[:i], m.projects[i+1:]...)
				w.WriteHeader(204)
				return
			}
		}
		writeError(w, 404, protocol.CodeNotFound, "project "+r.PathValue("org")+"/"+r.PathValue("name")+" not found")
	})
}

func (m *fakeManager) hasOrg(name string) bool {
	for _, o := range m.orgs {
		if o.Name == name {
			return true
		}
	}
	return false
}

// connectorRoutes serves connectors.
func (m *fakeManager) connectorRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/connectors", func(w http.ResponseWriter, r *http.Request) {
		var req protocol.CreateConnectorRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name == "" || req.URL == "" {
			writeError(w, 400, protocol.CodeBadRequest, "name and url required")
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.connReqs = append(m.connReqs, req)
		sel := req.Selectors
		if sel == nil {
			sel = []string{}
		}
		c := protocol.Connector{Name: req.Name, URL: req.URL, Type: req.Type, Selectors: sel, CAPEM: req.CAPEM, TokenSecret: req.TokenSecret,
			Username: req.Username, PasswordSecret: req.PasswordSecret, CreatedAt: testNow}
		m.connectors = append(m.connectors, c)
		writeJSON(w, 201, c)
	})
	mux.HandleFunc("GET /api/v1/connectors", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		writeJSON(w, 200, protocol.ConnectorList{Connectors: m.connectors})
	})
	mux.HandleFunc("GET /api/v1/connectors/{name}", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, c := range m.connectors {
			if c.Name == r.PathValue("name") {
				writeJSON(w, 200, c)
				return
			}
		}
		writeError(w, 404, protocol.CodeNotFound, "connector "+r.PathValue("name")+" not found")
	})
	mux.HandleFunc("DELETE /api/v1/connectors/{name}", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, c := range m.connectors {
			if c.Name == r.PathValue("name") {
				m.connectors = append(m.connectors[:i], m.connectors[i+1:]...)
				w.WriteHeader(204)
				return
			}
		}
		writeError(w, 404, protocol.CodeNotFound, "connector "+r.PathValue("name")+" not found")
	})
}

func (m *fakeManager) submitted() []protocol.TaskSpec {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]protocol.TaskSpec(nil), m.specs...)
}

// env returns an environment that points the CLI at the fake manager.
func (m *fakeManager) env() map[string]string {
	return map[string]string{EnvURL: m.srv.URL, EnvAPIKey: testKey}
}

// result is what one CLI run produced.
type result struct {
	stdout, stderr string
	err            error
}

// runCLI runs the CLI in-process with the given environment and arguments.
func runCLI(ctx context.Context, env map[string]string, stdin string, args ...string) result {
	return runCLIOut(ctx, env, stdin, newNotifyBuffer(), args...)
}

// runCLIOut is runCLI with a given stdout.
func runCLIOut(ctx context.Context, env map[string]string, stdin string, out *notifyBuffer, args ...string) result {
	return runCLIWith(ctx, env, stdin, out, newNotifyBuffer(), nil, args...)
}

// runCLIWith is runCLI with a given stdout and stderr (which the test may
// read while the command runs) and, when mod is not nil, a change to the
// app's settings.
func runCLIWith(ctx context.Context, env map[string]string, stdin string, out, errOut *notifyBuffer, mod func(*app), args ...string) result {
	root := &cobra.Command{Use: "legate", SilenceUsage: true, SilenceErrors: true}
	a := &app{
		getenv: func(k string) string { return env[k] },
		now:    func() time.Time { return testNow },
		loc:    time.UTC,
		build:  testBuild,
	}
	if mod != nil {
		mod(a)
	}
	addCommands(root, a)
	Finish(root)
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetIn(bytes.NewBufferString(stdin))
	err := root.ExecuteContext(ctx)
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}

func intp(i int) *int { return &i }

// notifyBuffer is a concurrency-safe buffer that tells when it was first
// written to.
type notifyBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	wrote chan struct{}
}

func newNotifyBuffer() *notifyBuffer { return &notifyBuffer{wrote: make(chan struct{})} }

func (b *notifyBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.once.Do(func() { close(b.wrote) })
	return b.buf.Write(p)
}

func (b *notifyBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
