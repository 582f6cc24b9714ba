package engine

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/leaktest"
	"github.com/legate-dev/legate/internal/pipeline"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

func TestMain(m *testing.M) { os.Exit(leaktest.Main(m.Run)) }

const testPipeline = `name: ship
stages:
  - name: build
    steps:
      - name: compile
        shell: make
  - name: deploy
    environment: prod
    service: web
    steps:
      - name: push
        shell: ./push
      - name: rollback
        when: failure
        shell: ./rollback
`

// manager is the rest of legate as the engine's tests see it: every
// step's task passes its checks, and the tasks the engine ends are
// noted.
type manager struct {
	mu    sync.Mutex
	ended []string
}

func (m *manager) PrepareTask(context.Context, string, *protocol.TaskSpec, func(context.Context) (*access.Policy, error)) ([]store.SecretBinding, error) {
	return nil, nil
}

func (m *manager) EndTask(_ context.Context, t store.Task) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = append(m.ended, t.ID+" "+t.Status)
}

func (m *manager) CheckScope(context.Context, string, string, string) error { return nil }

func (m *manager) ApplyConnectorCluster(context.Context, string, *protocol.TaskSpec) error {
	return nil
}

func (m *manager) SecretNeeds(context.Context, string, protocol.TaskSpec) ([]api.Need, error) {
	return nil, nil
}

func (m *manager) SealError(error) error { return nil }

func (m *manager) PolicyOf(context.Context, string, string, string) (*access.Policy, bool, error) {
	return nil, false, nil
}

