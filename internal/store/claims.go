package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// ClaimTask moves a queued task to running for the claimer, in one
// transaction: it fails with ErrNotFound (no such task), ErrAlreadyClaimed
// (not queued any more), ErrTaskTerminal (finished) or ErrNoCapacity (the
// claimer already runs Capacity tasks, when Capacity > 0). On success it
// increments Epoch and Attempts, sets InstanceID, DelegateName,
// DelegateHostname, AcquiredAt = now, clears StartedAt, and sets
// LeaseExpiresAt = now + LeaseDuration. Exactly one concurrent claimer wins,
// also across several Stores (managers) on one PostgreSQL database: the
// task is read FOR UPDATE, so a claimer that waited for that row lock
// reads the committed row and sees it is no longer queued. The capacity check holds under concurrency too (see
// getTaskSecretsForClaim). A queued task is usually claimed by one
// statement instead (claimQueued), with the same outcome.
//
// The task it returns carries its secret values in Spec.SecretEnv, opened
// with the store's keys: the only read that does, and only for the claimer
// that holds the task (the winner, or the holder whose repeated claim Check
// refused). A value that does not open fails the claim (the task stays
// queued) with an error wrapping the seal package's error. The values of
// the stored secrets the spec references come in StoredSecrets; a
// reference no secret answers any more (it was deleted after the task was
// submitted) fails the claim with a *MissingSecretsError and the task as
// read (the task stays as it was: the caller decides its end).
func (s *Store) ClaimTask(ctx context.Context, c Claim, now time.Time) (Task, error) {
	if s.dialect == dialectSQLite || c.Capacity == 0 {
		t, err := s.claimQueued(ctx, c, now)
		if !errors.Is(err, errClaimLongWay) {
			if err != nil {
				return Task{}, fmt.Errorf("claim task %s: %w", c.TaskID, err)
			}
			return t, nil
		}
	}
	var t Task
	var checkErr error
	// In a transaction of its own (writeMode.own).
	err := s.writeIn(ctx, writeMode{own: true}, func(tx *sql.Tx) error {
		var err error
		var ss storedSecrets
		checkErr = nil
		if c.Capacity > 0 && s.dialect == dialectPostgres {
			// The instance's claims lock is taken by the statement that
			// reads (and locks) the task, a round trip less: the capacity
			// count below, a later statement, sees every claim committed
			// before it was granted.
			t, ss, err = getTaskSecretsForClaim(ctx, s.w(tx), c.TaskID, c.InstanceID)
		} else {
			t, ss, err = getTaskSecretsForUpdate(ctx, s.w(tx), c.TaskID)
		}
		if err != nil {
			return err
		}
		if c.Check != nil {
			if checkErr = c.Check(t); checkErr != nil {
				if t.Status == protocol.StatusRunning && t.InstanceID == c.InstanceID {
					if t, err = s.withSecrets(ctx, tx, t, ss); err != nil {
						checkErr = nil
						return err
					}
				}
				return checkErr
			}
		}
		if t.Status != protocol.StatusQueued {
			if protocol.Terminal(t.Status) {
				return ErrTaskTerminal
			}
			return ErrAlreadyClaimed
		}
		claimed, err := s.withSecrets(ctx, tx, t, ss)
		if err != nil {
			return err
		}
		prevEpoch := t.Epoch
		t.Status = protocol.StatusRunning
		t.Epoch++
		t.Attempts++
		t.InstanceID, t.DelegateName, t.DelegateHostname = c.InstanceID, c.DelegateName, c.DelegateHostname
		t.AcquiredAt, t.StartedAt = timePtr(now), nil
		t.LeaseExpiresAt = timePtr(now.Add(c.LeaseDuration))
		if c.Capacity == 0 {
			if err := updateTask(ctx, s.w(tx), t, protocol.StatusQueued, prevEpoch); err != nil {
				if errors.Is(err, errRowChanged) {
					return ErrAlreadyClaimed
				}
				return err
			}
		} else {
			// The capacity check is a condition of the update: the row is
			// locked (PostgreSQL) or the writer is (SQLite), so an update
			// that changed nothing found the instance full.
			err := updateTaskIf(ctx, s.w(tx), t, protocol.StatusQueued, prevEpoch,
				` AND (SELECT COUNT(*) FROM tasks WHERE instance_id = ? AND `+isRunning+`) < ?`,
				c.InstanceID, c.Capacity)
			if errors.Is(err, errRowChanged) {
				return ErrNoCapacity
			}
			if err != nil {
				return err
			}
		}
		t.Spec.SecretEnv, t.StoredSecrets = claimed.Spec.SecretEnv, claimed.StoredSecrets
		return nil
	})
	if err != nil {
		var missing *MissingSecretsError
		if checkErr != nil || errors.As(err, &missing) {
			return t, fmt.Errorf("claim task %s: %w", c.TaskID, err)
		}
		return Task{}, fmt.Errorf("claim task %s: %w", c.TaskID, err)
	}
	return t, nil
}

