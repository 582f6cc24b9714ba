package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Delegate approval. A token may require approval; the decision is about
// a delegate — a name (compared without case) within the token it
// registers with — and every instance of it, present or to come, carries
// it in instances.approval. delegate_approvals keeps the decision when
// the instances are deleted or pruned.

// approvalOf returns the decision about the delegate name of tokenID,
// recording it as pending when there is none yet. Within a write
// transaction.
func (s *Store) approvalOf(ctx context.Context, tx *sql.Tx, accountID, tokenID, name string, now time.Time) (string, error) {
	key := strings.ToLower(name)
	if _, err := s.w(tx).exec(ctx, `INSERT INTO delegate_approvals (account_id, token_id, name, state, created_at, decided_at, decided_by)
	VALUES (?, ?, ?, ?, ?, NULL, '') ON CONFLICT DO NOTHING`, accountID, tokenID, key, protocol.ApprovalPending, micros(now)); err != nil {
		return "", err
	}
	var state string
	err := s.w(tx).queryRow(ctx, `SELECT state FROM delegate_approvals WHERE account_id = ? AND token_id = ? AND name = ?`,
		accountID, tokenID, key).Scan(&state)
	return state, err
}

// ErrNoApproval is SetApproval's refusal for a delegate whose instances
// registered with tokens that require no approval.
var ErrNoApproval = errors.New("the delegate's token requires no approval")

// SetApproval records the decision (protocol.ApprovalApproved or
// ApprovalRejected) about every delegate of the account named name (any
// case, any token that requires approval), by the principal named by, and
// returns its instances as they are now. ErrNotFound when the account has
// neither an instance nor a decision of that name; ErrNoApproval when it
// has instances but none registered with a token that requires approval.
func (s *Store) SetApproval(ctx context.Context, accountID, name, state, by string, now time.Time) ([]Instance, error) {
	if state != protocol.ApprovalApproved && state != protocol.ApprovalRejected {
		return nil, fmt.Errorf("set approval of %q: unknown state %q", name, state)
	}
	var out []Instance
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = nil
		res, err := s.w(tx).exec(ctx, `UPDATE delegate_approvals SET state = ?, decided_at = ?, decided_by = ?
	WHERE account_id = ? AND name = ?`, state, micros(now), by, accountID, strings.ToLower(name))
		if err != nil {
			return err
		}
		decisions, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if _, err := s.w(tx).exec(ctx, `UPDATE instances SET approval = ? WHERE account_id = ? AND LOWER(name) = LOWER(?) AND approval <> ''`,
			state, accountID, name); err != nil {
			return err
		}
		rows, err := s.w(tx).query(ctx, `SELECT `+instanceCols+` FROM instances
	WHERE account_id = ? AND LOWER(name) = LOWER(?) ORDER BY hostname, id`, accountID, name)
		if err != nil {
			return err
		}
		defer rows.Close()
		all := 0
		for rows.Next() {
			in, err := scanInstance(rows)
			if err != nil {
				return err
			}
			all++
			if in.Approval != "" {
				out = append(out, in)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		switch {
		case decisions == 0 && all == 0:
			return ErrNotFound
		case decisions == 0:
			return ErrNoApproval
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record %s for delegate %q: %w", state, name, err)
	}
	return out, nil
}

// InstanceApproval returns the stored decision about an instance's
// delegate ("" when its token requires none); ErrNotFound.
func (s *Store) InstanceApproval(ctx context.Context, id string) (string, error) {
	var state string
	err := s.r(nil).queryRow(ctx, `SELECT approval FROM instances WHERE id = ?`, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("approval of instance %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("approval of instance %s: %w", id, err)
	}
	return state, nil
}
