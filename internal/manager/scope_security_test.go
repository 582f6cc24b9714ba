package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// Tests of the delegate API the way a delegate with a stolen or
// narrow-scoped token would use it: every call that names a task or a
// configuration is checked against the scope of its token, an identity
// cannot be taken over with another token, registration text is printable,
// running lists are bounded, and a result closes the task's log.

// scopedWorld is an account with orgs eng and ops, projects eng/web and
// eng/api, and a token of each scope.
type scopedWorld struct {
	tm                       *testManager
	api                      *client.Client
	acctTok, webTok, engTok  string
	apiTask, opsTask, acTask protocol.Task
}

// Dispatch's names of the delegate calls (the "call" label of
// legate_manager_scope_refusals_total) and its bounds of a delegate's
// list of running tasks (delegate_checks.go).
const (
	callAcquire             = "acquire"
	callStarted             = "started"
	callLogs                = "logs"
	callResult              = "result"
	callHeartbeat           = "heartbeat"
	callRegister            = "register"
	callCapabilities        = "capabilities"
	callConfigurationResult = "configuration_result"

	maxTaskIDLen     = 64
	maxRunningListed = 10000
	runningSlack     = 64
)

func newScopedWorld(t *testing.T, cfg Config) *scopedWorld {
	t.Helper()
	tm := startTestManager(t, cfg)
	ctx := context.Background()
	api := tm.client(t, tm.admin.APIKey)
	for _, org := range []string{"eng", "ops"} {
		if _, err := api.CreateOrg(ctx, org); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"web", "api"} {
		if _, err := api.CreateProject(ctx, "eng", p); err != nil {
			t.Fatal(err)
		}
	}
	w := &scopedWorld{tm: tm, api: api}
	for _, tk := range []struct {
		dst          *string
		name         string
		org, project string
	}{{&w.acctTok, "acct", "", ""}, {&w.webTok, "web", "eng", "web"}, {&w.engTok, "eng", "eng", ""}} {
		tok, err := api.CreateScopedToken(ctx, protocol.CreateTokenRequest{Name: tk.name, Org: tk.org, Project: tk.project})
		if err != nil {
			t.Fatal(err)
		}
		*tk.dst = tok.Value
	}
	submit := func(org, project string) protocol.Task {
		task, err := api.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "echo hi"},
			SecretEnv: map[string]string{"DEPLOY_KEY": "s3cret-" + org + project}, Org: org, Project: project,
			QueueTimeoutMS: time.Hour.Milliseconds()})
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	w.apiTask, w.opsTask, w.acTask = submit("eng", "api"), submit("ops", ""), submit("", "")
	return w
}

func scopeRefusals(t *testing.T, tm *testManager, call string) float64 {
	t.Helper()
	return promtest.Scrape(t, tm.url+protocol.PathMetrics).Value(t, "legate_manager_scope_refusals_total", "call", call)
}

