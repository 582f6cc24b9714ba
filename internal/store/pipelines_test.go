package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPipelines(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		apply := func(org, project, name, src string, now time.Time) (Pipeline, bool) {
			t.Helper()
			p, changed, err := s.ApplyPipeline(ctx, Pipeline{AccountID: "acc1", Org: org, Project: project, Name: name, Source: src, UpdatedBy: "alice"}, now)
			if err != nil {
				t.Fatal(err)
			}
			return p, changed
		}
		p, changed := apply("", "", "web", "v1", t0)
		want := Pipeline{AccountID: "acc1", Name: "web", Source: "v1", Version: 1, UpdatedBy: "alice", CreatedAt: t0, UpdatedAt: t0}
		if diff := cmp.Diff(want, p); diff != "" || !changed {
			t.Errorf("first apply, changed %v (-want +got):\n%s", changed, diff)
		}
		if p, changed = apply("", "", "web", "v1", at(time.Minute)); changed || p.Version != 1 || !p.UpdatedAt.Equal(t0) {
			t.Errorf("apply of the same source: changed %v, %+v", changed, p)
		}
		p, changed = apply("", "", "web", "v2", at(2*time.Minute))
		want.Source, want.Version, want.UpdatedAt = "v2", 2, at(2*time.Minute)
		if diff := cmp.Diff(want, p); diff != "" || !changed {
			t.Errorf("second apply, changed %v (-want +got):\n%s", changed, diff)
		}
		apply("o1", "", "web", "org", t0)
		apply("o1", "p1", "web", "proj", t0)
		apply("o1", "p1", "api", "proj", t0)
		got, err := s.GetPipeline(ctx, "acc1", "o1", "p1", "web")
		if err != nil || got.Source != "proj" {
			t.Errorf("GetPipeline o1/p1/web: %+v, %v", got, err)
		}
		if _, err := s.GetPipeline(ctx, "acc2", "", "", "web"); !errors.Is(err, ErrNotFound) {
			t.Errorf("another account's pipeline: %v, want ErrNotFound", err)
		}
		list, err := s.ListPipelines(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range list {
			names = append(names, p.Org+"/"+p.Project+"/"+p.Name)
		}
		if diff := cmp.Diff([]string{"//web", "o1//web", "o1/p1/api", "o1/p1/web"}, names); diff != "" {
			t.Errorf("ListPipelines (-want +got):\n%s", diff)
		}
		if err := s.DeletePipeline(ctx, "acc1", "o1", "", "web"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeletePipeline(ctx, "acc1", "o1", "", "web"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second delete: %v, want ErrNotFound", err)
		}
		if _, err := s.GetPipeline(ctx, "acc1", "o1", "p1", "web"); err != nil {
			t.Errorf("the project's pipeline went with the org's: %v", err)
		}
	})
}

