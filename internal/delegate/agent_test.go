package delegate_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/mask"
	"github.com/legate-dev/legate/internal/protocol"
)

func TestRunsTaskEndToEndWithOrderedOutput(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	const n = 2000
	var want strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&want, "line %04d of the output\n", i)
	}
	task := tm.submitScript(t, `for ((i=1; i<=2000; i++)); do printf 'line %04d of the output\n' "$i"; done`)
	out, chunks, final := tm.logs(t, task.ID, true)

	if final.Status != protocol.StatusSucceeded || final.ExitCode == nil || *final.ExitCode != 0 {
		t.Fatalf("task ended %s exit %v (error %q), want succeeded exit 0", final.Status, final.ExitCode, final.Error)
	}
	if out != want.String() {
		got, exp := strings.Split(out, "\n"), strings.Split(want.String(), "\n")
		for i := range min(len(got), len(exp)) {
			if got[i] != exp[i] {
				t.Fatalf("output differs at line %d: got %q, want %q (%d lines, want %d)", i+1, got[i], exp[i], len(got)-1, len(exp)-1)
			}
		}
		t.Fatalf("output has %d lines, want %d", len(got)-1, len(exp)-1)
	}
	for i, c := range chunks {
		if c.Seq != int64(i+1) || c.Attempt != 1 {
			t.Fatalf("chunk %d has seq %d attempt %d, want seq %d attempt 1", i, c.Seq, c.Attempt, i+1)
		}
	}
	got := tm.task(t, task.ID)
	if got.AcquiredAt == nil || got.StartedAt == nil || got.FinishedAt == nil {
		t.Fatalf("timestamps acquired %v started %v finished %v: want all set", got.AcquiredAt, got.StartedAt, got.FinishedAt)
	}
	if got.StartedAt.Before(*got.AcquiredAt) || got.FinishedAt.Before(*got.StartedAt) {
		t.Errorf("timestamps out of order: acquired %v started %v finished %v", got.AcquiredAt, got.StartedAt, got.FinishedAt)
	}
	if got.DelegateHostname != ag.hostname || got.DelegateName != "test-delegate" || got.Attempts != 1 {
		t.Errorf("task ran on %s/%s in %d attempts, want test-delegate/%s in 1", got.DelegateName, got.DelegateHostname, got.Attempts, ag.hostname)
	}
	// The task directory is removed before the result is reported.
	if _, err := os.Stat(filepath.Join(ag.workDir, "tasks", task.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("task directory still there after the task finished: %v", err)
	}
}

