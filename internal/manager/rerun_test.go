package manager

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// TestRerunRunsTheRunsDefinitionWithItsInputs: a re-run runs the version
// the run ran (not the pipeline's current one) with the run's inputs, an
// override in place of one; the new run names the run it re-runs, its
// steps carry their place in the definition, and the audit log records
// run.rerun.
func TestRerunRunsTheRunsDefinitionWithItsInputs(t *testing.T) {
	f := newRunFixture(t, Config{})
	ctx := context.Background()
	acct := f.tm.admin.AccountID
	orig := f.start(t, map[string]string{"version": "1.5"})
	f.finish(t, f.stepTask(t, orig.ID, "build", "compile"), protocol.StatusSucceeded, map[string]string{"artifact": "a1"})
	f.finish(t, f.stepTask(t, orig.ID, "deploy", "push"), protocol.StatusFailed, nil)
	f.finish(t, f.stepTask(t, orig.ID, "deploy", "rollback"), protocol.StatusSucceeded, nil)
	if got := f.waitRun(t, orig.ID); got.Status != store.RunFailed {
		t.Fatalf("the first run: %s, want failed", got.Status)
	}
	// A later version of the pipeline: the re-run must not run it.
	if _, _, err := f.tm.st.ApplyPipeline(ctx, store.Pipeline{AccountID: acct, Name: "ship",
		Source: strings.Replace(testRunPipeline, "shell: make", "shell: make v2", 1), UpdatedBy: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	admin := f.tm.client(t, f.tm.admin.APIKey)
	rerun, err := admin.RerunRun(ctx, orig.ID, protocol.RerunRequest{Inputs: map[string]string{"version": "2.0"}})
	if err != nil {
		t.Fatalf("re-run: %v", err)
	}
	if rerun.RerunOf != orig.ID || rerun.Trigger != protocol.TriggerRerun || rerun.Version != orig.Version || rerun.Inputs["version"] != "2.0" {
		t.Errorf("re-run: rerun_of %q trigger %q version %d inputs %v, want rerun_of %s, trigger rerun, version %d, version=2.0",
			rerun.RerunOf, rerun.Trigger, rerun.Version, rerun.Inputs, orig.ID, orig.Version)
	}
	spec := f.finish(t, f.stepTask(t, rerun.ID, "build", "compile"), protocol.StatusSucceeded, map[string]string{"artifact": "a2"})
	if spec.Shell == nil || spec.Shell.Script != "make" {
		t.Errorf("the re-run's compile ran %+v, want the run's version's %q", spec.Shell, "make")
	}
	got, err := admin.GetRun(ctx, rerun.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RerunOf != orig.ID {
		t.Errorf("GET the re-run: rerun_of %q, want %s", got.RerunOf, orig.ID)
	}
	first, err := admin.GetRun(ctx, orig.ID)
	if err != nil {
		t.Fatal(err)
	}
	order := map[string]int{}
	for _, s := range first.Steps {
		order[s.Step] = s.Order
	}
	if order["compile"] != 0 || order["push"] != 1 || order["rollback"] != 2 || first.RerunOf != "" || first.Trigger != "manual" {
		t.Errorf("the first run: step order %v, rerun_of %q, trigger %q", order, first.RerunOf, first.Trigger)
	}
	audit := f.tm.mustAPI(t, f.tm.admin.APIKey, "GET", protocol.PathAudit+"?action=run.rerun", "", 200)
	if !strings.Contains(audit, `"resource":"`+orig.ID+`"`) || !strings.Contains(audit, rerun.ID) {
		t.Errorf("audit log of run.rerun: %s, want the run and the new run", audit)
	}
}

// TestRerunRefusals: a re-run of an unknown run is a 404, an input the
// definition does not declare a 400 naming it, a caller without
// pipeline:execute a 403 naming it, and a run whose pipeline was deleted
// a 404 that says so.
func TestRerunRefusals(t *testing.T) {
	f := newRunFixture(t, Config{})
	ctx := context.Background()
	orig := f.start(t, nil)
	admin := f.tm.client(t, f.tm.admin.APIKey)
	var pe *protocol.Error
	_, err := admin.RerunRun(ctx, "r_nope", protocol.RerunRequest{})
	if !errors.As(err, &pe) || pe.Status != http.StatusNotFound || !strings.Contains(pe.Message, "r_nope") {
		t.Errorf("re-run of an unknown run: %v, want 404 naming it", err)
	}
	_, err = admin.RerunRun(ctx, orig.ID, protocol.RerunRequest{Inputs: map[string]string{"nope": "x"}})
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || !strings.Contains(pe.Message, "has no input named nope") {
		t.Errorf("re-run with an unknown input: %v, want 400 naming it", err)
	}
	status, body := f.tm.api(t, f.tm.admin.APIKey, "POST", protocol.PathRuns+"/"+orig.ID+"/rerun", `{"inputs":`)
	if status != http.StatusBadRequest || !strings.Contains(body, "invalid JSON body") {
		t.Errorf("re-run with a bad body: %d %s, want 400", status, body)
	}
	viewer := f.tm.userKey(t, "vera", "viewer", access.Scope{})
	status, body = f.tm.api(t, viewer, "POST", protocol.PathRuns+"/"+orig.ID+"/rerun", "")
	if status != http.StatusForbidden || !strings.Contains(body, "pipeline:execute") {
		t.Errorf("re-run by a viewer: %d %s, want 403 naming pipeline:execute", status, body)
	}
	f.tm.mustAPI(t, f.tm.admin.APIKey, "DELETE", protocol.PathPipelines+"/ship", "", 204)
	_, err = admin.RerunRun(ctx, orig.ID, protocol.RerunRequest{})
	if !errors.As(err, &pe) || pe.Status != http.StatusNotFound || !strings.Contains(pe.Message, "no longer exists") {
		t.Errorf("re-run of a deleted pipeline's run: %v, want 404 saying so", err)
	}
}

// TestRerunRefusesARecreatedPipeline: a pipeline deleted and created again
// under the same name is another pipeline: a run of the deleted one is
// not re-run (409 saying so), while a run of the new one is.
func TestRerunRefusesARecreatedPipeline(t *testing.T) {
	f := newRunFixture(t, Config{})
	ctx := context.Background()
	acct := f.tm.admin.AccountID
	orig := f.start(t, nil)
	f.tm.mustAPI(t, f.tm.admin.APIKey, "DELETE", protocol.PathPipelines+"/ship", "", 204)
	if _, _, err := f.tm.st.ApplyPipeline(ctx, store.Pipeline{AccountID: acct, Name: "ship",
		Source: strings.Replace(testRunPipeline, "shell: make", "shell: make v2", 1), UpdatedBy: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	admin := f.tm.client(t, f.tm.admin.APIKey)
	var pe *protocol.Error
	_, err := admin.RerunRun(ctx, orig.ID, protocol.RerunRequest{})
	if !errors.As(err, &pe) || pe.Status != http.StatusConflict || !strings.Contains(pe.Message, "deleted and created again") {
		t.Errorf("re-run of a re-created pipeline's old run: %v, want 409 saying it was re-created", err)
	}
	again := f.start(t, nil)
	if _, err := admin.RerunRun(ctx, again.ID, protocol.RerunRequest{}); err != nil {
		t.Errorf("re-run of the re-created pipeline's own run: %v", err)
	}
}

// TestRerunNeedsWhatItsStepsUse: a re-run is refused, naming the
// permission, to a caller with pipeline:execute who lacks what the run's
// steps use (a stored secret), as a run would be.
func TestRerunNeedsWhatItsStepsUse(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"S1","value":"v"}`, 201)
	src := "name: uses\\nstages:\\n  - name: s\\n    steps:\\n      - name: a\\n        shell: echo\\n        secrets: {T: S1}\\n"
	tm.mustAPI(t, admin, "POST", protocol.PathPipelines, `{"source":"`+src+`"}`, 201)
	body := tm.mustAPI(t, admin, "POST", protocol.PathPipelines+"/uses/runs", `{}`, 201)
	var run protocol.Run
	if err := json.Unmarshal([]byte(body), &run); err != nil {
		t.Fatal(err)
	}
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["pipeline:execute","pipeline:view"]}`, 201)
	key := tm.userKey(t, "rita", "runner", access.Account)
	status, out := tm.api(t, key, "POST", protocol.PathRuns+"/"+run.ID+"/rerun", `{}`)
	if status != http.StatusForbidden || !strings.Contains(out, "secret:access") {
		t.Errorf("re-run without secret:access: %d %s, want 403 naming it", status, out)
	}
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"user-of-s1","permissions":["secret:access"]}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathBindings, `{"role":"user-of-s1","subject_kind":"user","subject":"rita"}`, 201)
	if status, out := tm.api(t, key, "POST", protocol.PathRuns+"/"+run.ID+"/rerun", `{}`); status != http.StatusCreated {
		t.Errorf("re-run with every permission: %d %s, want 201", status, out)
	}
}
