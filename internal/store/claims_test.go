package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestClaimTask(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("t1", "acc1", t0), newTask("t2", "acc1", t0), newTask("t3", "acc1", t0), newTask("t4", "acc1", t0))

		now := at(time.Minute)
		got := mustClaim(t, s, "t1", "i1", now)
		want := stored(newTask("t1", "acc1", t0))
		want.Status = protocol.StatusRunning
		want.Epoch, want.Attempts = 1, 1
		want.InstanceID, want.DelegateName, want.DelegateHostname = "i1", "dlg-i1", "host-i1"
		want.AcquiredAt = ptr(now)
		want.LeaseExpiresAt = ptr(now.Add(lease))
		// The claim, and only the claim, carries the secret values.
		wantClaim := want
		wantClaim.Spec.SecretEnv = map[string]string{"TOKEN": "s3cret"}
		if diff := cmp.Diff(wantClaim, got, equateEmpty); diff != "" {
			t.Errorf("ClaimTask (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, mustGet(t, s, "acc1", "t1"), equateEmpty); diff != "" {
			t.Errorf("GetTask after claim (-want +got):\n%s", diff)
		}

		if _, err := s.FinishTask(ctx, "acc1", "t4", Result{Status: protocol.StatusCancelled}, now); err != nil {
			t.Fatal(err)
		}
		withCap := func(c Claim, n int) Claim { c.Capacity = n; return c }
		tests := []struct {
			name    string
			c       Claim
			wantErr error
		}{
			{"already claimed", claimFor("t1", "i2"), ErrAlreadyClaimed},
			{"already claimed by the same instance", claimFor("t1", "i1"), ErrAlreadyClaimed},
			{"finished", claimFor("t4", "i2"), ErrTaskTerminal},
			{"unknown", claimFor("nope", "i2"), ErrNotFound},
			{"at capacity", withCap(claimFor("t2", "i1"), 1), ErrNoCapacity},
			{"under capacity", withCap(claimFor("t2", "i1"), 2), nil},
			{"unlimited", withCap(claimFor("t3", "i1"), 0), nil},
		}
		for _, tt := range tests {
			_, err := s.ClaimTask(ctx, tt.c, now)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: ClaimTask error %v, want %v", tt.name, err, tt.wantErr)
			}
		}
		running, err := s.RunningTasksOf(ctx, "i1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"t1", "t2", "t3"}, ids(running)); diff != "" {
			t.Errorf("RunningTasksOf (-want +got):\n%s", diff)
		}
	})
}

// TestClaimTaskCheck: Check sees a queued task as stored, also one a lost
// delegate held before (requeued with it denied); a refusal leaves the
// task as it was and returns it as stored; an accepted check claims it.
func TestClaimTaskCheck(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		task := newTask("t1", "acc1", t0)
		task.Retries = 1
		mustCreate(t, s, task)
		mustClaim(t, s, "t1", "i1", at(time.Minute))
		if _, err := s.ExpireLeases(ctx, at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		requeued := mustGet(t, s, "acc1", "t1")
		if requeued.Status != protocol.StatusQueued || requeued.Epoch != 1 || len(requeued.DeniedInstances) != 1 {
			t.Fatalf("after the lease expired: %s at epoch %d, denied %v; want queued at 1, i1 denied",
				requeued.Status, requeued.Epoch, requeued.DeniedInstances)
		}
		var seen []Task
		refuse := errors.New("refused")
		c := claimFor("t1", "i2")
		c.Check = func(t Task) error { seen = append(seen, t); return refuse }
		got, err := s.ClaimTask(ctx, c, at(2*time.Hour))
		if !errors.Is(err, refuse) {
			t.Fatalf("refused claim: %v, want the check's error", err)
		}
		if diff := cmp.Diff(requeued, got.WithoutSecretValues(), equateEmpty); diff != "" {
			t.Errorf("refused claim returned (-stored +got):\n%s", diff)
		}
		if diff := cmp.Diff(requeued, mustGet(t, s, "acc1", "t1"), equateEmpty); diff != "" {
			t.Errorf("after a refused claim (-before +after):\n%s", diff)
		}
		// Whatever the way, the last look of Check is the task as stored.
		if len(seen) == 0 || seen[len(seen)-1].Status != protocol.StatusQueued ||
			!cmp.Equal(seen[len(seen)-1].WithoutSecretValues(), requeued, equateEmpty) {
			t.Errorf("Check saw %+v, want the stored task", seen)
		}
		seen = nil
		c.Check = func(t Task) error {
			seen = append(seen, t)
			if t.Status != protocol.StatusQueued || t.Epoch != 1 || t.Attempts != 1 || len(t.DeniedInstances) != 1 {
				return fmt.Errorf("check saw %s at epoch %d, attempts %d, denied %v", t.Status, t.Epoch, t.Attempts, t.DeniedInstances)
			}
			return nil
		}
		got, err = s.ClaimTask(ctx, c, at(2*time.Hour))
		if err != nil {
			t.Fatalf("accepted claim: %v", err)
		}
		if len(seen) != 1 || got.Status != protocol.StatusRunning || got.Epoch != 2 || got.Attempts != 2 || got.InstanceID != "i2" {
			t.Errorf("accepted claim: %d checks, %s at epoch %d, attempts %d on %q; want 1 check, running at 2, attempts 2 on i2",
				len(seen), got.Status, got.Epoch, got.Attempts, got.InstanceID)
		}
	})
}