func TestExitStatusEnvironmentMaskingAndTimeout(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	const secret = "hunter2-very-secret"
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	for _, tc := range []struct {
		name       string
		spec       protocol.TaskSpec
		wantStatus string
		wantExit   int
		// want returns the exact expected output for the task ID.
		want func(id string) string
	}{{
		name:       "non-zero exit fails with its code",
		spec:       protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "echo out\necho err >&2\nexit 3\n"}},
		wantStatus: protocol.StatusFailed,
		wantExit:   3,
		want:       func(string) string { return "out\nerr\n" },
	}, {
		name: "env, task ID and masked secrets",
		spec: protocol.TaskSpec{
			Shell: &protocol.ShellSpec{Script: `echo "id=$LEGATE_TASK_ID greeting=$GREETING pw=$PASSWORD"` + "\n" +
				`printf '%s' "$PASSWORD" | base64` + "\n" +
				`echo "token=${DELEGATE_TOKEN-unset}"` + "\n"},
			Env:       map[string]string{"GREETING": "hello"},
			SecretEnv: map[string]string{"PASSWORD": secret},
		},
		wantStatus: protocol.StatusSucceeded,
		wantExit:   0,
		want: func(id string) string {
			return "id=" + id + " greeting=hello pw=" + mask.Replacement + "\n" + mask.Replacement + "\ntoken=unset\n"
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := tm.submit(t, tc.spec)
			out, _, final := tm.logs(t, task.ID, true)
			if final.Status != tc.wantStatus || final.ExitCode == nil || *final.ExitCode != tc.wantExit {
				t.Fatalf("task ended %s exit %v (error %q), want %s exit %d", final.Status, final.ExitCode, final.Error, tc.wantStatus, tc.wantExit)
			}
			if want := tc.want(task.ID); out != want {
				t.Fatalf("output %q, want %q", out, want)
			}
			if strings.Contains(out, secret) || strings.Contains(out, b64) {
				t.Fatalf("output leaks the secret: %q", out)
			}
		})
	}
	t.Run("stored secrets referenced in the script and env are masked", func(t *testing.T) {
		t.Parallel()
		const stored = "stored-secret-value-42"
		if _, err := tm.api.CreateSecret(context.Background(), protocol.CreateSecretRequest{Name: "STORED", Value: stored}); err != nil {
			t.Fatal(err)
		}
		task := tm.submit(t, protocol.TaskSpec{
			Shell: &protocol.ShellSpec{Script: `echo "script=${secrets.STORED} env=$FROM_SECRET"` + "\n" +
				`printf '%s' '${secrets.STORED}' | base64` + "\n" + `echo 'literal=$${secrets.STORED}'` + "\n"},
			Env: map[string]string{"FROM_SECRET": "${secrets.STORED}"},
		})
		out, _, final := tm.logs(t, task.ID, true)
		if final.Status != protocol.StatusSucceeded {
			t.Fatalf("task ended %s (%q)", final.Status, final.Error)
		}
		want := "script=" + mask.Replacement + " env=" + mask.Replacement + "\n" + mask.Replacement + "\nliteral=${secrets.STORED}\n"
		if out != want {
			t.Fatalf("output %q, want %q", out, want)
		}
	})
	t.Run("timeout ends the task timed_out and kills it", func(t *testing.T) {
		t.Parallel()
		pidFile := filepath.Join(t.TempDir(), "pid")
		task := tm.submit(t, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: sleeperScript(pidFile)}, TimeoutMS: 1000})
		pid := waitPID(t, pidFile)
		final := tm.waitTask(t, task.ID, protocol.StatusTimedOut)
		if final.ExitCode != nil {
			t.Errorf("timed-out task has exit code %d", *final.ExitCode)
		}
		waitGone(t, pid)
	})
}

func TestCapacityOneRunsOneTaskAtATime(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{capacity: 1})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	dir := t.TempDir()
	var ids []string
	markers := map[string]string{}
	for i := range 3 {
		marker := filepath.Join(dir, fmt.Sprintf("marker-%d", i))
		task := tm.submitScript(t, waitMarkerScript(marker))
		ids = append(ids, task.ID)
		markers[task.ID] = marker
	}
	// Hold the first running task across at least one rebroadcast of the
	// queued ones (every second), so a second acquire had its chance.
	var firstRunning time.Time
	released := map[string]bool{}
	eventually(t, "all three tasks to succeed, one at a time", func() (bool, string) {
		var running, succeeded []string
		for _, id := range ids {
			switch st := tm.task(t, id).Status; st {
			case protocol.StatusRunning:
				running = append(running, id)
			case protocol.StatusSucceeded:
				succeeded = append(succeeded, id)
			case protocol.StatusQueued:
			default:
				t.Fatalf("task %s is %s", id, st)
			}
		}
		// The statuses are read one after the other: a released task may
		// finish and the next one start between two reads. A task not
		// released yet cannot finish, so two of them running is two at once.
		var held []string
		for _, id := range running {
			if !released[id] {
				held = append(held, id)
			}
		}
		if len(held) > 1 {
			t.Fatalf("capacity 1 but tasks %v run at once", held)
		}
		if len(held) == 1 {
			if firstRunning.IsZero() {
				firstRunning = time.Now()
			}
			if len(released) > 0 || time.Since(firstRunning) > 1500*time.Millisecond {
				touch(t, markers[held[0]])
				released[held[0]] = true
			}
		}
		return len(succeeded) == 3, fmt.Sprintf("running %v succeeded %v", running, succeeded)
	})

	// The manager's own timestamps: each task was acquired only after the
	// previous one finished.
	var tasks []protocol.Task
	for _, id := range ids {
		task := tm.task(t, id)
		if task.AcquiredAt == nil || task.FinishedAt == nil || task.DelegateHostname != ag.hostname {
			t.Fatalf("task %+v: want acquired and finished by %s", task, ag.hostname)
		}
		tasks = append(tasks, task)
	}
	slices.SortFunc(tasks, func(a, b protocol.Task) int { return a.AcquiredAt.Compare(*b.AcquiredAt) })
	for i := 1; i < len(tasks); i++ {
		if tasks[i].AcquiredAt.Before(*tasks[i-1].FinishedAt) {
			t.Errorf("task %s acquired at %v before task %s finished at %v", tasks[i].ID, tasks[i].AcquiredAt, tasks[i-1].ID, tasks[i-1].FinishedAt)
		}
	}
}

