package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// DelegateBusyError is DeleteDelegate's refusal of a delegate that still
// works: some of its instances are connected, or run tasks. It matches
// ErrConflict (errors.Is).
type DelegateBusyError struct {
	// Name is the delegate's name as its instances registered it.
	Name string
	// Connected are the hostnames of the instances in contact since the
	// cutoff DeleteDelegate was given (and not deregistered).
	Connected []string
	// Running is how many tasks run on its instances.
	Running int
}

func (e *DelegateBusyError) Error() string {
	var why []string
	if n := len(e.Connected); n > 0 {
		why = append(why, fmt.Sprintf("%d connected %s (%s)", n, plural(n, "instance", "instances"), strings.Join(e.Connected, ", ")))
	}
	if e.Running > 0 {
		why = append(why, fmt.Sprintf("%d running %s", e.Running, plural(e.Running, "task", "tasks")))
	}
	return fmt.Sprintf("delegate %q has %s", e.Name, strings.Join(why, " and "))
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *DelegateBusyError) Is(target error) bool { return target == ErrConflict }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// DeleteDelegate removes every instance of the account's delegate called
// name (compared case-insensitively, as selectors are), with the
// capability results and configuration outcome recorded for each; it
// returns the removed instances. It refuses with *DelegateBusyError
// (ErrConflict) when an instance that did not deregister was in contact at
// or after connectedSince, or when a task runs on one of them, and answers
// ErrNotFound when the account has no instance of that name. The check
// and the removal are one transaction (the rows locked on PostgreSQL), and
// only the rows checked are removed: an instance that registers meanwhile
// stays. Tasks keep the name and hostname of the delegate that ran them.
func (s *Store) DeleteDelegate(ctx context.Context, accountID, name string, connectedSince time.Time) ([]Instance, error) {
	var out []Instance
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = nil
		rows, err := s.w(tx).query(ctx, `SELECT `+instanceCols+` FROM instances
	WHERE account_id = ? AND LOWER(name) = LOWER(?) ORDER BY hostname, id`+s.lockClause("FOR UPDATE"), accountID, name)
		if err != nil {
			return err
		}
		for rows.Next() {
			in, err := scanInstance(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, in)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
			return ErrNotFound
		}
		busy := &DelegateBusyError{Name: out[0].Name}
		for _, in := range out {
			if in.DeregisteredAt == nil && in.LastHeartbeat != nil && !in.LastHeartbeat.Before(connectedSince) {
				busy.Connected = append(busy.Connected, in.Hostname)
			}
		}
		err = s.w(tx).queryRow(ctx, `SELECT COUNT(*) FROM tasks t JOIN instances i ON i.id = t.instance_id
	WHERE i.account_id = ? AND LOWER(i.name) = LOWER(?) AND t.`+isRunning, accountID, name).Scan(&busy.Running)
		if err != nil {
			return err
		}
		if len(busy.Connected) > 0 || busy.Running > 0 {
			return busy
		}
		for _, in := range out {
			if err := s.deleteInstance(ctx, tx, in.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete delegate %q: %w", name, err)
	}
	return out, nil
}

// deleteInstance removes one instance row and what is recorded for it.
func (s *Store) deleteInstance(ctx context.Context, tx *sql.Tx, id string) error {
	for _, q := range []string{
		`DELETE FROM capability_results WHERE instance_id = ?`,
		`DELETE FROM configuration_results WHERE instance_id = ?`,
		`DELETE FROM instances WHERE id = ?`,
	} {
		if _, err := s.w(tx).exec(ctx, q, id); err != nil {
			return err
		}
	}
	return nil
}

// PruneInstances removes at most limit instances, of every account, whose
// last contact (registration, last recorded heartbeat and deregistration
// alike) is before before and on which no task runs, with what is recorded
// for each, and returns their IDs. It is safe on several managers at once:
// on PostgreSQL the rows are claimed with SKIP LOCKED, and a row that a
// registration or heartbeat updates meanwhile no longer matches.
func (s *Store) PruneInstances(ctx context.Context, before time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	var ids []string
	err := s.write(ctx, func(tx *sql.Tx) error {
		ids = nil
		cut := micros(before)
		rows, err := s.w(tx).query(ctx, `SELECT id FROM instances i
	WHERE registered_at < ? AND (last_heartbeat IS NULL OR last_heartbeat < ?)
	AND (deregistered_at IS NULL OR deregistered_at < ?)
	AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.instance_id = i.id AND t.`+isRunning+`)
	ORDER BY id LIMIT ?`+s.lockClause("FOR UPDATE SKIP LOCKED"), cut, cut, cut, limit)
		if err != nil {
			return err
		}
		if ids, err = scanStrings(rows); err != nil {
			return err
		}
		for _, id := range ids {
			if err := s.deleteInstance(ctx, tx, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("prune delegate instances: %w", err)
	}
	return ids, nil
}
