package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/legate-dev/legate/internal/seal"
)

// t0 is the base time of the tests: microsecond precision, UTC, as the
// store returns times.
var t0 = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr[T any](v T) *T { return &v }

var equateEmpty = cmpopts.EquateEmpty()

func openTest(t testing.TB) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "legate.db"))
}

// testKeys seal what the test stores keep: the stores a test opens on one
// database share them, as the managers of one database share a key.
var testKeys = func() *seal.Ring {
	r, err := seal.NewRing(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		panic(err)
	}
	return r
}()

func openAt(t testing.TB, dsn string) *Store {
	t.Helper()
	return openWithKeys(t, dsn, testKeys)
}

// openWithKeys opens a store on dsn with the key ring keys, closed when t ends.
func openWithKeys(t testing.TB, dsn string, keys *seal.Ring) *Store {
	t.Helper()
	s, err := OpenWith(context.Background(), dsn, Options{Keys: keys})
	if err != nil {
		t.Fatalf("Open(%q): %v", dsn, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func TestOpenDSN(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name    string
		dsn     string
		wantErr string // "" means it opens
	}{
		{"plain path", filepath.Join(dir, "a.db"), ""},
		{"sqlite scheme", "sqlite://" + filepath.Join(dir, "b.db"), ""},
		{"creates parent directory", filepath.Join(dir, "sub", "dir", "c.db"), ""},
		// PostgreSQL DSNs that fail before or at connecting (opening one
		// is tested in TestOpenPostgres); errors never show the password.
		{"postgres bad URL", "postgres://u:s3cretpw@localhost:notaport/legate", "not a valid URL"},
		{"postgresql bad pool size", "postgresql://localhost/legate?pool_max_conns=0", "pool_max_conns"},
		{"postgres unreachable", "postgres://u:s3cretpw@127.0.0.1:1/legate?sslmode=disable", "127.0.0.1"},
		{"memory", ":memory:", "use a file path"},
		{"empty", "", "empty SQLite path"},
		{"query", filepath.Join(dir, "d.db?mode=ro"), "must not contain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(context.Background(), tt.dsn)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded, want error %q", tt.dsn, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Open(%q) error %q, want it to contain %q", tt.dsn, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "s3cretpw") {
				t.Errorf("Open error %q shows the password", err)
			}
		})
	}
}

func TestOpenPragmasAndPermissions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "legate.db")
	s := openAt(t, path)
	ctx := context.Background()
	var mode string
	if err := s.reader.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	for _, db := range []struct {
		name string
		db   *sql.DB
	}{{"writer", s.writer}, {"reader", s.reader}} {
		var fk, busy int
		if err := db.db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if err := db.db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if fk != 1 || busy != busyTimeoutMS {
			t.Errorf("%s: foreign_keys=%d busy_timeout=%d, want 1 and %d", db.name, fk, busy, busyTimeoutMS)
		}
	}
	// The reader pool must not write.
	if _, err := s.reader.ExecContext(ctx, "INSERT INTO settings (key, value) VALUES ('x', 'y')"); err == nil {
		t.Error("reader pool accepted a write")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("database file mode %v, want 0600", perm)
	}
}

func TestOpenConcurrent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		// Several managers opening a fresh database at once all migrate it
		// safely (on SQLite, switching it to WAL among them).
		path := b.newDSN(t)
		errs := make([]error, 8)
		race(len(errs), func(i int) {
			s, err := Open(context.Background(), path)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("open %d: %v", i, err)
			}
		}
	})
}

// TestOpenWaitsForTheOpenLock holds the open lock of a SQLite database:
// Open waits for it, as long as its context allows, and succeeds once it is
// released.
func TestOpenWaitsForTheOpenLock(t *testing.T) {
	t.Parallel()
	path := sqliteBackend.newDSN(t)
	unlock, err := lockOpen(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err := Open(ctx, path)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded while another opener held the lock")
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "another process is opening the database") {
		t.Errorf("Open error %q, want context.Canceled and the reason", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the database file was created without the lock: %v", err)
	}
	unlock()
	openAt(t, path)
}

func TestRebind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    dialect
		in   string
		want string
	}{
		{dialectSQLite, "SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = ? AND c = ?"},
		{dialectPostgres, "SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = $1 AND c = $2"},
		{dialectPostgres, "SELECT '?', 'it''s ?' FROM t WHERE b = ?", "SELECT '?', 'it''s ?' FROM t WHERE b = $1"},
		{dialectPostgres, "SELECT 1", "SELECT 1"},
	}
	for _, tt := range tests {
		if got := rebind(tt.d, tt.in); got != tt.want {
			t.Errorf("rebind(%d, %q) = %q, want %q", tt.d, tt.in, got, tt.want)
		}
	}
}

func TestSettingOrInitRace(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		const n = 16
		got := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				got[i], errs[i] = s.SettingOrInit(ctx, "manager.secret", fmt.Sprintf("value-%d", i))
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("caller %d: %v", i, errs[i])
			}
			if got[i] != got[0] {
				t.Fatalf("caller %d got %q, caller 0 got %q", i, got[i], got[0])
			}
		}
		if !strings.HasPrefix(got[0], "value-") {
			t.Fatalf("stored value %q", got[0])
		}
		again, err := s.SettingOrInit(ctx, "manager.secret", "other")
		if err != nil || again != got[0] {
			t.Fatalf("SettingOrInit again = %q, %v; want %q", again, err, got[0])
		}
		other, err := s.SettingOrInit(ctx, "other.key", "x")
		if err != nil || other != "x" {
			t.Fatalf("SettingOrInit(other.key) = %q, %v", other, err)
		}
	})
}

func TestAccounts(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()

		if err := s.CreateAccount(ctx, Account{ID: "acc1", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "duplicate account", s.CreateAccount(ctx, Account{ID: "acc1", CreatedAt: at(time.Hour)}), ErrConflict)
		a, err := s.GetAccount(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Account{ID: "acc1", CreatedAt: t0}, a); diff != "" {
			t.Errorf("GetAccount (-want +got):\n%s", diff)
		}
		_, err = s.GetAccount(ctx, "nope")
		wantErr(t, "unknown account", err, ErrNotFound)
	})
}
