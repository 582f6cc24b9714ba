package manager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
	"github.com/legate-dev/legate/internal/store"
)

// testManager is a real manager on a loopback port over a real SQLite file.
type testManager struct {
	url   string
	admin identity.Admin
	st    *store.Store
	m     *Manager
}

func startTestManager(t testing.TB, cfg Config) *testManager {
	t.Helper()
	dir := t.TempDir()
	return startTestManagerOn(t, dir+"/legate.db", dir, cfg)
}

// startTestManagerOn starts a manager on the store dsn with its admin.env
// in dir. When the test ends, the manager is stopped, its store closed,
// and the test fails if a goroutine started since is still running (see
// checkLeaks). A test that runs several managers at once starts them with
// startTestManagers instead.
func startTestManagerOn(t testing.TB, dsn, dir string, cfg Config) *testManager {
	t.Helper()
	leaks := checkLeaks(t)
	tm, stop := runTestManager(t, dsn, dir, cfg)
	t.Cleanup(func() { stop(); leaks() })
	return tm
}

// startTestManagers starts one manager per configuration on the store dsn
// (a PostgreSQL database, shared as replicas share it), each with its own
// admin.env; when the test ends they are all stopped before the leak check.
func startTestManagers(t testing.TB, dsn string, cfgs ...Config) []*testManager {
	t.Helper()
	leaks := checkLeaks(t)
	tms := make([]*testManager, len(cfgs))
	stops := make([]func(), len(cfgs))
	for i, cfg := range cfgs {
		tms[i], stops[i] = runTestManager(t, dsn, t.TempDir(), cfg)
	}
	t.Cleanup(func() {
		for _, stop := range stops {
			stop()
		}
		leaks()
	})
	return tms
}

// checkLeaks notes the goroutines running now; the function it returns,
// called once the test's managers have stopped, fails t if a goroutine
// still runs manager code (Run waits for everything it starts; this is
// checked at once), or if any goroutine started since is still running
// (goleak retries for a while, so goroutines on their way out, such as
// those of the test's HTTP clients, are not reported). Tests of this
// package do not run in parallel, so another test's goroutines are never
// mistaken for this one's.
func checkLeaks(t testing.TB) func() {
	before := goleak.IgnoreCurrent()
	return func() {
		if gs := managerGoroutines(); len(gs) > 0 {
			t.Errorf("manager code still running after Run returned:\n%s", strings.Join(gs, "\n\n"))
		}
		// pgx ends a connection whose query was cancelled (a manager
		// stopping mid-query) in a goroutine of its own that sends the
		// server a cancel request and Terminate and reads until the server
		// hangs up, for at most 15 s: on a loaded machine that outlasts
		// goleak's retries. It is pgx's, bounded, and the binary's final
		// check (leaktest.Main) still waits for it.
		if err := goleak.Find(before, goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgconn.(*PgConn).asyncClose.func1")); err != nil {
			t.Errorf("goroutines left behind: %v", err)
		}
	}
}

// managerGoroutines returns the stacks of the goroutines that run a
// method of a Manager (or a function one started).
func managerGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "/internal/manager.(*Manager).") || strings.Contains(g, "/internal/dispatch.(*Service).") {
			out = append(out, g)
		}
	}
	return out
}

// runTestManager starts a manager on a loopback port; stop stops it (and
// fails t if it does not stop cleanly) and closes its store.
func runTestManager(t testing.TB, dsn, dir string, cfg Config) (tm *testManager, stop func()) {
	t.Helper()
	ctx := context.Background()
	// One fixed master key for every test manager, so that managers sharing
	// a database (and restarts on one) open what the others sealed.
	keys, err := seal.NewRing(bytes.Repeat([]byte{0x42}, 32))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenWith(ctx, dsn, store.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	admin, err := identity.Bootstrap(ctx, st, dir, url, time.Now())
	if err != nil {
		ln.Close()
		st.Close()
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m, err := New(ctx, st, cfg)
	if err != nil {
		ln.Close()
		st.Close()
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx, ln) }()
	stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("manager did not stop within 15s")
		}
		// Every follow has returned with the server: none may be left
		// subscribed to task output.
		if n := m.dispatch.FollowedTasks(); n != 0 {
			t.Errorf("log followers of %d tasks left subscribed after the manager stopped", n)
		}
		st.Close()
	}
	return &testManager{url: url, admin: admin, st: st, m: m}, stop
}

