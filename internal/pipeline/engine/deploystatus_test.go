package engine

import (
	"testing"

	"github.com/legate-dev/legate/internal/pipeline"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// TestStageOutcome: the deploy steps of a stage with kubernetes steps are
// those; a notification that fails after them changes nothing, a step's
// deploy_status does; a cancel that stops the deploy step is a cancel; a
// stage with steps still to come is not decided.
func TestStageOutcome(t *testing.T) {
	stage := &pipeline.Stage{Name: "deploy", Service: "web", Environment: "prod", Items: []pipeline.Item{
		{Steps: []pipeline.Step{{Name: "web", Type: protocol.TaskKubernetes, When: pipeline.WhenSuccess}}},
		{Steps: []pipeline.Step{{Name: "notify", Type: "shell", When: pipeline.WhenAlways}}},
	}}
	row := func(step, status string, outs map[string]string) store.RunStep {
		return store.RunStep{Stage: "deploy", Step: step, Status: status, Outputs: outs}
	}
	rolledBack := map[string]string{protocol.OutputDeployStatus: protocol.DeployRolledBack}
	failed := map[string]string{protocol.OutputDeployStatus: protocol.DeployFailed}
	for _, c := range []struct {
		name    string
		run     store.Run
		want    string
		decided bool
	}{
		{"deployed, the notification failed", store.Run{Status: store.RunFailed, Steps: []store.RunStep{
			row("web", protocol.StatusSucceeded, nil), row("notify", protocol.StatusFailed, nil)}}, protocol.DeploymentSucceeded, true},
		{"rolled back by the step", store.Run{Status: store.RunFailed, Steps: []store.RunStep{
			row("web", protocol.StatusFailed, rolledBack), row("notify", protocol.StatusSucceeded, nil)}}, protocol.DeploymentRolledBack, true},
		{"failed", store.Run{Status: store.RunFailed, Steps: []store.RunStep{
			row("web", protocol.StatusTimedOut, failed), row("notify", protocol.StatusSucceeded, nil)}}, protocol.DeploymentFailed, true},
		{"stopped by a cancel", store.Run{Status: store.RunCancelled, CancelRequested: true, Steps: []store.RunStep{
			row("web", protocol.StatusCancelled, failed), row("notify", string(pipeline.StepSkipped), nil)}}, protocol.DeploymentCancelled, true},
		{"the notification is still to come", store.Run{Status: store.RunRunning, Steps: []store.RunStep{
			row("web", protocol.StatusSucceeded, nil)}}, "", false},
		{"the deploy step runs", store.Run{Status: store.RunRunning, Steps: []store.RunStep{
			row("web", protocol.StatusRunning, nil)}}, "", false},
		{"never ran: an earlier stage failed", store.Run{Status: store.RunFailed, Steps: []store.RunStep{
			row("web", string(pipeline.StepSkipped), nil), row("notify", protocol.StatusSucceeded, nil)}}, protocol.DeploymentFailed, true},
	} {
		got, decided := stageOutcome(c.run, stage)
		if got != c.want || decided != c.decided {
			t.Errorf("%s: %q (decided %v), want %q (%v)", c.name, got, decided, c.want, c.decided)
		}
	}
	// A canary: start and promote are its deploy steps; the abort that
	// runs only on failure is skipped when all went well, and is no deploy
	// step that "never ran".
	canary := &pipeline.Stage{Name: "deploy", Service: "web", Environment: "prod", Items: []pipeline.Item{
		{Steps: []pipeline.Step{{Name: "start", Type: protocol.TaskKubernetes, When: pipeline.WhenSuccess}}},
		{Steps: []pipeline.Step{{Name: "promote", Type: protocol.TaskKubernetes, When: pipeline.WhenSuccess}}},
		{Steps: []pipeline.Step{{Name: "abort", Type: protocol.TaskKubernetes, When: pipeline.WhenFailure}}},
	}}
	for _, c := range []struct {
		name  string
		steps []store.RunStep
		run   string
		want  string
	}{
		{"promoted", []store.RunStep{row("start", protocol.StatusSucceeded, nil), row("promote", protocol.StatusSucceeded, nil),
			row("abort", string(pipeline.StepSkipped), nil)}, store.RunSucceeded, protocol.DeploymentSucceeded},
		{"aborted", []store.RunStep{row("start", protocol.StatusSucceeded, nil), row("promote", protocol.StatusFailed, failed),
			row("abort", protocol.StatusSucceeded, rolledBack)}, store.RunFailed, protocol.DeploymentRolledBack},
		{"start failed, abort failed too", []store.RunStep{row("start", protocol.StatusFailed, failed), row("promote", string(pipeline.StepSkipped), nil),
			row("abort", protocol.StatusFailed, failed)}, store.RunFailed, protocol.DeploymentFailed},
	} {
		if got, _ := stageOutcome(store.Run{Status: c.run, Steps: c.steps}, canary); got != c.want {
			t.Errorf("canary %s: %q, want %q", c.name, got, c.want)
		}
	}
	// A stage of cleanup steps only: they are its deploy steps.
	cleanup := &pipeline.Stage{Name: "deploy", Items: []pipeline.Item{{Steps: []pipeline.Step{{Name: "undo", Type: "shell", When: pipeline.WhenFailure}}}}}
	if got, _ := stageOutcome(store.Run{Status: store.RunFailed, Steps: []store.RunStep{row("undo", protocol.StatusFailed, nil)}}, cleanup); got != protocol.DeploymentFailed {
		t.Errorf("a failed cleanup-only stage: %q, want failed", got)
	}
}

// TestStageOutcomeOfVerification: a verify step of the stage that
// failed (even with no record: its provider was unreachable) fails the
// deployment, though its deploy step succeeded; a cancelled one does not.
func TestStageOutcomeOfVerification(t *testing.T) {
	stage := &pipeline.Stage{Name: "deploy", Items: []pipeline.Item{
		{Steps: []pipeline.Step{{Name: "web", Type: protocol.TaskKubernetes}}},
		{Steps: []pipeline.Step{{Name: "verify", Type: protocol.TaskVerify}}},
	}}
	for _, c := range []struct{ status, want string }{
		{protocol.StatusFailed, protocol.DeploymentFailed},
		{protocol.StatusSucceeded, protocol.DeploymentSucceeded},
	} {
		run := store.Run{Status: store.RunFailed, Steps: []store.RunStep{
			{Stage: "deploy", Step: "web", Status: protocol.StatusSucceeded}, {Stage: "deploy", Step: "verify", Status: c.status}}}
		if got, _ := stageOutcome(run, stage); got != c.want {
			t.Errorf("verify step %s: %q, want %q", c.status, got, c.want)
		}
	}
}

// TestStageRecords: the records of a stage's steps in the order they ran,
// a bad one left out and reported.
func TestStageRecords(t *testing.T) {
	stage := &pipeline.Stage{Name: "deploy"}
	run := store.Run{Steps: []store.RunStep{
		{Stage: "build", Step: "x", Outputs: map[string]string{protocol.OutputDeployRecord: `{"type":"helm"}`}},
		{Stage: "deploy", Step: "a", Outputs: map[string]string{protocol.OutputDeployRecord: `{"type":"kubernetes","namespace":"a"}`}},
		{Stage: "deploy", Step: "b", Outputs: map[string]string{protocol.OutputDeployRecord: `{"namespace":"b"}`}},
		{Stage: "deploy", Step: "c", Outputs: map[string]string{protocol.OutputDeployRecord: `{"type":"helm","namespace":"c","release":"r"}`}},
	}}
	got, bad := stageRecords(run, stage)
	if want := `[{"type":"kubernetes","namespace":"a"},{"type":"helm","namespace":"c","release":"r"}]`; got != want {
		t.Errorf("records %s, want %s", got, want)
	}
	if len(bad) != 1 || bad[0].step != "deploy.b" {
		t.Errorf("bad records %+v, want deploy.b's", bad)
	}
}
