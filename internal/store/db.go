package store

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/protocol"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// dialect names the SQL flavour a Store speaks.
type dialect int

const (
	dialectSQLite dialect = iota
	dialectPostgres
)

func (d dialect) String() string {
	if d == dialectPostgres {
		return "postgres"
	}
	return "sqlite"
}

// busyTimeoutMS is how long a SQLite connection waits for a lock held by
// another connection (or process) before it gives up with SQLITE_BUSY.
const busyTimeoutMS = 10000

// parseSQLiteDSN turns a SQLite store DSN into a file path.
func parseSQLiteDSN(dsn string) (string, error) {
	dsn = strings.TrimPrefix(dsn, "sqlite://")
	switch {
	case dsn == "":
		return "", errors.New("empty SQLite path")
	case dsn == ":memory:" || strings.HasPrefix(dsn, "file:"):
		return "", fmt.Errorf("unsupported SQLite name %q: use a file path", dsn)
	case strings.ContainsRune(dsn, '?'):
		return "", fmt.Errorf("SQLite path %q must not contain '?'", dsn)
	}
	return dsn, nil
}

// openSQLite opens the writer (one connection, BEGIN IMMEDIATE) and the
// reader pool (query_only) on the file at path, and migrates it. It holds
// the open lock (openlock.go) from creating the file until the migrations
// are applied, so that concurrent openers of a new database take turns.
func openSQLite(ctx context.Context, path string) (*Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create directory of %s: %w", path, err)
		}
	}
	unlock, err := lockOpen(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer unlock()
	if err := createPrivate(path); err != nil {
		return nil, err
	}

	common := "_pragma=busy_timeout(" + strconv.Itoa(busyTimeoutMS) + ")&_pragma=foreign_keys(1)"
	// The WAL is checkpointed every 8,192 pages (32 MiB) rather than
	// SQLite's 1,000: a checkpoint copies the last version of each page,
	// and task output, whose capped tail reuses the same freed pages over
	// and over, then costs one copy per page per 32 MiB instead of per
	// 4 MiB: a large share of the manager's CPU while a task writes fast
	// (measured in BENCHMARKS.md).
	writer, err := sql.Open("sqlite", path+"?"+common+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(8192)&_pragma=temp_store(2)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxIdleTime(0)
	writer.SetConnMaxLifetime(0)
	s := &Store{writer: writer, dialect: dialectSQLite, lanes: []*groupCommit{newGroupCommit(maxGroup, gatherYields)}}
	if err := s.migrate(ctx); err != nil {
		writer.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	reader, err := sql.Open("sqlite", path+"?"+common+"&_pragma=query_only(1)")
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	reader.SetMaxOpenConns(n)
	reader.SetMaxIdleConns(n)
	if err := reader.PingContext(ctx); err != nil {
		writer.Close()
		reader.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s.reader = reader
	return s, nil
}

// createPrivate creates the database file at path, readable by its owner
// only, if it does not exist: it holds secret task values, and SQLite
// gives its -wal and -shm files the permissions of the database file. An
// existing file is not opened here: closing a descriptor of the database
// file would drop the locks that SQLite connections of this process hold
// on it. (A file created here is new: no connection can hold a lock on it
// while the open lock is held.)
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return fmt.Errorf("create %s: %w", path, err)
	}
	return f.Close()
}

// migrate applies the embedded migrations that are not yet recorded in
// schema_migrations, in file-name order, each in its own write transaction
// (which, on PostgreSQL, first takes the migration lock).
func (s *Store) migrate(ctx context.Context) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := s.lockMigrations(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    TEXT PRIMARY KEY,
    applied_at BIGINT NOT NULL
)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		version := strings.TrimSuffix(filepath.Base(name), ".sql")
		body, err := migrationFS.ReadFile(name)
		if err != nil {
			return err
		}
		err = s.write(ctx, func(tx *sql.Tx) error {
			if err := s.lockMigrations(ctx, tx); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`),
				version, time.Now().UnixMicro())
			return err
		})
		if err != nil {
			return fmt.Errorf("apply migration %s: %w", version, err)
		}
	}
	return nil
}

// rebind converts a query written with ? placeholders to the store's
// dialect. Every query goes through it.
func (s *Store) rebind(q string) string { return rebind(s.dialect, q) }

func rebind(d dialect, q string) string {
	if d != dialectPostgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	inString := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			inString = !inString // '' inside a literal toggles twice
			b.WriteByte(c)
		case c == '?' && !inString:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// stmtCache keeps one prepared statement per query text for a *sql.DB,
// so hot queries are parsed once per connection instead of on every call.
// The set of query texts is fixed by the code, so the cache stays small.
//
// A statement can only be prepared on the pool while no connection is
// held (the writer has one connection, which a transaction holds), so a
// query first seen inside a transaction is prepared on the transaction
// alone and remembered in pending; fill prepares it on the pool once the
// transaction is over.
type stmtCache struct {
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending map[string]bool
}

func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[query]
}

func (c *stmtCache) want(query string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = make(map[string]bool)
	}
	c.pending[query] = true
}

// get returns the cached statement for query, preparing it on db first.
// It must not be called while holding a connection of db.
func (c *stmtCache) get(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	if st := c.lookup(query); st != nil {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[query]; ok { // prepared concurrently
		st.Close()
		return old, nil
	}
	if c.m == nil {
		c.m = make(map[string]*sql.Stmt)
	}
	c.m[query] = st
	delete(c.pending, query)
	return st, nil
}

// fill prepares the queries first seen inside transactions. Errors are
// ignored: the next use of the query reports them.
func (c *stmtCache) fill(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	var queries []string
	for q := range c.pending {
		queries = append(queries, q)
	}
	c.pending = nil
	c.mu.Unlock()
	for _, q := range queries {
		c.get(ctx, db, q)
	}
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, st := range c.m {
		errs = append(errs, st.Close())
	}
	c.m = nil
	return errors.Join(errs...)
}

// handle runs queries (written with ? placeholders, rebound to the
// dialect) through the statement cache of one pool, inside tx if set.
type handle struct {
	s     *Store
	db    *sql.DB
	cache *stmtCache
	tx    *sql.Tx
}

// w is the writer, inside tx (a write transaction) if not nil.
func (s *Store) w(tx *sql.Tx) handle { return handle{s, s.writer, &s.wcache, tx} }

// r is the reader pool, inside tx (a read transaction) if not nil.
func (s *Store) r(tx *sql.Tx) handle { return handle{s, s.reader, &s.rcache, tx} }

// stmtCtx is the context a statement runs with. SQLite's writer runs a
// transaction's statements to their end whatever its caller's context
// says: an interrupted write statement rolls back its whole transaction
// (a group's, with every other caller's writes), and watching a context
// costs the driver a goroutine per statement. A write's context is
// checked before it starts (groupCommit.run, writeOnce's BeginTx), and
// its statements are short: the writer never waits for a lock.
func (h handle) stmtCtx(ctx context.Context) context.Context {
	if h.tx != nil && h.s.dialect == dialectSQLite && h.db == h.s.writer {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (h handle) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	query = h.s.rebind(query)
	if h.tx == nil {
		return h.cache.get(ctx, h.db, query)
	}
	if st := h.cache.lookup(query); st != nil {
		// Reuses the statement already prepared on the transaction's
		// connection (or prepares it there); closed with the transaction.
		return h.tx.StmtContext(ctx, st), nil
	}
	h.cache.want(query)
	return h.tx.PrepareContext(ctx, query)
}

func (h handle) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = h.stmtCtx(ctx)
	st, err := h.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (h handle) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = h.stmtCtx(ctx)
	st, err := h.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// errRow is a row whose query could not even be prepared.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (h handle) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	ctx = h.stmtCtx(ctx)
	st, err := h.stmt(ctx, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// write runs fn in a write transaction: on SQLite on the single writer
// connection; on PostgreSQL on a connection of the pool at READ COMMITTED,
// run again (up to maxWriteAttempts times) after a serialization failure
// or a deadlock, so fn must be safe to repeat: it must (re)set everything
// it returns through its closure. Concurrent writes share transactions
// (groupcommit.go): fn must not wait for another write to start.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeIn(ctx, writeMode{}, fn)
}

// writeMode says what a write function does, for group commit.
type writeMode struct {
	// own says the function runs in a transaction of its own, never in a
	// group, on PostgreSQL (SQLite's single writer groups everything): a
	// claim, whose task row and instance lock other claimers
	// wait for, and whose latency decides whether an offer widens to
	// more delegates (a claim held for a group's length made a loaded
	// manager widen many more offers, BENCHMARKS.md).
	own bool
	// clean says that when the function fails with an error other than a
	// statement's own (a server error), it has changed nothing: in a
	// group it needs no savepoint of its own.
	clean bool
	// single says the function is clean and runs at most one statement
	// that changes the database (reads may come before or after it) and
	// needs no lock beyond that statement: alone, it runs without a
	// transaction (tx nil), one round trip on PostgreSQL instead of three
	// (BEGIN, the statement, COMMIT).
	single bool
}

// writeSingle is write for a single function (see writeMode).
func (s *Store) writeSingle(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.writeIn(ctx, writeMode{single: true, clean: true}, fn)
}

// writeIn is write in mode.
func (s *Store) writeIn(ctx context.Context, mode writeMode, fn func(tx *sql.Tx) error) error {
	if len(s.lanes) > 0 && !(mode.own && s.dialect == dialectPostgres) {
		return s.lane().run(ctx, s, fn, mode)
	}
	return s.writeAlone(ctx, fn, mode)
}

// writeAlone runs fn in a transaction of its own (without one if single,
// on PostgreSQL), retried on PostgreSQL as write says.
func (s *Store) writeAlone(ctx context.Context, fn func(tx *sql.Tx) error, mode writeMode) error {
	for attempt := 1; ; attempt++ {
		var err error
		if mode.single && s.dialect == dialectPostgres {
			err = fn(nil)
		} else {
			err = s.writeOnce(ctx, fn)
		}
		if err == nil || s.dialect != dialectPostgres || attempt == maxWriteAttempts || !retryable(err) {
			return err
		}
		if werr := retryWait(ctx, attempt+1); werr != nil {
			return err
		}
	}
}

func (s *Store) writeOnce(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.wcache.fill(ctx, s.writer)
	return nil
}

// read runs fn in a transaction of the reader pool, so that several
// queries see one snapshot.
func (s *Store) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.reader.BeginTx(ctx, s.readOptions())
	if err != nil {
		return err
	}
	err = fn(tx)
	tx.Rollback()
	s.rcache.fill(ctx, s.reader)
	return err
}

// --- value conversions -----------------------------------------------------------

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// nullMicros is the column value of an optional timestamp.
func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

func timePtr(t time.Time) *time.Time {
	t = fromMicros(micros(t))
	return &t
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nullInt(p *int) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

func fromNullInt(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	i := int(v.Int64)
	return &i
}

// encodeStrings stores a list as a JSON array ("[]" for none).
// encodeIsolation stores what a delegate reported about keeping its
// tasks apart as JSON ("" for nothing reported).
func encodeIsolation(ti *protocol.TaskIsolation) string {
	if ti == nil {
		return ""
	}
	b, err := json.Marshal(ti)
	if err != nil {
		return ""
	}
	return string(b)
}

// decodeIsolation reverses encodeIsolation (nil for "" or what does not
// read as a report).
func decodeIsolation(s string) *protocol.TaskIsolation {
	if s == "" {
		return nil
	}
	var ti protocol.TaskIsolation
	if json.Unmarshal([]byte(s), &ti) != nil {
		return nil
	}
	return &ti
}

// encodeTaskTypes stores an instance's task types: ” for nil (an older
// delegate that did not report them), else a JSON array.
func encodeTaskTypes(l []string) string {
	if l == nil {
		return ""
	}
	b, err := json.Marshal(l)
	if err != nil { // cannot happen for []string
		panic(err)
	}
	return string(b)
}

// decodeTaskTypes reverses encodeTaskTypes (nil for ” or what does not
// read as a list).
func decodeTaskTypes(s string) []string {
	if s == "" {
		return nil
	}
	l := []string{}
	if json.Unmarshal([]byte(s), &l) != nil {
		return nil
	}
	return l
}

func encodeStrings(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	b, err := json.Marshal(l)
	if err != nil { // cannot happen for []string
		panic(err)
	}
	return string(b)
}

// decodeStrings reads a JSON array column; an empty list decodes to nil.
func decodeStrings(s string) ([]string, error) {
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, fmt.Errorf("decode string list: %w", err)
	}
	if len(l) == 0 {
		return nil, nil
	}
	return l, nil
}

func encodeSpec(spec protocol.TaskSpec) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("encode task spec: %w", err)
	}
	return string(b), nil
}

func decodeSpec(s string) (protocol.TaskSpec, error) {
	var spec protocol.TaskSpec
	if err := json.Unmarshal([]byte(s), &spec); err != nil {
		return protocol.TaskSpec{}, fmt.Errorf("decode task spec: %w", err)
	}
	return spec, nil
}

func encodeHTTPResult(r *protocol.HTTPResult) (any, error) {
	if r == nil {
		return nil, nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode http result: %w", err)
	}
	return string(b), nil
}

// decodeHTTPResult reads the http_result column; NULL (and a JSON null)
// decode to nil.
func decodeHTTPResult(v sql.NullString) (*protocol.HTTPResult, error) {
	if !v.Valid {
		return nil, nil
	}
	var r *protocol.HTTPResult
	if err := json.Unmarshal([]byte(v.String), &r); err != nil {
		return nil, fmt.Errorf("decode http result: %w", err)
	}
	return r, nil
}

// List limits.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

func listLimit(n int) int {
	switch {
	case n <= 0:
		return defaultListLimit
	case n > maxListLimit:
		return maxListLimit
	}
	return n
}

// insert runs one INSERT ... ON CONFLICT DO NOTHING on the writer and
// reports ErrConflict when it inserted nothing.
func (s *Store) insert(ctx context.Context, query string, args ...any) error {
	return s.writeSingle(ctx, func(tx *sql.Tx) error {
		res, err := s.w(tx).exec(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrConflict
		}
		return nil
	})
}