func (tm *testManager) client(t testing.TB, secret string) *client.Client {
	t.Helper()
	c, err := client.New(tm.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecret(secret)
	return c
}

// newAccount creates a second account with its own API key, straight in the store.
func (tm *testManager) newAccount(t *testing.T, id string) string {
	t.Helper()
	ctx := context.Background()
	if err := tm.st.CreateAccount(ctx, store.Account{ID: id, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	key := "lgk_other_" + id
	if err := tm.st.CreateAPIKey(ctx, store.APIKey{ID: "ak_" + id, AccountID: id, Name: "admin", Hash: api.HashSecret(key),
		OwnerKind: protocol.OwnerAccount, OwnerID: id, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return key
}

// registerFake registers a delegate that speaks the protocol from the
// test: one of this version, which runs every task type of this build.
func (tm *testManager) registerFake(t testing.TB, accountID, token, name, host string, tags ...string) (*client.Client, protocol.RegisterResponse) {
	t.Helper()
	c := tm.client(t, "")
	resp, err := c.Register(context.Background(), protocol.RegisterRequest{
		ProtocolVersion: protocol.Version, AccountID: accountID, Token: token, Name: name,
		Hostname: host, IP: "127.0.0.1", Tags: tags, Version: "test", TaskTypes: protocol.TaskTypes(),
	})
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	c.SetSecret(resp.Session)
	return c, resp
}

func wantCode(t *testing.T, what string, err error, code protocol.Code) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("%s: want error code %s, got %v", what, code, err)
	}
	if pe.Code != code {
		t.Fatalf("%s: want code %s, got %s (%s)", what, code, pe.Code, pe.Message)
	}
}

func TestAccountsAreIsolatedOnEveryEndpoint(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	keyB := tm.newAccount(t, "ACCOUNTB0000000000000B")
	b := tm.client(t, keyB)

	tokA, err := a.CreateToken(ctx, "tok-a")
	if err != nil {
		t.Fatal(err)
	}
	tokB, err := b.CreateToken(ctx, "tok-b")
	if err != nil {
		t.Fatal(err)
	}
	taskA, err := a.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "echo a"}})
	if err != nil {
		t.Fatal(err)
	}
	// Admin endpoints: B sees nothing of A.
	if _, err := b.GetTask(ctx, taskA.ID); err == nil {
		t.Fatal("B read A's task")
	} else {
		wantCode(t, "get", err, protocol.CodeNotFound)
	}
	_, err = b.CancelTask(ctx, taskA.ID)
	wantCode(t, "cancel", err, protocol.CodeNotFound)
	_, err = b.StreamLogs(ctx, taskA.ID, false, func(protocol.LogStreamLine) error { return nil })
	wantCode(t, "logs", err, protocol.CodeNotFound)
	_, err = b.RevokeToken(ctx, "tok-a")
	wantCode(t, "revoke", err, protocol.CodeNotFound)
	tl, err := b.ListTasks(ctx, "", 0)
	if err != nil || len(tl.Tasks) != 0 {
		t.Fatalf("B lists tasks %v, %v; want none", tl.Tasks, err)
	}
	toks, err := b.ListTokens(ctx)
	if err != nil || len(toks.Tokens) != 1 || toks.Tokens[0].Name != "tok-b" {
		t.Fatalf("B lists tokens %v, %v; want only tok-b", toks.Tokens, err)
	}
	// A's token does not register a delegate into B, nor B's into A.
	_, err = tm.client(t, "").Register(ctx, protocol.RegisterRequest{AccountID: "ACCOUNTB0000000000000B", Token: tokA.Value, Name: "x", Hostname: "h"})
	wantCode(t, "register with another account's token", err, protocol.CodeUnauthenticated)
	_, err = tm.client(t, "").Register(ctx, protocol.RegisterRequest{AccountID: tm.admin.AccountID, Token: tokB.Value, Name: "x", Hostname: "h"})
	wantCode(t, "register with another account's token", err, protocol.CodeUnauthenticated)

	// Delegate endpoints: B's delegate cannot touch A's task.
	dB, _ := tm.registerFake(t, "ACCOUNTB0000000000000B", tokB.Value, "del-b", "host-b")
	_, err = dB.Acquire(ctx, taskA.ID)
	wantCode(t, "acquire", err, protocol.CodeNotFound)
	err = dB.Started(ctx, taskA.ID, protocol.StartedRequest{Epoch: 1})
	wantCode(t, "started", err, protocol.CodeNotFound)
	err = dB.SendLogs(ctx, taskA.ID, protocol.LogsRequest{Epoch: 1, Chunks: []protocol.LogChunk{{Seq: 1, Data: "x"}}})
	wantCode(t, "logs", err, protocol.CodeNotFound)
	_, err = dB.Result(ctx, taskA.ID, protocol.ResultRequest{Epoch: 1, Status: protocol.StatusSucceeded})
	wantCode(t, "result", err, protocol.CodeNotFound)
	dl, err := a.ListDelegates(ctx)
	if err != nil || len(dl.Delegates) != 0 {
		t.Fatalf("A lists delegates %v, %v; want none (B's delegate is not A's)", dl.Delegates, err)
	}
	// And A's task is untouched.
	got, err := a.GetTask(ctx, taskA.ID)
	if err != nil || got.Status != protocol.StatusQueued {
		t.Fatalf("A's task: %+v, %v; want queued", got, err)
	}
}

