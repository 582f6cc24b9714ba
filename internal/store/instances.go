package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// IdentityConflictError is UpsertInstance's refusal of a registration
// whose identity is bound to another token that is still valid. It
// matches ErrIdentityConflict (errors.Is).
type IdentityConflictError struct {
	// InstanceID is the instance the identity belongs to.
	InstanceID string
	// TokenID and TokenName are the token it is bound to.
	TokenID, TokenName string
}

func (e *IdentityConflictError) Error() string {
	return fmt.Sprintf("identity of instance %s is bound to token %q", e.InstanceID, e.TokenName)
}

// Is makes errors.Is(err, ErrIdentityConflict) hold.
func (e *IdentityConflictError) Is(target error) bool { return target == ErrIdentityConflict }

// UpsertInstance registers an instance. If (AccountID, IdentityKey) exists
// it keeps that row's ID and RegisteredAt, updates every other field from
// in, clears DeregisteredAt and increments Generation; otherwise it inserts
// in with Generation 1. It returns the stored row.
//
// An existing instance is bound to the token it was registered with: a
// registration with another TokenID fails with *IdentityConflictError
// (ErrIdentityConflict) unless that token was revoked or deleted, and then
// the instance is bound to the new token. The check and the update are one
// transaction (the row is locked on PostgreSQL), so of two registrations
// that race for one identity with different tokens, one wins and the
// other is refused.
//
// The registration of a new process (in.ProcessID other than the one the
// live instance was registered by) takes a use of a token created with a
// number of uses, in the same transaction: ErrTokenUsedUp when none is left.
func (s *Store) UpsertInstance(ctx context.Context, in Instance) (Instance, error) {
	var out Instance
	err := s.write(ctx, func(tx *sql.Tx) error {
		var id, tokenID, processID string
		var generation int64
		var deregistered sql.NullInt64
		lookup := func() error {
			return s.w(tx).queryRow(ctx, `SELECT id, generation, token_id, process_id, deregistered_at FROM instances WHERE account_id = ? AND identity_key = ?`+
				s.lockClause("FOR UPDATE"), in.AccountID, in.IdentityKey).Scan(&id, &generation, &tokenID, &processID, &deregistered)
		}
		if in.Approval != "" {
			state, err := s.approvalOf(ctx, tx, in.AccountID, in.TokenID, in.Name, in.RegisteredAt)
			if err != nil {
				return err
			}
			in.Approval = state
		}
		err := lookup()
		if err == nil || errors.Is(err, sql.ErrNoRows) {
			// A new process takes a use of its token; the live process
			// that holds the instance registering again (a new session, a
			// reconnect, a manager restart) does not.
			again := err == nil && in.ProcessID != "" && in.ProcessID == processID && in.TokenID == tokenID && !deregistered.Valid
			if !again {
				if err := s.takeTokenUse(ctx, tx, in.TokenID); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, sql.ErrNoRows) {
			res, err := s.w(tx).exec(ctx, `INSERT INTO instances (`+instanceCols+`)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
				in.ID, in.AccountID, in.IdentityKey, in.Name, in.Hostname, in.IP, encodeStrings(in.Tags),
				in.Version, in.Type, in.TokenID, in.Capacity, int64(1), in.Connection, boolInt(in.Draining),
				micros(in.RegisteredAt), nullMicros(in.LastHeartbeat), nil, in.Org, in.Project, cleanText(in.Description), in.Approval, in.ContainerRuntime, in.UpgradeMode, encodeIsolation(in.TaskIsolation), encodeTaskTypes(in.TaskTypes), in.ContainerReason)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n > 0 {
				out, err = s.recordProcess(ctx, tx, in.ID, in.ProcessID)
				return err
			}
			// Nothing inserted: the ID is taken by another identity, or
			// (PostgreSQL, several managers) the same identity registered
			// concurrently and committed first; then update that row.
			if err := lookup(); errors.Is(err, sql.ErrNoRows) {
				return ErrConflict
			} else if err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if tokenID != in.TokenID {
			if err := s.checkRebind(ctx, tx, id, tokenID); err != nil {
				return err
			}
		}
		if err := s.updateInstance(ctx, tx, id, generation, in); err != nil {
			return err
		}
		out, err = getInstance(ctx, s.w(tx), id)
		out.ProcessID = in.ProcessID
		return err
	})
	if err != nil {
		return Instance{}, fmt.Errorf("upsert instance %q: %w", in.IdentityKey, err)
	}
	return out, nil
}

// recordProcess records the process that registered the new instance id
// (a re-registration records it in updateInstance) and returns the
// instance.
func (s *Store) recordProcess(ctx context.Context, tx *sql.Tx, id, processID string) (Instance, error) {
	if processID != "" {
		if _, err := s.w(tx).exec(ctx, `UPDATE instances SET process_id = ? WHERE id = ?`, processID, id); err != nil {
			return Instance{}, err
		}
	}
	in, err := getInstance(ctx, s.w(tx), id)
	in.ProcessID = processID
	return in, err
}

// checkRebind allows instance id, bound to boundToken, to be registered
// with another token only when boundToken was revoked or deleted.
func (s *Store) checkRebind(ctx context.Context, tx *sql.Tx, id, boundToken string) error {
	var name string
	var revoked sql.NullInt64
	err := s.w(tx).queryRow(ctx, `SELECT name, revoked_at FROM tokens WHERE id = ?`, boundToken).Scan(&name, &revoked)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil // deleted
	case err != nil:
		return err
	case revoked.Valid:
		return nil
	}
	return &IdentityConflictError{InstanceID: id, TokenID: boundToken, TokenName: name}
}

// updateInstance is the re-registration half of UpsertInstance: row id,
// read (and locked) at generation, takes every field of in but the ID and
// RegisteredAt.
func (s *Store) updateInstance(ctx context.Context, tx *sql.Tx, id string, generation int64, in Instance) error {
	_, err := s.w(tx).exec(ctx, `UPDATE instances SET name = ?, hostname = ?, ip = ?, tags = ?,
	version = ?, type = ?, token_id = ?, capacity = ?, generation = ?, connection = ?, draining = ?,
	last_heartbeat = ?, deregistered_at = NULL, org = ?, project = ?, description = ?, approval = ?, container_runtime = ?, upgrade_mode = ?, task_isolation = ?, task_types = ?, container_reason = ?, process_id = ? WHERE id = ?`,
		in.Name, in.Hostname, in.IP, encodeStrings(in.Tags), in.Version, in.Type, in.TokenID,
		in.Capacity, generation+1, in.Connection, boolInt(in.Draining), nullMicros(in.LastHeartbeat),
		in.Org, in.Project, cleanText(in.Description), in.Approval, in.ContainerRuntime, in.UpgradeMode, encodeIsolation(in.TaskIsolation), encodeTaskTypes(in.TaskTypes), in.ContainerReason, in.ProcessID, id)
	return err
}

// GetInstance returns an instance by ID or ErrNotFound.
func (s *Store) GetInstance(ctx context.Context, id string) (Instance, error) {
	in, err := getInstance(ctx, s.r(nil), id)
	if err != nil {
		return Instance{}, fmt.Errorf("get instance %s: %w", id, err)
	}
	return in, nil
}

// ListInstances lists an account's instances (deregistered ones included),
// ordered by name then hostname.
func (s *Store) ListInstances(ctx context.Context, accountID string) ([]Instance, error) {
	rows, err := s.r(nil).query(ctx, `SELECT `+instanceCols+` FROM instances WHERE account_id = ? ORDER BY name, hostname, id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	defer rows.Close()
	var out []Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("list instances: %w", err)
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return out, nil
}

// TouchInstances records liveness for many instances in one transaction.
// It returns the IDs it found no row for (an instance deleted or pruned
// while its delegate was still in contact with a manager).
func (s *Store) TouchInstances(ctx context.Context, touches []InstanceTouch) (missing []string, err error) {
	if len(touches) == 0 {
		return nil, nil
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		missing = nil
		stmt, err := s.w(tx).stmt(ctx, `UPDATE instances SET last_heartbeat = ?, connection = ?, draining = ? WHERE id = ?`)
		if err != nil {
			return err
		}
		for _, t := range touches {
			res, err := stmt.ExecContext(ctx, micros(t.LastHeartbeat), t.Connection, boolInt(t.Draining), t.ID)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				missing = append(missing, t.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("touch %d instances: %w", len(touches), err)
	}
	return missing, nil
}

// DeregisterInstance marks an instance deregistered at now; ErrNotFound
// for an unknown ID.
func (s *Store) DeregisterInstance(ctx context.Context, id string, now time.Time) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.w(tx).exec(ctx, `UPDATE instances SET deregistered_at = ? WHERE id = ?`, micros(now), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deregister instance %s: %w", id, err)
	}
	return nil
}

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