// A project-scoped delegate asks for tasks of another project, of another
// org and of the account by ID: each is answered as a task of another
// account (404, nothing leaks), and counted.
func TestScopeCheckedOnAcquire(t *testing.T) {
	w := newScopedWorld(t, Config{})
	ctx := context.Background()
	web, _ := w.tm.registerFake(t, w.tm.admin.AccountID, w.webTok, "web-del", "web-host")
	eng, _ := w.tm.registerFake(t, w.tm.admin.AccountID, w.engTok, "eng-del", "eng-host")
	for _, task := range []protocol.Task{w.apiTask, w.opsTask, w.acTask} {
		acq, err := web.Acquire(ctx, task.ID)
		if err == nil {
			t.Fatalf("the project web delegate acquired task %s of scope %q/%q and got its secrets %v",
				task.ID, task.Org, task.Project, acq.Spec.SecretEnv)
		}
		wantCode(t, "acquire of task "+task.Org+"/"+task.Project, err, protocol.CodeNotFound)
		if !strings.Contains(err.Error(), "task "+task.ID+" not found") {
			t.Errorf("answer %q is not the one for a task of another account", err)
		}
	}
	for _, task := range []protocol.Task{w.opsTask, w.acTask} {
		_, err := eng.Acquire(ctx, task.ID)
		wantCode(t, "org delegate's acquire of task "+task.Org+"/"+task.Project, err, protocol.CodeNotFound)
	}
	if got := scopeRefusals(t, w.tm, callAcquire); got != 5 {
		t.Errorf("scope refusals of acquire: %v, want 5", got)
	}
	// Nothing was claimed; the org delegate takes the task of its project.
	for _, task := range []protocol.Task{w.apiTask, w.opsTask, w.acTask} {
		if got, err := w.api.GetTask(ctx, task.ID); err != nil || got.Status != protocol.StatusQueued {
			t.Errorf("task %s after the refusals: %+v, %v; want queued", task.ID, got, err)
		}
	}
	if acq, err := eng.Acquire(ctx, w.apiTask.ID); err != nil || acq.Spec.SecretEnv["DEPLOY_KEY"] != "s3cret-engapi" {
		t.Errorf("org delegate acquiring its project's task: %+v, %v", acq, err)
	}
}

// A task held by an account delegate: a project delegate of another
// project reporting on it (started, logs, result, capabilities) is answered
// as for a task of another account, not as a stale lease.
func TestScopeCheckedOnReports(t *testing.T) {
	w := newScopedWorld(t, Config{})
	ctx := context.Background()
	acct, _ := w.tm.registerFake(t, w.tm.admin.AccountID, w.acctTok, "acct-del", "acct-host")
	web, _ := w.tm.registerFake(t, w.tm.admin.AccountID, w.webTok, "web-del", "web-host")
	acq, err := acct.Acquire(ctx, w.apiTask.ID)
	if err != nil {
		t.Fatal(err)
	}
	err = web.Started(ctx, w.apiTask.ID, protocol.StartedRequest{Epoch: acq.Epoch})
	wantCode(t, "started", err, protocol.CodeNotFound)
	err = web.SendLogs(ctx, w.apiTask.ID, protocol.LogsRequest{Epoch: acq.Epoch, Chunks: []protocol.LogChunk{{Seq: 1, Data: "forged"}}})
	wantCode(t, "logs", err, protocol.CodeNotFound)
	_, err = web.Result(ctx, w.apiTask.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded})
	wantCode(t, "result", err, protocol.CodeNotFound)
	// A failed capability check naming an out-of-scope queued task does
	// not get it offered again.
	if err := web.ReportCapabilities(ctx, protocol.CapabilityReport{TaskID: w.opsTask.ID,
		Results: []protocol.CapabilityResult{{Criteria: "binary:x", Error: "missing"}}}); err != nil {
		t.Fatal(err)
	}
	for call, want := range map[string]float64{callStarted: 1, callLogs: 1, callResult: 1, callCapabilities: 1} {
		if got := scopeRefusals(t, w.tm, call); got != want {
			t.Errorf("scope refusals of %s: %v, want %v", call, got, want)
		}
	}
	if got, err := w.api.GetTask(ctx, w.apiTask.ID); err != nil || got.Status != protocol.StatusRunning {
		t.Errorf("task after the forged reports: %+v, %v; want still running", got, err)
	}
}