// TestClaimTaskConcurrent races 20 claimers per task, through two Store
// handles on one file (two managers), and expects exactly one winner.
func TestClaimTaskConcurrent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		path := b.newDSN(t)
		stores := []*Store{openAt(t, path), openAt(t, path)}
		const tasks, claimers = 5, 20
		for i := range tasks {
			mustCreate(t, stores[0], newTask(fmt.Sprintf("t%d", i), "acc1", t0))
		}
		for i := range tasks {
			id := fmt.Sprintf("t%d", i)
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, claimers)
			won := make([]Task, claimers)
			for c := range claimers {
				wg.Go(func() {
					<-start
					won[c], errs[c] = stores[c%2].ClaimTask(context.Background(), claimFor(id, fmt.Sprintf("i%d", c)), at(time.Minute))
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for c, err := range errs {
				switch {
				case err == nil:
					if winner >= 0 {
						t.Fatalf("%s: claimers %d and %d both won", id, winner, c)
					}
					winner = c
				case !errors.Is(err, ErrAlreadyClaimed):
					t.Fatalf("%s: claimer %d: %v", id, c, err)
				}
			}
			if winner < 0 {
				t.Fatalf("%s: nobody won", id)
			}
			got := mustGet(t, stores[1], "acc1", id)
			if got.InstanceID != fmt.Sprintf("i%d", winner) || got.Epoch != 1 || got.Attempts != 1 {
				t.Errorf("%s: stored %s epoch %d attempts %d, winner i%d", id, got.InstanceID, got.Epoch, got.Attempts, winner)
			}
			if won[winner].Epoch != 1 {
				t.Errorf("%s: winner got epoch %d", id, won[winner].Epoch)
			}
		}
	})
}

func BenchmarkClaimComplete(b *testing.B) { benchClaimComplete(b, openTest(b)) }

// BenchmarkClaimCompletePostgres is BenchmarkClaimComplete on PostgreSQL
// (the throwaway test cluster runs with fsync off, so this measures round
// trips and server work, not disk flushes).
func BenchmarkClaimCompletePostgres(b *testing.B) { benchClaimComplete(b, postgresBackend.open(b)) }

// The Parallel variants run create+claim+complete from GOMAXPROCS
// goroutines through one store (one manager under load).
func BenchmarkClaimCompleteParallel(b *testing.B) { benchClaimCompleteParallel(b, openTest(b)) }

func BenchmarkClaimCompletePostgresParallel(b *testing.B) {
	benchClaimCompleteParallel(b, postgresBackend.open(b))
}

// benchClaimComplete measures one task's create, claim and complete, one
// after the other.
func benchClaimComplete(b *testing.B, s *Store) {
	ctx := context.Background()
	ok := Result{Status: protocol.StatusSucceeded, ExitCode: ptr(0)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("t%d", i)
		if err := s.CreateTask(ctx, newTask(id, "acc1", t0)); err != nil {
			b.Fatal(err)
		}
		task, err := s.ClaimTask(ctx, claimFor(id, "i1"), t0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.CompleteTask(ctx, id, task.Epoch, ok, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func benchClaimCompleteParallel(b *testing.B, s *Store) {
	ctx := context.Background()
	ok := Result{Status: protocol.StatusSucceeded, ExitCode: ptr(0)}
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			id := fmt.Sprintf("t%d", i)
			if err := s.CreateTask(ctx, newTask(id, "acc1", t0)); err != nil {
				b.Error(err)
				return
			}
			// Each goroutine its own instance, as delegates are.
			task, err := s.ClaimTask(ctx, claimFor(id, fmt.Sprintf("i%d", i%64)), t0)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := s.CompleteTask(ctx, id, task.Epoch, ok, t0); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
