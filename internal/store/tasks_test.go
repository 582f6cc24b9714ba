package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

const lease = 30 * time.Second

// newTask is a queued task of account acc created at created.
func newTask(id, acc string, created time.Time) Task {
	return Task{
		ID:        id,
		AccountID: acc,
		Spec: protocol.TaskSpec{
			Type:      protocol.TaskShell,
			Shell:     &protocol.ShellSpec{Script: "echo " + id},
			Selectors: []string{"linux"},
			Env:       map[string]string{"A": "1"},
			SecretEnv: map[string]string{"TOKEN": "s3cret"},
		},
		TimeoutMS:      60_000,
		QueueTimeoutMS: 120_000,
		Retries:        1,
		CreatedAt:      created,
		QueueDeadline:  created.Add(2 * time.Minute),
	}
}

// stored is what a read returns right after CreateTask(t): a queued task,
// its secret names without their values.
func stored(t Task) Task {
	t.Status = protocol.StatusQueued
	return t.WithoutSecretValues()
}

func mustCreate(t testing.TB, s *Store, tasks ...Task) {
	t.Helper()
	for _, task := range tasks {
		if err := s.CreateTask(context.Background(), task); err != nil {
			t.Fatalf("CreateTask(%s): %v", task.ID, err)
		}
	}
}

func claimFor(id, instance string) Claim {
	return Claim{
		TaskID: id, InstanceID: instance, DelegateName: "dlg-" + instance,
		DelegateHostname: "host-" + instance, LeaseDuration: lease,
	}
}

func mustClaim(t testing.TB, s *Store, id, instance string, now time.Time) Task {
	t.Helper()
	task, err := s.ClaimTask(context.Background(), claimFor(id, instance), now)
	if err != nil {
		t.Fatalf("ClaimTask(%s, %s): %v", id, instance, err)
	}
	return task
}

func mustGet(t testing.TB, s *Store, acc, id string) Task {
	t.Helper()
	task, err := s.GetTask(context.Background(), acc, id)
	if err != nil {
		t.Fatalf("GetTask(%s): %v", id, err)
	}
	return task
}

func ids(tasks []Task) []string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.ID)
	}
	return out
}