func TestSessionIsRefreshedBeforeItExpires(t *testing.T) {
	t.Parallel()
	// Sessions carry whole seconds: one lives between 3s and 4s, and the
	// agent refreshes it at half its life, seconds before it expires.
	const ttl = 4 * time.Second
	cfg := testConfig()
	cfg.SessionTTL = ttl
	tm := startManager(t, cfg)
	proxy := startCountingProxy(t, tm.url)
	ag := startAgent(t, tm, agentOpts{urls: []string{proxy.url}})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	// A task every 500ms until the session was refreshed three times
	// (more than two lifetimes): every acquire, log and result call needs
	// a valid session.
	start := time.Now()
	var ids []string
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for proxy.count(http.MethodPost, protocol.PathSession, http.StatusOK) < 3 {
		if time.Since(start) > waitLong {
			t.Fatalf("the session was not refreshed three times within %s (%d refreshes)", waitLong,
				proxy.count(http.MethodPost, protocol.PathSession, http.StatusOK))
		}
		ids = append(ids, tm.submitScript(t, fmt.Sprintf("echo task %d", len(ids))).ID)
		<-tick.C
	}
	for i, id := range ids {
		final := tm.waitTask(t, id, protocol.StatusSucceeded)
		if out, _, _ := tm.logs(t, id, false); out != fmt.Sprintf("task %d\n", i) {
			t.Errorf("task %d output %q", i, out)
		}
		if final.DelegateHostname != ag.hostname {
			t.Errorf("task %d ran on %s", i, final.DelegateHostname)
		}
	}
	if !ag.running() {
		t.Fatal("agent Run returned")
	}
	// The session was rotated, not left to expire: a refresh succeeds only
	// before the session expires. (One that came too late is refused, and
	// the agent registers again: logged, not a failure.)
	t.Logf("over %v: %d refreshes, %d refused as expired, %d registrations", time.Since(start).Round(time.Millisecond),
		proxy.count(http.MethodPost, protocol.PathSession, http.StatusOK),
		proxy.count(http.MethodPost, protocol.PathSession, http.StatusUnauthorized),
		proxy.count(http.MethodPost, protocol.PathRegister, http.StatusOK))
}

