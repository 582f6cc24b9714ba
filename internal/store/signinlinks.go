package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SignInLink is a one-time sign-in link of a user (legate ui): valid
// until ExpiresAt, for one sign-in. Only its token's hash is stored.
type SignInLink struct {
	ID          string
	AccountID   string
	PrincipalID string
	Hash        string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	UsedAt      *time.Time
}

// ErrLinkUsed: the sign-in link was used already, or has expired.
var ErrLinkUsed = errors.New("sign-in link used or expired")

// CreateSignInLink stores a sign-in link, and deletes the links that
// expired before its creation.
func (s *Store) CreateSignInLink(ctx context.Context, l SignInLink) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := s.w(tx).exec(ctx, `DELETE FROM signin_links WHERE expires_at < ?`, micros(l.CreatedAt)); err != nil {
			return err
		}
		_, err := s.w(tx).exec(ctx, `INSERT INTO signin_links (id, account_id, principal_id, hash, created_at, expires_at, used_at) VALUES (?, ?, ?, ?, ?, ?, NULL)`,
			l.ID, l.AccountID, l.PrincipalID, l.Hash, micros(l.CreatedAt), micros(l.ExpiresAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("create sign-in link: %w", err)
	}
	return nil
}

// UseSignInLink marks the link whose token hashes to hash used at now and
// returns it: ErrNotFound when there is none, ErrLinkUsed when it was used
// already or expired by now (with the link, whose user the audit log
// names). Of two uses at once, one wins.
func (s *Store) UseSignInLink(ctx context.Context, hash string, now time.Time) (SignInLink, error) {
	var l SignInLink
	err := s.write(ctx, func(tx *sql.Tx) error {
		l = SignInLink{}
		var created, expires int64
		var used sql.NullInt64
		err := s.w(tx).queryRow(ctx, `SELECT id, account_id, principal_id, hash, created_at, expires_at, used_at FROM signin_links WHERE hash = ?`, hash).
			Scan(&l.ID, &l.AccountID, &l.PrincipalID, &l.Hash, &created, &expires, &used)
		if err != nil {
			return notFound(err)
		}
		l.CreatedAt, l.ExpiresAt, l.UsedAt = fromMicros(created), fromMicros(expires), fromNullMicros(used)
		if l.UsedAt != nil || !now.Before(l.ExpiresAt) {
			return ErrLinkUsed
		}
		res, err := s.w(tx).exec(ctx, `UPDATE signin_links SET used_at = ? WHERE id = ? AND used_at IS NULL`, micros(now), l.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err == nil {
				err = ErrLinkUsed
			}
			return err
		}
		l.UsedAt = &now
		return nil
	})
	if errors.Is(err, ErrLinkUsed) {
		return l, fmt.Errorf("use sign-in link %s: %w", l.ID, err)
	}
	if err != nil {
		return SignInLink{}, fmt.Errorf("use sign-in link: %w", err)
	}
	return l, nil
}