func TestCreateGetTask(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		task := newTask("task1", "acc1", t0)
		task.Spec.HTTP = &protocol.HTTPSpec{Method: "GET", URL: "http://x", Headers: map[string]string{"H": "v"}}
		mustCreate(t, s, task)

		got := mustGet(t, s, "acc1", "task1")
		if diff := cmp.Diff(stored(task), got, equateEmpty); diff != "" {
			t.Errorf("GetTask (-want +got):\n%s", diff)
		}
		var typ string
		if err := s.reader.QueryRowContext(ctx, "SELECT type FROM tasks WHERE id = 'task1'").Scan(&typ); err != nil || typ != protocol.TaskShell {
			t.Errorf("type column = %q, %v", typ, err)
		}

		_, err := s.GetTask(ctx, "acc2", "task1")
		wantErr(t, "other account", err, ErrNotFound)
		_, err = s.GetTask(ctx, "acc1", "nope")
		wantErr(t, "unknown task", err, ErrNotFound)
		wantErr(t, "duplicate", s.CreateTask(ctx, newTask("task1", "acc1", t0)), ErrConflict)

		// Runtime fields given to CreateTask are ignored: it inserts a queued task.
		odd := newTask("task2", "acc1", t0)
		odd.Status, odd.Epoch, odd.InstanceID = protocol.StatusRunning, 7, "i1"
		mustCreate(t, s, odd)
		got = mustGet(t, s, "acc1", "task2")
		if got.Status != protocol.StatusQueued || got.Epoch != 0 || got.InstanceID != "" {
			t.Errorf("CreateTask kept runtime fields: %+v", got)
		}
	})
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		// a1..a4 in acc1 (a2 and a3 created at the same time: id breaks the tie),
		// b1 in acc2.
		mustCreate(t, s,
			newTask("a1", "acc1", at(1*time.Second)),
			newTask("a3", "acc1", at(2*time.Second)),
			newTask("a2", "acc1", at(2*time.Second)),
			newTask("a4", "acc1", at(3*time.Second)),
			newTask("b1", "acc2", at(4*time.Second)),
		)
		// Scoped tasks of acc1: o1 (its org), o1/p1, o1/p2, o2/p1.
		scoped := func(id, org, project string, d time.Duration) Task {
			tk := newTask(id, "acc1", at(d))
			tk.Spec.Org, tk.Spec.Project = org, project
			return tk
		}
		mustCreate(t, s,
			scoped("s-o1", "o1", "", 500*time.Millisecond),
			scoped("s-p1", "o1", "p1", 400*time.Millisecond),
			scoped("s-p2", "o1", "p2", 300*time.Millisecond),
			scoped("s-o2p1", "o2", "p1", 200*time.Millisecond),
		)
		mustClaim(t, s, "a3", "i1", at(5*time.Second))
		mustClaim(t, s, "b1", "i2", at(5*time.Second))

		tests := []struct {
			name string
			f    TaskFilter
			want []string
		}{
			{"all", TaskFilter{}, []string{"b1", "a4", "a3", "a2", "a1", "s-o1", "s-p1", "s-p2", "s-o2p1"}},
			{"account", TaskFilter{AccountID: "acc1"}, []string{"a4", "a3", "a2", "a1", "s-o1", "s-p1", "s-p2", "s-o2p1"}},
			{"account and status", TaskFilter{AccountID: "acc1", Status: protocol.StatusQueued}, []string{"a4", "a2", "a1", "s-o1", "s-p1", "s-p2", "s-o2p1"}},
			{"status", TaskFilter{Status: protocol.StatusRunning}, []string{"b1", "a3"}},
			{"limit", TaskFilter{AccountID: "acc1", Limit: 2}, []string{"a4", "a3"}},
			{"nothing", TaskFilter{AccountID: "acc3"}, nil},
			{"scope: account", TaskFilter{AccountID: "acc1", Scopes: []ScopeFilter{{Org: "o1"}, {}}, Limit: 5}, []string{"a4", "a3", "a2", "a1", "s-o1"}},
			{"scope: an org and its projects", TaskFilter{AccountID: "acc1", Scopes: []ScopeFilter{{Org: "o1"}}}, []string{"s-o1", "s-p1", "s-p2"}},
			{"scope: a project", TaskFilter{AccountID: "acc1", Scopes: []ScopeFilter{{Org: "o1", Project: "p1"}}}, []string{"s-p1"}},
			{"scope: projects of two orgs, limited", TaskFilter{AccountID: "acc1", Scopes: []ScopeFilter{{Org: "o2", Project: "p1"}, {Org: "o1", Project: "p2"}}, Limit: 2},
				[]string{"s-p2", "s-o2p1"}},
			{"scope: a project of that name in another org only", TaskFilter{AccountID: "acc1", Scopes: []ScopeFilter{{Org: "o3", Project: "p1"}}}, nil},
			{"scope: none", TaskFilter{AccountID: "acc1", Scopes: []ScopeFilter{}}, nil},
			{"within an org", TaskFilter{AccountID: "acc1", Within: &ScopeFilter{Org: "o1"}}, []string{"s-o1", "s-p1", "s-p2"}},
			{"within a project", TaskFilter{AccountID: "acc1", Within: &ScopeFilter{Org: "o2", Project: "p1"}}, []string{"s-o2p1"}},
			{"within an org, of what a project viewer may view", TaskFilter{AccountID: "acc1", Within: &ScopeFilter{Org: "o1"}, Scopes: []ScopeFilter{{Org: "o1", Project: "p2"}, {Org: "o2", Project: "p1"}}},
				[]string{"s-p2"}},
			{"before a task", TaskFilter{AccountID: "acc1", Before: &TaskCursor{CreatedAt: at(2 * time.Second), ID: "a3"}, Limit: 3}, []string{"a2", "a1", "s-o1"}},
			{"before the tie's second", TaskFilter{AccountID: "acc1", Before: &TaskCursor{CreatedAt: at(2 * time.Second), ID: "a2"}, Limit: 1}, []string{"a1"}},
			{"before the last", TaskFilter{AccountID: "acc1", Before: &TaskCursor{CreatedAt: at(200 * time.Millisecond), ID: "s-o2p1"}}, nil},
			{"delegate by name, any case", TaskFilter{Delegate: "DLG-I1"}, []string{"a3"}},
			{"delegate by hostname", TaskFilter{Delegate: "host-i2"}, []string{"b1"}},
			{"delegate and status", TaskFilter{Delegate: "dlg-i1", Status: protocol.StatusQueued}, nil},
		}
		for _, tt := range tests {
			got, err := s.ListTasks(context.Background(), tt.f)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
				t.Errorf("%s: ListTasks(%+v) (-want +got):\n%s", tt.name, tt.f, diff)
			}
		}
	})
}