// TestSessionLastsAsLongAsAnnounced checks the manager's side of session
// rotation: a session is accepted until the expiry the manager announced,
// and refused from then on (on the manager's clock, which the test sets).
func TestSessionLastsAsLongAsAnnounced(t *testing.T) {
	t.Parallel()
	clock := &frozenClock{t: time.Now()}
	cfg := testConfig()
	cfg.SessionTTL = 2 * time.Second
	cfg.Now = clock.now
	tm := startManager(t, cfg)
	tok := tm.token(t, "announce")
	c, err := client.New(tm.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Register(context.Background(), protocol.RegisterRequest{
		ProtocolVersion: protocol.Version, AccountID: tm.admin.AccountID, Token: tok.Value,
		Name: "announce", Hostname: "announce-host", IP: "127.0.0.1", Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecret(resp.Session)
	announced := resp.SessionExpiresAt
	// The credential carries whole seconds, so must the announcement.
	if !announced.Equal(announced.Truncate(time.Second)) {
		t.Fatalf("announced expiry %v has a fraction of a second the credential cannot carry", announced)
	}
	clock.set(announced.Add(-time.Nanosecond))
	if _, err := c.RefreshSession(context.Background()); err != nil {
		t.Fatalf("refresh of a session 1ns before its announced expiry %v: %v", announced, err)
	}
	clock.set(announced)
	_, err = c.RefreshSession(context.Background())
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeSessionExpired {
		t.Fatalf("refresh of a session at its announced expiry %v: %v, want %s", announced, err, protocol.CodeSessionExpired)
	}
}

// frozenClock is a manager clock that stands still until the test sets it.
type frozenClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *frozenClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *frozenClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func TestCancelKillsTheTaskAndFreesTheSlot(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{capacity: 1})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	pidFile := filepath.Join(t.TempDir(), "pid")
	task := tm.submitScript(t, sleeperScript(pidFile))
	tm.waitTask(t, task.ID, protocol.StatusRunning)
	pid := waitPID(t, pidFile)

	got, err := tm.api.CancelTask(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != protocol.StatusCancelled {
		t.Fatalf("cancel answered status %s", got.Status)
	}
	waitGone(t, pid)
	eventually(t, "the agent to finish the cancelled task", func() (bool, string) {
		return len(ag.logs.lines("task finished", "task="+task.ID, "status=cancelled")) == 1, "not yet"
	})
	if len(ag.logs.lines("manager aborted task", "task="+task.ID)) == 0 {
		t.Error("the agent did not log the manager's abort")
	}
	// The manager refuses the cancelled task's result (the cancel ended its
	// lease): expected after a cancel, so neither side warns about it. (The
	// manager logs the refusal before it answers, so before "task finished".)
	if got := ag.logs.lines("level=INFO", "manager refused the result", "task="+task.ID); len(got) != 1 {
		t.Errorf("agent log lines about the refused result: %q, want one at info", got)
	}
	if got := tm.log.lines("level=INFO", "refused result from a stale lease", "task="+task.ID); len(got) != 1 {
		t.Errorf("manager log lines about the refused result: %q, want one at info", got)
	}
	for name, l := range map[string]*logBuffer{"agent": ag.logs, "manager": tm.log} {
		if got := l.lines("level=WARN", "task="+task.ID); len(got) > 0 {
			t.Errorf("the %s warns about the cancelled task: %q", name, got)
		}
	}

	// The only slot is free again.
	next := tm.submitScript(t, "echo next")
	tm.waitTask(t, next.ID, protocol.StatusSucceeded)
	if out, _, _ := tm.logs(t, next.ID, false); out != "next\n" {
		t.Errorf("next task output %q", out)
	}
	final := tm.task(t, task.ID)
	if final.Status != protocol.StatusCancelled || !strings.HasPrefix(final.Error, "cancelled by ") {
		t.Errorf("cancelled task ended %s %q, want cancelled by user", final.Status, final.Error)
	}
	if !ag.running() {
		t.Fatal("agent Run returned")
	}
}

func TestDrainFinishesRunningTaskAndTakesNoNewOnes(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{grace: 10 * time.Minute})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	marker := filepath.Join(t.TempDir(), "go")
	task := tm.submitScript(t, waitMarkerScript(marker))
	tm.waitTask(t, task.ID, protocol.StatusRunning)

	ag.cancel() // first stop request
	tm.waitDelegate(t, ag.hostname, "draining", func(d protocol.Delegate) bool {
		return d.Draining && d.Status == protocol.DelegateConnected
	})
	late := tm.submitScript(t, "echo late")
	if !ag.running() {
		t.Fatal("Run returned while a task was still running")
	}
	touch(t, marker)
	if err := ag.mustReturn(t); err != nil {
		t.Fatalf("Run after drain: %v", err)
	}

	// The result was delivered before Run returned.
	final := tm.task(t, task.ID)
	if final.Status != protocol.StatusSucceeded {
		t.Fatalf("drained task is %s (error %q), want succeeded", final.Status, final.Error)
	}
	if out, _, _ := tm.logs(t, task.ID, false); out != "start\ndone\n" {
		t.Errorf("drained task output %q", out)
	}
	if got := tm.task(t, late.ID); got.Status != protocol.StatusQueued || got.InstanceID != "" {
		t.Errorf("task submitted during the drain is %s on %q, want queued on no delegate", got.Status, got.InstanceID)
	}
	d, ok := tm.delegateByHost(t, ag.hostname)
	if !ok || d.Status != protocol.DelegateDeregistered {
		t.Errorf("after the drain the delegate is listed as %+v, want deregistered", d)
	}
}

func TestGraceExpiryCancelsRunningTasks(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{grace: 500 * time.Millisecond})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	pidFile := filepath.Join(t.TempDir(), "pid")
	task := tm.submitScript(t, sleeperScript(pidFile))
	tm.waitTask(t, task.ID, protocol.StatusRunning)
	pid := waitPID(t, pidFile)

	ag.cancel()
	if err := ag.mustReturn(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if final := tm.task(t, task.ID); final.Status != protocol.StatusCancelled {
		t.Fatalf("task is %s (error %q) after the grace period, want cancelled", final.Status, final.Error)
	}
	if !processGone(pid) {
		t.Errorf("task process %d still runs after Run returned", pid)
	}
	if len(ag.logs.lines("grace period over")) == 0 {
		t.Error("the agent did not log the end of the grace period")
	}
	if d, ok := tm.delegateByHost(t, ag.hostname); !ok || d.Status != protocol.DelegateDeregistered {
		t.Errorf("after stopping the delegate is listed as %+v, want deregistered", d)
	}
}

func TestForceStopCancelsAtOnce(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{grace: time.Hour})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	pidFile := filepath.Join(t.TempDir(), "pid")
	task := tm.submitScript(t, sleeperScript(pidFile))
	tm.waitTask(t, task.ID, protocol.StatusRunning)
	pid := waitPID(t, pidFile)

	ag.cancel()
	tm.waitDelegate(t, ag.hostname, "draining", func(d protocol.Delegate) bool { return d.Draining })
	if !ag.running() {
		t.Fatal("Run returned during a one-hour grace period")
	}
	ag.force() // second stop request
	if err := ag.mustReturn(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if final := tm.task(t, task.ID); final.Status != protocol.StatusCancelled {
		t.Fatalf("task is %s (error %q) after ForceStop, want cancelled", final.Status, final.Error)
	}
	if !processGone(pid) {
		t.Errorf("task process %d still runs after Run returned", pid)
	}
	if len(ag.logs.lines("second stop request")) == 0 {
		t.Error("the agent did not log the second stop request")
	}
}

func TestRevokedTokenStopsRun(t *testing.T) {
	t.Parallel()
	// The task's lease expires once the delegate is gone: a 6s window.
	cfg := testConfig()
	cfg.HeartbeatInterval = 2 * time.Second
	tm := startManager(t, cfg)
	ag := startAgent(t, tm, agentOpts{})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	pidFile := filepath.Join(t.TempDir(), "pid")
	task := tm.submitScript(t, sleeperScript(pidFile))
	tm.waitTask(t, task.ID, protocol.StatusRunning)
	pid := waitPID(t, pidFile)

	if _, err := tm.api.RevokeToken(context.Background(), ag.tokenName); err != nil {
		t.Fatal(err)
	}
	err := ag.mustReturn(t)
	if err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("Run returned %v, want an error that says the token was revoked", err)
	}
	if !processGone(pid) {
		t.Errorf("task process %d still runs after Run returned", pid)
	}
	if d, ok := tm.delegateByHost(t, ag.hostname); !ok || d.Status != protocol.DelegateDisconnected {
		t.Errorf("after the revoke the delegate is listed as %+v, want disconnected", d)
	}
	// The agent cannot report the task any more; the manager must not
	// leave it running for ever.
	var final protocol.Task
	eventually(t, "the orphaned task to end", func() (bool, string) {
		final = tm.task(t, task.ID)
		return protocol.Terminal(final.Status), final.Status
	})
	t.Logf("task of the revoked delegate ended %s: %s", final.Status, final.Error)

	// Starting again with the revoked token fails at once, saying why.
	again := startAgent(t, tm, agentOpts{token: tokenValue(t, ag)})
	if err := again.mustReturn(t); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("Run with a revoked token returned %v, want an error that says it was revoked", err)
	}
}

