package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestDeleteFinishedTasks: only tasks finished before the cutoff go, with
// their logs, oldest first and at most limit per call; queued, running
// and recently finished tasks stay.
func TestDeleteFinishedTasks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		old, older := t0.Add(-40*24*time.Hour), t0.Add(-50*24*time.Hour)
		mustCreate(t, s, newTask("done-old", "acc1", older), newTask("cancelled-old", "acc2", older),
			newTask("done-new", "acc1", t0), newTask("queued-old", "acc1", older), newTask("running-old", "acc1", older))
		// done-old: ran, wrote a log, succeeded 50 days ago.
		task := mustClaim(t, s, "done-old", "i1", older)
		if err := s.AppendLogs(ctx, "done-old", task.Epoch, []protocol.LogChunk{{Seq: 1, Data: "hello\n"}}, LogCap{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CompleteTask(ctx, "done-old", task.Epoch, Result{Status: protocol.StatusSucceeded, LastSeq: 1}, older); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishTask(ctx, "acc2", "cancelled-old", Result{Status: protocol.StatusCancelled}, old); err != nil {
			t.Fatal(err)
		}
		task = mustClaim(t, s, "done-new", "i1", t0)
		if _, err := s.CompleteTask(ctx, "done-new", task.Epoch, Result{Status: protocol.StatusFailed}, t0); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, "running-old", "i1", older)

		if _, err := s.DeleteFinishedTasks(ctx, t0, 0); err == nil {
			t.Error("limit 0: no error")
		}
		cutoff := t0.Add(-30 * 24 * time.Hour)
		// Oldest first: done-old (50 days), then cancelled-old (40).
		for _, want := range []string{"done-old", "cancelled-old"} {
			n, err := s.DeleteFinishedTasks(ctx, cutoff, 1)
			if err != nil || n != 1 {
				t.Fatalf("delete (want %s): %d, %v; want 1, nil", want, n, err)
			}
			if _, err := s.GetTask(ctx, "", want); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s after its deletion: %v, want ErrNotFound", want, err)
			}
		}
		if n, err := s.DeleteFinishedTasks(ctx, cutoff, 10); err != nil || n != 0 {
			t.Fatalf("nothing left to delete: %d, %v", n, err)
		}
		for _, id := range []string{"done-new", "queued-old", "running-old"} {
			if _, err := s.GetTask(ctx, "acc1", id); err != nil {
				t.Errorf("%s was deleted: %v", id, err)
			}
		}
		var logs, attempts int
		if err := s.reader.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM task_logs WHERE task_id = ?`), "done-old").Scan(&logs); err != nil {
			t.Fatal(err)
		}
		if err := s.reader.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM task_log_attempts WHERE task_id = ?`), "done-old").Scan(&attempts); err != nil {
			t.Fatal(err)
		}
		if logs != 0 || attempts != 0 {
			t.Errorf("done-old's log is left: %d chunks, %d attempts", logs, attempts)
		}
	})
}

// TestDeleteFinishedRuns: finished runs older than the cutoff go with
// their steps; running and recent runs stay.
func TestDeleteFinishedRuns(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		older := t0.Add(-50 * 24 * time.Hour)
		for _, id := range []string{"r-old", "r-new", "r-running"} {
			run := Run{ID: id, AccountID: "acc1", Org: "o1", Pipeline: "web", Version: 1, Source: "src",
				Status: RunRunning, Trigger: "manual", TriggeredBy: "alice", CreatedAt: older}
			if _, err := s.CreateRun(ctx, run); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AdvanceRun(ctx, "acc1", id, func(Run) (RunChange, error) {
				ch := RunChange{Steps: []RunStep{{Stage: "s", Step: "a", TaskID: "t-" + id, Status: RunRunning, StartedAt: older}}}
				switch id {
				case "r-old":
					ch.Status, ch.FinishedAt = RunSucceeded, &older
				case "r-new":
					ch.Status, ch.FinishedAt = RunFailed, &t0
				}
				return ch, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		n, err := s.DeleteFinishedRuns(ctx, t0.Add(-30*24*time.Hour), 10)
		if err != nil || n != 1 {
			t.Fatalf("DeleteFinishedRuns: %d, %v; want 1, nil", n, err)
		}
		if _, err := s.GetRun(ctx, "acc1", "r-old"); !errors.Is(err, ErrNotFound) {
			t.Errorf("r-old after its deletion: %v, want ErrNotFound", err)
		}
		var steps int
		if err := s.reader.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM pipeline_run_steps WHERE run_id = ?`), "r-old").Scan(&steps); err != nil {
			t.Fatal(err)
		}
		if steps != 0 {
			t.Errorf("r-old's steps are left: %d", steps)
		}
		for _, id := range []string{"r-new", "r-running"} {
			if r, err := s.GetRun(ctx, "acc1", id); err != nil || len(r.Steps) != 1 {
				t.Errorf("%s: %+v, %v; want it with its step", id, r, err)
			}
		}
	})
}
