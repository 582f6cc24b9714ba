package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

func TestSeedVariablesSelectorsOutputAndExitCodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("ecs")
	// One delegate from seed 004's Docker task definition, one from seed 003's ECS one.
	c.delegate("docker-del", "docker-host-1", c.seed004Env(tok, "docker-del", "linux, Docker")...)
	c.delegate("ecs-delegate", "ecs-host-1", c.seed003Env(tok, "ecs-delegate")...)

	d, _ := c.findDelegate("docker-host-1")
	if d.Name != "docker-del" || d.Type != "DOCKER" || strings.Join(d.Tags, ",") != "docker,linux" || d.Connection != protocol.ConnWebSocket || d.IP == "" || d.Version == "" {
		t.Errorf("docker delegate listed as %+v", d)
	}

	// A tag selector picks the Docker delegate, every time.
	for i := 0; i < 3; i++ {
		task, r := c.runJSON("--selector", "DOCKER", "--script", "echo on $(hostname)")
		if r.code != 0 || task.Status != protocol.StatusSucceeded || task.DelegateHostname != "docker-host-1" {
			t.Fatalf("docker-selected task: code %d, %+v, stderr %s", r.code, task, r.stderr)
		}
	}
	// The implicit selectors: delegate name and hostname.
	task, _ := c.runJSON("--selector", "ecs-delegate", "--script", "true")
	if task.DelegateName != "ecs-delegate" {
		t.Errorf("name selector ran on %q", task.DelegateName)
	}
	task, _ = c.runJSON("--selector", "Docker-Host-1", "--script", "true")
	if task.DelegateHostname != "docker-host-1" {
		t.Errorf("hostname selector ran on %q", task.DelegateHostname)
	}
	if task.CreatedAt.IsZero() || task.AcquiredAt == nil || task.StartedAt == nil || task.FinishedAt == nil || task.Attempts != 1 {
		t.Errorf("timestamps/attempts missing: %+v", task)
	}

	// Output streams to stdout and the exit code propagates.
	r := c.cli("task", "run", "--selector", "linux", "--script", "echo hello; echo oops >&2; exit 7")
	if r.code != 7 {
		t.Errorf("exit code = %d, want 7 (stderr %s)", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "hello\n") || !strings.Contains(r.stdout, "oops\n") {
		t.Errorf("stdout = %q, want the task's output", r.stdout)
	}
	logs := c.mustCLI("task", "list", "--json")
	if !strings.Contains(logs, "failed") {
		t.Errorf("task list does not show the failed task: %s", logs)
	}

	// Env vars reach the task; the delegate's own token does not.
	r = c.cli("task", "run", "--env", "GREETING=hi there", "--script", `echo "[$GREETING] [${DELEGATE_TOKEN:-none}] [${HARNESS_TOKEN:-none}]"`)
	if r.code != 0 || !strings.Contains(r.stdout, "[hi there] [none] [none]") {
		t.Errorf("env: code %d stdout %q", r.code, r.stdout)
	}

	// A selector nobody has: the task is never run elsewhere.
	task, r = c.runJSON("--selector", "gpu", "--queue-timeout", "1s", "--script", "true")
	if task.Status != protocol.StatusNotAssigned || r.code == 0 || task.DelegateName != "" {
		t.Errorf("unmatched selector: code %d task %+v", r.code, task)
	}
}

func TestBadTokenIsRefusedClearly(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	p := start(t, "bad delegate", append(c.seed004Env("not-a-real-token", "bad", ""), "DELEGATE_HOSTNAME=bad-host"), "delegate")
	if code := p.wait(20 * time.Second); code == 0 {
		t.Fatal("delegate with a bad token exited 0")
	}
	out := p.out.String()
	if !strings.Contains(out, "not valid") || !strings.Contains(out, "DELEGATE_TOKEN") {
		t.Errorf("refusal message does not explain: %s", out)
	}
	// A missing variable is a one-line error that names it.
	p = start(t, "no token", []string{"ACCOUNT_ID=" + c.account, "MANAGER_HOST_AND_PORT=" + c.url}, "delegate")
	if code := p.wait(10 * time.Second); code == 0 {
		t.Fatal("delegate without a token exited 0")
	}
	if out := p.out.String(); !strings.Contains(out, "DELEGATE_TOKEN") {
		t.Errorf("missing-token error does not name the variable: %s", out)
	}
	// A placeholder copied from the seed documents is caught too.
	env := c.seed004Env("<DELEGATE_TOKEN>", "ph", "")
	p = start(t, "placeholder", env, "delegate")
	if code := p.wait(10 * time.Second); code == 0 {
		t.Fatal("delegate with a placeholder token exited 0")
	}
}