// tokenValue returns the token an agent registered with (from its config).
func tokenValue(t *testing.T, ag *testAgent) string {
	t.Helper()
	if ag.token == "" {
		t.Fatal("agent has no token")
	}
	return ag.token
}

func TestUnknownTokenStopsRun(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{token: "no-such-token-value"})
	err := ag.mustReturn(t)
	if err == nil || !strings.Contains(err.Error(), "registration refused") {
		t.Fatalf("Run with an unknown token returned %v, want registration refused", err)
	}
	if _, ok := tm.delegateByHost(t, ag.hostname); ok {
		t.Error("a delegate with an unknown token is listed")
	}
}

func TestReconnectsAfterManagerRestart(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig()) // its lease outlives a slow restart
	ag := startAgent(t, tm, agentOpts{})
	before := tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	tm.stop()
	if !ag.running() {
		t.Fatal("Run returned when the manager stopped")
	}
	tm.restart()

	after := tm.waitDelegate(t, ag.hostname, "connected again", func(d protocol.Delegate) bool {
		return d.Status == protocol.DelegateConnected
	})
	if after.InstanceID != before.InstanceID {
		t.Errorf("instance %s after the restart, was %s", after.InstanceID, before.InstanceID)
	}
	task := tm.submitScript(t, "echo after restart")
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	if out, _, _ := tm.logs(t, task.ID, false); out != "after restart\n" {
		t.Errorf("output %q", out)
	}
	// The WebSocket comes back by itself (polling bridges the gap).
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
	if !ag.running() {
		t.Fatal("agent Run returned")
	}
}

