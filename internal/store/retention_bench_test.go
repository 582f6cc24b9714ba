package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// envInt reads a benchmark size from the environment.
func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		tb.Fatalf("%s=%q: want a number >= 0", name, v)
	}
	return n
}

// bulkTasks inserts n tasks of account acc quickly (multi-row INSERTs, 50,000
// rows per transaction): finished tasks (status succeeded, finished at
// finishedAt plus i µs, one log chunk for every tenth) when finished, else
// queued ones.
func bulkTasks(tb testing.TB, s *Store, acc, prefix string, n int, finished bool, at time.Time) {
	tb.Helper()
	ctx := context.Background()
	const perStmt, perTx = 500, 50_000
	spec := `{"type":"shell","shell":{"script":"true"},"selectors":["bench"]}`
	for start := 0; start < n; start += perTx {
		end := min(n, start+perTx)
		txn, err := s.writer.BeginTx(ctx, nil)
		if err != nil {
			tb.Fatal(err)
		}
		for i := start; i < end; i += perStmt {
			j := min(end, i+perStmt)
			var q strings.Builder
			q.WriteString(`INSERT INTO tasks (id, account_id, type, spec, status, exit_code, error,
	http_result, timeout_ms, queue_timeout_ms, retries, attempts, epoch, instance_id, delegate_name,
	delegate_hostname, denied_instances, created_at, acquired_at, started_at, finished_at,
	queue_deadline, lease_expires_at, log_bytes, log_omitted, org, project, secret_names, secrets, created_by) VALUES `)
			var args []any
			var logArgs []any
			for k := i; k < j; k++ {
				if k > i {
					q.WriteString(",")
				}
				id := fmt.Sprintf("%s%08d", prefix, k)
				t := micros(at.Add(time.Duration(k) * time.Microsecond))
				if finished {
					q.WriteString(`(?, ?, 'shell', ?, 'succeeded', 0, '', NULL, 60000, 60000, 0, 1, 1, 'i1', 'd1', 'h1', '[]', ?, ?, ?, ?, ?, NULL, 6, 0, '', '', '[]', '', '')`)
					args = append(args, id, acc, spec, t, t, t, t, t+60_000_000)
					if k%10 == 0 {
						logArgs = append(logArgs, id)
					}
				} else {
					q.WriteString(`(?, ?, 'shell', ?, 'queued', NULL, '', NULL, 60000, 86400000, 0, 0, 0, '', '', '', '[]', ?, NULL, NULL, NULL, ?, NULL, 0, 0, '', '', '[]', '', '')`)
					args = append(args, id, acc, spec, t, t+86_400_000_000)
				}
			}
			if _, err := txn.ExecContext(ctx, s.rebind(q.String()), args...); err != nil {
				txn.Rollback()
				tb.Fatal(err)
			}
			if len(logArgs) > 0 {
				var lq, aq strings.Builder
				lq.WriteString(`INSERT INTO task_logs (task_id, attempt, seq, ts, data, size, head) VALUES `)
				aq.WriteString(`INSERT INTO task_log_attempts (task_id, attempt, received_bytes, stored_bytes, omitted_bytes, max_seq) VALUES `)
				for k := range logArgs {
					if k > 0 {
						lq.WriteString(",")
						aq.WriteString(",")
					}
					lq.WriteString(`(?, 1, 1, 0, 'hello', 6, 1)`)
					aq.WriteString(`(?, 1, 6, 6, 0, 1)`)
				}
				for _, q := range []string{lq.String(), aq.String()} {
					if _, err := txn.ExecContext(ctx, s.rebind(q), logArgs...); err != nil {
						txn.Rollback()
						tb.Fatal(err)
					}
				}
			}
		}
		if err := txn.Commit(); err != nil {
			tb.Fatal(err)
		}
	}
}

// retentionDB returns a SQLite database with finished tasks (finished 60
// days before now) and queued ones: a copy of a template made once in
// the temp directory and kept for later runs (and for measuring a
// manager's start on it: $LEGATE_BENCH_KEEP names a copy to leave behind).
func retentionDB(b *testing.B, finished, queued int, old time.Time) string {
	b.Helper()
	tmpl := filepath.Join(os.TempDir(), fmt.Sprintf("legate-bench-retention-%d-%d.db", finished, queued))
	if _, err := os.Stat(tmpl); err != nil {
		start := time.Now()
		part := tmpl + ".part"
		os.Remove(part)
		s, err := Open(context.Background(), part)
		if err != nil {
			b.Fatal(err)
		}
		bulkTasks(b, s, "acc1", "f", finished, true, old)
		bulkTasks(b, s, "acc1", "q", queued, false, old)
		if _, err := s.writer.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
		s.Close()
		os.Remove(part + "-lock") // the store's open lock, not needed with the file renamed
		if err := os.Rename(part, tmpl); err != nil {
			b.Fatal(err)
		}
		b.Logf("generated %d finished and %d queued tasks in %s: %s", finished, queued, time.Since(start).Round(time.Millisecond), tmpl)
	}
	dst := filepath.Join(b.TempDir(), "legate.db")
	if keep := os.Getenv("LEGATE_BENCH_KEEP"); keep != "" {
		dst = keep
	}
	data, err := os.ReadFile(tmpl)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		b.Fatal(err)
	}
	return dst
}