func TestClaimIsExclusiveAndResultsIdempotent(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, err := a.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var dels []*client.Client
	for i, host := range []string{"h1", "h2", "h3", "h4"} {
		c, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "grp", host)
		dels = append(dels, c)
		_ = i
	}
	task, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, SecretEnv: map[string]string{"S": "hidden"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(task.SecretEnvNames) != 1 || task.SecretEnvNames[0] != "S" {
		t.Errorf("secret names = %v", task.SecretEnvNames)
	}
	var mu sync.Mutex
	var winners []int
	var wg sync.WaitGroup
	var acq protocol.AcquireResponse
	for i, d := range dels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := d.Acquire(ctx, task.ID)
			if err == nil {
				mu.Lock()
				winners = append(winners, i)
				acq = r
				mu.Unlock()
				return
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeAlreadyClaimed {
				t.Errorf("loser got %v, want already_claimed", err)
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("winners = %v, want exactly one", winners)
	}
	if acq.Spec.SecretEnv["S"] != "hidden" || acq.Epoch != 1 {
		t.Fatalf("acquire payload = %+v", acq)
	}
	w := dels[winners[0]]
	loser := dels[(winners[0]+1)%len(dels)]
	// A loser cannot report for the task.
	_, err = loser.Result(ctx, task.ID, protocol.ResultRequest{Epoch: 1, Status: protocol.StatusSucceeded})
	wantCode(t, "loser result", err, protocol.CodeStaleLease)
	// A wrong epoch is refused.
	_, err = w.Result(ctx, task.ID, protocol.ResultRequest{Epoch: 7, Status: protocol.StatusSucceeded})
	wantCode(t, "stale epoch", err, protocol.CodeStaleLease)
	zero := 0
	res := protocol.ResultRequest{Epoch: 1, Status: protocol.StatusSucceeded, ExitCode: &zero}
	first, err := w.Result(ctx, task.ID, res)
	if err != nil {
		t.Fatal(err)
	}
	again, err := w.Result(ctx, task.ID, res)
	if err != nil {
		t.Fatalf("repeated result: %v", err)
	}
	if first.Status != protocol.StatusSucceeded || again.Status != protocol.StatusSucceeded || !first.FinishedAt.Equal(*again.FinishedAt) {
		t.Fatalf("results not idempotent: %+v vs %+v", first, again)
	}
	got, err := a.GetTask(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != protocol.StatusSucceeded || got.AcquiredAt == nil || got.FinishedAt == nil || got.Attempts != 1 {
		t.Fatalf("final task = %+v", got)
	}
}

func TestSelectorsAreEnforcedOnAcquire(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, _ := a.CreateToken(ctx, "t")
	linux, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "builders", "lin-1", "Linux", "docker")
	win, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "builders", "win-1", "windows")
	task, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{" linux ", "DOCKER"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = win.Acquire(ctx, task.ID)
	wantCode(t, "windows acquire", err, protocol.CodeNotEligible)
	if _, err := linux.Acquire(ctx, task.ID); err != nil {
		t.Fatalf("linux acquire: %v", err)
	}
	// Implicit selector: the hostname.
	byHost, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"WIN-1"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = linux.Acquire(ctx, byHost.ID)
	wantCode(t, "linux acquire of win-1 task", err, protocol.CodeNotEligible)
	if _, err := win.Acquire(ctx, byHost.ID); err != nil {
		t.Fatalf("win acquire: %v", err)
	}
}

func TestSubmitValidation(t *testing.T) {
	tm := startTestManager(t, Config{})
	a := tm.client(t, tm.admin.APIKey)
	for name, spec := range map[string]protocol.TaskSpec{
		"empty script":     {Type: "shell", Shell: &protocol.ShellSpec{Script: "  "}},
		"unknown type":     {Type: "docker"},
		"http without url": {Type: "http", HTTP: &protocol.HTTPSpec{}},
		"ftp url":          {Type: "http", HTTP: &protocol.HTTPSpec{URL: "ftp://x"}},
		"bad env name":     {Shell: &protocol.ShellSpec{Script: "x"}, Env: map[string]string{"1A": "v"}},
		"negative timeout": {Shell: &protocol.ShellSpec{Script: "x"}, TimeoutMS: -1},
		"too many retries": {Shell: &protocol.ShellSpec{Script: "x"}, Retries: 1000},
	} {
		_, err := a.SubmitTask(context.Background(), spec)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || pe.Message == "" {
			t.Errorf("%s: got %v, want bad_request with a message", name, err)
		}
	}
	// Raw garbage and a wrong API key.
	req, _ := http.NewRequest("POST", tm.url+protocol.PathTasks, strings.NewReader("{not json"))
	req.Header.Set("Authorization", "Bearer "+tm.admin.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("garbage body: status %d", resp.StatusCode)
	}
	_, err = tm.client(t, "wrong").ListTasks(context.Background(), "", 0)
	wantCode(t, "wrong key", err, protocol.CodeUnauthenticated)
}

func TestLogCapKeepsHeadAndTailWithMarker(t *testing.T) {
	tm := startTestManager(t, Config{LogCap: store.LogCap{Head: 100, Tail: 100}})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, _ := a.CreateToken(ctx, "t")
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d", "h")
	task, _ := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}})
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 50; i++ {
		line := fmt.Sprintf("line %03d ----------\n", i) // 20 bytes
		if err := d.SendLogs(ctx, task.ID, protocol.LogsRequest{Epoch: acq.Epoch, Chunks: []protocol.LogChunk{{Seq: int64(i), Data: line}}}); err != nil {
			t.Fatal(err)
		}
	}
	zero := 0
	if _, err := d.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero, LastSeq: 50}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if _, err := a.StreamLogs(ctx, task.ID, false, func(l protocol.LogStreamLine) error {
		if l.Chunk != nil {
			out.WriteString(l.Chunk.Data)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"line 001", "line 005", "bytes of output omitted", "line 050"} {
		if !strings.Contains(s, want) {
			t.Errorf("capped log lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "line 025") {
		t.Errorf("capped log kept the middle:\n%s", s)
	}
	if len(s) > 400 {
		t.Errorf("capped log is %d bytes, want about head+tail", len(s))
	}
}

func TestDelegateFaultRunsTheTaskElsewhere(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, _ := a.CreateToken(ctx, "t")
	d1, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "grp", "h1")
	d2, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "grp", "h2")
	task, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	acq, err := d1.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d1.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusFailed, Error: "bash not found", DelegateFault: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != protocol.StatusQueued {
		t.Fatalf("after a delegate fault with a retry left: %s, want queued", got.Status)
	}
	// The faulty delegate is denied the task; the other one runs it.
	_, err = d1.Acquire(ctx, task.ID)
	wantCode(t, "faulty delegate re-acquire", err, protocol.CodeNotEligible)
	acq2, err := d2.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatalf("other delegate: %v", err)
	}
	if acq2.Epoch <= acq.Epoch {
		t.Errorf("epoch did not advance: %d then %d", acq.Epoch, acq2.Epoch)
	}
	// A fault with no retries left ends the task failed, naming the delegate.
	got, err = d2.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq2.Epoch, Status: protocol.StatusFailed, Error: "disk full", DelegateFault: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != protocol.StatusFailed || !strings.Contains(got.Error, "h2") || !strings.Contains(got.Error, "disk full") {
		t.Fatalf("final: %s %q", got.Status, got.Error)
	}
}

