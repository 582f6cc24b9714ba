package e2e

// End-to-end tests of issue 10, items 1 and 2, the way an attacker would go
// about it: a stolen project-scoped delegate token used by hand against a
// real manager process to take another project's task and report on it,
// and a real delegate process started with another token and the identity
// of a delegate that is running a task.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// attacker registers by hand with a delegate token, as a script with a
// stolen token would, and returns the client with its session.
func (c *cluster) attacker(token, name, host string) *client.Client {
	c.t.Helper()
	cl, err := client.New(c.url, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := cl.Register(context.Background(), protocol.RegisterRequest{ProtocolVersion: protocol.Version,
		AccountID: c.account, Token: token, Name: name, Hostname: host, IP: "127.0.0.1", FreshStart: true})
	if err != nil {
		c.t.Fatalf("attacker registration: %v", err)
	}
	cl.SetSecret(resp.Session)
	return cl
}

func wantErrCode(t *testing.T, what string, err error, code protocol.Code) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("%s: got %v, want an error with code %s", what, err, code)
	}
}

// A delegate token of project web, stolen, is used to take a task of
// project api by its ID (the task carries a secret), and then to report
// start, output and success for it while the api project's delegate runs
// it. Every call is answered as for a task that does not exist, and the
// task runs and ends as its own delegate says.
func TestScopeStolenProjectTokenCannotReachAnotherProject(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx := context.Background()
	c.mustCLI("org", "create", "eng")
	c.mustCLI("project", "create", "--org", "eng", "web")
	c.mustCLI("project", "create", "--org", "eng", "api")
	webTok := c.scopedToken("web-ci", "--org", "eng", "--project", "web")
	apiTok := c.scopedToken("api-ci", "--org", "eng", "--project", "api")
	// The api project's delegate runs one task at a time: while it runs
	// the first, the second waits in the queue.
	c.startDelegates(deliveryModes[0], delegateSpec{name: "api-del", host: "api-h", token: apiTok,
		env: []string{"DELEGATE_TASK_CAPACITY=1"}})
	first, releaseFirst := blocker(t, "first")
	firstID := c.submit("--org", "eng", "--project", "api", "--script", first)
	c.waitRunning(firstID)
	second, releaseSecond := blocker(t, "deployed")
	victim := c.submit("--org", "eng", "--project", "api", "--secret-env", "DEPLOY_KEY=s3cret-api-key", "--script", second)

	att := c.attacker(webTok, "web-del", "attacker-h")
	acq, err := att.Acquire(ctx, victim)
	if err == nil {
		t.Fatalf("a project web delegate acquired a task of project api and got its secrets %v", acq.Spec.SecretEnv)
	}
	wantErrCode(t, "acquire of another project's task", err, protocol.CodeNotFound)
	if tk := c.task(victim); tk.Status != protocol.StatusQueued {
		t.Fatalf("task after the attempt: %s, want queued", tk.Status)
	}

	releaseFirst()
	tk := c.waitRunning(victim)
	if tk.DelegateName != "api-del" {
		t.Fatalf("task runs on %q, want api-del", tk.DelegateName)
	}
	const epoch = 1 // a guess that is right: the first claim
	wantErrCode(t, "started", att.Started(ctx, victim, protocol.StartedRequest{Epoch: epoch}), protocol.CodeNotFound)
	wantErrCode(t, "logs", att.SendLogs(ctx, victim, protocol.LogsRequest{Epoch: epoch,
		Chunks: []protocol.LogChunk{{Seq: 1000, Data: "forged output\n"}}}), protocol.CodeNotFound)
	_, err = att.Result(ctx, victim, protocol.ResultRequest{Epoch: epoch, Status: protocol.StatusFailed, Error: "forged"})
	wantErrCode(t, "result", err, protocol.CodeNotFound)
	hb, err := att.Heartbeat(ctx, protocol.Heartbeat{Seq: 1, Running: []protocol.RunningTask{{ID: victim, Epoch: epoch}}})
	if err != nil || len(hb.Abort) != 1 {
		t.Errorf("heartbeat listing the task: %+v, %v; want it aborted", hb, err)
	}

	releaseSecond()
	done := c.waitTerminal(victim)
	if done.Status != protocol.StatusSucceeded || done.DelegateName != "api-del" {
		t.Errorf("task ended %s on %q (%s), want succeeded on api-del", done.Status, done.DelegateName, done.Error)
	}
	if out := c.mustCLI("task", "logs", victim); out != "deployed\n" {
		t.Errorf("task output %q, want %q", out, "deployed\n")
	}
}

// A delegate runs a task; a second delegate process is started with a
// token of another scope and the same DELEGATE_NAME and hostname (so the
// same name, hostname and IP). It is refused, says why, and stops; the
// first delegate's task is not failed and ends as it should. Once the
// first token is revoked, the identity may move to the other token.
func TestIdentityTakeoverWithAnotherTokenRefused(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.mustCLI("org", "create", "eng")
	c.mustCLI("project", "create", "--org", "eng", "web")
	victimTok := c.scopedToken("build-ci")
	attackerTok := c.scopedToken("web-ci", "--org", "eng", "--project", "web")
	env := func(token string) []string {
		return append(c.seed004Env(token, "build", ""), "DELEGATE_HOSTNAME=build-h")
	}
	start(t, "victim", env(victimTok), "delegate")
	c.waitConnected("build-h", "")
	script, release := blocker(t, "built")
	id := c.submit("--script", script)
	c.waitRunning(id)

	att := start(t, "attacker", env(attackerTok), "delegate")
	eventually(t, 30*time.Second, "the delegate with the other token to stop (or the victim's task to end)", func() bool {
		return att.exited() || c.task(id).Status != protocol.StatusRunning
	})
	if tk := c.task(id); tk.Status != protocol.StatusRunning {
		t.Fatalf("the delegate with the other token took the identity over: the victim's task ended %s: %s", tk.Status, tk.Error)
	}
	if code := att.wait(30 * time.Second); code == 0 {
		t.Fatalf("the delegate with the other token exited 0; output:\n%s", att.out.String())
	}
	out := att.out.String()
	for _, want := range []string{`"build-ci"`, "identity", "DELEGATE_NAME", "legate token revoke build-ci"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refused delegate's output does not say %s:\n%s", want, out)
		}
	}
	// The victim still runs its task, connected, under its own token.
	if tk := c.task(id); tk.Status != protocol.StatusRunning {
		t.Fatalf("victim's task after the takeover attempt: %s (%s)", tk.Status, tk.Error)
	}
	if d, ok := c.findDelegate("build-h"); !ok || d.TokenName != "build-ci" || d.Status != protocol.DelegateConnected {
		t.Fatalf("victim after the takeover attempt: %+v", d)
	}
	release()
	if done := c.waitTerminal(id); done.Status != protocol.StatusSucceeded {
		t.Fatalf("victim's task ended %s: %s", done.Status, done.Error)
	}
	if out := c.mustCLI("task", "logs", id); out != "built\n" {
		t.Errorf("task output %q", out)
	}

	// Revoked: the identity moves to the other token (the old process is
	// told its token was revoked and stops).
	c.mustCLI("token", "revoke", "build-ci")
	start(t, "successor", env(attackerTok), "delegate")
	eventually(t, 20*time.Second, "build-h registered with web-ci", func() bool {
		d, ok := c.findDelegate("build-h")
		return ok && d.TokenName == "web-ci" && d.Status == protocol.DelegateConnected
	})
}
