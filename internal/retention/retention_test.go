package retention_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/leaktest"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/retention"
	"github.com/legate-dev/legate/internal/store"
)

func TestMain(m *testing.M) {
	os.Exit(leaktest.Main(func() int { return pgtest.Main(m) }))
}

var now = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func task(id string, created time.Time) store.Task {
	return store.Task{
		ID: id, AccountID: "acc1",
		Spec:      protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}},
		TimeoutMS: 60_000, QueueTimeoutMS: 60_000, CreatedAt: created, QueueDeadline: created.Add(time.Minute),
	}
}

// TestLoop: a pass deletes, batch by batch, every task finished before
// the retention period, and nothing newer or unfinished; on SQLite and
// PostgreSQL.
func TestLoop(t *testing.T) {
	for _, b := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "legate.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, b.dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			old := now.Add(-31 * 24 * time.Hour)
			for i := range 25 {
				id := fmt.Sprintf("old-%02d", i)
				if err := st.CreateTask(ctx, task(id, old)); err != nil {
					t.Fatal(err)
				}
				if _, err := st.FinishTask(ctx, "acc1", id, store.Result{Status: protocol.StatusCancelled}, old.Add(time.Duration(i)*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.CreateTask(ctx, task("queued-old", old)); err != nil {
				t.Fatal(err)
			}
			if err := st.CreateTask(ctx, task("recent", now)); err != nil {
				t.Fatal(err)
			}
			if _, err := st.FinishTask(ctx, "acc1", "recent", store.Result{Status: protocol.StatusCancelled}, now.Add(-29*24*time.Hour)); err != nil {
				t.Fatal(err)
			}
			l := &retention.Loop{Store: st, Age: 30 * 24 * time.Hour, Batch: 10, Pause: time.Millisecond, Now: func() time.Time { return now }}
			tasks, runs, err := l.Pass(ctx)
			if err != nil || tasks != 25 || runs != 0 {
				t.Fatalf("Pass: %d tasks, %d runs, %v; want 25, 0, nil", tasks, runs, err)
			}
			for _, id := range []string{"old-00", "old-24"} {
				if _, err := st.GetTask(ctx, "acc1", id); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("%s: %v, want ErrNotFound", id, err)
				}
			}
			for _, id := range []string{"queued-old", "recent"} {
				if _, err := st.GetTask(ctx, "acc1", id); err != nil {
					t.Errorf("%s was deleted: %v", id, err)
				}
			}
			// Run makes a pass at once and returns nil when ctx ends.
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- l.Run(runCtx) }()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v, want nil when ctx ends", err)
			}
		})
	}
}

func TestLoopRefusesNoAge(t *testing.T) {
	l := &retention.Loop{Age: 0}
	if err := l.Run(context.Background()); err == nil {
		t.Fatal("Run with Age 0: no error")
	}
}
