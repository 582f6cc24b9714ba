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

	"github.com/legate-dev/legate/internal/protocol"
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

func TestMigrationsReopen(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		path := b.newDSN(t)
		files, err := fs.Glob(migrationFS, "migrations/*.sql")
		if err != nil || len(files) == 0 {
			t.Fatalf("embedded migrations: %v %v", files, err)
		}

		versions := func(s *Store) []string {
			t.Helper()
			rows, err := s.reader.QueryContext(ctx, "SELECT version FROM schema_migrations ORDER BY version")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
			return out
		}
		var want []string
		for _, f := range files {
			want = append(want, strings.TrimSuffix(filepath.Base(f), ".sql"))
		}

		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateAccount(ctx, Account{ID: "acc", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, versions(s)); diff != "" {
			t.Errorf("versions after first open (-want +got):\n%s", diff)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		// Re-opening applies nothing again (a second CREATE TABLE would fail)
		// and keeps the data.
		for i := 0; i < 2; i++ {
			s = openAt(t, path)
			if diff := cmp.Diff(want, versions(s)); diff != "" {
				t.Errorf("versions after re-open (-want +got):\n%s", diff)
			}
			a, err := s.GetAccount(ctx, "acc")
			if err != nil {
				t.Fatal(err)
			}
			if !a.CreatedAt.Equal(t0) {
				t.Errorf("CreatedAt = %v, want %v", a.CreatedAt, t0)
			}
		}
	})
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

func TestTokens(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()

		tok1 := Token{ID: "t1", AccountID: "acc1", Name: "prod", Hash: "h1", CreatedAt: t0}
		tok2 := Token{ID: "t2", AccountID: "acc1", Name: "dev", Hash: "h2", CreatedAt: at(time.Minute)}
		tok3 := Token{ID: "t3", AccountID: "acc2", Name: "prod", Hash: "h3", CreatedAt: at(-time.Minute)}
		for _, tok := range []Token{tok2, tok1, tok3} {
			if err := s.CreateToken(ctx, tok); err != nil {
				t.Fatalf("CreateToken(%s): %v", tok.ID, err)
			}
		}
		wantErr(t, "same name", s.CreateToken(ctx, Token{ID: "t4", AccountID: "acc1", Name: "prod", Hash: "h4", CreatedAt: t0}), ErrConflict)
		wantErr(t, "same ID", s.CreateToken(ctx, Token{ID: "t1", AccountID: "acc1", Name: "other", Hash: "h5", CreatedAt: t0}), ErrConflict)

		list, err := s.ListTokens(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Token{tok1, tok2}, list); diff != "" {
			t.Errorf("ListTokens (-want +got):\n%s", diff)
		}

		lookups := []struct {
			name    string
			account string
			hash    string
			want    Token
			wantErr error
		}{
			{"own token", "acc1", "h1", tok1, nil},
			{"other account's token", "acc1", "h3", Token{}, ErrNotFound},
			{"unknown hash", "acc1", "zz", Token{}, ErrNotFound},
		}
		for _, tt := range lookups {
			got, err := s.TokenByHash(ctx, tt.account, tt.hash)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: TokenByHash error %v, want %v", tt.name, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: TokenByHash (-want +got):\n%s", tt.name, diff)
			}
		}
		got, err := s.TokenByID(ctx, "t3")
		if err != nil || !cmp.Equal(got, tok3) {
			t.Errorf("TokenByID(t3) = %+v, %v", got, err)
		}
		_, err = s.TokenByID(ctx, "nope")
		wantErr(t, "TokenByID unknown", err, ErrNotFound)

		// Revoke: idempotent, keeps the first time, keeps the name taken.
		revoked, err := s.RevokeToken(ctx, "acc1", "prod", at(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		want := tok1
		want.RevokedAt = ptr(at(time.Hour))
		if diff := cmp.Diff(want, revoked); diff != "" {
			t.Errorf("RevokeToken (-want +got):\n%s", diff)
		}
		revoked, err = s.RevokeToken(ctx, "acc1", "prod", at(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, revoked); diff != "" {
			t.Errorf("second RevokeToken (-want +got):\n%s", diff)
		}
		got, err = s.TokenByHash(ctx, "acc1", "h1")
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("TokenByHash of revoked token = %+v, %v", got, err)
		}
		_, err = s.RevokeToken(ctx, "acc1", "nope", t0)
		wantErr(t, "revoke unknown", err, ErrNotFound)
		_, err = s.RevokeToken(ctx, "acc2", "dev", t0)
		wantErr(t, "revoke other account's name", err, ErrNotFound)
		wantErr(t, "reuse revoked name", s.CreateToken(ctx, Token{ID: "t9", AccountID: "acc1", Name: "prod", Hash: "h9", CreatedAt: t0}), ErrConflict)
		other, err := s.TokenByID(ctx, "t3")
		if err != nil || other.RevokedAt != nil {
			t.Errorf("revoking acc1/prod touched acc2/prod: %+v, %v", other, err)
		}
	})
}

