package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestExtendLeases(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("t1", "acc1", t0), newTask("t2", "acc1", t0), newTask("t3", "acc1", t0))
		mustClaim(t, s, "t1", "i1", t0)
		mustClaim(t, s, "t2", "i1", t0)
		later := at(time.Hour)
		err := s.ExtendLeases(ctx, []LeaseExtension{
			{TaskID: "t1", Epoch: 1, ExpiresAt: later},
			{TaskID: "t2", Epoch: 2, ExpiresAt: later}, // wrong epoch
			{TaskID: "t3", Epoch: 0, ExpiresAt: later}, // queued
			{TaskID: "ghost", Epoch: 1, ExpiresAt: later},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			id   string
			want *time.Time
		}{{"t1", ptr(later)}, {"t2", ptr(t0.Add(lease))}, {"t3", nil}} {
			got := mustGet(t, s, "acc1", tt.id).LeaseExpiresAt
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s lease (-want +got):\n%s", tt.id, diff)
			}
		}
	})
}

// TestShortenLeases: a lease ending later than asked (and no later than
// the caller knew) is cut; one ending sooner, one extended past what the
// caller knew, another epoch's and a task not running are left alone.
func TestShortenLeases(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("t1", "acc1", t0), newTask("t2", "acc1", t0), newTask("t3", "acc1", t0),
			newTask("t4", "acc1", t0), newTask("t5", "acc1", t0))
		for _, id := range []string{"t1", "t2", "t4", "t5"} {
			mustClaim(t, s, id, "i1", t0)
		}
		soon, known := t0.Add(lease/3), t0.Add(lease)
		err := s.ShortenLeases(ctx, []LeaseCut{
			{TaskID: "t1", Epoch: 1, To: soon, Known: known},
			{TaskID: "t2", Epoch: 2, To: soon, Known: known},                      // wrong epoch
			{TaskID: "t3", Epoch: 0, To: soon, Known: known},                      // queued
			{TaskID: "t4", Epoch: 1, To: at(time.Hour), Known: at(2 * time.Hour)}, // ends sooner already
			{TaskID: "t5", Epoch: 1, To: soon, Known: t0.Add(lease / 2)},          // extended since
			{TaskID: "ghost", Epoch: 1, To: soon, Known: known},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			id   string
			want *time.Time
		}{{"t1", ptr(soon)}, {"t2", ptr(t0.Add(lease))}, {"t3", nil}, {"t4", ptr(t0.Add(lease))}, {"t5", ptr(t0.Add(lease))}} {
			got := mustGet(t, s, "acc1", tt.id).LeaseExpiresAt
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s lease (-want +got):\n%s", tt.id, diff)
			}
		}
		if err := s.ShortenLeases(ctx, nil); err != nil {
			t.Errorf("no leases: %v", err)
		}
	})
}

