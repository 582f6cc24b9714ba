package manager

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// applyPipeline stores a pipeline as the admin.
func (tm *testManager) applyPipeline(t *testing.T, src string) {
	t.Helper()
	tm.applyPipelineAs(t, tm.admin.APIKey, src)
}

// applyPipelineAs stores a pipeline as the holder of key.
func (tm *testManager) applyPipelineAs(t *testing.T, key, src string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"source": src})
	tm.mustAPI(t, key, "POST", protocol.PathPipelines, string(body), 201)
}

// runAs starts a run of a pipeline as the holder of key.
func (tm *testManager) runAs(t *testing.T, key, name string, inputs map[string]string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(protocol.RunPipelineRequest{Inputs: inputs})
	return tm.api(t, key, "POST", protocol.PathPipelines+"/"+name+"/runs", string(body))
}

// TestEveryStepTypeNeedsSecretAccess: a pipeline's container step that
// references a stored secret in its script or command needs secret:access,
// as a shell step does; a caller without it is refused (403) before the
// run starts, and no task is created.
func TestEveryStepTypeNeedsSecretAccess(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"S","value":"the-value"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["pipeline:execute","pipeline:view","task:run","task:view"]}`, 201)
	key := tm.userKey(t, "rita", "runner", access.Account)
	for name, step := range map[string]string{
		"shell":    "shell: echo ${secrets.S}",
		"cscript":  "container:\n          image: img\n          script: echo ${secrets.S}",
		"ccommand": "container:\n          image: img\n          command: [login, \"${secrets.S}\"]",
		"cenv":     "container:\n          image: img\n        env: {T: \"${secrets.S}\"}",
		"http":     "http:\n          url: \"https://h.example/?k=${secrets.S}\"",
	} {
		tm.applyPipeline(t, "name: "+name+"\nstages:\n  - name: s\n    steps:\n      - name: a\n        "+step+"\n")
		status, body := tm.runAs(t, key, name, nil)
		if status != http.StatusForbidden || !strings.Contains(body, "secret:access") {
			t.Errorf("%s step without secret:access: %d %s, want 403 naming secret:access", name, status, body)
		}
	}
	ts, err := tm.st.ListTasks(context.Background(), store.TaskFilter{AccountID: tm.admin.AccountID})
	if err != nil || len(ts) != 0 {
		t.Errorf("tasks after the refusals: %d, %v; want none", len(ts), err)
	}

	// Who may: the step's task is created, bound, and its delegate gets
	// the value; so for a key that acts as its whole account.
	ctx := context.Background()
	for _, who := range []struct{ acct, key, value string }{{tm.admin.AccountID, admin, "the-value"}, {"acc-other", tm.newAccount(t, "acc-other"), "other-value"}} {
		if who.acct != tm.admin.AccountID {
			tm.mustAPI(t, who.key, "POST", protocol.PathSecrets, `{"name":"S","value":"other-value"}`, 201)
			tm.applyPipelineAs(t, who.key, "name: cscript\nstages:\n  - name: s\n    steps:\n      - name: a\n        container:\n          image: img\n          script: echo ${secrets.S}\n")
		}
		status, body := tm.runAs(t, who.key, "cscript", nil)
		if status != http.StatusCreated {
			t.Fatalf("%s runs cscript: %d %s", who.acct, status, body)
		}
		var run protocol.Run
		_ = json.Unmarshal([]byte(body), &run)
		tok, err := tm.client(t, who.key).CreateToken(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		del, _ := tm.registerFake(t, who.acct, tok.Value, "d-"+who.acct, "h-"+who.acct)
		acq, err := del.Acquire(ctx, run.Steps[0].TaskID)
		if err != nil || acq.Spec.Container == nil || acq.Spec.Container.Script != "echo "+who.value {
			t.Errorf("%s: the step's task as acquired: %+v, %v", who.acct, acq.Spec.Container, err)
		}
	}
}

// TestExpansionCannotFormASecretReference: a run's input (or an earlier
// step's output) placed before pipeline text can complete a secret
// reference only after expansion; the reference is checked on the final
// task spec, so a caller without secret:access is refused, and an output
// that completes one fails the step before its task exists.
func TestExpansionCannotFormASecretReference(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"S","value":"the-value"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["pipeline:execute","pipeline:view","task:run","task:view"]}`, 201)
	key := tm.userKey(t, "rita", "runner", access.Account)
	tm.applyPipeline(t, "name: in\ninputs:\n  pre: x\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: echo ${{ inputs.pre }}{secrets.S}\n")
	for _, pre := range []string{"$", "x$"} {
		if status, body := tm.runAs(t, key, "in", map[string]string{"pre": pre}); status != http.StatusForbidden || !strings.Contains(body, "secret:access") {
			t.Errorf("input %q completing a reference: %d %s, want 403", pre, status, body)
		}
	}
	if status, body := tm.runAs(t, key, "in", map[string]string{"pre": "plain"}); status != http.StatusCreated {
		t.Errorf("an input that forms no reference: %d %s, want 201", status, body)
	}
	// An input that names the secret the pipeline's text references.
	tm.applyPipeline(t, "name: named\ninputs:\n  which: NONE\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: echo\n        env: {V: \"${secrets.${{ inputs.which }}}\"}\n")
	if status, body := tm.runAs(t, key, "named", map[string]string{"which": "S"}); status != http.StatusForbidden || !strings.Contains(body, "secret:access") {
		t.Errorf("an input naming the secret: %d %s, want 403", status, body)
	}

	// The same through an output, known only once the first step ran.
	tm.applyPipeline(t, "name: out\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: make\n        outputs: [x]\n"+
		"  - name: t\n    steps:\n      - name: b\n        shell: echo ${{ stages.s.steps.a.outputs.x }}{secrets.S}\n")
	tok, err := tm.client(t, admin).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	del, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d1", "h1")
	status, body := tm.runAs(t, key, "out", nil)
	if status != http.StatusCreated {
		t.Fatalf("run out: %d %s", status, body)
	}
	var run protocol.Run
	if err := json.Unmarshal([]byte(body), &run); err != nil {
		t.Fatal(err)
	}
	f := runFixture{tm: tm, del: del}
	f.finish(t, f.stepTask(t, run.ID, "s", "a"), protocol.StatusSucceeded, map[string]string{"x": "$"})
	ended := f.waitRun(t, run.ID)
	var b store.RunStep
	for _, s := range ended.Steps {
		if s.Step == "b" {
			b = s
		}
	}
	if ended.Status != store.RunFailed || b.Status != store.RunFailed ||
		!strings.Contains(b.Error, "secret:access") || !strings.Contains(b.Error, "user rita") {
		t.Errorf("run whose output completes a reference: %s, step b %+v; want b failed, naming secret:access and the user", ended.Status, b)
	}
	if _, err := tm.st.GetTask(ctx, tm.admin.AccountID, b.TaskID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("step b's task: %v; want none created", err)
	}
}