func TestListTasksDefaultLimit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		for i := range defaultListLimit + 5 {
			mustCreate(t, s, newTask(fmt.Sprintf("t%03d", i), "acc1", at(time.Duration(i)*time.Second)))
		}
		got, err := s.ListTasks(context.Background(), TaskFilter{AccountID: "acc1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != defaultListLimit || got[0].ID != fmt.Sprintf("t%03d", defaultListLimit+4) {
			t.Errorf("ListTasks returned %d tasks starting %s", len(got), got[0].ID)
		}
		for _, tt := range []struct{ in, want int }{{0, 100}, {-1, 100}, {5, 5}, {1000, 1000}, {5000, 1000}} {
			if got := listLimit(tt.in); got != tt.want {
				t.Errorf("listLimit(%d) = %d, want %d", tt.in, got, tt.want)
			}
		}
	})
}

// TestQueuedPage: the whole queue of every account, oldest first, page by
// page; claimed tasks are not in it.
func TestQueuedPage(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		mustCreate(t, s,
			newTask("q3", "acc1", at(3*time.Second)),
			newTask("q1", "acc1", at(1*time.Second)),
			newTask("q2", "acc1", at(2*time.Second)),
			newTask("r1", "acc1", at(0)),
			newTask("x1", "acc2", at(0)),
			newTask("x2", "acc2", at(2*time.Second)),
		)
		mustClaim(t, s, "r1", "i1", at(time.Minute))
		ctx := context.Background()
		all, err := s.QueuedPage(ctx, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"x1", "q1", "q2", "x2", "q3"}, ids(all)); diff != "" {
			t.Errorf("QueuedPage (-want +got):\n%s", diff)
		}
		var paged []string
		var after *Task
		for range 10 {
			page, err := s.QueuedPage(ctx, after, 2)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, ids(page)...)
			if len(page) < 2 {
				break
			}
			after = &page[len(page)-1]
		}
		if diff := cmp.Diff(ids(all), paged); diff != "" {
			t.Errorf("page by page, 2 at a time (-want +got):\n%s", diff)
		}
	})
}

func TestMarkStarted(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("t1", "acc1", t0), newTask("t2", "acc1", t0))
		mustClaim(t, s, "t1", "i1", at(time.Minute))

		if err := s.MarkStarted(ctx, "t1", 1, at(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkStarted(ctx, "t1", 1, at(3*time.Minute)); err != nil {
			t.Fatalf("second MarkStarted: %v", err)
		}
		if got := mustGet(t, s, "acc1", "t1").StartedAt; got == nil || !got.Equal(at(2*time.Minute)) {
			t.Errorf("StartedAt = %v, want the first call's time", got)
		}
		wantErr(t, "wrong epoch", s.MarkStarted(ctx, "t1", 2, t0), ErrStaleLease)
		wantErr(t, "queued task", s.MarkStarted(ctx, "t2", 0, t0), ErrStaleLease)
		wantErr(t, "unknown task", s.MarkStarted(ctx, "nope", 1, t0), ErrNotFound)
		if _, err := s.CompleteTask(ctx, "t1", 1, Result{Status: protocol.StatusSucceeded, ExitCode: ptr(0)}, at(4*time.Minute)); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "finished task", s.MarkStarted(ctx, "t1", 1, t0), ErrStaleLease)
	})
}