// fakeClock is a controllable clock for TTL tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestCapabilityListsFollowTheirTTLs(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	tm := startTestManager(t, Config{Now: clock.Now, HeartbeatInterval: time.Hour})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, _ := a.CreateToken(ctx, "t")
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "capdel", "h1")
	if err := d.ReportCapabilities(ctx, protocol.CapabilityReport{Results: []protocol.CapabilityResult{
		{Criteria: "tcp://db:5432", OK: false, Error: "connection refused"},
		{Criteria: "https://git.example.com", OK: true},
	}}); err != nil {
		t.Fatal(err)
	}
	describe := func() protocol.DelegateDetail {
		t.Helper()
		det, err := a.DescribeDelegate(ctx, "capdel")
		if err != nil || len(det.Instances) != 1 {
			t.Fatalf("describe: %+v %v", det, err)
		}
		return det.Instances[0]
	}
	det := describe()
	if len(det.Denylist) != 1 || det.Denylist[0].Criteria != "tcp://db:5432" || det.Denylist[0].TimeLeftMS != (5*time.Minute).Milliseconds() {
		t.Fatalf("deny list = %+v", det.Denylist)
	}
	if len(det.Allowlist) != 1 || det.Allowlist[0].TimeLeftMS != (6*time.Hour).Milliseconds() {
		t.Fatalf("allowlist = %+v", det.Allowlist)
	}
	// A task needing the denied criteria is not offered to this delegate, even by selector.
	task, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"capdel"}, Capabilities: []string{"tcp://db:5432"}})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := a.ExplainTask(ctx, task.ID)
	if err != nil || len(ex.Delegates) != 1 || ex.Delegates[0].Eligible || ex.Delegates[0].Reasons[0].Rule != protocol.RuleCapabilityDenied {
		t.Fatalf("explain = %+v, %v", ex, err)
	}
	// Five minutes later the deny entry is gone; the allowlist entry has 5h55m left.
	clock.Add(5*time.Minute + time.Second)
	det = describe()
	if len(det.Denylist) != 0 {
		t.Errorf("deny list after 5m: %+v", det.Denylist)
	}
	if len(det.Allowlist) != 1 || det.Allowlist[0].TimeLeftMS != (6*time.Hour-5*time.Minute-time.Second).Milliseconds() {
		t.Errorf("allowlist after 5m: %+v", det.Allowlist)
	}
	// A success resets the allowlist TTL to 6h.
	if err := d.ReportCapabilities(ctx, protocol.CapabilityReport{Results: []protocol.CapabilityResult{{Criteria: "https://git.example.com", OK: true}}}); err != nil {
		t.Fatal(err)
	}
	if det = describe(); det.Allowlist[0].TimeLeftMS != (6 * time.Hour).Milliseconds() {
		t.Errorf("allowlist not reset by success: %+v", det.Allowlist)
	}
	clock.Add(6*time.Hour + time.Second)
	if det = describe(); len(det.Allowlist) != 0 {
		t.Errorf("allowlist after 6h: %+v", det.Allowlist)
	}
}