// TestQueuedTaskGetsTheSecretItWasCheckedFor: a project admin shadows the
// org's secret with a project secret, submits a task that references it,
// then deletes (or replaces, or updates) the shadow: the task never
// receives the org's value; it fails when acquired, saying what happened.
func TestQueuedTaskGetsTheSecretItWasCheckedFor(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathOrgs, `{"name":"o1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathOrgs+"/o1/projects", `{"name":"p1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"S","org":"o1","value":"org-value"}`, 201)
	carol := tm.userKey(t, "carol", access.RoleProjectAdmin, access.Scope{Org: "o1", Project: "p1"})
	tok, err := tm.client(t, admin).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d", "h1")
	spec := `{"type":"shell","shell":{"script":"echo ${secrets.S}"},"org":"o1","project":"p1"}`
	// Without the shadow the org's secret is hers to use no more than to read.
	if st, b := tm.api(t, carol, "POST", protocol.PathTasks, spec); st != http.StatusForbidden || !strings.Contains(b, "secret:access") {
		t.Fatalf("carol using the org's secret: %d %s, want 403", st, b)
	}
	submit := func() string {
		var task protocol.Task
		if err := json.Unmarshal([]byte(tm.mustAPI(t, carol, "POST", protocol.PathTasks, spec, 201)), &task); err != nil {
			t.Fatal(err)
		}
		return task.ID
	}
	for _, tc := range []struct {
		name   string
		change func()
		want   string
	}{
		{"deleted", func() {
			tm.mustAPI(t, carol, "DELETE", protocol.PathSecrets+"/S?org=o1&project=p1", "", 204)
		}, "secret S (project o1/p1) was deleted after the task was submitted"},
		{"replaced", func() {
			tm.mustAPI(t, carol, "DELETE", protocol.PathSecrets+"/S?org=o1&project=p1", "", 204)
			tm.mustAPI(t, carol, "POST", protocol.PathSecrets, `{"name":"S","org":"o1","project":"p1","value":"other"}`, 201)
		}, "secret S (project o1/p1) was deleted and created again after the task was submitted"},
		{"updated", func() {
			tm.mustAPI(t, carol, "PATCH", protocol.PathSecrets+"/S?org=o1&project=p1", `{"value":"newer"}`, 200)
		}, "secret S (project o1/p1) was updated after the task was submitted (it was checked at version 1, it is at version 2 now)"},
	} {
		tm.api(t, carol, "DELETE", protocol.PathSecrets+"/S?org=o1&project=p1", "")
		tm.mustAPI(t, carol, "POST", protocol.PathSecrets, `{"name":"S","org":"o1","project":"p1","value":"project-value"}`, 201)
		id := submit()
		tc.change()
		acq, err := d.Acquire(ctx, id)
		if err == nil {
			t.Errorf("%s: acquired with script %q, mask %v; want a refusal", tc.name, acq.Spec.Shell.Script, acq.Mask)
			continue
		}
		wantCode(t, tc.name, err, protocol.CodeTaskTerminal)
		got, err := tm.client(t, admin).GetTask(ctx, id)
		if err != nil || got.Status != protocol.StatusFailed || !strings.Contains(got.Error, tc.want) {
			t.Errorf("%s: task %s %q, %v; want failed saying %q", tc.name, got.Status, got.Error, err, tc.want)
		}
	}
	// Unchanged: the task gets the project's value it was checked for.
	tm.mustAPI(t, carol, "DELETE", protocol.PathSecrets+"/S?org=o1&project=p1", "", 204)
	tm.mustAPI(t, carol, "POST", protocol.PathSecrets, `{"name":"S","org":"o1","project":"p1","value":"project-value"}`, 201)
	id := submit()
	if acq, err := d.Acquire(ctx, id); err != nil || acq.Spec.Shell.Script != "echo project-value" {
		t.Errorf("unchanged: %+v, %v; want the project's value", acq.Spec.Shell, err)
	}
}

// TestWebhookRunsAreCheckedAsTheirPrincipal: a webhook's run acts as the
// principal that enabled it: a container step's reference, or one that a
// delivery's input completes, is refused (403) for a principal without
// secret:access, and a run that starts acts as that principal when its
// steps' tasks are created.
func TestWebhookRunsAreCheckedAsTheirPrincipal(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"S","value":"the-value"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"hooker","permissions":["pipeline:execute","pipeline:view","pipeline:edit","task:run"]}`, 201)
	key := tm.userKey(t, "hana", "hooker", access.Account)
	hook := "triggers:\n  webhook:\n    inputs:\n      pre: release.tag_name\n"
	for _, tc := range []struct {
		name, step, tag string
		status          int
	}{
		{"direct", "container:\n          image: img\n          script: echo ${secrets.S}", "v1", http.StatusForbidden},
		{"completed", "container:\n          image: img\n          command: [\"${{ inputs.pre }}{secrets.S}\"]", "$", http.StatusForbidden},
		{"plain", "container:\n          image: img\n          command: [\"${{ inputs.pre }}{secrets.S}\"]", "v1", http.StatusCreated},
	} {
		tm.applyPipeline(t, "name: "+tc.name+"\ninputs:\n  pre: x\n"+hook+"stages:\n  - name: s\n    steps:\n      - name: a\n        "+tc.step+"\n")
		ws := tm.enableWebhook(t, key, tc.name, false)
		payload := []byte(`{"release":{"tag_name":"` + tc.tag + `"}}`)
		status, body := tm.deliver(t, ws.Path, payload, map[string]string{protocol.HeaderHubSignature256: sign(ws.Secret, payload)})
		if status != tc.status || (tc.status == http.StatusForbidden && !strings.Contains(body, "secret:access")) {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.status)
			continue
		}
		if status != http.StatusCreated {
			continue
		}
		var run protocol.Run
		_ = json.Unmarshal([]byte(body), &run)
		stored, err := tm.st.GetRun(ctx, tm.admin.AccountID, run.ID)
		if err != nil || stored.ActsKind != access.KindUser || stored.ActsID == "" {
			t.Errorf("%s: the run acts as %q %q, %v; want hana", tc.name, stored.ActsKind, stored.ActsID, err)
		}
	}
}
