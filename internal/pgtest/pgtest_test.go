package pgtest

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestNewDatabaseIsFreshEmptyAndDropped(t *testing.T) {
	t.Parallel()
	var dsn, other string
	t.Run("use", func(t *testing.T) {
		dsn = NewDatabase(t)
		other = NewDatabase(t)
		if dsn == other {
			t.Fatalf("two calls returned the same database %s", dsn)
		}
		u, err := url.Parse(dsn)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			t.Fatalf("DSN %q is not a postgres:// URL", dsn)
		}
		db := open(t, dsn)
		ctx := ctxT(t)
		var tables int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Errorf("new database has %d tables, want none", tables)
		}
		// Text sorts by bytes, as in SQLite.
		var coll string
		if err := db.QueryRowContext(ctx, `SELECT datcollate FROM pg_database WHERE datname = current_database()`).Scan(&coll); err != nil {
			t.Fatal(err)
		}
		if coll != "C" {
			t.Errorf("collation = %q, want C", coll)
		}
		if _, err := db.ExecContext(ctx, `CREATE TABLE t (x int)`); err != nil {
			t.Fatal(err)
		}
		// The other database does not see it.
		if err := open(t, other).QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&tables); err != nil || tables != 0 {
			t.Errorf("other database: %d tables, err %v", tables, err)
		}
		// A connection left open does not stop the drop at cleanup: db
		// is closed only after it (cleanups run last-in first-out, and
		// open registered its own after NewDatabase's).
	})
	// After the subtest's cleanup, both databases are gone.
	for _, d := range []string{dsn, other} {
		u, _ := url.Parse(d)
		name := strings.TrimPrefix(u.Path, "/")
		u.Path = "/postgres"
		admin := open(t, u.String())
		var n int
		if err := admin.QueryRowContext(ctxT(t), `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("database %s still exists after the test ended", name)
		}
	}
}

func TestAvailable(t *testing.T) {
	t.Parallel()
	if !Available(t) {
		if os.Getenv("CI") == "true" {
			t.Fatal("Available is false under CI=true")
		}
		t.Skip("no PostgreSQL here")
	}
	// Available means NewDatabase works (or, under CI=true, fails loudly).
	db := open(t, NewDatabase(t))
	if err := db.PingContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