// An instance holds a task claimed under an account token; the token is
// revoked and the identity registers again with a project token of
// another project. The task is not adopted from its running list, a
// heartbeat listing it is told to abort it, and reports on it are refused.
func TestScopeCheckedAfterRebind(t *testing.T) {
	w := newScopedWorld(t, Config{})
	ctx := context.Background()
	acct, _ := w.tm.registerFake(t, w.tm.admin.AccountID, w.acctTok, "shared", "host-1")
	acq, err := acct.Acquire(ctx, w.opsTask.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.api.RevokeToken(ctx, "acct"); err != nil {
		t.Fatal(err)
	}
	running := []protocol.RunningTask{{ID: w.opsTask.ID, Epoch: acq.Epoch}}
	c := w.tm.client(t, "")
	resp, err := c.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: w.tm.admin.AccountID,
		Token: w.webTok, Name: "shared", Hostname: "host-1", IP: "127.0.0.1", Running: running})
	if err != nil {
		t.Fatalf("register the identity of a revoked token with another token: %v", err)
	}
	c.SetSecret(resp.Session)
	if got := scopeRefusals(t, w.tm, callRegister); got != 1 {
		t.Errorf("scope refusals of register: %v, want 1", got)
	}
	hb, err := c.Heartbeat(ctx, protocol.Heartbeat{Seq: 1, Running: running})
	if err != nil || !cmp.Equal(hb.Abort, []string{w.opsTask.ID}) {
		t.Errorf("heartbeat listing the out-of-scope task: %+v, %v; want it aborted", hb, err)
	}
	if got := scopeRefusals(t, w.tm, callHeartbeat); got != 1 {
		t.Errorf("scope refusals of heartbeat: %v, want 1", got)
	}
	wantCode(t, "logs", c.SendLogs(ctx, w.opsTask.ID, protocol.LogsRequest{Epoch: acq.Epoch,
		Chunks: []protocol.LogChunk{{Seq: 1, Data: "forged"}}}), protocol.CodeNotFound)
	_, err = c.Result(ctx, w.opsTask.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded})
	wantCode(t, "result", err, protocol.CodeNotFound)
	if got, err := w.api.GetTask(ctx, w.opsTask.ID); err != nil || got.Status == protocol.StatusSucceeded {
		t.Errorf("task after the forged result: %+v, %v", got, err)
	}
}