func TestForcedPollingRunsTasks(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("poll")
	c.delegate("poller", "poll-host", append(c.seed004Env(tok, "poller", "poll"), "POLL_FOR_TASKS=true")...)
	c.waitConnected("poll-host", protocol.ConnPolling)
	for i := 0; i < 3; i++ {
		r := c.cli("task", "run", "--selector", "poll", "--script", fmt.Sprintf("echo poll-%d", i))
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("poll-%d", i)) {
			t.Fatalf("polling task %d: code %d stdout %q stderr %q", i, r.code, r.stdout, r.stderr)
		}
	}
	// It stays on polling; it never opened a WebSocket.
	if d, _ := c.findDelegate("poll-host"); d.Connection != protocol.ConnPolling {
		t.Errorf("connection = %q, want polling", d.Connection)
	}
}

func TestOutputStreamsWhileTheTaskRuns(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("s")
	c.delegate("s", "stream-host", c.seed004Env(tok, "s", "")...)
	marker := filepath.Join(t.TempDir(), "release")
	cmd, out, _ := c.streamCLI("task", "run", "--script", fmt.Sprintf("echo first line; while [ ! -e %s ]; do sleep 0.05; done; echo second line", marker))
	// The first line arrives while the task is still blocked.
	if line := readLineWithin(t, out, 10*time.Second); line != "first line\n" {
		t.Fatalf("first line = %q", line)
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if line := readLineWithin(t, out, 10*time.Second); line != "second line\n" {
		t.Fatalf("second line = %q", line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("task run: %v", err)
	}
}

func TestSecretsAreMaskedBeforeLeavingTheDelegate(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("m")
	c.delegate("m", "mask-host", c.seed004Env(tok, "m", "")...)
	secret := "hunter2-very-secret"
	r := c.cli("task", "run", "--secret-env", "PASSWORD="+secret, "--script",
		`echo "pw=$PASSWORD"; printf %s "$PASSWORD" | base64; exit 0`)
	if r.code != 0 {
		t.Fatalf("code %d stderr %s", r.code, r.stderr)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	if strings.Contains(r.stdout, secret) || strings.Contains(r.stdout, b64) {
		t.Fatalf("secret leaked in output: %q", r.stdout)
	}
	if !strings.Contains(r.stdout, "pw=*") {
		t.Errorf("masked output missing: %q", r.stdout)
	}
	// Nor does the API return the secret value.
	list := c.mustCLI("task", "list", "--json")
	if strings.Contains(list, secret) {
		t.Error("task list returns the secret value")
	}
}

func TestTimeoutAndCancelKillTheProcessGroup(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("k")
	c.delegate("k", "kill-host", c.seed004Env(tok, "k", "")...)

	mark := fmt.Sprintf("legate-e2e-%d", time.Now().UnixNano())
	// A background grandchild and a foreground child; both must die.
	script := fmt.Sprintf("sleep 300 & exec -a %s-timeout sleep 301", mark)
	task, r := c.runJSON("--timeout", "1s", "--script", script)
	if task.Status != protocol.StatusTimedOut || r.code == 0 {
		t.Fatalf("timeout: code %d task %+v", r.code, task)
	}
	r = c.cli("task", "run", "--timeout", "1s", "--script", "sleep 30")
	if r.code != 124 || !strings.Contains(r.stderr, "timed_out") {
		t.Errorf("timeout exit code = %d (want 124), stderr %q", r.code, r.stderr)
	}
	eventually(t, 10*time.Second, "timed-out processes gone", func() bool { return !processExists(mark + "-timeout") })

	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--script", fmt.Sprintf("exec -a %s-cancel sleep 302", mark)))
	eventually(t, 10*time.Second, "task running", func() bool { return processExists(mark + "-cancel") })
	c.mustCLI("task", "cancel", id)
	eventually(t, 10*time.Second, "cancelled process gone", func() bool { return !processExists(mark + "-cancel") })
	if got := c.task(id); got.Status != protocol.StatusCancelled {
		t.Errorf("cancelled task status = %s", got.Status)
	}
	// The delegate is free again.
	if r := c.cli("task", "run", "--script", "echo still alive"); r.code != 0 {
		t.Errorf("after cancel: code %d %s", r.code, r.stderr)
	}
}

// processExists reports whether a process whose command line contains s runs.
func processExists(s string) bool {
	out, _ := exec.Command("pgrep", "-f", s).Output()
	return strings.TrimSpace(string(out)) != ""
}

func TestHTTPTask(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Probe") != "yes" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, "accepted "+r.Method)
	}))
	defer srv.Close()
	c := startCluster(t)
	tok := c.token("h")
	c.delegate("h", "http-host", c.seed004Env(tok, "h", "")...)
	task, r := c.runJSON("--type", "http", "--http-url", srv.URL+"/x", "--method", "POST", "--header", "X-Probe: yes", "--expect-status", "202")
	if r.code != 0 || task.Status != protocol.StatusSucceeded || task.HTTPResult == nil || task.HTTPResult.Status != 202 || !strings.Contains(task.HTTPResult.BodyExcerpt, "accepted POST") {
		t.Fatalf("http task: code %d %+v stderr %s", r.code, task, r.stderr)
	}
	task, r = c.runJSON("--type", "http", "--http-url", srv.URL+"/x", "--expect-status", "202")
	if r.code == 0 || task.Status != protocol.StatusFailed || !strings.Contains(task.Error, "400") {
		t.Fatalf("http mismatch: code %d %+v", r.code, task)
	}
}

