package delegate_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/delegate"
	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/manager"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
	"github.com/legate-dev/legate/internal/store"
)

// waitLong bounds every wait of these tests; it is a safety net against
// hangs, never an assertion about speed.
const waitLong = 45 * time.Second

// logBuffer collects log lines from the manager or an agent; they are
// printed when the test fails.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the log lines that contain every one of parts.
func (l *logBuffer) lines(parts ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func newLogger(t *testing.T, what string) (*slog.Logger, *logBuffer) {
	t.Helper()
	buf := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- %s log ----\n%s", what, buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// testManager is a real manager on a loopback port over a real SQLite file.
// It can be stopped and started again on the same address and data.
type testManager struct {
	t     *testing.T
	cfg   manager.Config
	dir   string
	addr  string
	url   string
	admin identity.Admin
	api   *client.Client // the admin API, with the bootstrap API key
	log   *logBuffer

	// keys seal the database's secrets; a restart keeps them, as a
	// manager's key file does.
	keys *seal.Ring

	st     *store.Store
	cancel context.CancelFunc
	done   chan error
}

// testConfig is the manager configuration of these tests. Its heartbeat
// interval is long enough that no test depends on a heartbeat arriving
// within a few hundred milliseconds on a loaded machine: the liveness
// window (and a task's lease) is three intervals, 15s, and a delegate or
// manager that stalls for less is never declared lost. Nothing in these
// tests waits for a periodic heartbeat (a delegate heartbeats at once when
// it drains or configures); a test that needs a delegate declared lost
// sets a shorter interval and expects the loss. Queued tasks are re-offered
// promptly all the same (SweepInterval).
func testConfig() manager.Config {
	return manager.Config{HeartbeatInterval: 5 * time.Second, SweepInterval: 100 * time.Millisecond}
}

func startManager(t *testing.T, cfg manager.Config) *testManager {
	t.Helper()
	logger, buf := newLogger(t, "manager")
	cfg.Logger = logger
	tm := &testManager{t: t, cfg: cfg, dir: t.TempDir(), log: buf}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tm.addr = ln.Addr().String()
	tm.url = "http://" + tm.addr
	tm.serve(ln)
	t.Cleanup(tm.stop)
	return tm
}

// serve opens the store and runs a manager on ln.
func (tm *testManager) serve(ln net.Listener) {
	t := tm.t
	t.Helper()
	ctx := context.Background()
	if tm.keys == nil {
		keys, err := seal.NewRing(seal.NewKey())
		if err != nil {
			t.Fatal(err)
		}
		tm.keys = keys
	}
	st, err := store.OpenWith(ctx, filepath.Join(tm.dir, "legate.db"), store.Options{Keys: tm.keys})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	admin, err := identity.Bootstrap(ctx, st, tm.dir, tm.url, time.Now())
	if err != nil {
		ln.Close()
		st.Close()
		t.Fatal(err)
	}
	if tm.admin.AccountID != "" && (admin.AccountID != tm.admin.AccountID || admin.APIKey != tm.admin.APIKey) {
		t.Errorf("restart changed the admin credentials: %+v, was %+v", admin, tm.admin)
	}
	tm.admin = admin
	m, err := manager.New(ctx, st, tm.cfg)
	if err != nil {
		ln.Close()
		st.Close()
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx, ln) }()
	tm.st, tm.cancel, tm.done = st, cancel, done
	if tm.api == nil {
		c, err := client.New(tm.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.SetSecret(admin.APIKey)
		tm.api = c
	}
}

// stop shuts the manager down and closes its store; it is a no-op when the
// manager is not running.
func (tm *testManager) stop() {
	t := tm.t
	t.Helper()
	if tm.cancel == nil {
		return
	}
	tm.cancel()
	select {
	case err := <-tm.done:
		if err != nil {
			t.Errorf("manager Run: %v", err)
		}
	case <-time.After(waitLong):
		t.Errorf("manager did not stop within %s", waitLong)
	}
	if err := tm.st.Close(); err != nil {
		t.Errorf("close store: %v", err)
	}
	tm.cancel, tm.st = nil, nil
}

// restart starts a new manager on the same address over the same data.
func (tm *testManager) restart() {
	t := tm.t
	t.Helper()
	if tm.cancel != nil {
		t.Fatal("restart of a running manager")
	}
	var ln net.Listener
	var err error
	// The old listener is closed, so the port is normally free at once;
	// retry briefly in case the kernel has not released it yet.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err = net.Listen("tcp", tm.addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen again on %s: %v", tm.addr, err)
	}
	tm.serve(ln)
}

func (tm *testManager) token(t *testing.T, name string) protocol.Token {
	t.Helper()
	tok, err := tm.api.CreateToken(context.Background(), name)
	if err != nil {
		t.Fatalf("create token %s: %v", name, err)
	}
	return tok
}

func (tm *testManager) submit(t *testing.T, spec protocol.TaskSpec) protocol.Task {
	t.Helper()
	if spec.Type == "" {
		spec.Type = protocol.TaskShell
	}
	task, err := tm.api.SubmitTask(context.Background(), spec)
	if err != nil {
		t.Fatalf("submit task: %v", err)
	}
	return task
}

func (tm *testManager) submitScript(t *testing.T, script string) protocol.Task {
	t.Helper()
	return tm.submit(t, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: script}})
}