// Configurations have a scope: a project delegate gets its project's
// rather than the account's (the closest scope wins a tie), never another
// project's, even when it declares their selectors; it cannot record a
// result for one that does not apply to it; a configuration of another
// project does not disturb it; an account delegate never gets a project's.
func TestConfigurationScope(t *testing.T) {
	w := newScopedWorld(t, Config{})
	ctx := context.Background()
	create := func(name string, org, project string, sel ...string) {
		t.Helper()
		c, err := w.api.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: name, Script: "echo " + name,
			Selectors: sel, Org: org, Project: project})
		if err != nil {
			t.Fatal(err)
		}
		if c.Org != org || c.Project != project {
			t.Errorf("created %+v", c)
		}
	}
	create("acct-tools", "", "", "linux")
	create("web-tools", "eng", "web", "linux")
	_, err := w.api.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "x", Script: "true", Org: "nope"})
	wantCode(t, "configuration of an unknown org", err, protocol.CodeBadRequest)
	_, err = w.api.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "x", Script: "true", Project: "web"})
	wantCode(t, "configuration of a project without its org", err, protocol.CodeBadRequest)

	web, resp := w.tm.registerFake(t, w.tm.admin.AccountID, w.webTok, "web-del", "web-host", "linux")
	want := &protocol.AppliedConfiguration{Name: "web-tools", Version: 1, Script: "echo web-tools"}
	wantAcct := &protocol.AppliedConfiguration{Name: "acct-tools", Version: 1, Script: "echo acct-tools"}
	if diff := cmp.Diff(want, resp.Configuration); diff != "" {
		t.Errorf("registration answer of the project delegate (-want +got):\n%s", diff)
	}
	acct, resp := w.tm.registerFake(t, w.tm.admin.AccountID, w.acctTok, "acct-del", "acct-host", "linux")
	if resp.Configuration == nil || resp.Configuration.Name != "acct-tools" {
		t.Errorf("registration answer of the account delegate: %+v", resp.Configuration)
	}
	// Another project's configuration, even one matching by name first
	// and by selectors, changes nothing for the web delegate.
	create("a-api-tools", "eng", "api", "linux")
	if ev, err := web.Poll(ctx, 0); err != nil || len(ev.Events) != 0 {
		t.Errorf("the web delegate got events %+v, %v for another project's configuration", ev, err)
	}
	got, err := web.DelegateConfiguration(ctx)
	if diff := cmp.Diff(want, got.Configuration); err != nil || diff != "" {
		t.Errorf("fetched configuration, error %v (-want +got):\n%s", err, diff)
	}

	report := func(c *client.Client, name string, version int64) error {
		now := time.Now()
		return c.ReportConfiguration(ctx, protocol.ConfigurationResult{Name: name, Version: version, ExitCode: new(int),
			Output: "forged", StartedAt: now, FinishedAt: now})
	}
	for _, r := range []struct {
		what    string
		name    string
		version int64
	}{
		{"another project's configuration", "a-api-tools", 1},
		{"an unknown configuration", "nope", 1},
		{"a version that does not exist", "web-tools", 2},
	} {
		err := report(web, r.name, r.version)
		wantCode(t, "result for "+r.what, err, protocol.CodeNotFound)
	}
	if got := scopeRefusals(t, w.tm, callConfigurationResult); got != 1 {
		t.Errorf("scope refusals of configuration results: %v, want 1", got)
	}
	if err := report(web, "web-tools", 1); err != nil {
		t.Errorf("result for its own configuration: %v", err)
	}
	// The web delegate may report the account's configuration: it
	// applies to it (the account covers the project), though another one
	// wins. The account delegate may not report the web configuration.
	if err := report(web, "acct-tools", 1); err != nil {
		t.Errorf("project delegate's result for a configuration that applies to it: %v", err)
	}
	if got, err := acct.DelegateConfiguration(ctx); err != nil || cmp.Diff(wantAcct, got.Configuration) != "" {
		t.Errorf("the account delegate fetched %+v, %v", got.Configuration, err)
	}
	wantCode(t, "account delegate's result for a project configuration", report(acct, "web-tools", 1), protocol.CodeNotFound)
	if err := report(web, "web-tools", 1); err != nil {
		t.Errorf("result for its own configuration: %v", err)
	}
	d, err := w.api.DescribeDelegate(ctx, "web-del")
	if err != nil || len(d.Instances) != 1 || d.Instances[0].ConfigurationResult == nil ||
		d.Instances[0].ConfigurationResult.Name != "web-tools" || d.Instances[0].ConfigurationApplies == nil ||
		d.Instances[0].ConfigurationApplies.Name != "web-tools" {
		t.Errorf("describe web-del: %+v, %v", d, err)
	}
	// A configuration a project still has keeps the project.
	wantCode(t, "delete a project with a configuration", w.api.DeleteProject(ctx, "eng", "api"), protocol.CodeConflict)
}

