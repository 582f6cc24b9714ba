package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// ExtendLeases sets LeaseExpiresAt for tasks still running at the given
// epochs, in one transaction; others are ignored, and so are those whose
// lease LoseUnstarted ended (their acquired_at cleared): a heartbeat that
// still lists such a task must not win it back before the lease expiry.
func (s *Store) ExtendLeases(ctx context.Context, ext []LeaseExtension) error {
	if len(ext) == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		stmt, err := s.w(tx).stmt(ctx, `UPDATE tasks SET lease_expires_at = ? WHERE id = ? AND epoch = ? AND status = ? AND acquired_at IS NOT NULL`)
		if err != nil {
			return err
		}
		for _, e := range ext {
			if _, err := stmt.ExecContext(ctx, micros(e.ExpiresAt), e.TaskID, e.Epoch, protocol.StatusRunning); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("extend %d leases: %w", len(ext), err)
	}
	return nil
}

// ShortenLeases ends each listed lease at its To if it ends later than
// that and no later than its Known (the task still running under that
// epoch): the delegate holding them lost its connection, so its tasks fail
// over sooner than a silent delegate's. A lease already ending sooner, or
// extended past Known since (the delegate reached another manager), is
// left alone.
func (s *Store) ShortenLeases(ctx context.Context, cuts []LeaseCut) error {
	if len(cuts) == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		stmt, err := s.w(tx).stmt(ctx, `UPDATE tasks SET lease_expires_at = ?
	WHERE id = ? AND epoch = ? AND status = ? AND lease_expires_at > ? AND lease_expires_at <= ?`)
		if err != nil {
			return err
		}
		for _, c := range cuts {
			to := micros(c.To)
			if _, err := stmt.ExecContext(ctx, to, c.TaskID, c.Epoch, protocol.StatusRunning, to, micros(c.Known)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("shorten %d leases: %w", len(cuts), err)
	}
	return nil
}

// NextLeaseExpiry returns the earliest lease end of the running tasks (of
// every account); ok is false when no running task has a lease. It reads
// the index of running tasks by lease end.
func (s *Store) NextLeaseExpiry(ctx context.Context) (at time.Time, ok bool, err error) {
	var v sql.NullInt64
	if err := s.r(nil).queryRow(ctx, `SELECT MIN(lease_expires_at) FROM tasks WHERE `+isRunning).Scan(&v); err != nil {
		return time.Time{}, false, fmt.Errorf("next lease expiry: %w", err)
	}
	if !v.Valid {
		return time.Time{}, false, nil
	}
	return fromMicros(v.Int64), true, nil
}

// ExpireLeases handles running tasks whose LeaseExpiresAt is before now: a
// task with Attempts <= Retries goes back to queued (its instance appended
// to DeniedInstances, InstanceID/DelegateName/DelegateHostname/AcquiredAt/
// StartedAt/LeaseExpiresAt cleared, QueueDeadline = now + QueueTimeoutMS);
// otherwise it ends failed with an Error naming the delegate (name and
// hostname) that was lost while running it.
//
// The sweeps (ExpireLeases, TimeoutRunning) run on every
// manager. On PostgreSQL they lock the rows they take and skip rows that
// another transaction holds, so concurrent sweeps of several managers
// split the work and each task is reported by exactly one of them; a row
// skipped because a claim or a result holds it is looked at again by the
// next sweep. Nothing to sweep is not an error: the result is empty.
func (s *Store) ExpireLeases(ctx context.Context, now time.Time) ([]LeaseOutcome, error) {
	var out []LeaseOutcome
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = nil
		expired, err := queryTasks(ctx, s.w(tx), `SELECT `+taskCols+` FROM tasks
	WHERE `+isRunning+` AND lease_expires_at < ? ORDER BY lease_expires_at, id`+s.lockClause("FOR UPDATE SKIP LOCKED"),
			micros(now))
		if err != nil {
			return err
		}
		for _, t := range expired {
			o := LeaseOutcome{LostInstanceID: t.InstanceID}
			prevEpoch := t.Epoch
			if t.Attempts <= t.Retries {
				o.Requeued = true
				deny(&t, t.InstanceID)
				requeue(&t, now)
			} else {
				finish(&t, Result{
					Status: protocol.StatusFailed,
					Error: fmt.Sprintf("delegate %q (host %s) disconnected while running the task (lease expired)",
						t.DelegateName, t.DelegateHostname),
				}, now)
				endLease(&t)
			}
			err := updateTask(ctx, s.w(tx), t, protocol.StatusRunning, prevEpoch)
			if errors.Is(err, errRowChanged) {
				continue
			}
			if err != nil {
				return fmt.Errorf("task %s: %w", t.ID, err)
			}
			o.Task = t
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	return out, nil
}

// TimeoutRunning ends timed_out every running task whose AcquiredAt +
// TimeoutMS + grace is before now, and returns them. This enforces
// timeouts even when the delegate running the task is gone. A task with
// TimeoutMS 0 has no timeout here.
func (s *Store) TimeoutRunning(ctx context.Context, now time.Time, grace time.Duration) ([]Task, error) {
	var out []Task
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = nil
		late, err := queryTasks(ctx, s.w(tx), `SELECT `+taskCols+` FROM tasks
	WHERE `+isRunning+` AND timeout_ms > 0 AND acquired_at + timeout_ms * 1000 < ?
	ORDER BY acquired_at, id`+s.lockClause("FOR UPDATE SKIP LOCKED"),
			micros(now)-grace.Microseconds())
		if err != nil {
			return err
		}
		for _, t := range late {
			prevEpoch := t.Epoch
			finish(&t, Result{
				Status: protocol.StatusTimedOut,
				Error: fmt.Sprintf("timed out after %s (enforced by the manager; the delegate did not report)",
					time.Duration(t.TimeoutMS)*time.Millisecond),
			}, now)
			endLease(&t)
			err := updateTask(ctx, s.w(tx), t, protocol.StatusRunning, prevEpoch)
			if errors.Is(err, errRowChanged) {
				continue
			}
			if err != nil {
				return fmt.Errorf("task %s: %w", t.ID, err)
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("time out running tasks: %w", err)
	}
	return out, nil
}

// LoseUnstarted ends, at to, the leases of those of taskIDs that instance
// holds and has not started (no started report reached any manager), and
// returns them: their delegate claimed them and went quiet, so the next
// ExpireLeases requeues them with the instance denied, as for a lost
// delegate. The claim gives its attempt back (nothing ran), so a task
// without retries left is requeued too rather than failed. A task that
// started, ended or moved on is left alone and not returned.
func (s *Store) LoseUnstarted(ctx context.Context, instanceID string, taskIDs []string, to time.Time) ([]string, error) {
	if len(taskIDs) == 0 {
		return nil, nil
	}
	var out []string
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = nil
		// The attempt is given back once: the cut clears acquired_at
		// (requeue clears it anyway), which also keeps ExtendLeases off
		// the lease until the lease expiry requeues the task.
		give, err := s.w(tx).stmt(ctx, `UPDATE tasks SET attempts = attempts - 1, acquired_at = NULL
	WHERE id = ? AND instance_id = ? AND `+isRunning+` AND started_at IS NULL AND attempts > 0 AND acquired_at IS NOT NULL`)
		if err != nil {
			return err
		}
		cut, err := s.w(tx).stmt(ctx, `UPDATE tasks SET lease_expires_at = ?
	WHERE id = ? AND instance_id = ? AND `+isRunning+` AND started_at IS NULL AND lease_expires_at > ?`)
		if err != nil {
			return err
		}
		for _, id := range taskIDs {
			res, err := cut.ExecContext(ctx, micros(to), id, instanceID, micros(to))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				continue
			}
			if _, err := give.ExecContext(ctx, id, instanceID); err != nil {
				return err
			}
			out = append(out, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("end the leases of %d unstarted tasks: %w", len(taskIDs), err)
	}
	return out, nil
}
