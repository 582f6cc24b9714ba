package manager

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/pipeline/engine"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

const testRunPipeline = `name: ship
inputs:
  version: "1.0"
stages:
  - name: build
    steps:
      - name: compile
        shell: make
        outputs: [artifact]
        delegateSelectors: [builder]
  - name: deploy
    environment: prod
    service: web
    steps:
      - name: push
        shell: ./push "$A"
        env: {A: "${{ stages.build.steps.compile.outputs.artifact }}", V: "${{ inputs.version }}"}
      - name: rollback
        when: failure
        shell: ./rollback
`

// runFixture is a manager with the pipeline above stored and a fake
// delegate that takes the steps' tasks by hand.
type runFixture struct {
	tm  *testManager
	del *client.Client
}

func newRunFixture(t *testing.T, cfg Config) runFixture {
	t.Helper()
	tm := startTestManager(t, cfg)
	ctx := context.Background()
	if _, _, err := tm.st.ApplyPipeline(ctx, store.Pipeline{AccountID: tm.admin.AccountID, Name: "ship", Source: testRunPipeline, UpdatedBy: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	del, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d1", "h1", "builder")
	return runFixture{tm: tm, del: del}
}

func (f runFixture) start(t *testing.T, inputs map[string]string) store.Run {
	t.Helper()
	run, err := f.tm.m.engine.StartRun(context.Background(), engine.RunStart{AccountID: f.tm.admin.AccountID, Pipeline: "ship",
		Inputs: inputs, Trigger: "manual", TriggeredBy: "user admin"})
	if err != nil {
		t.Fatalf("start run: %v", err)
	}
	return run
}

// stepTask waits until step stage.step of the run has a task (recorded
// and created) and returns the task's ID.
func (f runFixture) stepTask(t *testing.T, runID, stage, step string) string {
	t.Helper()
	var id string
	eventually(t, 10*time.Second, "step "+stage+"."+step+" to start", func() bool {
		run, err := f.tm.st.GetRun(context.Background(), f.tm.admin.AccountID, runID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range run.Steps {
			if s.Stage == stage && s.Step == step && s.TaskID != "" {
				id = s.TaskID
			}
		}
		if id == "" {
			return false
		}
		// The run records the step before the manager creates its task.
		_, err = f.tm.st.GetTask(context.Background(), f.tm.admin.AccountID, id)
		return err == nil
	})
	return id
}

// finish takes a task and reports its end; it returns the spec it ran.
func (f runFixture) finish(t *testing.T, taskID, status string, outputs map[string]string) protocol.TaskSpec {
	t.Helper()
	ctx := context.Background()
	acq, err := f.del.Acquire(ctx, taskID)
	if err != nil {
		t.Fatalf("acquire %s: %v", taskID, err)
	}
	code := 0
	if status != protocol.StatusSucceeded {
		code = 1
	}
	if _, err := f.del.Result(ctx, taskID, protocol.ResultRequest{Epoch: acq.Epoch, Status: status, ExitCode: &code, Outputs: outputs}); err != nil {
		t.Fatalf("result of %s: %v", taskID, err)
	}
	return acq.Spec
}

func (f runFixture) waitRun(t *testing.T, id string) store.Run {
	t.Helper()
	var run store.Run
	eventually(t, 10*time.Second, "run "+id+" to end", func() bool {
		var err error
		run, err = f.tm.st.GetRun(context.Background(), f.tm.admin.AccountID, id)
		if err != nil {
			t.Fatal(err)
		}
		return run.Status != store.RunRunning
	})
	return run
}

type stepRow struct{ Stage, Step, Status, Error string }

func stepRows(run store.Run) []stepRow {
	var out []stepRow
	for _, s := range run.Steps {
		out = append(out, stepRow{s.Stage, s.Step, s.Status, s.Error})
	}
	return out
}

// TestRunPassesOutputsAndRunsFailureSteps: the first step's task has its
// selectors, its output reaches the next step's environment, and when
// that step fails the `when: failure` step runs; the run fails, and the
// deployment stage records a failed deployment.
func TestRunPassesOutputsAndRunsFailureSteps(t *testing.T) {
	f := newRunFixture(t, Config{})
	run := f.start(t, map[string]string{"version": "2.0"})
	compile := f.stepTask(t, run.ID, "build", "compile")
	if compile != engine.StepTaskID(run.ID, 0) {
		t.Errorf("compile's task %s, want %s", compile, engine.StepTaskID(run.ID, 0))
	}
	task, err := f.tm.st.GetTask(context.Background(), f.tm.admin.AccountID, compile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"builder"}, task.Spec.Selectors); diff != "" {
		t.Errorf("compile's selectors (-want +got):\n%s", diff)
	}
	if task.CreatedBy != "user admin" {
		t.Errorf("compile's task created by %q, want the run's trigger (user admin)", task.CreatedBy)
	}
	f.finish(t, compile, protocol.StatusSucceeded, map[string]string{"artifact": "web-2.0.tgz"})

	push := f.stepTask(t, run.ID, "deploy", "push")
	spec := f.finish(t, push, protocol.StatusFailed, nil)
	if diff := cmp.Diff(map[string]string{"A": "web-2.0.tgz", "V": "2.0"}, spec.Env); diff != "" {
		t.Errorf("push's environment (-want +got):\n%s", diff)
	}
	f.finish(t, f.stepTask(t, run.ID, "deploy", "rollback"), protocol.StatusSucceeded, nil)

	run = f.waitRun(t, run.ID)
	if run.Status != store.RunFailed || run.FinishedAt == nil {
		t.Errorf("run %s, finished %v: want failed", run.Status, run.FinishedAt)
	}
	if diff := cmp.Diff([]stepRow{
		{"build", "compile", "succeeded", ""},
		{"deploy", "push", "failed", "its task " + push + " failed"},
		{"deploy", "rollback", "succeeded", ""},
	}, stepRows(run), cmpopts.IgnoreFields(stepRow{}, "Error")); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	ds, err := f.tm.st.ListDeployments(context.Background(), store.DeploymentFilter{AccountID: f.tm.admin.AccountID})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].RunID != run.ID || ds[0].Status != protocol.DeploymentFailed || ds[0].Version != "2.0" ||
		ds[0].Service != "web" || ds[0].Environment != "prod" || ds[0].PrincipalName != "admin" {
		t.Errorf("deployments %+v, want one failed deployment of web 2.0 to prod by admin", ds)
	}
}

// TestRunSucceedsAndSkipsFailureSteps: a run whose steps succeed skips the
// `when: failure` step and succeeds; a step whose output is missing fails
// without a task, which runs the failure step.
func TestRunSucceedsAndSkipsFailureSteps(t *testing.T) {
	f := newRunFixture(t, Config{})
	run := f.start(t, nil)
	f.finish(t, f.stepTask(t, run.ID, "build", "compile"), protocol.StatusSucceeded, map[string]string{"artifact": "a"})
	f.finish(t, f.stepTask(t, run.ID, "deploy", "push"), protocol.StatusSucceeded, nil)
	run = f.waitRun(t, run.ID)
	if diff := cmp.Diff([]stepRow{
		{"build", "compile", "succeeded", ""},
		{"deploy", "push", "succeeded", ""},
		{"deploy", "rollback", "skipped", ""},
	}, stepRows(run)); diff != "" || run.Status != store.RunSucceeded {
		t.Errorf("run %s, steps (-want +got):\n%s", run.Status, diff)
	}

	// No output: push cannot get its task.
	run = f.start(t, nil)
	f.finish(t, f.stepTask(t, run.ID, "build", "compile"), protocol.StatusSucceeded, nil)
	f.finish(t, f.stepTask(t, run.ID, "deploy", "rollback"), protocol.StatusSucceeded, nil)
	run = f.waitRun(t, run.ID)
	rows := stepRows(run)
	if run.Status != store.RunFailed || len(rows) != 3 || rows[1].Status != store.RunFailed ||
		rows[1].Error != "step deploy.push, env.A: step build.compile did not write the output artifact (it writes KEY=VALUE lines to $LEGATE_OUTPUT)" {
		t.Errorf("run %s (%s), steps %+v: want push failed for the missing output", run.Status, run.Error, rows)
	}
}

// TestCancelRunCancelsItsSteps: cancelling a run cancels its running
// step's task; the run ends cancelled and starts nothing more.
func TestCancelRunCancelsItsSteps(t *testing.T) {
	f := newRunFixture(t, Config{})
	run := f.start(t, nil)
	compile := f.stepTask(t, run.ID, "build", "compile")
	got, err := f.tm.m.engine.CancelRun(context.Background(), f.tm.admin.AccountID, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.RunCancelled {
		t.Errorf("run after cancel: %s, want cancelled", got.Status)
	}
	task, err := f.tm.st.GetTask(context.Background(), f.tm.admin.AccountID, compile)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != protocol.StatusCancelled {
		t.Errorf("compile's task %s, want cancelled", task.Status)
	}
	if diff := cmp.Diff([]stepRow{
		{"build", "compile", "cancelled", ""},
		{"deploy", "push", "skipped", ""},
		{"deploy", "rollback", "skipped", ""},
	}, stepRows(got), cmpopts.IgnoreFields(stepRow{}, "Error")); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

// TestRunRefusedOverTheDeploymentLimit: with a limit of one deployment per
// hour, a second run of a deploying pipeline is refused before it starts.
func TestRunRefusedOverTheDeploymentLimit(t *testing.T) {
	f := newRunFixture(t, Config{DeploymentsPerHour: 1})
	run := f.start(t, nil)
	f.finish(t, f.stepTask(t, run.ID, "build", "compile"), protocol.StatusSucceeded, map[string]string{"artifact": "a"})
	f.stepTask(t, run.ID, "deploy", "push") // the deployment began
	_, err := f.tm.m.engine.StartRun(context.Background(), engine.RunStart{AccountID: f.tm.admin.AccountID, Pipeline: "ship", Trigger: "manual"})
	var le *engine.LimitError
	if !errors.As(err, &le) || le.Limit != 1 || le.Used != 1 {
		t.Fatalf("second run: %v, want a *engine.LimitError of 1 of 1", err)
	}
	runs, err := f.tm.st.ListRuns(context.Background(), f.tm.admin.AccountID, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Errorf("%d runs stored, want only the first", len(runs))
	}
}

// TestRunResumesAfterARestart: a step's task that ends while no manager
// runs (here: finished in the store) is seen by the next manager when it
// starts, which advances the run and creates the next step's task.
func TestRunResumesAfterARestart(t *testing.T) {
	dir := t.TempDir()
	dsn := dir + "/legate.db"
	leaks := checkLeaks(t)
	defer leaks()
	tm, stop := runTestManager(t, dsn, dir, Config{})
	ctx := context.Background()
	acct := tm.admin.AccountID
	if _, _, err := tm.st.ApplyPipeline(ctx, store.Pipeline{AccountID: acct, Name: "ship", Source: testRunPipeline}, time.Now()); err != nil {
		t.Fatal(err)
	}
	run, err := tm.m.engine.StartRun(ctx, engine.RunStart{AccountID: acct, Pipeline: "ship", Trigger: "manual", TriggeredBy: "user admin"})
	if err != nil {
		t.Fatal(err)
	}
	compile := engine.StepTaskID(run.ID, 0)
	// The task ends (as the lease sweep of a manager would end it) while
	// the run is not advanced: no hook runs.
	if _, err := tm.st.FinishTask(ctx, acct, compile, store.Result{Status: protocol.StatusTimedOut, Error: "timed out"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	stop()

	tm2, stop2 := runTestManager(t, dsn, dir, Config{})
	defer stop2()
	f := runFixture{tm: tm2}
	tok, err := tm2.client(t, tm2.admin.APIKey).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	f.del, _ = tm2.registerFake(t, acct, tok.Value, "d1", "h1")
	f.finish(t, f.stepTask(t, run.ID, "deploy", "rollback"), protocol.StatusSucceeded, nil)
	run = f.waitRun(t, run.ID)
	if diff := cmp.Diff([]stepRow{
		{"build", "compile", "timed_out", "timed out"},
		{"deploy", "push", "skipped", ""},
		{"deploy", "rollback", "succeeded", ""},
	}, stepRows(run)); diff != "" || run.Status != store.RunFailed {
		t.Errorf("run %s, steps (-want +got):\n%s", run.Status, diff)
	}
}

// TestRunAdvancedByTwoManagersAtOnce: on one PostgreSQL database, two
// managers advancing the same run at once start each step once.
func TestRunAdvancedByTwoManagersAtOnce(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	tms := startTestManagers(t, dsn, Config{}, Config{})
	a, b := tms[0], tms[1]
	ctx := context.Background()
	acct := a.admin.AccountID
	if _, _, err := a.st.ApplyPipeline(ctx, store.Pipeline{AccountID: acct, Name: "ship", Source: testRunPipeline}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		run, err := a.m.engine.StartRun(ctx, engine.RunStart{AccountID: acct, Pipeline: "ship", Trigger: "manual", TriggeredBy: "user admin"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.st.FinishTask(ctx, acct, engine.StepTaskID(run.ID, 0), store.Result{Status: protocol.StatusFailed, Error: "boom"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, tm := range []*testManager{a, b} {
			wg.Go(func() {
				if _, err := tm.m.engine.AdvanceRun(ctx, acct, run.ID); err != nil {
					t.Errorf("advance: %v", err)
				}
			})
		}
		wg.Wait()
		got, err := a.st.GetRun(ctx, acct, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]stepRow{
			{"build", "compile", "failed", "boom"},
			{"deploy", "push", "skipped", ""},
			{"deploy", "rollback", "running", ""},
		}, stepRows(got)); diff != "" {
			t.Errorf("steps (-want +got):\n%s", diff)
		}
		tasks, err := a.st.ListTasks(ctx, store.TaskFilter{AccountID: acct, Status: protocol.StatusQueued})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, task := range tasks {
			if task.ID == engine.StepTaskID(run.ID, 2) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("rollback's task queued %d times, want once", n)
		}
	}
}

// TestRunNeedsWhatItsStepsUse: running a pipeline needs pipeline:execute
// and, as submitting its steps as tasks would, connector:access on the
// connectors and secret:access on the stored secrets they use.
func TestRunNeedsWhatItsStepsUse(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathConnectors, `{"name":"conn","url":"http://127.0.0.1:1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"S1","value":"v"}`, 201)
	src := "name: uses\\nstages:\\n  - name: s\\n    infrastructure: conn\\n    steps:\\n      - name: a\\n        shell: echo\\n        secrets: {T: S1}\\n"
	tm.mustAPI(t, admin, "POST", protocol.PathPipelines, `{"source":"`+src+`"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["pipeline:execute","pipeline:view"]}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"user-of-conn","permissions":["connector:access"]}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"user-of-s1","permissions":["secret:access"]}`, 201)
	key := tm.userKey(t, "rita", "runner", access.Account)
	runPath := protocol.PathPipelines + "/uses/runs"
	for _, tt := range []struct {
		grant, want string
	}{
		{"", "connector:access"},
		{"user-of-conn", "secret:access"},
		{"user-of-s1", ""},
	} {
		if tt.grant != "" {
			tm.mustAPI(t, admin, "POST", protocol.PathBindings, `{"role":"`+tt.grant+`","subject_kind":"user","subject":"rita"}`, 201)
		}
		status, body := tm.api(t, key, "POST", runPath, `{}`)
		switch {
		case tt.want == "" && status != http.StatusCreated:
			t.Errorf("with every permission: %d %s, want 201", status, body)
		case tt.want != "" && (status != http.StatusForbidden || !strings.Contains(body, tt.want)):
			t.Errorf("without %s: %d %s, want 403 naming it", tt.want, status, body)
		}
	}
}

// TestRunCreatesAStepTaskNeverCreated: a step recorded as running whose
// task was never created (its manager died between the two) gets its
// task on the next advance, once.
func TestRunCreatesAStepTaskNeverCreated(t *testing.T) {
	f := newRunFixture(t, Config{})
	ctx := context.Background()
	acct := f.tm.admin.AccountID
	run, err := f.tm.st.CreateRun(ctx, store.Run{ID: "r_lost", AccountID: acct, Pipeline: "ship", Version: 1, Source: testRunPipeline,
		Inputs: map[string]string{"version": "1.0"}, Status: store.RunRunning, Trigger: "manual", TriggeredBy: "user admin", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	id := engine.StepTaskID(run.ID, 0)
	if _, err := f.tm.st.AdvanceRun(ctx, acct, run.ID, func(store.Run) (store.RunChange, error) {
		return store.RunChange{Steps: []store.RunStep{{Stage: "build", Step: "compile", TaskID: id, Status: store.RunRunning, StartedAt: time.Now()}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	// The engine's own pass at start (Run) may come after this run was
	// written on a busy machine and create the task first: that is the
	// same behaviour, by another advance, so it is not a failure.
	if _, err := f.tm.st.GetTask(ctx, acct, id); err == nil {
		t.Log("the engine's start-up pass created the task before the test's advance")
	} else if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("task before the advance: %v, want not found", err)
	}
	for range 2 {
		if _, err := f.tm.m.engine.AdvanceRun(ctx, acct, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	task, err := f.tm.st.GetTask(ctx, acct, id)
	if err != nil {
		t.Fatalf("compile's task after the advance: %v", err)
	}
	if task.Status != protocol.StatusQueued || task.Spec.Selectors[0] != "builder" {
		t.Errorf("compile's task: %s %v", task.Status, task.Spec.Selectors)
	}
}

// TestListRunsAPIPagesAndRefusesBadQueries: the runs API pages by its
// cursor until no next is left, every run exactly once, and refuses an
// unknown status, a scope without a pipeline, a cursor that is not a run
// of the account and a bad limit with a message that says why.
func TestListRunsAPIPagesAndRefusesBadQueries(t *testing.T) {
	f := newRunFixture(t, Config{})
	ctx := context.Background()
	want := map[string]bool{}
	for range 5 {
		want[f.start(t, nil).ID] = true
	}
	admin := f.tm.client(t, f.tm.admin.APIKey)
	seen := map[string]bool{}
	page, pages := "", 0
	for {
		list, err := admin.ListRunsPage(ctx, client.RunQuery{Pipeline: "ship", InScope: true, Limit: 2, Page: page})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range list.Runs {
			if seen[r.ID] {
				t.Fatalf("run %s on two pages", r.ID)
			}
			seen[r.ID] = true
		}
		if list.Next == "" {
			break
		}
		if pages > 5 {
			t.Fatalf("more than 5 pages of 2 for 5 runs")
		}
		page = list.Next
	}
	if diff := cmp.Diff(want, seen); diff != "" || pages != 3 {
		t.Errorf("runs over %d pages (-want +got):\n%s", pages, diff)
	}
	for query, wantMsg := range map[string]string{
		"status=done":          "unknown run status",
		"org=o1":               "pass pipeline too",
		"page=r_nope":          "is not a run of this account",
		"limit=1001":           "limit must be between 1 and 1000",
		"pipeline=ship&limit=": "",
	} {
		req, err := http.NewRequestWithContext(ctx, "GET", f.tm.url+protocol.PathRuns+"?"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+f.tm.admin.APIKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if wantMsg == "" {
			if res.StatusCode != http.StatusOK {
				t.Errorf("%s: %d %s, want 200", query, res.StatusCode, body)
			}
			continue
		}
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), wantMsg) {
			t.Errorf("%s: %d %s, want 400 saying %q", query, res.StatusCode, body, wantMsg)
		}
	}
}

// TestRunAdvanceReachesTheOtherManagersPages: on one PostgreSQL database,
// a run that manager A advances wakes the web UI's run watchers on manager
// B at once, not at B's next pass over the unfinished runs (an hour here);
// a pass that records nothing says so (and so broadcasts nothing).
func TestRunAdvanceReachesTheOtherManagersPages(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	tms := startTestManagers(t, dsn, Config{RunAdvanceInterval: time.Hour}, Config{RunAdvanceInterval: time.Hour})
	a, b := tms[0], tms[1]
	ctx := context.Background()
	acct := a.admin.AccountID
	if _, _, err := a.st.ApplyPipeline(ctx, store.Pipeline{AccountID: acct, Name: "ship", Source: testRunPipeline}, time.Now()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "manager B listening", func() bool { return b.m.bus.Listening() })
	changes, stop := b.m.runWatch.subscribe(acct)
	defer stop()
	wake := func(what string) {
		t.Helper()
		select {
		case <-changes:
		case <-time.After(10 * time.Second):
			t.Fatalf("manager B's run watchers were not told that %s", what)
		}
	}
	run, err := a.m.engine.StartRun(ctx, engine.RunStart{AccountID: acct, Pipeline: "ship", Trigger: "manual", TriggeredBy: "user admin"})
	if err != nil {
		t.Fatal(err)
	}
	wake("the run started")
	// While the step's task is still queued, a pass records nothing, and
	// so broadcasts nothing (the engine's tests check what the pass says).
	var watching, broadcast atomic.Bool
	a.m.events.Subscribe(func(_ context.Context, e events.Event) {
		if watching.Load() && e.Account == acct && e.Broadcast {
			broadcast.Store(true)
		}
	}, events.RunAdvanced)
	watching.Store(true)
	if _, err := a.m.engine.AdvanceRun(ctx, acct, run.ID); err != nil {
		t.Fatal(err)
	}
	watching.Store(false)
	if broadcast.Load() {
		t.Fatalf("a pass with nothing to record told the other managers the run moved")
	}
	// B's own pass at its start may have woken its watchers too (a
	// manager's own passes do, whatever they change): start from none.
	select {
	case <-changes:
	default:
	}
	// The step's end moves the run, through A.
	if _, err := a.st.FinishTask(ctx, acct, engine.StepTaskID(run.ID, 0), store.Result{Status: protocol.StatusFailed, Error: "boom"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := a.m.engine.AdvanceRun(ctx, acct, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Steps) != 3 {
		t.Fatalf("after the advance: %+v", got.Steps)
	}
	wake("the run advanced")
}
