package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL specifics. Everything else (schema, migrations, queries) is
// shared with SQLite; the places where the SQL differs are:
//
//   - placeholders: ? becomes $n (rebind);
//   - row locks: lockClause adds FOR UPDATE / FOR SHARE / FOR UPDATE SKIP
//     LOCKED to the selects of write transactions that read rows they then
//     change (SQLite has no such clause; its single writer already
//     serializes those transactions);
//   - advisory locks: migrations and the capacity check of ClaimTask;
//   - read transactions run at REPEATABLE READ (one snapshot for all their
//     queries, as SQLite's read transactions give);
//   - write transactions are retried on serialization failures and
//     deadlocks;
//   - concurrent writes share transactions, several groups at once, and
//     a write of a group never waits long for a lock (groupcommit.go).

// defaultPoolSize is the connection pool of a PostgreSQL store unless the
// DSN says otherwise with pool_max_conns.
const defaultPoolSize = 16

// Advisory lock keys (the two-int4 form, whose key space does not overlap
// the single-bigint form other software may use). The first int is
// legate's namespace for the kind of lock.
const (
	advisoryMigrations int32 = 0x6c656761 // "lega"; second key 0
	advisoryClaims     int32 = 0x6c656762 // second key hashtext(instance_id)
)

// maxWriteAttempts bounds the retries of a write transaction that failed
// with a serialization failure or a deadlock (PostgreSQL only). A write
// that deadlocks loses only when the server picks it as the victim, at
// random among the waiters: writes of two managers that lock rows in
// opposite orders lost five times in a row in one run of three
// (TestGroupsOfTwoManagers, each deadlock costing the server's 1 s
// deadlock_timeout), never twenty.
const maxWriteAttempts = 20

func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// openPostgres opens a PostgreSQL store: one pool serves reads and writes
// (PostgreSQL has row-level concurrency, so there is no single writer).
// The DSN is a libpq URL; pool_max_conns=N (as pgxpool spells it) sets the
// pool size, default 16. Errors never repeat the DSN: it may hold a password.
func openPostgres(ctx context.Context, dsn string) (*Store, error) {
	dsn, poolSize, err := takePoolSize(dsn)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL DSN: %w", err)
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "legate"
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{writer: db, reader: db, dialect: dialectPostgres, pgConfig: cfg}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate PostgreSQL database %q on %s: %w", cfg.Database, cfg.Host, err)
	}
	// Writes share transactions from here on (migrations ran alone): a
	// lane per connection of the pool (groupcommit.go).
	for range poolSize {
		s.lanes = append(s.lanes, newGroupCommit(maxGroupPostgres, 0))
	}
	return s, nil
}

// takePoolSize removes pool_max_conns from the DSN's query and returns it.
func takePoolSize(dsn string) (string, int, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", 0, errors.New("PostgreSQL DSN: not a valid URL")
	}
	q := u.Query()
	v := q.Get("pool_max_conns")
	if v == "" {
		return dsn, defaultPoolSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return "", 0, fmt.Errorf("PostgreSQL DSN: pool_max_conns=%q: want a positive number", v)
	}
	q.Del("pool_max_conns")
	u.RawQuery = q.Encode()
	return u.String(), n, nil
}

// lockClause returns clause (a row-locking clause such as "FOR UPDATE")
// with a leading space on PostgreSQL, and nothing on SQLite, where a write
// transaction holds the database's only write lock already.
func (s *Store) lockClause(clause string) string {
	if s.dialect != dialectPostgres {
		return ""
	}
	return " " + clause
}

// lockMigrations serializes concurrent migrations (several managers
// starting at once on a fresh database) until tx ends. SQLite needs
// nothing: BEGIN IMMEDIATE already excludes other writers.
func (s *Store) lockMigrations(ctx context.Context, tx *sql.Tx) error {
	if s.dialect != dialectPostgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, advisoryMigrations)
	return err
}

// readOptions are the options of read transactions: on PostgreSQL a
// read-only REPEATABLE READ transaction, so that all its queries see one
// snapshot (at READ COMMITTED each statement has its own); on SQLite a
// plain transaction of the reader pool is a snapshot already.
func (s *Store) readOptions() *sql.TxOptions {
	if s.dialect != dialectPostgres {
		return nil
	}
	return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
}

// retryable reports whether a write transaction that failed with err may
// succeed if run again: a serialization failure (40001) or a deadlock
// (40P01) on PostgreSQL.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// lockTimedOut reports whether err is a lock wait that exceeded
// lock_timeout (55P03 lock_not_available), as a write inside a group does
// after groupLockTimeout.
func lockTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// retryWait sleeps before attempt (2, 3, ...) of a write transaction: a
// random pause of up to 2 ms, doubled at each attempt up to 128 ms, so
// that transactions that deadlocked do not collide again in step.
func retryWait(ctx context.Context, attempt int) error {
	d := time.Duration(rand.Int64N(int64(2*time.Millisecond) << min(max(attempt-2, 0), 6)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
