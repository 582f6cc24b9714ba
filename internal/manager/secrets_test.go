package manager

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestSecretReferencesResolveOnlyForTheAcquirer: a task's references are
// resolved, closest scope first, into the acquire answer alone (with the
// values to mask); every admin answer shows the references.
func TestSecretReferencesResolveOnlyForTheAcquirer(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathOrgs, `{"name":"o1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathOrgs+"/o1/projects", `{"name":"p1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"TOKEN","value":"account-token"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"TOKEN","org":"o1","project":"p1","value":"project-token"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"PW","org":"o1","value":"org-pw"}`, 201)
	if st, b := tm.api(t, admin, "POST", protocol.PathSecrets, `{"name":"PW","org":"o1","value":"again"}`); st != 409 || !strings.Contains(b, "legate secret update") {
		t.Errorf("second PW at o1: %d %s", st, b)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"name":"db-pw","value":"x"}`, "letters, digits and underscores"},
		{`{"name":"X","value":""}`, "value is empty"},
		{`{"name":"X","value":"a\u0000b"}`, "UTF-8 without NUL"},
		{`{"name":"X","org":"nope","value":"v"}`, "unknown org"},
	} {
		if st, b := tm.api(t, admin, "POST", protocol.PathSecrets, bad.body); st != 400 || !strings.Contains(b, bad.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", bad.body, st, b, bad.want)
		}
	}
	if st, b := tm.api(t, admin, "POST", protocol.PathConnectors, `{"name":"c","url":"https://h/?k=${secrets.TOKEN}"}`); st != 400 || !strings.Contains(b, "cannot reference a secret") {
		t.Errorf("connector with a reference: %d %s", st, b)
	}
	tok, err := tm.client(t, admin).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d", "h1")

	spec := `{"type":"shell","shell":{"script":"echo ${secrets.TOKEN} $${secrets.TOKEN}"},
		"env":{"PW":"${secrets.PW}"},"org":"o1","project":"p1"}`
	var task protocol.Task
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTasks, spec, 201)), &task); err != nil {
		t.Fatal(err)
	}
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if acq.Spec.Shell.Script != "echo project-token ${secrets.TOKEN}" || acq.Spec.Env["PW"] != "org-pw" {
		t.Errorf("acquired spec: script %q, env %v", acq.Spec.Shell.Script, acq.Spec.Env)
	}
	if diff := cmp.Diff([]string{"org-pw", "project-token"}, acq.Mask); diff != "" {
		t.Errorf("mask (-want +got):\n%s", diff)
	}
	// The holder asks again (its answer was lost): the same answer.
	if again, err := d.Acquire(ctx, task.ID); err != nil || again.Spec.Env["PW"] != "org-pw" || len(again.Mask) != 2 {
		t.Errorf("repeated acquire: %+v, %v", again, err)
	}
	for _, path := range []string{protocol.PathTasks + "/" + task.ID, protocol.PathTasks} {
		got := tm.mustAPI(t, admin, "GET", path, "", 200)
		if strings.Contains(got, "-token") || strings.Contains(got, "org-pw") || !strings.Contains(got, "${secrets.TOKEN}") {
			t.Errorf("GET %s: %s", path, got)
		}
	}

	// Deleted after the submission: the acquire fails the task, saying
	// which secret and where it was looked for.
	var gone protocol.Task
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTasks,
		`{"type":"shell","shell":{"script":"echo ${secrets.PW}"},"org":"o1","project":"p1"}`, 201)), &gone); err != nil {
		t.Fatal(err)
	}
	tm.mustAPI(t, admin, "DELETE", protocol.PathSecrets+"/PW?org=o1", "", 204)
	_, err = d.Acquire(ctx, gone.ID)
	wantCode(t, "acquire of a task whose secret was deleted", err, protocol.CodeTaskTerminal)
	var ended protocol.Task
	_ = json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathTasks+"/"+gone.ID, "", 200)), &ended)
	if ended.Status != protocol.StatusFailed || !strings.Contains(ended.Error, "secret PW (org o1) was deleted after the task was submitted") {
		t.Errorf("task whose secret was deleted: %s %q", ended.Status, ended.Error)
	}
	// And it is refused at submission now.
	if st, b := tm.api(t, admin, "POST", protocol.PathTasks, `{"type":"shell","shell":{"script":"echo ${secrets.PW}"},"org":"o1","project":"p1"}`); st != 400 || !strings.Contains(b, "unknown secret PW") {
		t.Errorf("submit after the delete: %d %s", st, b)
	}
	// An update reaches the next acquire.
	tm.mustAPI(t, admin, "PATCH", protocol.PathSecrets+"/TOKEN?org=o1&project=p1", `{"value":"project-token-2"}`, 200)
	var next protocol.Task
	_ = json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTasks,
		`{"type":"http","http":{"url":"http://127.0.0.1:1/?t=${secrets.TOKEN}","headers":{"Authorization":"Bearer ${secrets.TOKEN}"},"body":"${secrets.TOKEN}"},"org":"o1","project":"p1"}`, 201)), &next)
	if acq, err := d.Acquire(ctx, next.ID); err != nil || acq.Spec.HTTP.URL != "http://127.0.0.1:1/?t=project-token-2" ||
		acq.Spec.HTTP.Headers["Authorization"] != "Bearer project-token-2" || acq.Spec.HTTP.Body != "project-token-2" {
		t.Errorf("http task: %+v, %v", acq.Spec.HTTP, err)
	}
	// A container task's script and command resolve the same way; what a
	// client reads back keeps the references.
	var ctr protocol.Task
	_ = json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTasks,
		`{"type":"container","container":{"image":"img","command":["login","${secrets.TOKEN}"]},"org":"o1","project":"p1"}`, 201)), &ctr)
	if ctr.Container == nil || ctr.Container.Command[1] != "${secrets.TOKEN}" {
		t.Errorf("container task as submitted: %+v", ctr.Container)
	}
	acq, err = d.Acquire(ctx, ctr.ID)
	if err != nil || acq.Spec.Container == nil || acq.Spec.Container.Command[1] != "project-token-2" || !slices.Equal(acq.Mask, []string{"project-token-2"}) {
		t.Errorf("container task: %+v (mask %v), %v", acq.Spec.Container, acq.Mask, err)
	}
}

// TestOldDelegatesAreNotHandedStoredSecrets: a delegate of a protocol
// before MaskVersion ignores AcquireResponse.Mask and would print stored
// secret values in clear, so it cannot acquire a task that uses them (the
// task stays queued for a newer one); other tasks it still takes.
func TestOldDelegatesAreNotHandedStoredSecrets(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"TOKEN","value":"s3cr3t-value"}`, 201)
	tok, err := tm.client(t, admin).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	old := tm.client(t, "")
	resp, err := old.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.MaskVersion - 1, AccountID: tm.admin.AccountID,
		Token: tok.Value, Name: "old", Hostname: "old-host", IP: "127.0.0.1", Version: "old"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetSecret(resp.Session)
	submit := func(script string) protocol.Task {
		var task protocol.Task
		body, _ := json.Marshal(protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: script}})
		if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTasks, string(body), 201)), &task); err != nil {
			t.Fatal(err)
		}
		return task
	}
	secret := submit("echo ${secrets.TOKEN}")
	_, err = old.Acquire(ctx, secret.ID)
	wantCode(t, "old delegate acquiring a task with a stored secret", err, protocol.CodeNotEligible)
	if !strings.Contains(err.Error(), "upgrade the delegate") {
		t.Errorf("refusal %q does not say what to do", err)
	}
	if got, err := tm.client(t, admin).GetTask(ctx, secret.ID); err != nil || got.Status != protocol.StatusQueued {
		t.Errorf("task after the refusal: %s, %v; want queued", got.Status, err)
	}
	if _, err := old.Acquire(ctx, submit("echo plain").ID); err != nil {
		t.Errorf("old delegate acquiring a task without stored secrets: %v", err)
	}
	current, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "new", "new-host")
	acq, err := current.Acquire(ctx, secret.ID)
	if err != nil || len(acq.Mask) != 1 || acq.Mask[0] != "s3cr3t-value" {
		t.Errorf("current delegate: %+v, %v; want the task with the value to mask", acq, err)
	}
}
