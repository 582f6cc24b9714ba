package store

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()

		admin := APIKey{ID: "ak1", AccountID: "acc1", Name: "admin", Hash: "h1", OwnerKind: "account", OwnerID: "acc1", CreatedAt: t0}
		ci := APIKey{ID: "ak2", AccountID: "acc1", Name: "ci", Hash: "h2", OwnerKind: "account", OwnerID: "acc1", CreatedAt: at(time.Minute), CreatedBy: "ak1"}
		other := APIKey{ID: "ak3", AccountID: "acc2", Name: "admin", Hash: "h3", OwnerKind: "account", OwnerID: "acc2", CreatedAt: at(-time.Minute)}
		for _, k := range []APIKey{ci, admin, other} {
			if err := s.CreateAPIKey(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		for _, tt := range []struct {
			what string
			k    APIKey
		}{
			{"same name in the account", APIKey{ID: "ak9", AccountID: "acc1", Name: "ci", Hash: "h9", OwnerKind: "account", CreatedAt: t0}},
			{"same hash", APIKey{ID: "ak9", AccountID: "acc1", Name: "fresh", Hash: "h2", OwnerKind: "account", CreatedAt: t0}},
			{"same ID", APIKey{ID: "ak2", AccountID: "acc1", Name: "fresh", Hash: "h9", OwnerKind: "account", CreatedAt: t0}},
		} {
			wantErr(t, tt.what, s.CreateAPIKey(ctx, tt.k), ErrConflict)
		}

		got, err := s.APIKeyByHash(ctx, "h2")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ci, got); diff != "" {
			t.Errorf("APIKeyByHash (-want +got):\n%s", diff)
		}
		for _, h := range []string{"h9", ""} {
			_, err := s.APIKeyByHash(ctx, h)
			wantErr(t, "unknown hash "+h, err, ErrNotFound)
		}
		list, err := s.ListAPIKeys(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]APIKey{admin, ci}, list); diff != "" {
			t.Errorf("ListAPIKeys, oldest first (-want +got):\n%s", diff)
		}

		// Last use: recorded, never moved back.
		if err := s.TouchAPIKeys(ctx, map[string]time.Time{"ak1": at(time.Hour), "ak2": at(2 * time.Hour), "nope": t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.TouchAPIKeys(ctx, map[string]time.Time{"ak1": at(30 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if k, _ := s.APIKeyByHash(ctx, "h1"); k.LastUsedAt == nil || !k.LastUsedAt.Equal(at(time.Hour)) {
			t.Errorf("admin last used %v, want %v", k.LastUsedAt, at(time.Hour))
		}

		// Revocation: ci by admin; then admin is the last active key.
		_, err = s.RevokeAPIKey(ctx, "acc1", "nope", "ak1", at(3*time.Hour), false)
		wantErr(t, "revoke unknown", err, ErrNotFound)
		_, err = s.RevokeAPIKey(ctx, "acc2", "ci", "ak3", at(3*time.Hour), true)
		wantErr(t, "revoke another account's key", err, ErrNotFound)
		rk, err := s.RevokeAPIKey(ctx, "acc1", "ci", "ak1", at(3*time.Hour), false)
		if err != nil {
			t.Fatal(err)
		}
		want := ci
		want.LastUsedAt, want.RevokedAt, want.RevokedBy = ptr(at(2*time.Hour)), ptr(at(3*time.Hour)), "ak1"
		if diff := cmp.Diff(want, rk); diff != "" {
			t.Errorf("RevokeAPIKey (-want +got):\n%s", diff)
		}
		again, err := s.RevokeAPIKey(ctx, "acc1", "ci", "ak3", at(4*time.Hour), false)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, again); diff != "" {
			t.Errorf("second revoke changed the key (-want +got):\n%s", diff)
		}
		if k, _ := s.APIKeyByHash(ctx, "h2"); k.RevokedAt == nil {
			t.Error("revoked key reads back active")
		}
		_, err = s.RevokeAPIKey(ctx, "acc1", "admin", "ak1", at(5*time.Hour), false)
		wantErr(t, "revoke the last active key", err, ErrLastAPIKey)
		if k, _ := s.APIKeyByHash(ctx, "h1"); k.RevokedAt != nil {
			t.Error("a refused revoke revoked the key")
		}
		if _, err := s.RevokeAPIKey(ctx, "acc1", "admin", "ak1", at(5*time.Hour), true); err != nil {
			t.Errorf("revoke the last active key when allowed: %v", err)
		}
		// Revoked keys keep their names.
		wantErr(t, "reuse a revoked key's name", s.CreateAPIKey(ctx, APIKey{ID: "ak8", AccountID: "acc1", Name: "ci", Hash: "h8", OwnerKind: "account", CreatedAt: t0}), ErrConflict)
		// The other account is untouched.
		if k, _ := s.APIKeyByHash(ctx, "h3"); k.RevokedAt != nil {
			t.Error("other account's key revoked")
		}
	})
}

// TestRevokeAPIKeysAtOnce has two keys revoke each other at the same time,
// many times over: the account always keeps one.
func TestRevokeAPIKeysAtOnce(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for round := range 20 {
			acct := fmt.Sprintf("acc%d", round)
			for i, name := range []string{"a", "b"} {
				k := APIKey{ID: acct + name, AccountID: acct, Name: name, Hash: acct + name, OwnerKind: "account", OwnerID: acct, CreatedAt: at(time.Duration(i))}
				if err := s.CreateAPIKey(ctx, k); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = s.RevokeAPIKey(ctx, acct, pair[1], acct+pair[0], t0, false)
				}()
			}
			wg.Wait()
			list, err := s.ListAPIKeys(ctx, acct)
			if err != nil {
				t.Fatal(err)
			}
			active := 0
			for _, k := range list {
				if k.RevokedAt == nil {
					active++
				}
			}
			if active != 1 {
				t.Fatalf("round %d: %d active keys after two keys revoked each other (errors %v), want 1", round, active, errs)
			}
		}
	})
}

