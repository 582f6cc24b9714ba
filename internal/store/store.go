// Package store keeps legate's durable state: accounts and settings;
// users, service accounts, groups, roles, bindings, web sessions, API keys
// and sign-in links; delegate tokens, approvals, instances (also by page),
// configurations and their results, capability results, and upgrade
// policies and reports; orgs, projects and connectors; tasks with their
// claims, leases and output, and the queue's figures; stored secrets and
// the sealing of every secret value; pipelines, their runs, deployments,
// deployment limits and webhooks; the audit log; and the deletion of
// finished tasks and runs that retention asks for.
//
// One Store type fronts both SQLite (embedded, pure Go, WAL, one writer
// connection) and PostgreSQL (several managers may share one database and
// tell each other of changes through Broadcast and Listen), with the same
// schema and the migrations embedded in the binary (migrations/), applied
// by Open. Concurrent writes share transactions, one commit for many
// writes (group commit, groupcommit.go). Claims are compare-and-set, so
// exactly one delegate wins a task, whichever manager it asks. Secret
// values (task secrets, stored secrets, webhook secrets, the session key)
// are sealed with a key ring the database never holds (secrets.go).
//
// It is one package, with one file per noun (tasks.go, claims.go,
// leases.go, logs.go, instances.go, ...).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/legate-dev/legate/internal/seal"
)

// Store is the durable state of a manager. It is safe for concurrent use.
type Store struct {
	// writer has a single connection on SQLite: every write transaction
	// goes through it, so writers queue in Go instead of fighting over the
	// lock. On PostgreSQL it is a pool, the same as reader.
	writer *sql.DB
	// reader is a pool for plain reads (WAL lets them run alongside writes).
	reader  *sql.DB
	dialect dialect
	// Prepared statements of the writer and of the reader pool.
	wcache, rcache stmtCache
	// lanes share write transactions among concurrent writers
	// (groupcommit.go): one on SQLite, several on PostgreSQL, whose
	// groups run side by side on connections of the pool. nextLane turns
	// between them.
	lanes    []*groupCommit
	nextLane atomic.Uint64
	// pgConfig opens the dedicated LISTEN connection (PostgreSQL only).
	pgConfig *pgx.ConnConfig
	// keys seal and open the secret values at rest.
	keys *seal.Ring
}

// Options configures OpenWith. The zero value means the documented defaults.
type Options struct {
	// Keys seal the secret values the store keeps (task secrets, the
	// session key). Nil means a random key made for this Store alone: what
	// it seals cannot be opened once it is closed, by another Store or by
	// another process (fine for tests that never reopen a database; a
	// manager passes the ring from its key file or LEGATE_MASTER_KEY).
	Keys *seal.Ring
}

// Open opens (creating if needed) the store named by dsn and applies
// migrations. A dsn is a file path or "sqlite://PATH" for SQLite, or a
// "postgres://..." (or "postgresql://...") URL for PostgreSQL, where
// pool_max_conns=N sets the connection pool (default 16). It is OpenWith
// with zero Options: secret values are sealed with a key that dies with
// the Store.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenWith(ctx, dsn, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn string, opts Options) (*Store, error) {
	keys := opts.Keys
	if keys == nil {
		var err error
		if keys, err = seal.NewRing(seal.NewKey()); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	var s *Store
	if isPostgresDSN(dsn) {
		var err error
		if s, err = openPostgres(ctx, dsn); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
	} else {
		path, err := parseSQLiteDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		if s, err = openSQLite(ctx, path); err != nil {
			return nil, err
		}
	}
	s.keys = keys
	return s, nil
}

// Close releases the database.
func (s *Store) Close() error {
	errs := []error{s.rcache.close(), s.wcache.close()}
	if s.reader != nil && s.reader != s.writer {
		errs = append(errs, s.reader.Close())
	}
	if s.writer != nil {
		errs = append(errs, s.writer.Close())
	}
	return errors.Join(errs...)
}

// --- settings ---------------------------------------------------------------

// SettingOrInit returns the value stored under key, storing value first if
// the key is absent (atomic: concurrent callers all get the same value).
func (s *Store) SettingOrInit(ctx context.Context, key, value string) (string, error) {
	var stored string
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := s.w(tx).exec(ctx, `INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING`, key, value); err != nil {
			return err
		}
		return s.w(tx).queryRow(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&stored)
	})
	if err != nil {
		return "", fmt.Errorf("setting %s: %w", key, err)
	}
	return stored, nil
}

// Setting returns the value stored under key; ErrNotFound.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	var v string
	if err := s.r(nil).queryRow(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v); err != nil {
		return "", fmt.Errorf("setting %s: %w", key, notFound(err))
	}
	return v, nil
}

// --- accounts -------------------------------------------------------------------

// CreateAccount creates an account. ErrConflict if the ID exists.
func (s *Store) CreateAccount(ctx context.Context, a Account) error {
	err := s.insert(ctx, `INSERT INTO accounts (id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING`,
		a.ID, micros(a.CreatedAt))
	if err != nil {
		return fmt.Errorf("create account %s: %w", a.ID, err)
	}
	return nil
}

// GetAccount returns an account or ErrNotFound.
func (s *Store) GetAccount(ctx context.Context, id string) (Account, error) {
	a := Account{ID: id}
	var created int64
	err := s.r(nil).queryRow(ctx, `SELECT created_at FROM accounts WHERE id = ?`, id).Scan(&created)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Account{}, fmt.Errorf("get account %s: %w", id, err)
	}
	a.CreatedAt = fromMicros(created)
	return a, nil
}
