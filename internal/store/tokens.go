package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CreateToken stores a token. ErrConflict if the account already has a token
// with that name (revoked tokens keep their name).
func (s *Store) CreateToken(ctx context.Context, t Token) error {
	err := s.insert(ctx, `INSERT INTO tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		t.ID, t.AccountID, t.Name, t.Hash, micros(t.CreatedAt), nullMicros(t.RevokedAt), t.Org, t.Project, boolInt(t.RequireApproval),
		strings.Join(t.InitSecrets, ","), max(t.Uses, 0), max(t.Uses, 0))
	if err != nil {
		return fmt.Errorf("create token %q: %w", t.Name, err)
	}
	return nil
}

// ListTokens lists an account's tokens, oldest first.
func (s *Store) ListTokens(ctx context.Context, accountID string) ([]Token, error) {
	rows, err := s.r(nil).query(ctx, `SELECT `+tokenCols+` FROM tokens WHERE account_id = ? ORDER BY created_at, id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// TokenByHash finds an account's token by hash, revoked or not; ErrNotFound.
func (s *Store) TokenByHash(ctx context.Context, accountID, hash string) (Token, error) {
	t, err := scanToken(s.r(nil).queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE account_id = ? AND hash = ? ORDER BY created_at, id LIMIT 1`, accountID, hash))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("look up token: %w", err)
	}
	return t, nil
}

// TokenByID returns a token by ID or ErrNotFound.
func (s *Store) TokenByID(ctx context.Context, id string) (Token, error) {
	t, err := scanToken(s.r(nil).queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("get token %s: %w", id, err)
	}
	return t, nil
}

// RevokeToken marks an account's token revoked (idempotent: a second revoke
// keeps the first time) and returns it; ErrNotFound for an unknown name.
func (s *Store) RevokeToken(ctx context.Context, accountID, name string, now time.Time) (Token, error) {
	var t Token
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := s.w(tx).exec(ctx, `UPDATE tokens SET revoked_at = ? WHERE account_id = ? AND name = ? AND revoked_at IS NULL`,
			micros(now), accountID, name); err != nil {
			return err
		}
		var err error
		t, err = scanToken(s.w(tx).queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE account_id = ? AND name = ?`, accountID, name))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		return err
	})
	if err != nil {
		return Token{}, fmt.Errorf("revoke token %q: %w", name, err)
	}
	return t, nil
}

// takeTokenUse takes one use of token id, when it was created with a
// number of uses; ErrTokenUsedUp when none is left. The row is locked
// (PostgreSQL) or the write transaction is alone (SQLite), so two
// registrations never take the last use both.
func (s *Store) takeTokenUse(ctx context.Context, tx *sql.Tx, id string) error {
	var uses, left int
	err := s.w(tx).queryRow(ctx, `SELECT uses, uses_left FROM tokens WHERE id = ?`+s.lockClause("FOR UPDATE"), id).Scan(&uses, &left)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil // deleted meanwhile: the caller's check of the token stands
	case err != nil:
		return err
	case uses <= 0:
		return nil
	case left <= 0:
		return ErrTokenUsedUp
	}
	_, err = s.w(tx).exec(ctx, `UPDATE tokens SET uses_left = uses_left - 1 WHERE id = ?`, id)
	return err
}