// A registration with the identity of a running instance and another
// token (even a project-scoped one) is refused with identity_conflict and
// leaves the victim's task and session alone; the same token still
// re-registers (a restart, a replica); once the bound token is revoked,
// another token may take the identity.
func TestIdentityBoundToToken(t *testing.T) {
	w := newScopedWorld(t, Config{})
	ctx := context.Background()
	victim, vresp := w.tm.registerFake(t, w.tm.admin.AccountID, w.acctTok, "build", "build-host")
	acq, err := victim.Acquire(ctx, w.acTask.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := victim.Started(ctx, w.acTask.ID, protocol.StartedRequest{Epoch: acq.Epoch}); err != nil {
		t.Fatal(err)
	}
	attacker := w.tm.client(t, "")
	for _, tok := range []string{w.webTok, w.engTok} {
		_, err := attacker.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: w.tm.admin.AccountID,
			Token: tok, Name: "build", Hostname: "build-host", IP: "127.0.0.1", FreshStart: true})
		wantCode(t, "takeover with another token", err, protocol.CodeIdentityConflict)
		for _, s := range []string{`"acct"`, "legate token revoke acct", "DELEGATE_NAME", `"build-host"`} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("the refusal %q does not say %s", err, s)
			}
		}
	}
	// The victim is untouched: its task runs, its session works.
	if got, err := w.api.GetTask(ctx, w.acTask.ID); err != nil || got.Status != protocol.StatusRunning {
		t.Fatalf("victim's task after the takeover attempt: %+v, %v", got, err)
	}
	if hb, err := victim.Heartbeat(ctx, protocol.Heartbeat{Seq: 1, Running: []protocol.RunningTask{{ID: w.acTask.ID, Epoch: acq.Epoch}}}); err != nil || len(hb.Abort) != 0 {
		t.Fatalf("victim's heartbeat: %+v, %v", hb, err)
	}
	// A replica or restart with the same token: same instance, as before.
	replica, rresp := w.tm.registerFake(t, w.tm.admin.AccountID, w.acctTok, "build", "build-host")
	if rresp.InstanceID != vresp.InstanceID {
		t.Errorf("same token: instance %s, want %s", rresp.InstanceID, vresp.InstanceID)
	}
	if _, err := replica.Result(ctx, w.acTask.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded}); err != nil {
		t.Fatalf("result from the re-registered holder: %v", err)
	}
	// Revoked: the identity is free for another token.
	if _, err := w.api.RevokeToken(ctx, "acct"); err != nil {
		t.Fatal(err)
	}
	if _, resp := w.tm.registerFake(t, w.tm.admin.AccountID, w.engTok, "build", "build-host"); resp.InstanceID != vresp.InstanceID {
		t.Errorf("after the revocation: instance %s, want %s", resp.InstanceID, vresp.InstanceID)
	}
}

// Registration text with control or formatting characters (the way an
// escape sequence reaches `legate delegates list`) is refused with a 400
// that names the field.
func TestRegistrationRefusesControlCharacters(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	base := func() protocol.RegisterRequest {
		return protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: tm.admin.AccountID, Token: tok.Value,
			Name: "build", Hostname: "host-a", IP: "10.0.0.1", Tags: []string{"linux"}, Version: "1.0", Type: "SHELL",
			Description: "build box"}
	}
	tests := []struct {
		field string
		set   func(*protocol.RegisterRequest)
	}{
		{"name", func(r *protocol.RegisterRequest) { r.Name = "build\x1b[2J" }},
		{"hostname", func(r *protocol.RegisterRequest) { r.Hostname = "host\x1b]8;;http://evil\x07x" }},
		{"ip", func(r *protocol.RegisterRequest) { r.IP = "10.0.0.1\r" }},
		{"tags[1]", func(r *protocol.RegisterRequest) { r.Tags = []string{"linux", "gpu\u009b31m"} }},
		{"description", func(r *protocol.RegisterRequest) { r.Description = "build \u202eevil" }},
		{"description", func(r *protocol.RegisterRequest) { r.Description = "two\nlines" }},
		{"version", func(r *protocol.RegisterRequest) { r.Version = "1.0\x7f" }},
		{"type", func(r *protocol.RegisterRequest) { r.Type = "SHELL\u2066" }},
		{"name", func(r *protocol.RegisterRequest) { r.Name = "zero\u200bwidth" }},
		{"version", func(r *protocol.RegisterRequest) { r.Version = strings.Repeat("1", 65) }},
	}
	for _, tt := range tests {
		req := base()
		tt.set(&req)
		_, err := tm.client(t, "").Register(ctx, req)
		wantCode(t, tt.field, err, protocol.CodeBadRequest)
		var pe *protocol.Error
		if errors.As(err, &pe) && !strings.HasPrefix(pe.Message, tt.field+" ") {
			t.Errorf("refusal of %s: %q does not start with the field's name", tt.field, pe.Message)
		}
	}
	list, err := tm.client(t, tm.admin.APIKey).ListDelegates(ctx)
	if err != nil || len(list.Delegates) != 0 {
		t.Fatalf("delegates after the refused registrations: %+v, %v", list, err)
	}
	// Printable text of any script is fine.
	ok := base()
	ok.Name, ok.Description, ok.Tags = "büro-ビルド", "Zürich — 構築 (x86)", []string{"gpu", "ügpu"}
	if _, err := tm.client(t, "").Register(ctx, ok); err != nil {
		t.Errorf("printable registration refused: %v", err)
	}
}