func TestResultProducedWhileManagerDownIsDelivered(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig()) // its lease outlives a slow restart
	ag := startAgent(t, tm, agentOpts{})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	// No output after the marker: the result is the only thing left to send.
	marker := filepath.Join(t.TempDir(), "go")
	task := tm.submitScript(t, "echo before\nwhile [ ! -e "+shq(marker)+" ]; do sleep 0.02; done\n")
	tm.waitTask(t, task.ID, protocol.StatusRunning)
	eventually(t, "the output and start report to reach the manager", func() (bool, string) {
		out, _, cur := tm.logs(t, task.ID, false)
		return out == "before\n" && cur.StartedAt != nil, fmt.Sprintf("output %q started %v", out, cur.StartedAt)
	})

	tm.stop()
	touch(t, marker)
	eventually(t, "the agent to fail to deliver the result", func() (bool, string) {
		return len(ag.logs.lines("result not delivered yet", "task="+task.ID)) > 0, "not yet"
	})
	tm.restart()

	final := tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	if final.ExitCode == nil || *final.ExitCode != 0 || final.Attempts != 1 {
		t.Errorf("task exit %v in %d attempts, want exit 0 in 1", final.ExitCode, final.Attempts)
	}
	if out, _, _ := tm.logs(t, task.ID, false); out != "before\n" {
		t.Errorf("output %q after the restart, want %q", out, "before\n")
	}
	if !ag.running() {
		t.Fatal("agent Run returned")
	}
}

func TestForcedPollingRunsTasks(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{poll: true})
	tm.waitConnected(t, ag.hostname, protocol.ConnPolling)

	var ids []string
	for i := range 3 {
		ids = append(ids, tm.submitScript(t, fmt.Sprintf("echo polled %d", i)).ID)
	}
	for i, id := range ids {
		tm.waitTask(t, id, protocol.StatusSucceeded)
		if out, _, _ := tm.logs(t, id, false); out != fmt.Sprintf("polled %d\n", i) {
			t.Errorf("task %d output %q", i, out)
		}
	}
	d, ok := tm.delegateByHost(t, ag.hostname)
	if !ok || d.Status != protocol.DelegateConnected || d.Connection != protocol.ConnPolling {
		t.Errorf("delegate listed as %+v, want connected over polling", d)
	}
	if lines := ag.logs.lines("connection=" + protocol.ConnWebSocket); len(lines) > 0 {
		t.Errorf("the agent used the WebSocket with POLL_FOR_TASKS: %q", lines)
	}
}

