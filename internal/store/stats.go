package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Ping checks that the database answers a query.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r(nil).queryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	return nil
}

// QueueStats returns how many tasks are queued (in every account) and
// since when the longest-waiting one waits: since it was created, or
// requeued (QueueDeadline - QueueTimeoutMS); zero time when none waits.
// It reads the index of queued tasks, never the finished ones.
func (s *Store) QueueStats(ctx context.Context) (depth int, oldest time.Time, err error) {
	var since sql.NullInt64
	err = s.r(nil).queryRow(ctx, `SELECT COUNT(*), MIN(queue_deadline - queue_timeout_ms * 1000)
	FROM tasks WHERE `+isQueued).Scan(&depth, &since)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("queue stats: %w", err)
	}
	if since.Valid && depth > 0 {
		oldest = fromMicros(since.Int64)
	}
	return depth, oldest, nil
}
