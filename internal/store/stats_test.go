package store

import (
	"context"
	"testing"
	"time"
)

func TestQueueStatsAndPing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		check := func(what string, wantDepth int, wantOldest time.Time) {
			t.Helper()
			depth, oldest, err := s.QueueStats(ctx)
			if err != nil {
				t.Fatalf("%s: QueueStats: %v", what, err)
			}
			if depth != wantDepth || !oldest.Equal(wantOldest) {
				t.Errorf("%s: QueueStats = %d, %v; want %d, %v", what, depth, oldest, wantDepth, wantOldest)
			}
		}
		check("empty", 0, time.Time{})
		mustCreate(t, s,
			newTask("q1", "acc1", at(1*time.Second)),
			newTask("q2", "acc1", at(3*time.Second)),
			newTask("r1", "acc1", at(0)),
			newTask("x1", "acc2", at(2*time.Second)),
		)
		mustClaim(t, s, "r1", "i1", at(5*time.Second))
		check("three queued in two accounts", 3, at(1*time.Second))
		// A requeued task waits since it was requeued.
		mustClaim(t, s, "q1", "i1", at(10*time.Second))
		if _, requeued, err := s.RequeueTask(ctx, "q1", 1, "i1", "lost", 0, at(20*time.Second)); err != nil || !requeued {
			t.Fatalf("RequeueTask: %v, requeued %v", err, requeued)
		}
		check("after a requeue", 3, at(2*time.Second))
		mustClaim(t, s, "x1", "i2", at(21*time.Second))
		mustClaim(t, s, "q2", "i2", at(21*time.Second))
		check("only the requeued task waits", 1, at(20*time.Second))
	})
}