func TestCompleteTask(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("t1", "acc1", t0), newTask("t2", "acc1", t0))
		claimed := mustClaim(t, s, "t1", "i1", at(time.Minute))

		r := Result{Status: protocol.StatusFailed, ExitCode: ptr(3), Error: "exit status 3",
			HTTPResult: &protocol.HTTPResult{Status: 500, BodyExcerpt: "oops", BodyTruncated: true}}
		got, err := s.CompleteTask(ctx, "t1", 1, r, at(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		want := claimed.WithoutSecretValues()
		want.Status, want.ExitCode, want.Error, want.HTTPResult = r.Status, r.ExitCode, r.Error, r.HTTPResult
		want.FinishedAt = ptr(at(2 * time.Minute))
		want.LeaseExpiresAt = nil
		if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
			t.Errorf("CompleteTask (-want +got):\n%s", diff)
		}

		// A repeated result at the same epoch is a no-op returning the stored task.
		again, err := s.CompleteTask(ctx, "t1", 1, Result{Status: protocol.StatusSucceeded}, at(3*time.Minute))
		if err != nil {
			t.Fatalf("repeated CompleteTask: %v", err)
		}
		if diff := cmp.Diff(want, again, equateEmpty); diff != "" {
			t.Errorf("repeated CompleteTask (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, mustGet(t, s, "acc1", "t1"), equateEmpty); diff != "" {
			t.Errorf("stored after repeat (-want +got):\n%s", diff)
		}

		ok := Result{Status: protocol.StatusSucceeded, ExitCode: ptr(0)}
		_, err = s.CompleteTask(ctx, "t1", 2, ok, t0)
		wantErr(t, "other epoch of a finished task", err, ErrStaleLease)
		_, err = s.CompleteTask(ctx, "t2", 0, ok, t0)
		wantErr(t, "queued task", err, ErrStaleLease)
		_, err = s.CompleteTask(ctx, "nope", 1, ok, t0)
		wantErr(t, "unknown task", err, ErrNotFound)
		if _, err := s.CompleteTask(ctx, "t2", 0, Result{Status: protocol.StatusRunning}, t0); err == nil {
			t.Error("CompleteTask accepted a non-terminal status")
		}

		// Stale epoch: the task was requeued (lease expired) and claimed again.
		mustClaim(t, s, "t2", "i1", at(time.Minute))
		if _, err := s.ExpireLeases(ctx, at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		_, err = s.CompleteTask(ctx, "t2", 1, ok, at(time.Hour))
		wantErr(t, "epoch of a requeued task", err, ErrStaleLease)
		mustClaim(t, s, "t2", "i2", at(time.Hour))
		_, err = s.CompleteTask(ctx, "t2", 1, ok, at(time.Hour))
		wantErr(t, "old epoch of a reclaimed task", err, ErrStaleLease)
		if got, err := s.CompleteTask(ctx, "t2", 2, ok, at(time.Hour)); err != nil || got.Status != protocol.StatusSucceeded {
			t.Errorf("current epoch: %s, %v", got.Status, err)
		}

		// Brief: the same change, and a task with only what Brief names.
		mustCreate(t, s, newTask("t3", "acc1", t0))
		claimed = mustClaim(t, s, "t3", "i1", at(time.Minute))
		brief, err := s.CompleteTask(ctx, "t3", 1, Result{Status: protocol.StatusSucceeded, ExitCode: ptr(0), Brief: true}, at(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		wantBrief := Task{ID: "t3", AccountID: "acc1", Spec: claimed.WithoutSecretValues().Spec,
			Status: protocol.StatusSucceeded, Epoch: 1, InstanceID: "i1"}
		if diff := cmp.Diff(wantBrief, brief, equateEmpty); diff != "" {
			t.Errorf("brief CompleteTask (-want +got):\n%s", diff)
		}
		want = claimed.WithoutSecretValues()
		want.Status, want.ExitCode = protocol.StatusSucceeded, ptr(0)
		want.FinishedAt, want.LeaseExpiresAt = ptr(at(2*time.Minute)), nil
		if diff := cmp.Diff(want, mustGet(t, s, "acc1", "t3"), equateEmpty); diff != "" {
			t.Errorf("stored after a brief CompleteTask (-want +got):\n%s", diff)
		}
	})
}

func TestFinishTask(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("queued", "acc1", t0), newTask("running", "acc1", t0), newTask("done", "acc1", t0))
		mustClaim(t, s, "running", "i1", at(time.Minute))
		mustClaim(t, s, "done", "i1", at(time.Minute))
		if _, err := s.CompleteTask(ctx, "done", 1, Result{Status: protocol.StatusSucceeded}, at(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		cancel := Result{Status: protocol.StatusCancelled, Error: "cancelled by user"}
		now := at(3 * time.Minute)
		tests := []struct {
			name, acc, id string
			wantErr       error
			wantInstance  string
		}{
			{"queued", "acc1", "queued", nil, ""},
			{"running keeps its instance", "acc1", "running", nil, "i1"},
			{"terminal", "acc1", "done", ErrTaskTerminal, ""},
			{"other account", "acc2", "queued", ErrNotFound, ""},
			{"unknown", "acc1", "nope", ErrNotFound, ""},
		}
		for _, tt := range tests {
			got, err := s.FinishTask(ctx, tt.acc, tt.id, cancel, now)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: error %v, want %v", tt.name, err, tt.wantErr)
				continue
			}
			if tt.wantErr != nil {
				continue
			}
			if got.Status != protocol.StatusCancelled || got.Error != cancel.Error || got.FinishedAt == nil ||
				!got.FinishedAt.Equal(now) || got.LeaseExpiresAt != nil || got.InstanceID != tt.wantInstance {
				t.Errorf("%s: got %+v", tt.name, got)
			}
			if diff := cmp.Diff(got, mustGet(t, s, "acc1", tt.id), equateEmpty); diff != "" {
				t.Errorf("%s: stored differs from returned (-returned +stored):\n%s", tt.name, diff)
			}
		}
		if got := mustGet(t, s, "acc1", "done"); got.Status != protocol.StatusSucceeded {
			t.Errorf("FinishTask changed a finished task: %s", got.Status)
		}
	})
}

