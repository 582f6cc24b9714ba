package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// QueueGroup is one group of queued tasks: the tasks of an account that
// carry the same stored selectors (a JSON array, normalized; for a task
// created before selectors had a column of their own, its spec, a JSON
// object with a "selectors" member), how many they are and since when the
// longest-waiting one waits (since it was created or requeued).
type QueueGroup struct {
	AccountID string
	Selectors string
	Queued    int
	Oldest    time.Time
}

// QueueGroups returns the queued tasks grouped by account and stored
// selectors, the largest groups first, at most limit groups (limit <= 0
// means 100), and per account the totals of every group (Selectors ""),
// so that a caller that reads only limit groups still knows how many tasks
// the rest hold. It is one aggregate over the queued tasks (their partial
// index), never over finished ones.
func (s *Store) QueueGroups(ctx context.Context, limit int) (groups, totals []QueueGroup, err error) {
	const since = `MIN(queue_deadline - queue_timeout_ms * 1000)`
	// A task created before the selectors column has '' there: its group
	// is its spec, whose selectors the caller reads (such tasks leave the
	// queue within their queue timeout).
	groups, err = s.queueGroups(ctx, `SELECT account_id, CASE WHEN selectors = '' THEN spec ELSE selectors END AS sels, COUNT(*), `+since+`
	FROM tasks WHERE `+isQueued+` GROUP BY account_id, sels ORDER BY COUNT(*) DESC, account_id, sels LIMIT ?`,
		listLimit(limit))
	if err != nil {
		return nil, nil, fmt.Errorf("queued tasks by selectors: %w", err)
	}
	totals, err = s.queueGroups(ctx, `SELECT account_id, '', COUNT(*), `+since+`
	FROM tasks WHERE `+isQueued+` GROUP BY account_id ORDER BY account_id`)
	if err != nil {
		return nil, nil, fmt.Errorf("queued tasks by account: %w", err)
	}
	return groups, totals, nil
}

func (s *Store) queueGroups(ctx context.Context, q string, args ...any) ([]QueueGroup, error) {
	rows, err := s.r(nil).query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []QueueGroup
	for rows.Next() {
		var g QueueGroup
		var since sql.NullInt64
		if err := rows.Scan(&g.AccountID, &g.Selectors, &g.Queued, &since); err != nil {
			return nil, err
		}
		if since.Valid {
			g.Oldest = fromMicros(since.Int64)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}