func TestExpireLeases(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		retry := newTask("retry", "acc1", t0)
		retry.Retries = 1
		final := newTask("final", "acc1", t0)
		final.Retries = 0
		alive := newTask("alive", "acc1", t0)
		mustCreate(t, s, retry, final, alive)
		claimed := mustClaim(t, s, "retry", "i1", at(time.Minute))
		mustClaim(t, s, "final", "i2", at(time.Minute))
		mustClaim(t, s, "alive", "i3", at(time.Minute))
		if err := s.MarkStarted(ctx, "retry", 1, at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.ExtendLeases(ctx, []LeaseExtension{{TaskID: "alive", Epoch: 1, ExpiresAt: at(time.Hour)}}); err != nil {
			t.Fatal(err)
		}

		now := at(10 * time.Minute)
		out, err := s.ExpireLeases(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		wantRetry := claimed.WithoutSecretValues()
		wantRetry.Status = protocol.StatusQueued
		wantRetry.DeniedInstances = []string{"i1"}
		wantRetry.InstanceID, wantRetry.DelegateName, wantRetry.DelegateHostname = "", "", ""
		wantRetry.AcquiredAt, wantRetry.StartedAt, wantRetry.LeaseExpiresAt = nil, nil, nil
		wantRetry.QueueDeadline = now.Add(time.Duration(retry.QueueTimeoutMS) * time.Millisecond)

		wantFinal := stored(final)
		wantFinal.Status = protocol.StatusFailed
		wantFinal.Epoch, wantFinal.Attempts = 2, 1 // the lease ended with the task
		wantFinal.InstanceID, wantFinal.DelegateName, wantFinal.DelegateHostname = "i2", "dlg-i2", "host-i2"
		wantFinal.AcquiredAt = ptr(at(time.Minute))
		wantFinal.FinishedAt = ptr(now)
		wantFinal.Error = `delegate "dlg-i2" (host host-i2) disconnected while running the task (lease expired)`

		want := []LeaseOutcome{
			{Task: wantFinal, Requeued: false, LostInstanceID: "i2"},
			{Task: wantRetry, Requeued: true, LostInstanceID: "i1"},
		}
		sortOutcomes := cmp.Transformer("sort", func(in []LeaseOutcome) []LeaseOutcome {
			out := append([]LeaseOutcome(nil), in...)
			for i := range out {
				for j := i + 1; j < len(out); j++ {
					if out[j].Task.ID < out[i].Task.ID {
						out[i], out[j] = out[j], out[i]
					}
				}
			}
			return out
		})
		if diff := cmp.Diff(want, out, equateEmpty, sortOutcomes); diff != "" {
			t.Errorf("ExpireLeases (-want +got):\n%s", diff)
		}
		for _, w := range []Task{wantRetry, wantFinal} {
			if diff := cmp.Diff(w, mustGet(t, s, "acc1", w.ID), equateEmpty); diff != "" {
				t.Errorf("stored %s (-want +got):\n%s", w.ID, diff)
			}
		}
		if got := mustGet(t, s, "acc1", "alive"); got.Status != protocol.StatusRunning {
			t.Errorf("alive: %s", got.Status)
		}
		if again, err := s.ExpireLeases(ctx, now); err != nil || len(again) != 0 {
			t.Errorf("second ExpireLeases = %v, %v; want nothing", again, err)
		}

		// Claimed again and lost again: no retries left, so it fails, naming
		// the second delegate; the deny list keeps the first.
		mustClaim(t, s, "retry", "i4", at(11*time.Minute))
		out, err = s.ExpireLeases(ctx, at(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range out {
			got = append(got, fmt.Sprintf("%s requeued=%v lost=%s attempts=%d denied=%v", o.Task.ID, o.Requeued, o.LostInstanceID, o.Task.Attempts, o.Task.DeniedInstances))
		}
		if diff := cmp.Diff([]string{"retry requeued=false lost=i4 attempts=2 denied=[i1]"}, got); diff != "" {
			t.Errorf("second loss (-want +got):\n%s", diff)
		}
		if e := out[0].Task.Error; !strings.Contains(e, `"dlg-i4"`) || !strings.Contains(e, "host-i4") {
			t.Errorf("error %q does not name the lost delegate", e)
		}
	})
}

func TestExpireLeasesDenyList(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		task := newTask("t1", "acc1", t0)
		task.Retries = 3
		mustCreate(t, s, task)
		for i, inst := range []string{"i1", "i2", "i1"} {
			mustClaim(t, s, "t1", inst, at(time.Duration(i)*time.Hour))
			if _, err := s.ExpireLeases(ctx, at(time.Duration(i)*time.Hour+time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		got := mustGet(t, s, "acc1", "t1")
		if got.Status != protocol.StatusQueued || got.Attempts != 3 || got.Epoch != 3 {
			t.Errorf("status %s attempts %d epoch %d", got.Status, got.Attempts, got.Epoch)
		}
		if diff := cmp.Diff([]string{"i1", "i2"}, got.DeniedInstances); diff != "" {
			t.Errorf("DeniedInstances (-want +got):\n%s", diff)
		}
	})
}

func TestTimeoutRunning(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		slow := newTask("slow", "acc1", t0)
		slow.TimeoutMS = 60_000
		inGrace := newTask("in-grace", "acc1", t0)
		inGrace.TimeoutMS = 60_000
		noLimit := newTask("no-limit", "acc1", t0)
		noLimit.TimeoutMS = 0
		queued := newTask("queued", "acc1", t0)
		queued.TimeoutMS = 1
		mustCreate(t, s, slow, inGrace, noLimit, queued)
		mustClaim(t, s, "slow", "i1", t0)
		mustClaim(t, s, "in-grace", "i1", at(5*time.Second))
		mustClaim(t, s, "no-limit", "i1", t0)

		// slow: t0 + 60s + 5s grace = 65s < 66s; in-grace: 70s > 66s.
		now := at(66 * time.Second)
		out, err := s.TimeoutRunning(ctx, now, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"slow"}, ids(out)); diff != "" {
			t.Fatalf("TimeoutRunning (-want +got):\n%s", diff)
		}
		got := out[0]
		if got.Status != protocol.StatusTimedOut || got.FinishedAt == nil || !got.FinishedAt.Equal(now) || got.LeaseExpiresAt != nil {
			t.Errorf("timed-out task: %+v", got)
		}
		if want := "timed out after 1m0s (enforced by the manager; the delegate did not report)"; got.Error != want {
			t.Errorf("Error = %q, want %q", got.Error, want)
		}
		if diff := cmp.Diff(got, mustGet(t, s, "acc1", "slow"), equateEmpty); diff != "" {
			t.Errorf("stored differs (-returned +stored):\n%s", diff)
		}
		// The manager ended the lease: a late result from the delegate that
		// held it is refused, and the timeout stands.
		if _, err := s.CompleteTask(ctx, "slow", 1, Result{Status: protocol.StatusSucceeded}, now); !errors.Is(err, ErrStaleLease) {
			t.Errorf("late result: %v, want ErrStaleLease", err)
		}
		if err := s.AppendLogs(ctx, "slow", 1, []protocol.LogChunk{{Seq: 1, Data: "late"}}, LogCap{}); !errors.Is(err, ErrStaleLease) {
			t.Errorf("late output: %v, want ErrStaleLease", err)
		}
		if cur := mustGet(t, s, "acc1", "slow"); cur.Status != protocol.StatusTimedOut || cur.Epoch != 2 {
			t.Errorf("after the late result: %s at epoch %d, want timed_out at 2", cur.Status, cur.Epoch)
		}
		out, err = s.TimeoutRunning(ctx, at(24*time.Hour), 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"in-grace"}, ids(out)); diff != "" {
			t.Errorf("second TimeoutRunning (-want +got):\n%s", diff)
		}
	})
}