// TestFinishQueuedTask ends only a task that is still queued: a claimed
// one (running) keeps running, a finished one stays finished.
func TestFinishQueuedTask(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("queued", "acc1", t0), newTask("running", "acc1", t0), newTask("done", "acc1", t0))
		mustClaim(t, s, "running", "i1", at(time.Minute))
		mustClaim(t, s, "done", "i1", at(time.Minute))
		if _, err := s.CompleteTask(ctx, "done", 1, Result{Status: protocol.StatusSucceeded}, at(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		r := Result{Status: protocol.StatusNotAssigned, Error: "no delegate"}
		now := at(3 * time.Minute)
		for _, tt := range []struct {
			id         string
			wantErr    error
			wantStatus string
		}{
			{"queued", nil, protocol.StatusNotAssigned},
			{"running", ErrAlreadyClaimed, protocol.StatusRunning},
			{"done", ErrTaskTerminal, protocol.StatusSucceeded},
		} {
			if _, err := s.FinishQueuedTask(ctx, "acc1", tt.id, r, now); !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: error %v, want %v", tt.id, err, tt.wantErr)
			}
			if got := mustGet(t, s, "acc1", tt.id); got.Status != tt.wantStatus {
				t.Errorf("%s: %s after FinishQueuedTask, want %s", tt.id, got.Status, tt.wantStatus)
			}
		}
	})
}

// TestQueuedPastDeadlineSeesPastADeepQueue: the sweep's view of expired
// tasks comes from the deadline index, earliest first, however many newer
// tasks are queued.
func TestQueuedPastDeadlineSeesPastADeepQueue(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		late := newTask("late", "acc1", t0)
		late.QueueDeadline = t0.Add(time.Second)
		later := newTask("later", "acc2", t0)
		later.QueueDeadline = t0.Add(2 * time.Second)
		claimed := newTask("claimed", "acc1", t0)
		claimed.QueueDeadline = t0.Add(time.Second)
		mustCreate(t, s, late, later, claimed)
		mustClaim(t, s, "claimed", "i1", t0)
		for i := range 150 {
			fresh := newTask(fmt.Sprintf("fresh%03d", i), "acc1", t0.Add(time.Duration(i+1)*time.Millisecond))
			fresh.QueueDeadline = t0.Add(time.Hour)
			mustCreate(t, s, fresh)
		}
		now := t0.Add(3 * time.Second)
		got, err := s.QueuedPastDeadline(ctx, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"late", "later"}, ids(got)); diff != "" {
			t.Errorf("past deadline (-want +got):\n%s", diff)
		}
		if got, err := s.QueuedPastDeadline(ctx, now, 1); err != nil || len(got) != 1 || got[0].ID != "late" {
			t.Errorf("limit 1: %v %v, want [late]", ids(got), err)
		}
		if got, err := s.QueuedPastDeadline(ctx, t0.Add(time.Second), 0); err != nil || len(got) != 0 {
			t.Errorf("at the first deadline itself: %v %v, want none (strictly before now)", ids(got), err)
		}
	})
}

