package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrLastAPIKey is returned by RevokeAPIKey when the key is the account's
// last active one and the caller did not allow that.
var ErrLastAPIKey = errors.New("last active API key of the account")

// APIKey is an admin API key; only the SHA-256 hash of its value is
// stored. Names are unique within an account (revoked keys keep theirs).
type APIKey struct {
	ID        string
	AccountID string
	Name      string
	Hash      string
	// OwnerKind and OwnerID say whom the key acts for:
	// protocol.OwnerAccount and the account ID today.
	OwnerKind string
	OwnerID   string
	CreatedAt time.Time
	// CreatedBy is the ID of the key that created this one; "" for a key
	// the manager created itself.
	CreatedBy  string
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	// RevokedBy is the ID of the key that revoked this one.
	RevokedBy string
}

const apiKeyCols = `id, account_id, name, hash, owner_kind, owner_id, created_at, created_by, last_used_at, revoked_at, revoked_by`

func scanAPIKey(r rowScanner) (APIKey, error) {
	var k APIKey
	var created int64
	var used, revoked sql.NullInt64
	if err := r.Scan(&k.ID, &k.AccountID, &k.Name, &k.Hash, &k.OwnerKind, &k.OwnerID, &created, &k.CreatedBy,
		&used, &revoked, &k.RevokedBy); err != nil {
		return APIKey{}, err
	}
	k.CreatedAt = fromMicros(created)
	k.LastUsedAt = fromNullMicros(used)
	k.RevokedAt = fromNullMicros(revoked)
	return k, nil
}

// CreateAPIKey stores an API key (LastUsedAt, RevokedAt and RevokedBy are
// ignored: a new key is active and unused). ErrConflict if the account
// already has a key with that name, or the hash is stored already.
func (s *Store) CreateAPIKey(ctx context.Context, k APIKey) error {
	err := s.insert(ctx, `INSERT INTO api_keys (`+apiKeyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, '') ON CONFLICT DO NOTHING`,
		k.ID, k.AccountID, k.Name, k.Hash, k.OwnerKind, k.OwnerID, micros(k.CreatedAt), k.CreatedBy)
	if err != nil {
		return fmt.Errorf("create API key %q of account %s: %w", k.Name, k.AccountID, err)
	}
	return nil
}

// APIKeyByHash returns the API key, revoked or not, whose value hashes to
// hash, or ErrNotFound.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (APIKey, error) {
	k, err := scanAPIKey(s.r(nil).queryRow(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("look up API key: %w", err)
	}
	return k, nil
}

// ListAPIKeys lists an account's API keys, revoked ones included, oldest
// first.
func (s *Store) ListAPIKeys(ctx context.Context, accountID string) ([]APIKey, error) {
	rows, err := s.r(nil).query(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE account_id = ? ORDER BY created_at, id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	defer rows.Close()
	var out []APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list API keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return out, nil
}

// RevokeAPIKey marks the account's key named name revoked by the key
// revokedBy and returns it; revoking a revoked key changes nothing and
// returns it as it is. ErrNotFound for an unknown name; ErrLastAPIKey when
// no other active key of the account would remain, unless allowLast. The
// account's keys are locked meanwhile, so two keys revoking each other at
// once cannot leave the account without one.
func (s *Store) RevokeAPIKey(ctx context.Context, accountID, name, revokedBy string, now time.Time, allowLast bool) (APIKey, error) {
	var k APIKey
	err := s.write(ctx, func(tx *sql.Tx) error {
		k = APIKey{}
		rows, err := s.w(tx).query(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE account_id = ? ORDER BY id`+
			s.lockClause("FOR UPDATE"), accountID)
		if err != nil {
			return err
		}
		found, othersActive := false, 0
		for rows.Next() {
			r, err := scanAPIKey(rows)
			if err != nil {
				rows.Close()
				return err
			}
			switch {
			case r.Name == name:
				k, found = r, true
			case r.RevokedAt == nil:
				othersActive++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		switch {
		case !found:
			return ErrNotFound
		case k.RevokedAt != nil:
			return nil
		case othersActive == 0 && !allowLast:
			return ErrLastAPIKey
		}
		if _, err := s.w(tx).exec(ctx, `UPDATE api_keys SET revoked_at = ?, revoked_by = ? WHERE id = ?`,
			micros(now), revokedBy, k.ID); err != nil {
			return err
		}
		k.RevokedAt, k.RevokedBy = timePtr(now), revokedBy
		return nil
	})
	if err != nil {
		return APIKey{}, fmt.Errorf("revoke API key %q: %w", name, err)
	}
	return k, nil
}

// TouchAPIKeys records when keys (by ID) were last used, in one
// transaction. A time older than the stored one is ignored, so managers
// sharing the store never move it back.
func (s *Store) TouchAPIKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		for id, at := range used {
			if _, err := s.w(tx).exec(ctx, `UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`,
				micros(at), id, micros(at)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record API key use: %w", err)
	}
	return nil
}
