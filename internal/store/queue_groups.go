package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
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
// the rest hold. It aggregates the index of queued tasks by selectors
// (never the finished tasks, nor the queued tasks' rows); the totals take
// a second aggregate only when the groups were more than limit.
func (s *Store) QueueGroups(ctx context.Context, limit int) (groups, totals []QueueGroup, err error) {
	const since = `MIN(queue_deadline - queue_timeout_ms * 1000)`
	limit = listLimit(limit)
	groups, err = s.queueGroups(ctx, `SELECT account_id, selectors, COUNT(*), `+since+`
	FROM tasks WHERE `+isQueued+` AND selectors <> '' GROUP BY selectors, account_id
	ORDER BY COUNT(*) DESC, account_id, selectors LIMIT ?`, limit+1)
	if err != nil {
		return nil, nil, fmt.Errorf("queued tasks by selectors: %w", err)
	}
	// A task created before the selectors column has '' there: its group
	// is its spec, whose selectors the caller reads (such tasks leave the
	// queue within their queue timeout).
	legacy, err := s.queueGroups(ctx, `SELECT account_id, spec, COUNT(*), `+since+`
	FROM tasks WHERE `+isQueued+` AND selectors = '' GROUP BY account_id, spec
	ORDER BY COUNT(*) DESC, account_id, spec LIMIT ?`, limit+1)
	if err != nil {
		return nil, nil, fmt.Errorf("queued tasks stored without selectors: %w", err)
	}
	groups = append(groups, legacy...)
	slices.SortFunc(groups, func(a, b QueueGroup) int {
		return cmp.Or(cmp.Compare(b.Queued, a.Queued), cmp.Compare(a.AccountID, b.AccountID), cmp.Compare(a.Selectors, b.Selectors))
	})
	if len(groups) <= limit {
		return groups, totalsOf(groups), nil
	}
	groups = groups[:limit]
	totals, err = s.queueGroups(ctx, `SELECT account_id, '', COUNT(*), `+since+`
	FROM tasks WHERE `+isQueued+` GROUP BY account_id ORDER BY account_id`)
	if err != nil {
		return nil, nil, fmt.Errorf("queued tasks by account: %w", err)
	}
	return groups, totals, nil
}

// totalsOf sums every group of each account, by account.
func totalsOf(groups []QueueGroup) []QueueGroup {
	at := map[string]int{} // account -> index in out
	var out []QueueGroup
	for _, g := range groups {
		i, ok := at[g.AccountID]
		if !ok {
			i = len(out)
			at[g.AccountID] = i
			out = append(out, QueueGroup{AccountID: g.AccountID})
		}
		out[i].Queued += g.Queued
		if out[i].Oldest.IsZero() || (!g.Oldest.IsZero() && g.Oldest.Before(out[i].Oldest)) {
			out[i].Oldest = g.Oldest
		}
	}
	slices.SortFunc(out, func(a, b QueueGroup) int { return cmp.Compare(a.AccountID, b.AccountID) })
	return out
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