// TestStartTaskSaysWhenTheTaskWasQueued: the first start report of an
// attempt learns when the task was queued (for pickup latency); a repeat
// learns nothing and keeps the first start.
func TestStartTaskSaysWhenTheTaskWasQueued(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		task := newTask("t1", "acc1", t0)
		mustCreate(t, s, task)
		mustClaim(t, s, "t1", "i1", at(time.Second))
		queued, err := s.StartTask(ctx, "t1", 1, Holder{}, at(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if !queued.Equal(t0) {
			t.Errorf("queued at %v, want %v (created)", queued, t0)
		}
		again, err := s.StartTask(ctx, "t1", 1, Holder{}, at(3*time.Second))
		if err != nil || !again.IsZero() {
			t.Errorf("repeated start: %v %v, want the zero time and no error", again, err)
		}
		if got := mustGet(t, s, "acc1", "t1"); got.StartedAt == nil || !got.StartedAt.Equal(at(2*time.Second)) {
			t.Errorf("started_at = %v, want the first report's", got.StartedAt)
		}
		if _, err := s.StartTask(ctx, "t1", 2, Holder{}, t0); !errors.Is(err, ErrStaleLease) {
			t.Errorf("other epoch: %v, want ErrStaleLease", err)
		}
	})
}

// TestReportsFromAnotherInstanceAreRefused: a start or a result that names
// its instance (the holder) is applied only when that instance holds the
// task at the epoch, so a delegate of the account that guesses a task ID
// and its epoch changes nothing; the holder's own reports stay idempotent.
func TestReportsFromAnotherInstanceAreRefused(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("t1", "acc1", t0))
		mustClaim(t, s, "t1", "i1", at(time.Second))

		if _, err := s.StartTask(ctx, "t1", 1, Holder{Instance: "i2"}, at(2*time.Second)); !errors.Is(err, ErrStaleLease) {
			t.Errorf("start from i2: %v, want ErrStaleLease", err)
		}
		if got := mustGet(t, s, "acc1", "t1"); got.StartedAt != nil {
			t.Errorf("started_at = %v after i2's report, want unset", got.StartedAt)
		}
		queued, err := s.StartTask(ctx, "t1", 1, Holder{Instance: "i1"}, at(2*time.Second))
		if err != nil || !queued.Equal(t0) {
			t.Errorf("start from i1: %v %v, want queued at %v", queued, err, t0)
		}
		if _, err := s.StartTask(ctx, "t1", 1, Holder{Instance: "i2"}, at(3*time.Second)); !errors.Is(err, ErrStaleLease) {
			t.Errorf("start from i2 after i1's: %v, want ErrStaleLease", err)
		}

		ok := Result{Status: protocol.StatusSucceeded, ExitCode: new(int)}
		bad := ok
		bad.Holder = Holder{Instance: "i2"}
		if _, err := s.CompleteTask(ctx, "t1", 1, bad, at(4*time.Second)); !errors.Is(err, ErrStaleLease) {
			t.Errorf("result from i2: %v, want ErrStaleLease", err)
		}
		if got := mustGet(t, s, "acc1", "t1"); got.Status != protocol.StatusRunning {
			t.Errorf("status %s after i2's result, want running", got.Status)
		}
		good := ok
		good.Holder = Holder{Instance: "i1"}
		done, err := s.CompleteTask(ctx, "t1", 1, good, at(5*time.Second))
		if err != nil || done.Status != protocol.StatusSucceeded {
			t.Fatalf("result from i1: %v %v, want succeeded", done.Status, err)
		}
		if again, err := s.CompleteTask(ctx, "t1", 1, good, at(6*time.Second)); err != nil || !again.FinishedAt.Equal(at(5*time.Second)) {
			t.Errorf("repeated result from i1: %v %v, want the first, no error", again.FinishedAt, err)
		}
		if _, err := s.CompleteTask(ctx, "t1", 1, bad, at(6*time.Second)); !errors.Is(err, ErrStaleLease) {
			t.Errorf("result from i2 after the end: %v, want ErrStaleLease", err)
		}

		// The holder's instance, registered again in a scope that does not
		// cover the task (org o1, project p1), is refused; in one that
		// does, applied.
		scoped := newTask("t2", "acc1", t0)
		scoped.Spec.Org, scoped.Spec.Project = "o1", "p1"
		mustCreate(t, s, scoped)
		mustClaim(t, s, "t2", "i1", at(time.Second))
		for _, h := range []Holder{{Instance: "i1", Org: "o2"}, {Instance: "i1", Org: "o1", Project: "p2"}} {
			if _, err := s.StartTask(ctx, "t2", 1, h, at(2*time.Second)); !errors.Is(err, ErrStaleLease) {
				t.Errorf("start from %+v: %v, want ErrStaleLease", h, err)
			}
			r := ok
			r.Holder = h
			if _, err := s.CompleteTask(ctx, "t2", 1, r, at(2*time.Second)); !errors.Is(err, ErrStaleLease) {
				t.Errorf("result from %+v: %v, want ErrStaleLease", h, err)
			}
		}
		for _, h := range []Holder{{Instance: "i1", Org: "o1"}, {Instance: "i1", Org: "o1", Project: "p1"}} {
			if _, err := s.StartTask(ctx, "t2", 1, h, at(2*time.Second)); err != nil {
				t.Errorf("start from %+v: %v, want it recorded", h, err)
			}
		}
		r := ok
		r.Holder = Holder{Instance: "i1", Org: "o1", Project: "p1"}
		if got, err := s.CompleteTask(ctx, "t2", 1, r, at(3*time.Second)); err != nil || got.Status != protocol.StatusSucceeded {
			t.Errorf("result from the project's instance: %v %v, want succeeded", got.Status, err)
		}
	})
}