// TestMigrateAPIKeys builds a database the way the migrations before 0007
// left it, with keys in it (two named "admin" in one account, as a lost
// admin.env made), and checks that Open turns them into key objects.
func TestMigrateAPIKeys(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		path := b.newDSN(t)

		old := b.openRaw(t, path)
		if _, err := old.ExecContext(ctx, `CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		files, err := fs.Glob(migrationFS, "migrations/*.sql")
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(files)
		for _, f := range files {
			version := strings.TrimSuffix(strings.TrimPrefix(f, "migrations/"), ".sql")
			if version >= "0007" {
				break
			}
			body, err := migrationFS.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := old.ExecContext(ctx, string(body)); err != nil {
				t.Fatalf("apply %s: %v", version, err)
			}
			if _, err := old.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ('`+version+`', 1)`); err != nil {
				t.Fatal(err)
			}
		}
		const h1, h2, h3 = "1111111111111111111111111111111111111111111111111111111111111111",
			"2222222222222222222222222222222222222222222222222222222222222222",
			"3333333333333333333333333333333333333333333333333333333333333333"
		for _, q := range []string{
			`INSERT INTO api_keys (hash, account_id, name, created_at) VALUES ('` + h2 + `', 'acc1', 'admin', 2000000)`,
			`INSERT INTO api_keys (hash, account_id, name, created_at) VALUES ('` + h1 + `', 'acc1', 'admin', 1000000)`,
			`INSERT INTO api_keys (hash, account_id, name, created_at) VALUES ('` + h3 + `', 'acc2', 'admin', 3000000)`,
		} {
			if _, err := old.ExecContext(ctx, q); err != nil {
				t.Fatalf("old key: %v", err)
			}
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}

		s := openAt(t, path)
		list, err := s.ListAPIKeys(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		want := []APIKey{
			{ID: "ak_" + h1[:20], AccountID: "acc1", Name: "admin", Hash: h1, OwnerKind: "account", OwnerID: "acc1", CreatedAt: fromMicros(1000000)},
			{ID: "ak_" + h2[:20], AccountID: "acc1", Name: "admin-22222222", Hash: h2, OwnerKind: "account", OwnerID: "acc1", CreatedAt: fromMicros(2000000)},
		}
		if diff := cmp.Diff(want, list); diff != "" {
			t.Errorf("migrated keys of acc1 (-want +got):\n%s", diff)
		}
		k, err := s.APIKeyByHash(ctx, h3)
		if err != nil || k.Name != "admin" || k.AccountID != "acc2" || k.OwnerID != "acc2" || k.RevokedAt != nil {
			t.Errorf("migrated key of acc2: %+v, %v", k, err)
		}
		// The migrated keys work as objects.
		if _, err := s.RevokeAPIKey(ctx, "acc1", "admin-22222222", want[0].ID, t0, false); err != nil {
			t.Errorf("revoke a migrated key: %v", err)
		}
		wantErr(t, "a new key with a migrated key's name", s.CreateAPIKey(ctx, APIKey{ID: "ak_new", AccountID: "acc1", Name: "admin", Hash: "hn", OwnerKind: "account", CreatedAt: t0}), ErrConflict)
	})
}