func TestRuns(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		run := Run{ID: "r1", AccountID: "acc1", Org: "o1", Pipeline: "web", Version: 2, Source: "src",
			Inputs: map[string]string{"v": "1"}, Status: RunRunning, Trigger: "manual", TriggeredBy: "alice", CreatedAt: t0}
		got, err := s.CreateRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(run, got); diff != "" {
			t.Errorf("CreateRun (-want +got):\n%s", diff)
		}
		if _, err := s.CreateRun(ctx, run); !errors.Is(err, ErrConflict) {
			t.Errorf("second CreateRun: %v, want ErrConflict", err)
		}
		r2 := run
		r2.ID, r2.CreatedAt, r2.Pipeline, r2.Inputs = "r2", at(time.Second), "api", nil
		if _, err := s.CreateRun(ctx, r2); err != nil {
			t.Fatal(err)
		}

		// First advance: one step starts, one is skipped.
		fin := at(3 * time.Second)
		adv, err := s.AdvanceRun(ctx, "acc1", "r1", func(r Run) (RunChange, error) {
			if len(r.Steps) != 0 {
				return RunChange{}, fmt.Errorf("steps before the first advance: %+v", r.Steps)
			}
			return RunChange{Steps: []RunStep{
				{Stage: "build", Step: "compile", TaskID: "t1", Status: "running", StartedAt: at(2 * time.Second)},
				{Stage: "build", Step: "lint", Status: "skipped", StartedAt: at(2 * time.Second), FinishedAt: &fin},
			}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(adv.Steps) != 2 || adv.Status != RunRunning {
			t.Errorf("after the first advance: %+v", adv)
		}
		ref, err := s.RunOfTask(ctx, "t1")
		if err != nil || ref != (RunRef{"acc1", "r1"}) {
			t.Errorf("RunOfTask t1: %+v, %v", ref, err)
		}
		if _, err := s.RunOfTask(ctx, "t9"); !errors.Is(err, ErrNotFound) {
			t.Errorf("RunOfTask of no step: %v, want ErrNotFound", err)
		}
		unfinished, err := s.UnfinishedRuns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]RunRef{{"acc1", "r1"}, {"acc1", "r2"}}, unfinished); diff != "" {
			t.Errorf("UnfinishedRuns (-want +got):\n%s", diff)
		}

		// The step ends with outputs; the run is cancelled, then over.
		end := at(4 * time.Second)
		if _, err := s.AdvanceRun(ctx, "acc1", "r1", func(r Run) (RunChange, error) {
			st := r.Steps[0]
			st.Status, st.Outputs, st.FinishedAt = "succeeded", map[string]string{"artifact": "web.tgz"}, &end
			return RunChange{Steps: []RunStep{st}, Cancel: true}, nil
		}); err != nil {
			t.Fatal(err)
		}
		adv, err = s.AdvanceRun(ctx, "acc1", "r1", func(r Run) (RunChange, error) {
			if !r.CancelRequested {
				return RunChange{}, errors.New("the cancel was not recorded")
			}
			return RunChange{Status: RunCancelled, Error: "cancelled by alice", FinishedAt: &end}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err = s.GetRun(ctx, "acc1", "r1")
		if err != nil {
			t.Fatal(err)
		}
		want := run
		want.Status, want.Error, want.CancelRequested, want.FinishedAt = RunCancelled, "cancelled by alice", true, &end
		want.Steps = []RunStep{
			{Stage: "build", Step: "compile", TaskID: "t1", Status: "succeeded", Outputs: map[string]string{"artifact": "web.tgz"}, StartedAt: at(2 * time.Second), FinishedAt: &end},
			{Stage: "build", Step: "lint", Status: "skipped", StartedAt: at(2 * time.Second), FinishedAt: &fin},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetRun (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, adv); diff != "" {
			t.Errorf("AdvanceRun's answer differs from GetRun (-want +got):\n%s", diff)
		}
		if _, err := s.GetRun(ctx, "acc2", "r1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("another account's run: %v, want ErrNotFound", err)
		}
		if _, err := s.AdvanceRun(ctx, "acc2", "r1", func(Run) (RunChange, error) { return RunChange{}, nil }); !errors.Is(err, ErrNotFound) {
			t.Errorf("advance of another account's run: %v, want ErrNotFound", err)
		}
		if unfinished, _ = s.UnfinishedRuns(ctx); len(unfinished) != 1 || unfinished[0].ID != "r2" {
			t.Errorf("UnfinishedRuns after r1 ended: %+v", unfinished)
		}
		list, err := s.ListRuns(ctx, "acc1", RunFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range list {
			ids = append(ids, r.ID)
		}
		if diff := cmp.Diff([]string{"r2", "r1"}, ids); diff != "" {
			t.Errorf("ListRuns, newest first (-want +got):\n%s", diff)
		}
		if list, _ = s.ListRuns(ctx, "acc1", RunFilter{Pipeline: "web"}); len(list) != 1 || list[0].ID != "r1" || list[0].Steps != nil {
			t.Errorf("ListRuns of web: %+v", list)
		}
	})
}

// TestListRunsFiltersAndPages: runs filtered in the store by status, the
// pipeline of one scope and the scopes a caller may view, a page at a time
// by the cursor, with runs created in the same microsecond ordered by ID.
func TestListRunsFiltersAndPages(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mk := func(id, org, project, pipeline, status string, at time.Time) {
			t.Helper()
			if _, err := s.CreateRun(ctx, Run{ID: id, AccountID: "acc1", Org: org, Project: project, Pipeline: pipeline,
				Status: status, Trigger: "manual", CreatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		mk("r1", "", "", "web", RunSucceeded, at(1*time.Second))
		mk("r2", "o1", "", "web", RunFailed, at(2*time.Second))
		mk("r3", "o1", "p1", "web", RunRunning, at(3*time.Second))
		mk("r4", "o1", "p1", "api", RunSucceeded, at(3*time.Second)) // same instant as r3: ID decides
		mk("r5", "o2", "", "web", RunSucceeded, at(4*time.Second))
		if _, err := s.CreateRun(ctx, Run{ID: "x1", AccountID: "acc2", Pipeline: "web", Status: RunSucceeded, Trigger: "manual", CreatedAt: at(5 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		ids := func(f RunFilter) []string {
			t.Helper()
			list, err := s.ListRuns(ctx, "acc1", f)
			if err != nil {
				t.Fatal(err)
			}
			out := []string{}
			for _, r := range list {
				out = append(out, r.ID)
			}
			return out
		}
		for _, tt := range []struct {
			name string
			f    RunFilter
			want []string
		}{
			{"all, newest first", RunFilter{}, []string{"r5", "r4", "r3", "r2", "r1"}},
			{"status", RunFilter{Status: RunSucceeded}, []string{"r5", "r4", "r1"}},
			{"pipeline", RunFilter{Pipeline: "web"}, []string{"r5", "r3", "r2", "r1"}},
			{"the account's pipeline web", RunFilter{Pipeline: "web", InScope: true}, []string{"r1"}},
			{"org o1's pipeline web", RunFilter{Pipeline: "web", InScope: true, Org: "o1"}, []string{"r2"}},
			{"project o1/p1's pipeline web", RunFilter{Pipeline: "web", InScope: true, Org: "o1", Project: "p1"}, []string{"r3"}},
			{"viewer of org o1", RunFilter{Scopes: []ScopeFilter{{Org: "o1"}}}, []string{"r4", "r3", "r2"}},
			{"viewer of o1/p1 and o2", RunFilter{Scopes: []ScopeFilter{{Org: "o1", Project: "p1"}, {Org: "o2"}}}, []string{"r5", "r4", "r3"}},
			{"viewer of nothing", RunFilter{Scopes: []ScopeFilter{}}, []string{}},
			{"first page", RunFilter{Limit: 2}, []string{"r5", "r4"}},
			{"after r4 (same instant as r3)", RunFilter{Limit: 2, Before: &RunCursor{CreatedAt: at(3 * time.Second), ID: "r4"}}, []string{"r3", "r2"}},
			{"after r2", RunFilter{Limit: 2, Before: &RunCursor{CreatedAt: at(2 * time.Second), ID: "r2"}}, []string{"r1"}},
			{"after r4, succeeded", RunFilter{Status: RunSucceeded, Before: &RunCursor{CreatedAt: at(3 * time.Second), ID: "r4"}}, []string{"r1"}},
		} {
			if diff := cmp.Diff(tt.want, ids(tt.f)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.name, diff)
			}
		}
	})
}

// TestAdvanceRunOneAtATime: advances of one run from several goroutines
// (on PostgreSQL, through two stores, as two managers would) never see the
// same state: each adds the step numbered by how many it saw, so a lost
// update shows as a repeated number.
func TestAdvanceRunOneAtATime(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.newDSN(t)
		s1 := openAt(t, dsn)
		s2 := s1
		if b.name == "postgres" {
			s2 = openAt(t, dsn)
		}
		ctx := context.Background()
		if _, err := s1.CreateRun(ctx, Run{ID: "r1", AccountID: "acc1", Pipeline: "p", Status: RunRunning, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		const n = 20
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			s := s1
			if i%2 == 1 {
				s = s2
			}
			wg.Go(func() {
				_, err := s.AdvanceRun(ctx, "acc1", "r1", func(r Run) (RunChange, error) {
					return RunChange{Steps: []RunStep{{Stage: "s", Step: fmt.Sprintf("step%02d", len(r.Steps)), Status: "skipped", StartedAt: t0}}}, nil
				})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		got, err := s1.GetRun(ctx, "acc1", "r1")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, st := range got.Steps {
			names = append(names, st.Step)
		}
		var want []string
		for i := range n {
			want = append(want, fmt.Sprintf("step%02d", i))
		}
		if diff := cmp.Diff(want, names, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("steps (-want +got):\n%s", diff)
		}
	})
}

// TestCompleteTaskWritesStepOutputs: a delegate's result with outputs
// lands on the run step of its task in the same transaction; a repeated
// result changes nothing; a task of no run keeps none and fails nothing.
func TestCompleteTaskWritesStepOutputs(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		if _, err := s.CreateRun(ctx, Run{ID: "r1", AccountID: "acc1", Pipeline: "p", Status: RunRunning, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AdvanceRun(ctx, "acc1", "r1", func(Run) (RunChange, error) {
			return RunChange{Steps: []RunStep{{Stage: "s", Step: "a", TaskID: "t1", Status: "running", StartedAt: t0}}}, nil
		}); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, s, newTask("t1", "acc1", t0), newTask("t2", "acc1", t0))
		mustClaim(t, s, "t1", "i1", t0)
		mustClaim(t, s, "t2", "i1", t0)
		outs := map[string]string{"artifact": "web.tgz"}
		for range 2 {
			if _, err := s.CompleteTask(ctx, "t1", 1, Result{Status: "succeeded", Outputs: outs}, at(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.CompleteTask(ctx, "t2", 1, Result{Status: "succeeded", Outputs: outs}, at(time.Second)); err != nil {
			t.Fatalf("a task of no run with outputs: %v", err)
		}
		run, err := s.GetRun(ctx, "acc1", "r1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(outs, run.Steps[0].Outputs); diff != "" {
			t.Errorf("step outputs (-want +got):\n%s", diff)
		}
	})
}