// TestLoseUnstarted: only a task the instance holds and has not started
// loses its lease, once its attempt given back; a flush that extends the
// leases of what the delegate still lists does not win it back, and the
// lease expiry requeues it (no retries left) with the instance denied.
func TestLoseUnstarted(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		unstarted := newTask("unstarted", "acc1", t0)
		unstarted.Retries = 0
		mustCreate(t, s, unstarted, newTask("started", "acc1", t0), newTask("other", "acc1", t0), newTask("queued", "acc1", t0))
		for id, inst := range map[string]string{"unstarted": "i1", "started": "i1", "other": "i2"} {
			mustClaim(t, s, id, inst, at(time.Minute))
		}
		if err := s.MarkStarted(ctx, "started", 1, at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		to := at(time.Minute).Add(lease / 2)
		lost, err := s.LoseUnstarted(ctx, "i1", []string{"unstarted", "started", "other", "queued", "ghost"}, to)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"unstarted"}, lost); diff != "" {
			t.Errorf("lost (-want +got):\n%s", diff)
		}
		// Again: the lease already ends at to, nothing is given back twice.
		if again, err := s.LoseUnstarted(ctx, "i1", []string{"unstarted"}, to); err != nil || len(again) != 0 {
			t.Errorf("a second cut: %v, %v", again, err)
		}
		if err := s.ExtendLeases(ctx, []LeaseExtension{{TaskID: "unstarted", Epoch: 1, ExpiresAt: at(time.Hour)},
			{TaskID: "started", Epoch: 1, ExpiresAt: at(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, "acc1", "unstarted"); got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(to) || got.Attempts != 0 {
			t.Errorf("unstarted after a flush: lease %v, attempts %d", got.LeaseExpiresAt, got.Attempts)
		}
		if got := mustGet(t, s, "acc1", "started"); got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(at(time.Hour)) {
			t.Errorf("started task's lease %v, want extended", got.LeaseExpiresAt)
		}
		out, err := s.ExpireLeases(ctx, at(time.Minute).Add(lease*3/4))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || out[0].Task.ID != "unstarted" || !out[0].Requeued || out[0].LostInstanceID != "i1" ||
			!slices.Contains(out[0].Task.DeniedInstances, "i1") {
			t.Errorf("expired %+v, want unstarted requeued without i1", out)
		}
		if got, err := s.LoseUnstarted(ctx, "i1", nil, to); err != nil || got != nil {
			t.Errorf("no tasks: %v, %v", got, err)
		}
	})
}