// TestQueuedPagePriorityAndAging: the queue is read by effective priority
// (priority + one level per protocol.PriorityAgingStep waited), computed
// from the injected creation times: a higher task queued shortly after a
// low one goes first, and a low task that waited longer than the distance
// between their levels (in aging steps; protocol.StarvationBound at most)
// goes before newer high and urgent ones. Page by page gives the same
// order (the keyset cursor is the rank).
func TestQueuedPagePriorityAndAging(t *testing.T) {
	t.Parallel()
	step := protocol.PriorityAgingStep
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		task := func(id string, created time.Duration, p int) Task {
			tk := newTask(id, "acc1", at(created))
			tk.Spec.Priority = p
			return tk
		}
		mustCreate(t, s,
			task("low", 0, protocol.PriorityLow),
			task("high-soon", time.Second, protocol.PriorityHigh),
			// 3 levels above low, queued 2 steps later: still ahead.
			task("normal-2steps", 2*step, protocol.PriorityNormal),
			// The default (0) is normal: 3 levels above low, queued
			// 3 steps and a second later: behind it.
			task("default-late", 3*step+time.Second, 0),
			// Queued more than the distance of their levels after low.
			task("high-late", time.Duration(protocol.PriorityHigh-protocol.PriorityLow)*step+time.Second, protocol.PriorityHigh),
			task("urgent-late", time.Duration(protocol.PriorityUrgent-protocol.PriorityLow)*step+time.Second, protocol.PriorityUrgent),
			// The lowest priority waits at most StarvationBound behind
			// the highest.
			task("min", 10*time.Second, protocol.PriorityMin),
			task("max-after-bound", 10*time.Second+protocol.StarvationBound+time.Second, protocol.PriorityMax),
		)
		ctx := context.Background()
		all, err := s.QueuedPage(ctx, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"high-soon", "normal-2steps", "low", "default-late", "high-late", "urgent-late", "min", "max-after-bound"}
		if diff := cmp.Diff(want, ids(all)); diff != "" {
			t.Errorf("QueuedPage (-want +got):\n%s", diff)
		}
		var paged []string
		var after *Task
		for range 10 {
			page, err := s.QueuedPage(ctx, after, 3)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, ids(page)...)
			if len(page) < 3 {
				break
			}
			after = &page[len(page)-1]
		}
		if diff := cmp.Diff(want, paged); diff != "" {
			t.Errorf("page by page, 3 at a time (-want +got):\n%s", diff)
		}
		for i := 1; i < len(all); i++ {
			if CompareQueued(&all[i-1], &all[i]) >= 0 {
				t.Errorf("CompareQueued disagrees with the store: %s before %s", all[i-1].ID, all[i].ID)
			}
		}
	})
}