func pct(xs []time.Duration, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p*float64(len(s))))]) / 1e6
}

// BenchmarkRetention measures the retention loop's batches on a database
// holding $LEGATE_BENCH_FINISHED (default 100,000; BENCHMARKS.md uses
// 1,000,000, generated once and kept in the temp directory) finished tasks, a
// tenth of them with a log chunk, and $LEGATE_BENCH_QUEUED (10,000) queued
// ones: one op is one batch of DeleteFinishedTasks ($LEGATE_BENCH_BATCH,
// default 100 tasks, as retention.DefaultBatch; the pause
// between batches is not timed), and meanwhile a hot path submits and
// claims tasks one at a time (CreateTask then ClaimTask, the store's
// share of a pickup) — its p50/p99 before the deletion starts and while
// it runs. SQLite; $LEGATE_BENCH_STORE=postgres for PostgreSQL (generated
// afresh each time: keep the sizes modest).
//
//	go test -run '^$' -bench BenchmarkRetention -benchtime 400x ./internal/store/
func BenchmarkRetention(b *testing.B) {
	finished := envInt(b, "LEGATE_BENCH_FINISHED", 100_000)
	queued := envInt(b, "LEGATE_BENCH_QUEUED", 10_000)
	batch := envInt(b, "LEGATE_BENCH_BATCH", 100)
	ctx := context.Background()
	now := time.Now()
	old := now.Add(-60 * 24 * time.Hour)
	var s *Store
	if os.Getenv("LEGATE_BENCH_STORE") == "postgres" {
		s = postgresBackend.open(b)
		start := time.Now()
		bulkTasks(b, s, "acc1", "f", finished, true, old)
		bulkTasks(b, s, "acc1", "q", queued, false, old)
		b.Logf("generated %d finished and %d queued tasks in %s", finished, queued, time.Since(start).Round(time.Millisecond))
	} else {
		var err error
		s, err = Open(ctx, retentionDB(b, finished, queued, old))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
	}

	// The hot path: submit, then claim, one task at a time.
	var during atomic.Bool
	stop := make(chan struct{})
	done := make(chan [2][]time.Duration)
	go func() {
		var base, hot []time.Duration
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- [2][]time.Duration{base, hot}
				return
			default:
			}
			id := fmt.Sprintf("hot%08d", i)
			t := Task{ID: id, AccountID: "acc2", Spec: protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}},
				TimeoutMS: 60_000, QueueTimeoutMS: 60_000, CreatedAt: time.Now(), QueueDeadline: time.Now().Add(time.Minute)}
			start := time.Now()
			if err := s.CreateTask(ctx, t); err != nil {
				b.Error(err)
				done <- [2][]time.Duration{base, hot}
				return
			}
			if _, err := s.ClaimTask(ctx, Claim{TaskID: id, InstanceID: "hot", LeaseDuration: time.Minute}, time.Now()); err != nil {
				b.Error(err)
				done <- [2][]time.Duration{base, hot}
				return
			}
			if during.Load() {
				hot = append(hot, time.Since(start))
			} else {
				base = append(base, time.Since(start))
			}
		}
	}()
	time.Sleep(2 * time.Second) // the hot path's baseline
	cutoff := now.Add(-30 * 24 * time.Hour)
	var batches []time.Duration
	deleted := 0
	during.Store(true)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		n, err := s.DeleteFinishedTasks(ctx, cutoff, batch)
		if err != nil {
			b.Fatal(err)
		}
		batches = append(batches, time.Since(start))
		deleted += n
		b.StopTimer()
		time.Sleep(25 * time.Millisecond) // retention.DefaultPause
		b.StartTimer()
	}
	b.StopTimer()
	close(stop)
	r := <-done
	b.ReportMetric(pct(batches, 0.5), "batch-p50-ms")
	b.ReportMetric(pct(batches, 0.99), "batch-p99-ms")
	b.ReportMetric(pct(r[0], 0.5), "hot-before-p50-ms")
	b.ReportMetric(pct(r[0], 0.99), "hot-before-p99-ms")
	b.ReportMetric(pct(r[1], 0.5), "hot-during-p50-ms")
	b.ReportMetric(pct(r[1], 0.99), "hot-during-p99-ms")
	b.ReportMetric(float64(deleted)/float64(b.N), "tasks/batch")
}
