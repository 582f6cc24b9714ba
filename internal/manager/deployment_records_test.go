package manager

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// listDeployments is the API's listing as the admin sees it.
func (f runFixture) listDeployments(t *testing.T) []protocol.Deployment {
	t.Helper()
	var list protocol.DeploymentList
	if err := json.Unmarshal([]byte(f.tm.mustAPI(t, f.tm.admin.APIKey, "GET", protocol.PathDeployments, "", 200)), &list); err != nil {
		t.Fatal(err)
	}
	return list.Deployments
}

// deploymentStatuses is each deployment of the listing as "RUN STATUS",
// newest first.
func deploymentStatuses(ds []protocol.Deployment) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.RunID+" "+d.Status)
	}
	return out
}

// TestDeploymentOfAFailedBuildIsNotASuccess: a run whose compile step
// failed never ran its deploy step; its `when: failure` rollback step
// ran and succeeded. The deployment is failed, not the rollback step's
// success; when the rollback step reports deploy_status=rolled_back (a
// user's script writing it to $LEGATE_OUTPUT) it is rolled_back; a
// deploy step that succeeded while a verification reports
// deploy_status=failed is failed; a run cancelled while its deploy step
// runs is a cancelled deployment.
func TestDeploymentOfAFailedBuildIsNotASuccess(t *testing.T) {
	f := newRunFixture(t, Config{})
	run := f.start(t, map[string]string{"version": "2.0"})
	f.finish(t, f.stepTask(t, run.ID, "build", "compile"), protocol.StatusFailed, nil)
	f.finish(t, f.stepTask(t, run.ID, "deploy", "rollback"), protocol.StatusSucceeded, nil)
	if run = f.waitRun(t, run.ID); run.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", run.Status)
	}

	// A deploy step that failed, then a rollback that says it rolled back.
	second := f.start(t, map[string]string{"version": "2.1"})
	f.finish(t, f.stepTask(t, second.ID, "build", "compile"), protocol.StatusSucceeded, map[string]string{"artifact": "a"})
	f.finish(t, f.stepTask(t, second.ID, "deploy", "push"), protocol.StatusFailed, nil)
	f.finish(t, f.stepTask(t, second.ID, "deploy", "rollback"), protocol.StatusSucceeded,
		map[string]string{protocol.OutputDeployStatus: protocol.DeployRolledBack})
	f.waitRun(t, second.ID)

	// A deploy that succeeded, whose verification says it failed.
	third := f.start(t, map[string]string{"version": "2.2"})
	f.finish(t, f.stepTask(t, third.ID, "build", "compile"), protocol.StatusSucceeded, map[string]string{"artifact": "a"})
	f.finish(t, f.stepTask(t, third.ID, "deploy", "push"), protocol.StatusSucceeded, map[string]string{protocol.OutputDeployStatus: protocol.DeployFailed})
	f.waitRun(t, third.ID)

	// A run cancelled while its deploy step runs.
	fourth := f.start(t, map[string]string{"version": "2.3"})
	f.finish(t, f.stepTask(t, fourth.ID, "build", "compile"), protocol.StatusSucceeded, map[string]string{"artifact": "a"})
	f.stepTask(t, fourth.ID, "deploy", "push")
	f.tm.mustAPI(t, f.tm.admin.APIKey, "POST", protocol.PathRuns+"/"+fourth.ID+"/cancel", "", 200)
	f.waitRun(t, fourth.ID)

	want := []string{fourth.ID + " cancelled", third.ID + " failed", second.ID + " rolled_back", run.ID + " failed"}
	if diff := cmp.Diff(want, deploymentStatuses(f.listDeployments(t))); diff != "" {
		t.Errorf("deployments (-want +got):\n%s", diff)
	}
}

// deploy runs the fixture's pipeline for version to its deploy step,
// which ends with status and outputs; a failed push runs the rollback
// step, which reports rollback's outputs. It returns the run's
// deployment.
func (f runFixture) deploy(t *testing.T, version, status string, push, rollback map[string]string) protocol.Deployment {
	t.Helper()
	run := f.start(t, map[string]string{"version": version})
	return f.finishDeploy(t, run.ID, status, push, rollback)
}