// withSecrets returns t, a task its claimer holds, with its secret values
// (opened from ss, as stored) and the values of the stored secrets its
// spec references: what only a claim hands out.
func (s *Store) withSecrets(ctx context.Context, tx *sql.Tx, t Task, ss storedSecrets) (Task, error) {
	values, err := s.openSecrets(t.ID, ss)
	if err != nil {
		return t, err
	}
	stored, err := s.referencedSecrets(ctx, s.w(tx), t, ss.bindings)
	if err != nil {
		return t, err
	}
	t.Spec.SecretEnv, t.StoredSecrets = values, stored
	return t, nil
}

// errClaimLongWay says that claimQueued did not claim the task and
// changed nothing: ClaimTask reads the task and decides.
var errClaimLongWay = errors.New("claim the long way")

// claimQueued is ClaimTask's way for a queued task: one statement claims
// it, if it is queued and the claimer has room, and returns the claimed
// row, instead of a read of the row and an update of every column.
// Anything else (not queued, no room, Check refuses, secrets that do not
// open or resolve) undoes the claim and returns errClaimLongWay, and
// ClaimTask decides on the row as read, as it always did. On PostgreSQL
// it serves claimers of unlimited capacity only (a capacity count needs
// the instance's claims lock first, see getTaskSecretsForClaim): the
// update locks the row, and a concurrent claimer that waited for the lock
// finds the task no longer queued and goes the long way. A round trip
// less than the long way (BEGIN, UPDATE, COMMIT).
func (s *Store) claimQueued(ctx context.Context, c Claim, now time.Time) (Task, error) {
	var t Task
	err := s.writeIn(ctx, writeMode{own: true}, func(tx *sql.Tx) error {
		q := `UPDATE tasks SET status = ?, epoch = epoch + 1, attempts = attempts + 1, instance_id = ?,
	delegate_name = ?, delegate_hostname = ?, acquired_at = ?, started_at = NULL, lease_expires_at = ?
	WHERE id = ? AND ` + isQueued
		args := []any{protocol.StatusRunning, c.InstanceID, c.DelegateName, c.DelegateHostname,
			micros(now), micros(now.Add(c.LeaseDuration)), c.TaskID}
		if c.Capacity > 0 {
			q += ` AND (SELECT COUNT(*) FROM tasks WHERE instance_id = ? AND ` + isRunning + `) < ?`
			args = append(args, c.InstanceID, c.Capacity)
		}
		var ss storedSecrets
		var err error
		t, ss, err = scanTaskSecrets(s.w(tx).queryRow(ctx, q+` RETURNING `+taskSecretCols, args...))
		if errors.Is(err, sql.ErrNoRows) {
			return errClaimLongWay
		}
		if err != nil {
			return err
		}
		if c.Check != nil {
			before := t
			before.Status = protocol.StatusQueued
			before.Epoch--
			before.Attempts--
			before.InstanceID, before.DelegateName, before.DelegateHostname = "", "", ""
			before.AcquiredAt, before.StartedAt, before.LeaseExpiresAt = nil, nil, nil
			if c.Check(before) != nil {
				return errClaimLongWay
			}
		}
		if t, err = s.withSecrets(ctx, tx, t, ss); err != nil {
			return errClaimLongWay
		}
		return nil
	})
	if err != nil {
		return Task{}, err
	}
	return t, nil
}
