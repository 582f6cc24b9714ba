package store

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/legate-dev/legate/internal/leaktest"
	"github.com/legate-dev/legate/internal/pgtest"
)

// Every store test runs against both backends: SQLite (a file in a temp
// dir) and PostgreSQL (a fresh database per test on the test binary's
// shared server; see package pgtest: $LEGATE_TEST_POSTGRES, or a throwaway
// cluster on loopback). Without PostgreSQL the PostgreSQL variants are
// skipped, except under CI=true, where that is a failure.

// backend is a database the store tests run against.
type backend struct {
	name string
	// newDSN returns the DSN of a new, empty database, removed when tb ends.
	newDSN func(tb testing.TB) string
	// rawDriver is the database/sql driver name for opening a DSN of the
	// backend without the store.
	rawDriver string
}

var (
	sqliteBackend = backend{
		name:      "sqlite",
		newDSN:    func(tb testing.TB) string { return filepath.Join(tb.TempDir(), "legate.db") },
		rawDriver: "sqlite",
	}
	postgresBackend = backend{name: "postgres", newDSN: pgtest.NewDatabase, rawDriver: "pgx"}
	backends        = []backend{sqliteBackend, postgresBackend}
)

// open opens a store on a new, empty database of the backend.
func (b backend) open(tb testing.TB) *Store {
	tb.Helper()
	return openAt(tb, b.newDSN(tb))
}

// forEachBackend runs f as the parallel subtests "sqlite" and "postgres".
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// TestMain runs the tests and stops the throwaway PostgreSQL cluster, if a
// test started one (pgtest.Main); then, if every test passed, it fails the
// run when goroutines are left behind (leaktest), such as those of a Store
// that a test did not close.
func TestMain(m *testing.M) {
	os.Exit(leaktest.Main(func() int { return pgtest.Main(m) }))
}

// pgAvailable reports whether PostgreSQL can be tested, for tests that
// also do something without it. Under CI=true it must be.
func pgAvailable(tb testing.TB) bool {
	tb.Helper()
	return pgtest.Available(tb)
}

// openRaw opens dsn without the store (no migrations), closed when tb ends.
func (b backend) openRaw(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	db, err := sql.Open(b.rawDriver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