// madeUp lists n task IDs that do not exist.
func madeUp(n int) []protocol.RunningTask {
	out := make([]protocol.RunningTask, n)
	for i := range out {
		out[i] = protocol.RunningTask{ID: fmt.Sprintf("t_madeup%010d", i), Epoch: 1}
	}
	return out
}

// A heartbeat or registration listing far more tasks than the delegate may
// run is answered (never refused: an honest delegate must not be cut off)
// but only its first capacity+64 entries, or 10,000 for unlimited
// capacity, are looked at; an entry that cannot be a task ID is refused.
func TestRunningListsBounded(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	register := func(host string, capacity int, running []protocol.RunningTask) (*client.Client, error) {
		c := tm.client(t, "")
		resp, err := c.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: tm.admin.AccountID,
			Token: tok.Value, Name: "d", Hostname: host, IP: "127.0.0.1", Capacity: capacity, Running: running})
		if err == nil {
			c.SetSecret(resp.Session)
		}
		return c, err
	}
	small, err := register("small", 2, madeUp(5000))
	if err != nil {
		t.Fatalf("registration with a long running list: %v", err)
	}
	hb, err := small.Heartbeat(ctx, protocol.Heartbeat{Seq: 1, Running: madeUp(5000)})
	if err != nil || len(hb.Abort) != 2+runningSlack {
		t.Errorf("heartbeat of a capacity-2 delegate listing 5000 tasks: %d aborts, %v; want %d", len(hb.Abort), err, 2+runningSlack)
	}
	// Duplicates count once.
	dup := append(madeUp(3), madeUp(3)...)
	if hb, err := small.Heartbeat(ctx, protocol.Heartbeat{Seq: 2, Running: dup}); err != nil || len(hb.Abort) != 3 {
		t.Errorf("heartbeat listing 3 tasks twice: %+v, %v", hb, err)
	}
	unlimited, err := register("unlimited", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	hb, err = unlimited.Heartbeat(ctx, protocol.Heartbeat{Seq: 1, Running: madeUp(maxRunningListed + 5000)})
	if err != nil || len(hb.Abort) != maxRunningListed {
		t.Errorf("heartbeat of an unlimited delegate listing %d tasks: %d aborts, %v; want %d", maxRunningListed+5000, len(hb.Abort), err, maxRunningListed)
	}
	long := []protocol.RunningTask{{ID: "t_ok", Epoch: 1}, {ID: strings.Repeat("x", maxTaskIDLen+1), Epoch: 1}}
	_, err = small.Heartbeat(ctx, protocol.Heartbeat{Seq: 3, Running: long})
	wantCode(t, "heartbeat with an absurd task ID", err, protocol.CodeBadRequest)
	if !strings.Contains(err.Error(), "running[1]") {
		t.Errorf("refusal %q does not name the entry", err)
	}
	_, err = register("long", 2, long)
	wantCode(t, "registration with an absurd task ID", err, protocol.CodeBadRequest)
	_, err = small.Acquire(ctx, strings.Repeat("x", 1000))
	wantCode(t, "acquire of an absurd task ID", err, protocol.CodeNotFound)
	if strings.Contains(err.Error(), "xxxx") {
		t.Errorf("the refusal echoes the ID: %q", err)
	}

	// Over the WebSocket: the same bound, and an absurd entry ends the channel.
	dial := func(c *client.Client) *websocket.Conn {
		t.Helper()
		sess, err := c.RefreshSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("Authorization", "Bearer "+sess.Session)
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tm.url, "http")+protocol.PathWebSocket, &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Fatal(err)
		}
		ws.SetReadLimit(4 << 20)
		t.Cleanup(func() { ws.CloseNow() })
		return ws
	}
	ws := dial(small)
	if err := wsjson.Write(ctx, ws, protocol.Frame{Kind: protocol.FrameHeartbeat, Heartbeat: &protocol.Heartbeat{Seq: 7, Running: madeUp(5000)}}); err != nil {
		t.Fatal(err)
	}
	ack := readAck(t, ws, 7)
	if len(ack.Abort) != 2+runningSlack {
		t.Errorf("WebSocket heartbeat listing 5000 tasks: %d aborts, want %d", len(ack.Abort), 2+runningSlack)
	}
	if err := wsjson.Write(ctx, ws, protocol.Frame{Kind: protocol.FrameHeartbeat, Heartbeat: &protocol.Heartbeat{Seq: 8, Running: long}}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		var ev protocol.Event
		err := wsjson.Read(rctx, ws, &ev)
		if err == nil {
			if ev.Kind == protocol.EventHeartbeatAck && ev.Seq == 8 {
				t.Fatalf("a heartbeat with an absurd task ID was acknowledged: %+v", ev)
			}
			continue
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("the WebSocket stayed open after a heartbeat with an absurd task ID")
		}
		break
	}
}