func TestInstances(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()

		in1 := Instance{
			ID: "i1", AccountID: "acc1", IdentityKey: "build|host-a|10.0.0.1", Name: "build", Hostname: "host-a",
			IP: "10.0.0.1", Tags: []string{"linux", "x86"}, Version: "1.0.0", Type: "SHELL", TokenID: "t1",
			Capacity: 4, Connection: "", RegisteredAt: t0,
		}
		got, err := s.UpsertInstance(ctx, in1)
		if err != nil {
			t.Fatal(err)
		}
		want := in1
		want.Generation = 1
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("first UpsertInstance (-want +got):\n%s", diff)
		}
		if err := s.DeregisterInstance(ctx, "i1", at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, err = s.GetInstance(ctx, "i1")
		if err != nil || got.DeregisteredAt == nil || !got.DeregisteredAt.Equal(at(time.Minute)) {
			t.Fatalf("after deregister: %+v, %v", got, err)
		}

		// The same identity registers again with a new ID: same row, every
		// other field updated, generation bumped, deregistration cleared.
		again := Instance{
			ID: "i1-new", AccountID: "acc1", IdentityKey: in1.IdentityKey, Name: "build", Hostname: "host-a",
			IP: "10.0.0.1", Tags: []string{"linux"}, Version: "1.1.0", Type: "SHELL", TokenID: "t2",
			Capacity: 8, Connection: protocol.ConnPolling, Draining: true, RegisteredAt: at(time.Hour),
			LastHeartbeat: ptr(at(time.Hour)),
		}
		got, err = s.UpsertInstance(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		want = again
		want.ID = "i1"
		want.RegisteredAt = t0
		want.Generation = 2
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("re-register (-want +got):\n%s", diff)
		}
		stored, err := s.GetInstance(ctx, "i1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, stored); diff != "" {
			t.Errorf("GetInstance after re-register (-want +got):\n%s", diff)
		}
		_, err = s.GetInstance(ctx, "i1-new")
		wantErr(t, "GetInstance of the unused ID", err, ErrNotFound)

		// Same identity key in another account is another instance; an ID
		// taken by another identity is a conflict.
		in2 := Instance{ID: "i2", AccountID: "acc2", IdentityKey: in1.IdentityKey, Name: "build", Hostname: "host-a", RegisteredAt: t0}
		if got, err = s.UpsertInstance(ctx, in2); err != nil || got.Generation != 1 || got.ID != "i2" {
			t.Fatalf("other account: %+v, %v", got, err)
		}
		_, err = s.UpsertInstance(ctx, Instance{ID: "i2", AccountID: "acc1", IdentityKey: "other", RegisteredAt: t0})
		wantErr(t, "taken ID", err, ErrConflict)

		in3 := Instance{ID: "i3", AccountID: "acc1", IdentityKey: "alpha|host-z", Name: "alpha", Hostname: "host-z", RegisteredAt: t0}
		in4 := Instance{ID: "i4", AccountID: "acc1", IdentityKey: "build|host-0", Name: "build", Hostname: "host-0", RegisteredAt: t0}
		for _, in := range []Instance{in3, in4} {
			if _, err := s.UpsertInstance(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		list, err := s.ListInstances(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, in := range list {
			ids = append(ids, in.ID)
		}
		if diff := cmp.Diff([]string{"i3", "i4", "i1"}, ids); diff != "" {
			t.Errorf("ListInstances order (-want +got):\n%s", diff)
		}

		// Touch: batched, unknown IDs reported.
		missing, err := s.TouchInstances(ctx, []InstanceTouch{
			{ID: "i3", LastHeartbeat: at(2 * time.Hour), Connection: protocol.ConnWebSocket, Draining: true},
			{ID: "ghost", LastHeartbeat: at(2 * time.Hour)},
			{ID: "i4", LastHeartbeat: at(3 * time.Hour), Connection: protocol.ConnPolling},
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"ghost"}, missing); diff != "" {
			t.Errorf("TouchInstances missing (-want +got):\n%s", diff)
		}
		got3, _ := s.GetInstance(ctx, "i3")
		got4, _ := s.GetInstance(ctx, "i4")
		want3, want4 := in3, in4
		want3.Generation, want4.Generation = 1, 1
		want3.LastHeartbeat, want3.Connection, want3.Draining = ptr(at(2*time.Hour)), protocol.ConnWebSocket, true
		want4.LastHeartbeat, want4.Connection = ptr(at(3*time.Hour)), protocol.ConnPolling
		if diff := cmp.Diff([]Instance{want3, want4}, []Instance{got3, got4}, equateEmpty); diff != "" {
			t.Errorf("after TouchInstances (-want +got):\n%s", diff)
		}
		if _, err := s.TouchInstances(ctx, nil); err != nil {
			t.Errorf("TouchInstances(nil): %v", err)
		}
		wantErr(t, "deregister unknown", s.DeregisterInstance(ctx, "ghost", t0), ErrNotFound)
	})
}