// fixture is an engine over a real SQLite store with testPipeline stored
// in account acct, and what it published.
type fixture struct {
	svc    *Service
	st     *store.Store
	mgr    *manager
	events *events.Stream
	acct   string

	mu        sync.Mutex
	published []events.Event
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "legate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, mgr: &manager{}, events: &events.Stream{}, acct: "acc1"}
	f.events.Subscribe(func(_ context.Context, e events.Event) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.published = append(f.published, e)
	}, events.TaskQueued, events.RunAdvanced)
	cfg.Store, cfg.Tasks, cfg.Scopes, cfg.Secrets, cfg.Principals, cfg.Events = st, f.mgr, f.mgr, f.mgr, f.mgr, f.events
	cfg.Log = slog.New(slog.DiscardHandler)
	f.svc = New(cfg)
	if err := st.CreateAccount(ctx, store.Account{ID: f.acct, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ApplyPipeline(ctx, store.Pipeline{AccountID: f.acct, Name: "ship", Source: testPipeline, UpdatedBy: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) start(t *testing.T) store.Run {
	t.Helper()
	run, err := f.svc.StartRun(context.Background(), RunStart{AccountID: f.acct, Pipeline: "ship", Trigger: "manual", TriggeredBy: "user admin"})
	if err != nil {
		t.Fatalf("start run: %v", err)
	}
	return run
}

// took returns what was published since the last call.
func (f *fixture) took() []events.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.published
	f.published = nil
	return out
}

// stepRows is each step of run as "stage.step status".
func stepRows(run store.Run) []string {
	var out []string
	for _, s := range run.Steps {
		out = append(out, s.Stage+"."+s.Step+" "+s.Status)
	}
	return out
}

// TestStartRunQueuesTheFirstStepsTask: a run that starts records its
// first step, creates its task (the run's trigger as its creator) and
// publishes it queued, with the task, for the dispatch side to offer.
func TestStartRunQueuesTheFirstStepsTask(t *testing.T) {
	f := newFixture(t, Config{})
	run := f.start(t)
	id := StepTaskID(run.ID, 0)
	if diff := cmp.Diff([]string{"build.compile running"}, stepRows(run)); diff != "" || run.Steps[0].TaskID != id {
		t.Errorf("steps (-want +got):\n%s; task %s, want %s", diff, run.Steps[0].TaskID, id)
	}
	task, err := f.st.GetTask(context.Background(), f.acct, id)
	if err != nil || task.Status != protocol.StatusQueued || task.CreatedBy != "user admin" {
		t.Fatalf("compile's task: %+v, %v; want queued, created by user admin", task, err)
	}
	var queued []string
	for _, e := range f.took() {
		if e.Kind == events.TaskQueued && e.Task != nil && e.Account == f.acct {
			queued = append(queued, e.Task.ID)
		}
	}
	if diff := cmp.Diff([]string{id}, queued); diff != "" {
		t.Errorf("tasks published queued (-want +got):\n%s", diff)
	}
}

// TestAPassWithNothingToRecordSaysSo: while a step's task is still
// queued, a pass records nothing and says so, and the run's pages are
// told to look again without telling the other managers; once the task
// ended, the pass records its end and the next steps, and tells them.
func TestAPassWithNothingToRecordSaysSo(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	run := f.start(t)
	if _, progressed, changed, err := f.svc.advanceOnce(ctx, f.acct, run.ID, map[string]taskEnd{}); err != nil || progressed || changed {
		t.Fatalf("a pass with nothing to record: progressed %v, changed %v, %v", progressed, changed, err)
	}
	f.took()
	if _, err := f.svc.AdvanceRun(ctx, f.acct, run.ID); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]events.Event{{Kind: events.RunAdvanced, Account: f.acct}}, f.took()); diff != "" {
		t.Errorf("published by a pass that records nothing (-want +got):\n%s", diff)
	}
	if _, err := f.st.FinishTask(ctx, f.acct, StepTaskID(run.ID, 0), store.Result{Status: protocol.StatusFailed, Error: "boom"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AdvanceRun(ctx, f.acct, run.ID); err != nil {
		t.Fatal(err)
	}
	got, err := f.st.GetRun(ctx, f.acct, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"build.compile failed", "deploy.push skipped", "deploy.rollback running"}, stepRows(got)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	evs := f.took()
	if i := slices.IndexFunc(evs, func(e events.Event) bool { return e.Kind == events.RunAdvanced }); i < 0 || !evs[i].Broadcast {
		t.Errorf("published by a pass that moved the run: %+v, want RunAdvanced told to the other managers", evs)
	}
}

// TestCancelRunEndsItsStepTasks: cancelling a run ends its running
// step's task in the store and hands it to the dispatch side (EndTask) to
// stop; the run ends cancelled.
func TestCancelRunEndsItsStepTasks(t *testing.T) {
	f := newFixture(t, Config{})
	run := f.start(t)
	got, err := f.svc.CancelRun(context.Background(), f.acct, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.RunCancelled {
		t.Errorf("run after cancel: %s, want cancelled", got.Status)
	}
	if diff := cmp.Diff([]string{StepTaskID(run.ID, 0) + " " + protocol.StatusCancelled}, f.mgr.ended); diff != "" {
		t.Errorf("tasks ended (-want +got):\n%s", diff)
	}
}

// TestRunAdvancesTheRunOfAStepTaskThatEnded: Run advances the run of a
// step task whose end this manager published, at once.
func TestRunAdvancesTheRunOfAStepTaskThatEnded(t *testing.T) {
	f := newFixture(t, Config{RunAdvanceInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.svc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	run := f.start(t)
	id := StepTaskID(run.ID, 0)
	if _, err := f.st.FinishTask(ctx, f.acct, id, store.Result{Status: protocol.StatusFailed, Error: "boom"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: f.acct, TaskID: id})
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := f.st.GetRun(ctx, f.acct, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Steps) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not advance after its step's task ended: %v", stepRows(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStepTaskIDs: a step's task ID is fixed by its run and its number,
// and tells itself apart from a submitted task's.
func TestStepTaskIDs(t *testing.T) {
	for id, want := range map[string]bool{
		StepTaskID("r_abc", 0):  true,
		StepTaskID("r_abc", 12): true,
		"t_abc":                 false,
		"r_abc_0":               false,
		"t_a_b_c":               false,
	} {
		if got := isStepTask(id); got != want {
			t.Errorf("isStepTask(%q) = %v, want %v", id, got, want)
		}
	}
	if got := StepTaskID("r_abc", 3); got != "t_abc_3" {
		t.Errorf("StepTaskID = %q, want t_abc_3", got)
	}
}

// TestPrincipalOfLabel: a run's TriggeredBy (api.PrincipalLabel) reads
// back as its principal's kind and name.
func TestPrincipalOfLabel(t *testing.T) {
	for _, p := range []access.Principal{{Kind: access.KindUser, Name: "alice"}, {Kind: access.KindServiceAccount, Name: "ci"}} {
		kind, name := principalOfLabel(api.PrincipalLabel(p))
		if kind != p.Kind || name != p.Name {
			t.Errorf("%+v reads back as %q %q", p, kind, name)
		}
	}
}

// TestProjectRun: a run as it will be once a change is recorded, without
// touching the run it was given.
func TestProjectRun(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	run := store.Run{Status: store.RunRunning, Steps: []store.RunStep{{Stage: "build", Step: "compile", Status: store.RunRunning}}}
	got := projectRun(run, store.RunChange{Steps: []store.RunStep{
		{Stage: "build", Step: "compile", Status: protocol.StatusSucceeded},
		{Stage: "deploy", Step: "push", Status: store.RunRunning},
	}, Status: store.RunCancelled, FinishedAt: &now, Cancel: true})
	if diff := cmp.Diff([]string{"build.compile succeeded", "deploy.push running"}, stepRows(got)); diff != "" ||
		got.Status != store.RunCancelled || !got.CancelRequested || got.FinishedAt != &now {
		t.Errorf("projected run %s (cancel %v), steps (-want +got):\n%s", got.Status, got.CancelRequested, diff)
	}
	if run.Steps[0].Status != store.RunRunning {
		t.Errorf("the run given changed: %+v", run.Steps)
	}
}

// TestStepState: a running step whose task ended takes the task's end;
// the others keep their rows' status; outputs are kept by step.
func TestStepState(t *testing.T) {
	run := store.Run{CancelRequested: true, Steps: []store.RunStep{
		{Stage: "build", Step: "compile", Status: protocol.StatusSucceeded, Outputs: map[string]string{"a": "1"}},
		{Stage: "deploy", Step: "push", Status: store.RunRunning, TaskID: "t_x_1"},
		{Stage: "deploy", Step: "check", Status: store.RunRunning, TaskID: "t_x_2"},
		{Stage: "deploy", Step: "rollback", Status: protocol.StatusTimedOut},
	}}
	st, outs := stepState(run, map[string]taskEnd{"t_x_1": {status: protocol.StatusFailed}})
	got := map[string]pipeline.StepStatus{}
	for ref, s := range st.Steps {
		got[ref.String()] = s
	}
	want := map[string]pipeline.StepStatus{"build.compile": pipeline.StepSucceeded, "deploy.push": pipeline.StepFailed,
		"deploy.check": pipeline.StepRunning, "deploy.rollback": pipeline.StepFailed}
	if diff := cmp.Diff(want, got); diff != "" || !st.Cancelled {
		t.Errorf("state (cancelled %v) (-want +got):\n%s", st.Cancelled, diff)
	}
	if len(outs) != 1 {
		t.Errorf("outputs %+v, want compile's only", outs)
	}
}

// TestStartRunRunsTheCheckedVersion: a run started with the version its
// caller checked runs that version, not one an apply stored in between
// (whose uses nobody checked).
func TestStartRunRunsTheCheckedVersion(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	checked, err := f.st.GetPipeline(ctx, f.acct, "", "", "ship")
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(testPipeline, "shell: make", "shell: cat /etc/shadow", 1)
	if _, _, err := f.st.ApplyPipeline(ctx, store.Pipeline{AccountID: f.acct, Name: "ship", Source: edited, UpdatedBy: "mallory"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	run, err := f.svc.StartRun(ctx, RunStart{AccountID: f.acct, Pipeline: "ship", Trigger: "manual", TriggeredBy: "user admin", Stored: &checked})
	if err != nil {
		t.Fatal(err)
	}
	task, err := f.st.GetTask(ctx, f.acct, StepTaskID(run.ID, 0))
	if err != nil {
		t.Fatal(err)
	}
	if run.Version != 1 || task.Spec.Shell == nil || task.Spec.Shell.Script != "make" {
		t.Errorf("run of version %d, first step %+v; want version 1's make", run.Version, task.Spec.Shell)
	}
}

// TestStepTasksTakeTheRunsPriority: a pipeline's `priority:` is its step
// tasks' priority unless the run gives its own (run start --priority);
// the run records the one its steps take.
func TestStepTasksTakeTheRunsPriority(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	src := strings.Replace(testPipeline, "name: ship\n", "name: ship\npriority: high\n", 1)
	if _, _, err := f.st.ApplyPipeline(ctx, store.Pipeline{AccountID: f.acct, Name: "ship", Source: src, UpdatedBy: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		priority int
		want     int
	}{{"the pipeline's", 0, protocol.PriorityHigh}, {"the run's own", protocol.PriorityLow, protocol.PriorityLow}} {
		run, err := f.svc.StartRun(ctx, RunStart{AccountID: f.acct, Pipeline: "ship", Trigger: "manual", TriggeredBy: "user admin", Priority: tc.priority})
		if err != nil {
			t.Fatal(err)
		}
		task, err := f.st.GetTask(ctx, f.acct, StepTaskID(run.ID, 0))
		if err != nil || task.Spec.Priority != tc.want {
			t.Errorf("%s: step task priority %d (%v), want %d", tc.name, task.Spec.Priority, err, tc.want)
		}
		if got, err := f.st.GetRun(ctx, f.acct, run.ID); err != nil || got.Priority != tc.want {
			t.Errorf("%s: run priority %d (%v), want %d", tc.name, got.Priority, err, tc.want)
		}
	}
}