// readAck reads events until the acknowledgement of heartbeat seq.
func readAck(t *testing.T, ws *websocket.Conn, seq int64) protocol.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		var ev protocol.Event
		if err := wsjson.Read(ctx, ws, &ev); err != nil {
			t.Fatalf("waiting for the ack of heartbeat %d: %v", seq, err)
		}
		if ev.Kind == protocol.EventHeartbeatAck && ev.Seq == seq {
			return ev
		}
	}
}

// After the result, log chunks numbered past the result's last one are
// refused (task_terminal); late chunks it counts are still taken.
func TestLogChunksAfterResult(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	api := tm.client(t, tm.admin.APIKey)
	tok, err := api.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	task, err := api.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d", "h")
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	chunk := func(seq int64, data string) protocol.LogsRequest {
		return protocol.LogsRequest{Epoch: acq.Epoch, Chunks: []protocol.LogChunk{{Seq: seq, Data: data}}}
	}
	if err := d.SendLogs(ctx, task.ID, chunk(1, "one\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, LastSeq: 2}); err != nil {
		t.Fatal(err)
	}
	if err := d.SendLogs(ctx, task.ID, chunk(2, "two\n")); err != nil {
		t.Errorf("a late chunk the result counts: %v", err)
	}
	if err := d.SendLogs(ctx, task.ID, chunk(1, "one\n")); err != nil {
		t.Errorf("a redelivered chunk: %v", err)
	}
	err = d.SendLogs(ctx, task.ID, chunk(3, "rm -rf / succeeded\n"))
	wantCode(t, "a chunk past the result", err, protocol.CodeTaskTerminal)
	var out strings.Builder
	if _, err := api.StreamLogs(ctx, task.ID, false, func(l protocol.LogStreamLine) error {
		if l.Chunk != nil {
			out.WriteString(l.Chunk.Data)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "one\ntwo\n" {
		t.Errorf("stored output %q, want %q", out.String(), "one\ntwo\n")
	}
}

// unprintableRE is an independent statement of what registration text may
// not contain: control (Cc) and format (Cf) characters and the line and
// paragraph separators.
var unprintableRE = regexp.MustCompile(`[\p{Cc}\p{Cf}\x{2028}\x{2029}]`)

// FuzzCheckText: the registration text check refuses exactly the text the
// reference pattern finds an unprintable character in (or that is too
// long), and its refusal names the field.
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{"build", "host\x1b[2J", "a\u202eb", "\u009b31m", "ok\u200b", "Zürich — 構築", "\x7f", "a\u2028b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := protocol.CheckText("field", s, 64)
		want := len(s) > 64 || unprintableRE.MatchString(s) || !utf8.ValidString(s)
		if (err != nil) != want {
			t.Fatalf("protocol.CheckText(%q) = %v; want refused %v", s, err, want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "field ") {
			t.Fatalf("refusal %q does not name the field", err)
		}
	})
}