func TestSuccessfulTaskResetsAllowlistTTL(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	tm := startTestManager(t, Config{Now: clock.Now, HeartbeatInterval: time.Hour})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, _ := a.CreateToken(ctx, "t")
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "ttl", "h1")
	if err := d.ReportCapabilities(ctx, protocol.CapabilityReport{Results: []protocol.CapabilityResult{{Criteria: "binary:git", OK: true}}}); err != nil {
		t.Fatal(err)
	}
	clock.Add(30 * time.Minute)
	task, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "git --version"}, Capabilities: []string{"binary:git"}})
	if err != nil {
		t.Fatal(err)
	}
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	if _, err := d.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	det, err := a.DescribeDelegate(ctx, "ttl")
	if err != nil {
		t.Fatal(err)
	}
	if al := det.Instances[0].Allowlist; len(al) != 1 || al[0].TimeLeftMS != (6*time.Hour).Milliseconds() {
		t.Fatalf("allowlist after a successful task = %+v, want binary:git with 6h left", al)
	}
}

func TestRestartedDelegateReconcilesItsTasks(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, _ := a.CreateToken(ctx, "t")
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "rst", "h1")
	submit := func(retries int) (protocol.Task, protocol.AcquireResponse) {
		t.Helper()
		task, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Retries: retries, Selectors: []string{"h1"}})
		if err != nil {
			t.Fatal(err)
		}
		acq, err := d.Acquire(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		return task, acq
	}
	lost, _ := submit(0)
	retried, _ := submit(1)
	kept, keptAcq := submit(0)
	// The same identity registers again from a new process that still runs
	// (or has a spooled result for) only one of the three.
	c := tm.client(t, "")
	if _, err := c.Register(ctx, protocol.RegisterRequest{
		AccountID: tm.admin.AccountID, Token: tok.Value, Name: "rst", Hostname: "h1", IP: "127.0.0.1",
		FreshStart: true, Running: []protocol.RunningTask{{ID: kept.ID, Epoch: keptAcq.Epoch}},
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.GetTask(ctx, lost.ID); got.Status != protocol.StatusFailed || !strings.Contains(got.Error, "restarted") {
		t.Errorf("task without retries: %s %q, want failed saying the delegate restarted", got.Status, got.Error)
	}
	if got, _ := a.GetTask(ctx, retried.ID); got.Status != protocol.StatusQueued {
		t.Errorf("task with a retry left: %s, want queued again", got.Status)
	}
	if got, _ := a.GetTask(ctx, kept.ID); got.Status != protocol.StatusRunning || got.Attempts != 1 {
		t.Errorf("task the new process still runs: %s (attempts %d), want running", got.Status, got.Attempts)
	}
}

// TestNoParallelTests: the leak check of each test (checkLeaks) counts
// every goroutine running manager code as its own, so tests of this
// package must not run in parallel.
func TestNoParallelTests(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(line) == "t.Parallel()" {
				t.Errorf("%s:%d: t.Parallel(): the tests of package manager run one at a time (see checkLeaks)", f, i+1)
			}
		}
	}
}
