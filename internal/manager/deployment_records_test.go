package manager

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

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
// user's script writing it to $LEGATE_OUTPUT) it is rolled_back.
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

	want := []string{third.ID + " failed", second.ID + " rolled_back", run.ID + " failed"}
	if diff := cmp.Diff(want, deploymentStatuses(f.listDeployments(t))); diff != "" {
		t.Errorf("deployments (-want +got):\n%s", diff)
	}
}
