package store

import (
	"context"
	"testing"
	"time"
)

// BenchmarkQueueGroups measures the queue signals' one read (QueueGroups)
// on a deep queue: $LEGATE_BENCH_QUEUED queued tasks (default 100,000) in
// 100 selector sets, on each backend.
func BenchmarkQueueGroups(b *testing.B) {
	queued := envInt(b, "LEGATE_BENCH_QUEUED", 100_000)
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			if be.name == "postgres" && !pgAvailable(b) {
				b.Skip("no PostgreSQL")
			}
			s := be.open(b)
			bulkTasks(b, s, "acc1", "q", queued, false, time.Now().Add(-time.Hour))
			// 100 selector sets: the last two digits of the task's ID.
			if _, err := s.w(nil).exec(context.Background(), `UPDATE tasks SET selectors = '["pool-' || substr(id, length(id) - 1, 2) || '"]'`); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				groups, totals, err := s.QueueGroups(context.Background(), 1000)
				if err != nil || len(groups) != 100 || totals[0].Queued != queued {
					b.Fatalf("%d groups, %+v, %v", len(groups), totals, err)
				}
			}
		})
	}
}
