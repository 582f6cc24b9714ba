package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// DeleteFinishedTasks deletes at most limit tasks of every account that
// finished before before, oldest first, with their stored logs, in one
// write transaction, and says how many it deleted. Queued and running
// tasks are never deleted. Managers sharing a database may run it at
// once: a task is deleted once.
func (s *Store) DeleteFinishedTasks(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("delete finished tasks: limit %d, want > 0", limit)
	}
	var n int
	err := s.write(ctx, func(tx *sql.Tx) error {
		n = 0
		rows, err := s.w(tx).query(ctx, `SELECT id FROM tasks WHERE finished_at < ? AND status <> ? AND status <> ?
	ORDER BY finished_at, id LIMIT ?`, micros(before), protocol.StatusQueued, protocol.StatusRunning, limit)
		if err != nil {
			return err
		}
		found, err := scanStrings(rows)
		if err != nil {
			return err
		}
		ids := make([]any, len(found))
		for i, id := range found {
			ids[i] = id
		}
		if len(ids) == 0 {
			return nil
		}
		in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
		for _, q := range []string{
			`DELETE FROM task_logs WHERE task_id IN ` + in,
			`DELETE FROM task_log_attempts WHERE task_id IN ` + in,
		} {
			// Not through the statement cache: the IN list's length varies.
			if _, err := tx.ExecContext(ctx, s.rebind(q), ids...); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM tasks WHERE id IN `+in), ids...)
		if err != nil {
			return err
		}
		d, err := res.RowsAffected()
		n = int(d)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete finished tasks: %w", err)
	}
	return n, nil
}

// DeleteFinishedRuns deletes at most limit pipeline runs of every account
// that finished before before, oldest first, with their steps, and says
// how many it deleted. A run a deployment refers to is kept (with the
// deployment's own history).
func (s *Store) DeleteFinishedRuns(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("delete finished runs: limit %d, want > 0", limit)
	}
	var n int
	err := s.write(ctx, func(tx *sql.Tx) error {
		n = 0
		sel := `SELECT id FROM pipeline_runs r WHERE finished_at < ?
	AND NOT EXISTS (SELECT 1 FROM deployments d WHERE d.run_id = r.id) ORDER BY finished_at, id LIMIT ?`
		if _, err := s.w(tx).exec(ctx, `DELETE FROM pipeline_run_steps WHERE run_id IN (`+sel+`)`, micros(before), limit); err != nil {
			return err
		}
		// The steps of the runs selected above are gone; the same
		// selection (the oldest runs, in one transaction) now deletes
		// the runs.
		res, err := s.w(tx).exec(ctx, `DELETE FROM pipeline_runs WHERE id IN (`+sel+`)`, micros(before), limit)
		if err != nil {
			return err
		}
		d, err := res.RowsAffected()
		n = int(d)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete finished runs: %w", err)
	}
	return n, nil
}