func (f runFixture) finishDeploy(t *testing.T, runID, status string, push, rollback map[string]string) protocol.Deployment {
	t.Helper()
	f.finish(t, f.stepTask(t, runID, "build", "compile"), protocol.StatusSucceeded, map[string]string{"artifact": "a"})
	f.finish(t, f.stepTask(t, runID, "deploy", "push"), status, push)
	if status != protocol.StatusSucceeded {
		f.finish(t, f.stepTask(t, runID, "deploy", "rollback"), protocol.StatusSucceeded, rollback)
	}
	f.waitRun(t, runID)
	for _, d := range f.listDeployments(t) {
		if d.RunID == runID {
			return d
		}
	}
	t.Fatalf("run %s has no deployment", runID)
	return protocol.Deployment{}
}

func webRecord(image, revision string) string {
	return `{"type":"kubernetes","strategy":"rolling","namespace":"shop","workloads":[{"kind":"Deployment","name":"web","images":["` +
		image + `"],"revision":"` + revision + `"}]}`
}

// TestDeploymentRecordsCurrentAndRollback: a deployment keeps the deploy
// records its steps reported (a bad one is left out and the run goes
// on); GET by ID shows them with who deployed; "current" says which
// version runs now and which ran before (a rolled-back deploy is not
// current); a rollback re-deploys the previous version through the same
// pipeline with that run's inputs, by the caller, marked as a rollback
// of the current deployment; the errors when there is nothing to roll
// back to, when the caller may not run the pipeline and when the
// pipeline changed so that the inputs no longer validate.
func TestDeploymentRecordsCurrentAndRollback(t *testing.T) {
	f := newRunFixture(t, Config{})
	admin := f.tm.admin.APIKey
	ok := map[string]string{protocol.OutputDeployStatus: protocol.DeploySucceeded}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			out[a] = b
		}
		return out
	}
	// Nothing deployed yet: nothing to roll back.
	if body := f.tm.mustAPI(t, admin, "POST", protocol.PathDeploymentsRollback, `{"service":"web","environment":"prod"}`, 404); !strings.Contains(body, "nothing to roll back") {
		t.Errorf("rollback of nothing: %s", body)
	}
	d1 := f.deploy(t, "1.0", protocol.StatusSucceeded, with(ok, protocol.OutputDeployRecord, webRecord("web:1.0", "1")), nil)
	if body := f.tm.mustAPI(t, admin, "POST", protocol.PathDeploymentsRollback, `{"service":"web","environment":"prod"}`, 409); !strings.Contains(body, "nothing to roll back to") {
		t.Errorf("rollback with one deployment: %s", body)
	}
	d2 := f.deploy(t, "2.0", protocol.StatusSucceeded, with(ok, protocol.OutputDeployRecord, `{"workloads":`), nil)
	d3 := f.deploy(t, "3.0", protocol.StatusFailed, map[string]string{protocol.OutputDeployStatus: protocol.DeployFailed,
		protocol.OutputDeployRecord: webRecord("web:3.0", "3")}, map[string]string{protocol.OutputDeployStatus: protocol.DeployRolledBack})
	if d1.Status != "succeeded" || d2.Status != "succeeded" || d3.Status != "rolled_back" {
		t.Fatalf("statuses %s %s %s, want succeeded succeeded rolled_back", d1.Status, d2.Status, d3.Status)
	}

	var got protocol.Deployment
	if err := json.Unmarshal([]byte(f.tm.mustAPI(t, admin, "GET", protocol.PathDeployments+"/"+d1.ID, "", 200)), &got); err != nil {
		t.Fatal(err)
	}
	want := []protocol.DeployRecord{{Type: "kubernetes", Strategy: "rolling", Namespace: "shop",
		Workloads: []protocol.DeployedWorkload{{Kind: "Deployment", Name: "web", Images: []string{"web:1.0"}, Revision: "1"}}}}
	if diff := cmp.Diff(want, got.Records); diff != "" || got.TriggeredBy != "user:admin" || got.Version != "1.0" {
		t.Errorf("deployment %s by %q version %q, records (-want +got):\n%s", got.ID, got.TriggeredBy, got.Version, diff)
	}
	if len(d2.Records) != 0 || len(d3.Records) != 1 {
		t.Errorf("records of the deploy with a bad record %+v, of the rolled back one %+v", d2.Records, d3.Records)
	}
	f.tm.mustAPI(t, admin, "GET", protocol.PathDeployments+"/dp_nope", "", 404)

	current := func() []string {
		var cur protocol.CurrentDeployments
		if err := json.Unmarshal([]byte(f.tm.mustAPI(t, admin, "GET", protocol.PathDeploymentsCurrent+"?environment=prod", "", 200)), &cur); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cur.Current {
			s := c.Service + "/" + c.Environment + " now " + c.Current.Version
			if c.Previous != nil {
				s += " before " + c.Previous.Version
			}
			out = append(out, s)
		}
		return out
	}
	if diff := cmp.Diff([]string{"web/prod now 2.0 before 1.0"}, current()); diff != "" {
		t.Errorf("current (-want +got):\n%s", diff)
	}

	// Who may only view may not roll back; --to a deployment that is not
	// a success, or of another service, is refused.
	viewer := f.tm.userKey(t, "vera", access.RoleViewer, access.Account)
	f.tm.mustAPI(t, viewer, "POST", protocol.PathDeploymentsRollback, `{"service":"web","environment":"prod"}`, 403)
	if body := f.tm.mustAPI(t, admin, "POST", protocol.PathDeploymentsRollback, `{"service":"web","environment":"prod","to":"`+d3.ID+`"}`, 400); !strings.Contains(body, "roll back to a succeeded deployment") {
		t.Errorf("rollback to a rolled back deployment: %s", body)
	}
	f.tm.mustAPI(t, admin, "POST", protocol.PathDeploymentsRollback, `{"service":"web","environment":"prod","to":"`+d2.ID+`"}`, 409)
	f.tm.mustAPI(t, admin, "POST", protocol.PathDeploymentsRollback, `{"service":"web"}`, 400)

	var run protocol.Run
	if err := json.Unmarshal([]byte(f.tm.mustAPI(t, admin, "POST", protocol.PathDeploymentsRollback, `{"service":"web","environment":"prod"}`, 201)), &run); err != nil {
		t.Fatal(err)
	}
	if run.Trigger != protocol.TriggerRollback || run.RollbackOf != d2.ID || run.Inputs["version"] != "1.0" || run.Pipeline != "ship" {
		t.Errorf("rollback run %+v, want a rollback of %s with version 1.0", run, d2.ID)
	}
	d4 := f.finishDeploy(t, run.ID, protocol.StatusSucceeded, with(ok, protocol.OutputDeployRecord, webRecord("web:1.0", "4")), nil)
	if d4.RollbackOf != d2.ID || d4.Version != "1.0" || d4.Status != "succeeded" || d4.TriggeredBy != "user:admin" {
		t.Errorf("rollback deployment %+v, want version 1.0 succeeded, a rollback of %s", d4, d2.ID)
	}
	if diff := cmp.Diff([]string{"web/prod now 1.0 before 2.0"}, current()); diff != "" {
		t.Errorf("current after the rollback (-want +got):\n%s", diff)
	}

	// The pipeline renames its input: the inputs of the run to go back to
	// no longer validate.
	renamed := strings.Replace(testRunPipeline, "  version: \"1.0\"", "  release: \"1.0\"", 1)
	renamed = strings.ReplaceAll(renamed, "inputs.version", "inputs.release")
	if _, _, err := f.tm.st.ApplyPipeline(context.Background(), store.Pipeline{AccountID: f.tm.admin.AccountID, Name: "ship", Source: renamed, UpdatedBy: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if body := f.tm.mustAPI(t, admin, "POST", protocol.PathDeploymentsRollback, `{"service":"web","environment":"prod"}`, 400); !strings.Contains(body, "no longer validate") {
		t.Errorf("rollback after the inputs changed: %s", body)
	}
}