func TestSigtermDrainsRunningTasks(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("d")
	p := c.delegate("drainer", "drain-host", c.seed004Env(tok, "drainer", "")...)
	marker := filepath.Join(t.TempDir(), "go")
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--script",
		fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; echo finished cleanly", marker)))
	eventually(t, 10*time.Second, "task running", func() bool { return c.task(id).StartedAt != nil })
	p.signal(syscall.SIGTERM)
	eventually(t, 10*time.Second, "delegate draining", func() bool { return strings.Contains(p.out.String(), "stop requested: draining") })
	// Draining: it does not take new work, but keeps the running task.
	queued := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--queue-timeout", "30s", "--script", "echo should not run here"))
	time.Sleep(300 * time.Millisecond)
	if p.exited() {
		t.Fatal("delegate exited before its task finished")
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(20 * time.Second); code != 0 {
		t.Fatalf("drained delegate exit code %d", code)
	}
	got := c.task(id)
	if got.Status != protocol.StatusSucceeded {
		t.Fatalf("drained task = %+v", got)
	}
	if q := c.task(queued); q.Status != protocol.StatusQueued {
		t.Errorf("task submitted during drain: %s on %q, want still queued", q.Status, q.DelegateHostname)
	}
	logs := c.mustCLI("task", "logs", id)
	if !strings.Contains(logs, "finished cleanly") {
		t.Errorf("logs = %q", logs)
	}
	// It deregistered: it leaves the listing, and --all shows it so.
	if d, ok := c.findDelegate("drain-host"); ok {
		t.Errorf("after deregistering, the delegate is still listed: %+v", d)
	}
	var all protocol.DelegateList
	if err := json.Unmarshal([]byte(c.mustCLI("delegates", "list", "--all", "--json")), &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Delegates) != 1 || all.Delegates[0].Hostname != "drain-host" || all.Delegates[0].Status != protocol.DelegateDeregistered {
		t.Errorf("delegates list --all after deregistering: %+v", all.Delegates)
	}
}

func TestTokenRevokeDisconnectsItsDelegates(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	keep := c.token("keep")
	gone := c.token("gone")
	pk := c.delegate("keeper", "keep-host", c.seed004Env(keep, "keeper", "")...)
	pg := c.delegate("goner", "gone-host", c.seed003Env(gone, "goner")...)
	c.mustCLI("token", "revoke", "gone")
	if code := pg.wait(15 * time.Second); code == 0 {
		t.Error("delegate with a revoked token exited 0")
	}
	if !strings.Contains(pg.out.String(), "revoked") {
		t.Errorf("revoked delegate output does not say so: %s", pg.out.String())
	}
	if pk.exited() {
		t.Fatal("the other delegate stopped too")
	}
	list := c.mustCLI("token", "list", "--json")
	if !strings.Contains(list, protocol.TokenRevoked) {
		t.Errorf("token list: %s", list)
	}
	if r := c.cli("task", "run", "--selector", "keeper", "--script", "true"); r.code != 0 {
		t.Errorf("keeper no longer runs tasks: %s", r.stderr)
	}
}

func TestCrossAccountAccessIsRefused(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("a")
	c.delegate("a", "acct-host", c.seed004Env(tok, "a", "")...)
	task, _ := c.runJSON("--script", "echo private output")
	// A second account, created straight in the manager's database.
	st, err := store.Open(context.Background(), filepath.Join(c.data, "legate.db"))
	if err != nil {
		t.Fatal(err)
	}
	const other = "OTHERACCOUNT0000000000"
	if err := st.CreateAccount(context.Background(), store.Account{ID: other, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	otherKey := "lgk_other_account_key"
	if err := st.CreateAPIKey(context.Background(), store.APIKey{ID: "ak_other", AccountID: other, Name: "admin", Hash: sha256hex(otherKey),
		OwnerKind: protocol.OwnerAccount, OwnerID: other, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	as := []string{"LEGATE_API_KEY=" + otherKey}
	for _, args := range [][]string{
		{"task", "get", task.ID},
		{"task", "logs", task.ID},
		{"task", "cancel", task.ID},
		{"token", "revoke", "a"},
	} {
		r := c.cliEnv(as, args...)
		if r.code == 0 || strings.Contains(r.stdout, "private output") || !strings.Contains(strings.ToLower(r.stderr), "not found") {
			t.Errorf("other account %v: code %d stdout %q stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	r := c.cliEnv(as, "delegates", "list", "--json")
	if strings.Contains(r.stdout, "acct-host") {
		t.Error("other account sees the delegate")
	}
	r = c.cliEnv(as, "task", "list", "--json")
	if strings.Contains(r.stdout, task.ID) {
		t.Error("other account lists the task")
	}
	// A delegate cannot join another account with this account's token.
	p := start(t, "intruder", append(c.seed004Env(tok, "intruder", ""), "ACCOUNT_ID="+other, "DELEGATE_HOSTNAME=intruder"), "delegate")
	if code := p.wait(15 * time.Second); code == 0 {
		t.Error("delegate joined another account with a foreign token")
	}
}

func TestManagerRestartKeepsEverything(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("r")
	c.delegate("r", "restart-host", c.seed004Env(tok, "r", "")...)
	task, _ := c.runJSON("--script", "echo before restart")
	key := c.apiKey
	c.mgr.signal(syscall.SIGTERM)
	if code := c.mgr.wait(15 * time.Second); code != 0 {
		t.Fatalf("manager exit code %d on SIGTERM", code)
	}
	c.startManager(strings.TrimPrefix(c.url, "http://"))
	if c.apiKey != key {
		t.Error("API key changed across a restart")
	}
	if got := c.task(task.ID); got.Status != protocol.StatusSucceeded {
		t.Errorf("task after restart: %+v", got)
	}
	if logs := c.mustCLI("task", "logs", task.ID); !strings.Contains(logs, "before restart") {
		t.Errorf("logs after restart: %q", logs)
	}
	// The delegate reconnects by itself and runs new work.
	c.waitConnected("restart-host", "")
	if r := c.cli("task", "run", "--script", "echo after restart"); r.code != 0 || !strings.Contains(r.stdout, "after restart") {
		t.Errorf("after restart: code %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestSecondSignalCancelsAtOnce(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("s2")
	p := c.delegate("twice", "twice-host", c.seed004Env(tok, "twice", "")...)
	mark := fmt.Sprintf("legate-e2e-twice-%d", time.Now().UnixNano())
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--script", fmt.Sprintf("exec -a %s sleep 303", mark)))
	eventually(t, 10*time.Second, "task running", func() bool { return processExists(mark) })
	p.signal(syscall.SIGTERM)
	eventually(t, 10*time.Second, "delegate draining", func() bool {
		d, _ := c.findDelegate("twice-host")
		return d.Draining
	})
	if p.exited() {
		t.Fatal("delegate exited on the first signal while a task ran (grace is 20s)")
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(15 * time.Second); code != 0 {
		t.Fatalf("exit code after second signal: %d", code)
	}
	if processExists(mark) {
		t.Error("task process survived the second signal")
	}
	if got := c.task(id); got.Status != protocol.StatusCancelled {
		t.Errorf("task after second signal: %s (%s), want cancelled", got.Status, got.Error)
	}
}