// A second registration with the same identity supersedes the agent's
// session; the agent registers again by itself, reporting the task it runs,
// and the manager accepts that task's result.
func TestReRegistersWhenSupersededAndKeepsItsTask(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{})
	before := tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
	if before.IP != "127.0.0.1" {
		t.Fatalf("agent registered with IP %q; this test needs 127.0.0.1", before.IP)
	}
	marker := filepath.Join(t.TempDir(), "go")
	task := tm.submitScript(t, waitMarkerScript(marker))
	tm.waitTask(t, task.ID, protocol.StatusRunning)

	// An impostor with the same name, hostname and IP registers.
	c, err := client.New(tm.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(context.Background(), protocol.RegisterRequest{
		ProtocolVersion: protocol.Version, AccountID: tm.admin.AccountID, Token: ag.token,
		Name: "test-delegate", Hostname: ag.hostname, IP: "127.0.0.1", Version: "impostor",
	}); err != nil {
		t.Fatal(err)
	}
	// Usually once; twice when two calls notice the lost session together
	// (see TestConcurrentReauthRegistersOnce).
	eventually(t, "the agent to register again", func() (bool, string) {
		n := len(ag.logs.lines("registered with the manager"))
		return n >= 2, fmt.Sprintf("%d registrations", n)
	})
	touch(t, marker)
	final := tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	if final.Attempts != 1 || final.InstanceID != before.InstanceID {
		t.Errorf("task ran %d times, on %s; want once on %s", final.Attempts, final.InstanceID, before.InstanceID)
	}
	if out, _, _ := tm.logs(t, task.ID, false); out != "start\ndone\n" {
		t.Errorf("output %q", out)
	}
	after := tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
	if after.InstanceID != before.InstanceID || after.Version != "test" {
		t.Errorf("listed as %+v after re-registering, want instance %s version test", after, before.InstanceID)
	}
	next := tm.submitScript(t, "echo next")
	tm.waitTask(t, next.ID, protocol.StatusSucceeded)
}

func TestFailsOverToTheNextManagerURL(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	// A loopback port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	ag := startAgent(t, tm, agentOpts{urls: []string{dead, tm.url}})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
	task := tm.submitScript(t, "echo failover")
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	if out, _, _ := tm.logs(t, task.ID, false); out != "failover\n" {
		t.Errorf("output %q", out)
	}
}

// TestResultKeptOnDiskAcrossADelegateRestart: the manager is down when a
// task ends and the delegate is stopped before it could report; the result
// waits on disk and the restarted delegate delivers it.
func TestResultKeptOnDiskAcrossADelegateRestart(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig()) // its lease outlives a slow restart
	ag := startAgent(t, tm, agentOpts{})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	marker := filepath.Join(t.TempDir(), "go")
	task := tm.submitScript(t, "echo kept\nwhile [ ! -e "+shq(marker)+" ]; do sleep 0.02; done\necho written while the manager was down\nexit 4\n")
	tm.waitTask(t, task.ID, protocol.StatusRunning)
	eventually(t, "the output to reach the manager", func() (bool, string) {
		out, _, _ := tm.logs(t, task.ID, false)
		return out == "kept\n", fmt.Sprintf("output %q", out)
	})
	tm.stop()
	touch(t, marker)
	// Stopped only once the script's exit is recorded (else the stop
	// cancels the task) and its last output could not be sent.
	eventually(t, "the task's process to end and its output to wait", func() (bool, string) {
		ended := len(ag.logs.lines("task process ended", "task="+task.ID, "status=failed")) > 0
		waits := len(ag.logs.lines("output not delivered yet", "task="+task.ID)) > 0
		return ended && waits, fmt.Sprintf("process ended %v, output waiting %v", ended, waits)
	})
	ag.cancel()
	ag.force()
	if ok, _ := ag.waitReturn(waitLong); !ok {
		t.Fatal("agent did not stop")
	}
	spooled, _ := filepath.Glob(filepath.Join(ag.workDir, "spool", "*.result.json"))
	if len(spooled) != 1 {
		t.Fatalf("spool holds %v, want the one undelivered result", spooled)
	}

	tm.restart()
	again := startAgent(t, tm, agentOpts{token: ag.token, hostname: ag.hostname, workDir: ag.workDir})
	final := tm.waitTask(t, task.ID, protocol.StatusFailed)
	if final.ExitCode == nil || *final.ExitCode != 4 || final.Attempts != 1 {
		t.Errorf("task exit %v in %d attempts, want exit 4 in 1 (the spooled result)", final.ExitCode, final.Attempts)
	}
	if out, _, _ := tm.logs(t, task.ID, false); out != "kept\nwritten while the manager was down\n" {
		t.Errorf("output after the restart = %q, want the output kept on disk too", out)
	}
	eventually(t, "the spool to be emptied", func() (bool, string) {
		left, _ := filepath.Glob(filepath.Join(again.workDir, "spool", "*.json"))
		return len(left) == 0, fmt.Sprintf("%v", left)
	})
}
