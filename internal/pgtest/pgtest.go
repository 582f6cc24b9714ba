// Package pgtest starts a throwaway PostgreSQL server for tests and hands
// out a fresh, empty database per test.
//
// The server is the one named by $LEGATE_TEST_POSTGRES (a postgres:// URL
// whose user may create databases), or else one throwaway cluster that the
// test binary starts on a loopback port on first use, from the server
// binaries of Debian's postgresql package (scripts/pg-ensure installs
// them). Without either, tests that ask for a database are skipped, except
// under CI=true, where that is a failure.
//
// A test binary that uses the package calls Main from its TestMain, which
// stops the cluster after the tests:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// (Should the binary die without running it, a detached watchdog stops
// the cluster and removes its files.) Tests then call NewDatabase:
//
//	st, err := store.Open(ctx, pgtest.NewDatabase(t))
//
// The package imports nothing from the project; it is for tests only.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// EnvServer names a PostgreSQL server to test against instead of a
// throwaway cluster. Once a cluster is started, the test binary sets it to
// the cluster's DSN, so processes it starts with its environment (fuzz
// workers) share that cluster instead of starting their own.
const EnvServer = "LEGATE_TEST_POSTGRES"

// server is the PostgreSQL server of this test binary, set up on first
// use. It is the package's only mutable state, and deliberately so: one
// server serves every test of the binary (starting a cluster takes
// seconds; a database per test isolates them), so its handle must outlive
// any single test and be reachable from Main, which stops it.
var server struct {
	once    sync.Once
	base    *url.URL // server DSN; a test database replaces its path
	admin   *sql.DB  // creates and drops the test databases
	cluster *cluster // the throwaway cluster, if this process started it
	missing string   // why there is no server (binaries not installed, ...)
	err     error    // why the server could not be set up
}

// Main wraps m.Run: it runs the tests, then stops the throwaway cluster if
// one was started, and returns the exit code for os.Exit (non-zero also
// when the cluster could not be stopped).
func Main(m *testing.M) int {
	code := m.Run()
	if server.admin != nil {
		server.admin.Close()
	}
	if c := server.cluster; c != nil {
		if err := c.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop the throwaway PostgreSQL cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// NewDatabase returns the DSN (a postgres:// URL) of a fresh, empty
// database on the shared test server, starting the server on first use.
// The database is created from template0 with the C collation (text sorts
// by bytes, as in SQLite) and dropped, with any connection still open to
// it, at tb's cleanup: callers should register their own cleanups (closing
// pools, killing processes) after calling it. It skips tb when PostgreSQL
// is not available, except under CI=true, where it fails tb.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	base, admin := serverOf(tb)
	var b [8]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name+
		` TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`); err != nil {
		tb.Fatalf("pgtest: create test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			tb.Errorf("pgtest: drop test database %s: %v", name, err)
		}
	})
	u := *base
	u.Path = "/" + name
	return u.String()
}

// Available reports whether PostgreSQL can be tested, for tests that also
// do something without it (it logs why not). Under CI=true it is always
// true: NewDatabase then fails the test instead of skipping it.
func Available(tb testing.TB) bool {
	tb.Helper()
	server.once.Do(setUp)
	if server.missing != "" && server.err == nil && os.Getenv("CI") != "true" {
		tb.Logf("no PostgreSQL: %s", server.missing)
		return false
	}
	return true
}

// serverOf returns the server DSN and admin pool, skipping tb (or failing
// it, under CI=true) when PostgreSQL is not available.
func serverOf(tb testing.TB) (*url.URL, *sql.DB) {
	tb.Helper()
	server.once.Do(setUp)
	switch {
	case server.err != nil:
		tb.Fatalf("PostgreSQL test server: %v", server.err)
	case server.missing != "" && os.Getenv("CI") == "true":
		tb.Fatalf("PostgreSQL is required under CI=true: %s", server.missing)
	case server.missing != "":
		tb.Skipf("skipping: no PostgreSQL: %s (install it with scripts/pg-ensure, or set %s to a postgres:// URL)",
			server.missing, EnvServer)
	}
	return server.base, server.admin
}

func setUp() {
	dsn := os.Getenv(EnvServer)
	if dsn == "" {
		c, missing, err := startCluster()
		if missing != "" || err != nil {
			server.missing, server.err = missing, err
			return
		}
		server.cluster = c
		dsn = c.dsn()
		os.Setenv(EnvServer, dsn) // for the processes this binary starts (fuzz workers)
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		server.err = fmt.Errorf("$%s: want a postgres:// URL", EnvServer)
		return
	}
	admin, err := sql.Open("pgx", dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = admin.PingContext(ctx)
		cancel()
	}
	if err != nil {
		if admin != nil {
			admin.Close()
		}
		server.err = fmt.Errorf("connect to the test server: %w", err)
		return
	}
	admin.SetMaxOpenConns(4)
	server.base, server.admin = u, admin
}
