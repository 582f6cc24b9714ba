package manager

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

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

// TestExpansionCannotFormASecretReference: a value that would complete a
// reference to a stored secret with the text around it (an input or output
// "$" right before "{secrets.S}", or an input naming the secret) is refused
// when the pipeline is applied: no check of the pipeline's text could see
// which secret such a run reads, and a webhook's deliveries (acting with the
// rights of whoever enabled it) choose the values. Every step's final spec is
// still checked when its task is created (TestEveryStepTypeNeedsSecretAccess).
func TestExpansionCannotFormASecretReference(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"S","value":"the-value"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["pipeline:execute","pipeline:view","task:run","task:view"]}`, 201)
	key := tm.userKey(t, "rita", "runner", access.Account)
	for _, tc := range []struct{ name, src, want string }{
		{"input before {secrets.", "name: in\ninputs:\n  pre: x\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: echo \"$V\"\n        env: {V: \"${{ inputs.pre }}{secrets.S}\"}\n",
			"could complete a reference"},
		{"input naming the secret", "name: named\ninputs:\n  which: NONE\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: echo\n        env: {V: \"${secrets.${{ inputs.which }}}\"}\n",
			"name cannot come from an expression"},
		{"output before {secrets.", "name: out\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: make\n        outputs: [x]\n" +
			"  - name: t\n    steps:\n      - name: b\n        http: {url: \"https://example.test/${{ stages.s.steps.a.outputs.x }}{secrets.S}\"}\n",
			"could complete a reference"},
	} {
		body, _ := json.Marshal(map[string]string{"source": tc.src})
		if status, resp := tm.api(t, admin, "POST", protocol.PathPipelines, string(body)); status != http.StatusBadRequest || !strings.Contains(resp, tc.want) {
			t.Errorf("%s: apply answered %d %s; want 400 saying %q", tc.name, status, resp, tc.want)
		}
	}
	// An expression beside text that forms no reference is fine.
	tm.applyPipeline(t, "name: plain\ninputs:\n  pre: x\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: echo \"$V\"\n        env: {V: \"${{ inputs.pre }}{other}\"}\n")
	if status, body := tm.runAs(t, key, "plain", map[string]string{"pre": "$"}); status != http.StatusCreated {
		t.Errorf("an input that forms no reference: %d %s, want 201", status, body)
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

// TestWebhookRunsAreCheckedAsTheirPrincipal: a webhook acts as the principal
// that enabled it: one without secret:access cannot enable the webhook of a
// pipeline whose container step reads a stored secret (403), and a run that
// a delivery starts acts as that principal when its steps' tasks are
// created.
func TestWebhookRunsAreCheckedAsTheirPrincipal(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"S","value":"the-value"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"hooker","permissions":["pipeline:execute","pipeline:view","pipeline:edit","task:run"]}`, 201)
	key := tm.userKey(t, "hana", "hooker", access.Account)
	hook := "triggers:\n  webhook:\n    inputs:\n      pre: release.tag_name\n"
	tm.applyPipeline(t, "name: direct\ninputs:\n  pre: x\n"+hook+"stages:\n  - name: s\n    steps:\n      - name: a\n        container:\n          image: img\n          script: echo ${secrets.S}\n")
	if status, body := tm.api(t, key, "POST", protocol.PathPipelines+"/direct/webhook", `{}`); status != http.StatusForbidden || !strings.Contains(body, "secret:access") {
		t.Errorf("enabling a webhook whose container step reads a secret without secret:access: %d %s, want 403", status, body)
	}
	tm.applyPipeline(t, "name: plain\ninputs:\n  pre: x\n"+hook+"stages:\n  - name: s\n    steps:\n      - name: a\n        container:\n          image: img\n          script: echo \"$PRE\"\n        env: {PRE: \"${{ inputs.pre }}\"}\n")
	ws := tm.enableWebhook(t, key, "plain", false)
	payload := []byte(`{"release":{"tag_name":"v1"}}`)
	status, body := tm.deliver(t, ws.Path, payload, signedDelivery(ws.Secret, time.Now(), "d-1", payload))
	if status != http.StatusCreated {
		t.Fatalf("delivery: %d %s, want 201", status, body)
	}
	var run protocol.Run
	_ = json.Unmarshal([]byte(body), &run)
	stored, err := tm.st.GetRun(ctx, tm.admin.AccountID, run.ID)
	if err != nil || stored.ActsKind != access.KindUser || stored.ActsID == "" {
		t.Errorf("the run acts as %q %q, %v; want hana", stored.ActsKind, stored.ActsID, err)
	}
}