func (tm *testManager) task(t *testing.T, id string) protocol.Task {
	t.Helper()
	task, err := tm.api.GetTask(context.Background(), id)
	if err != nil {
		t.Fatalf("get task %s: %v", id, err)
	}
	return task
}

// waitTask waits until the task reaches status and returns it. It fails at
// once if the task ends in another terminal status.
func (tm *testManager) waitTask(t *testing.T, id, status string) protocol.Task {
	t.Helper()
	var last protocol.Task
	eventually(t, "task "+id+" "+status, func() (bool, string) {
		task, err := tm.api.GetTask(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		last = task
		if task.Status != status && protocol.Terminal(task.Status) {
			t.Fatalf("task %s ended %s (error %q), want %s", id, task.Status, task.Error, status)
		}
		return task.Status == status, fmt.Sprintf("status %s", task.Status)
	})
	return last
}

// delegateByHost returns the listing of the delegate with that hostname
// (deregistered ones included).
func (tm *testManager) delegateByHost(t *testing.T, hostname string) (protocol.Delegate, bool) {
	t.Helper()
	list, err := tm.api.ListAllDelegates(context.Background())
	if err != nil {
		t.Fatalf("list delegates: %v", err)
	}
	for _, d := range list.Delegates {
		if d.Hostname == hostname {
			return d, true
		}
	}
	return protocol.Delegate{}, false
}

// waitDelegate waits until the delegate with that hostname is listed and
// cond holds for it.
func (tm *testManager) waitDelegate(t *testing.T, hostname, what string, cond func(protocol.Delegate) bool) protocol.Delegate {
	t.Helper()
	var d protocol.Delegate
	eventually(t, "delegate "+hostname+" "+what, func() (bool, string) {
		var ok bool
		d, ok = tm.delegateByHost(t, hostname)
		if !ok {
			return false, "not listed"
		}
		return cond(d), fmt.Sprintf("%+v", d)
	})
	return d
}

func (tm *testManager) waitConnected(t *testing.T, hostname, connection string) protocol.Delegate {
	t.Helper()
	return tm.waitDelegate(t, hostname, "connected over "+connection, func(d protocol.Delegate) bool {
		return d.Status == protocol.DelegateConnected && d.Connection == connection
	})
}

// logs returns a task's whole stored output and its chunks.
func (tm *testManager) logs(t *testing.T, id string, follow bool) (string, []protocol.LogChunk, protocol.Task) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	var out strings.Builder
	var chunks []protocol.LogChunk
	task, err := tm.api.StreamLogs(ctx, id, follow, func(l protocol.LogStreamLine) error {
		if l.Chunk != nil {
			chunks = append(chunks, *l.Chunk)
			out.WriteString(l.Chunk.Data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("stream logs of %s: %v", id, err)
	}
	return out.String(), chunks, task
}

// testAgent is a delegate agent running in this process.
type testAgent struct {
	hostname  string
	tokenName string
	token     string // the token value it registers with
	workDir   string
	logs      *logBuffer
	cancel    context.CancelFunc
	forceStop chan struct{}
	forceOnce sync.Once
	done      chan error

	mu       sync.Mutex
	returned bool
	err      error

	agent *delegate.Agent
}

type agentOpts struct {
	capacity int
	poll     bool
	grace    time.Duration
	// token is an existing token value to use; "" creates a new token.
	token string
	// urls replaces the manager URL list; nil means the test manager's.
	urls []string
	// hostname and workDir, when set, restart an earlier agent's identity
	// and working directory.
	hostname, workDir string
	// httpAddr is where the agent serves health and metrics ("" = not).
	httpAddr string
	// configure, when set, changes the configuration (proxy, TLS, ...).
	configure func(cfg *config.Delegate, workDir string)
	// tags, initScript and description are DELEGATE_TAGS, INIT_SCRIPT and
	// DELEGATE_DESCRIPTION; scriptTimeout bounds delegate-level scripts.
	tags                    []string
	initScript, description string
	scriptTimeout           time.Duration
	// environ is the delegate's environment (nil: the test process's).
	environ []string
	// sandbox is LEGATE_TASK_SANDBOX ("": off, as these tests look at
	// their tasks' processes and files from outside); oneScope runs
	// tasks of one scope at a time without a sandbox (by default these
	// tests allow mixed scopes).
	sandbox  string
	oneScope bool
	// version is the delegate's build version ("": "test").
	version string
}

var hostSeq struct {
	sync.Mutex
	n int
}

func startAgent(t *testing.T, tm *testManager, o agentOpts) *testAgent {
	t.Helper()
	hostSeq.Lock()
	hostSeq.n++
	n := hostSeq.n
	hostSeq.Unlock()
	ag := &testAgent{
		hostname:  fmt.Sprintf("host-%d", n),
		tokenName: fmt.Sprintf("tok-%d", n),
		workDir:   t.TempDir(),
		forceStop: make(chan struct{}),
		done:      make(chan error, 1),
	}
	if o.hostname != "" {
		ag.hostname = o.hostname
	}
	if o.workDir != "" {
		ag.workDir = o.workDir
	}
	tokValue := o.token
	if tokValue == "" {
		tokValue = tm.token(t, ag.tokenName).Value
	}
	ag.token = tokValue
	if o.grace == 0 {
		o.grace = time.Minute
	}
	urls := o.urls
	if urls == nil {
		urls = []string{tm.url}
	}
	logger, buf := newLogger(t, "agent "+ag.hostname)
	ag.logs = buf
	cfg := config.Delegate{
		AccountID:    tm.admin.AccountID,
		Token:        tokValue,
		ManagerURLs:  urls,
		Name:         "test-delegate",
		Hostname:     ag.hostname,
		Type:         "SHELL",
		Capacity:     o.capacity,
		PollForTasks: o.poll,
		Tags:         o.tags,
		InitScript:   o.initScript,
		Description:  o.description,
	}
	if o.configure != nil {
		o.configure(&cfg, ag.workDir)
	}
	a, err := delegate.New(delegate.Options{
		Config:           cfg,
		WorkDir:          ag.workDir,
		Grace:            o.grace,
		Version:          cmp.Or(o.version, "test"),
		Logger:           logger,
		ForceStop:        ag.forceStop,
		HTTPAddr:         o.httpAddr,
		ScriptTimeout:    o.scriptTimeout,
		Environ:          o.environ,
		TaskSandbox:      cmp.Or(o.sandbox, "off"),
		AllowMixedScopes: !o.oneScope,
	})
	if err != nil {
		t.Fatalf("delegate.New: %v", err)
	}
	ag.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	ag.cancel = cancel
	go func() { ag.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		// Stop at once: a test that wanted a graceful stop already waited.
		ag.cancel()
		ag.force()
		if ok, _ := ag.waitReturn(waitLong); !ok {
			t.Errorf("agent %s: Run did not return within %s", ag.hostname, waitLong)
		}
	})
	return ag
}

// force closes the ForceStop channel (the second signal).
func (ag *testAgent) force() { ag.forceOnce.Do(func() { close(ag.forceStop) }) }

// waitReturn waits up to d (0: not at all) for Run to return and reports
// whether it did and its error.
func (ag *testAgent) waitReturn(d time.Duration) (bool, error) {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if ag.returned {
		return true, ag.err
	}
	if d <= 0 {
		select {
		case err := <-ag.done:
			ag.returned, ag.err = true, err
			return true, err
		default:
			return false, nil
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-ag.done:
		ag.returned, ag.err = true, err
		return true, err
	case <-timer.C:
		return false, nil
	}
}

// running reports whether Run has not returned yet.
func (ag *testAgent) running() bool {
	returned, _ := ag.waitReturn(0)
	return !returned
}

// mustReturn waits for Run to return and returns its error.
func (ag *testAgent) mustReturn(t *testing.T) error {
	t.Helper()
	ok, err := ag.waitReturn(waitLong)
	if !ok {
		t.Fatalf("agent %s: Run did not return within %s", ag.hostname, waitLong)
	}
	return err
}

// eventually polls cond until it holds, failing the test after waitLong
// with the last detail cond gave.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	detail := ""
	for {
		var ok bool
		ok, detail = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", waitLong, what, detail)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shq quotes s for bash.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitMarkerScript is a script that prints "start", waits until marker
// exists and prints "done".
func waitMarkerScript(marker string) string {
	return "echo start\nwhile [ ! -e " + shq(marker) + " ]; do sleep 0.02; done\necho done\n"
}

// sleeperScript writes the PID of a long sleep to pidFile.
func sleeperScript(pidFile string) string {
	return "echo $$ > " + shq(pidFile) + "\nexec sleep 300\n"
}

// waitPID waits until pidFile holds a PID and returns it.
func waitPID(t *testing.T, pidFile string) int {
	t.Helper()
	var pid int
	eventually(t, "pid file "+pidFile, func() (bool, string) {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false, err.Error()
		}
		_, err = fmt.Sscanf(string(b), "%d", &pid)
		return err == nil && pid > 0, string(b)
	})
	return pid
}

// processGone reports whether pid has exited (a zombie counts as gone).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	eventually(t, fmt.Sprintf("process %d to exit", pid), func() (bool, string) {
		return processGone(pid), "still running"
	})
}

// countingProxy forwards everything to a manager over a real socket and
// counts the answers to delegate calls by path and status.
type countingProxy struct {
	url string
	mu  sync.Mutex
	n   map[string]int // "POST /path 200" -> count
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func startCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	p := &countingProxy{n: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == protocol.PathWebSocket {
			rp.ServeHTTP(w, r) // a hijacked connection: nothing to count
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		rp.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		p.mu.Lock()
		p.n[fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.status)]++
		p.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *countingProxy) count(method, path string, status int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[fmt.Sprintf("%s %s %d", method, path, status)]
}
