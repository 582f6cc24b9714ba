package store

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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

// TestMigrateFrom0001 builds a database the way a build with only
// migration 0001 left it, with rows in it, and checks that Open applies
// the later migrations and gives the old rows account-level scope.
func TestMigrateFrom0001(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		path := b.newDSN(t)

		old := b.openRaw(t, path)
		body, err := migrationFS.ReadFile("migrations/0001_init.sql")
		if err != nil {
			t.Fatal(err)
		}
		spec, err := encodeSpec(newTask("t1", "acc1", t0).Spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`,
			string(body),
			`INSERT INTO schema_migrations (version, applied_at) VALUES ('0001_init', 1)`,
			`INSERT INTO tokens (id, account_id, name, hash, created_at, revoked_at) VALUES ('tok1', 'acc1', 'prod', 'h1', 1, NULL)`,
			`INSERT INTO instances (id, account_id, identity_key, name, hostname, ip, tags, version, type, token_id,
				capacity, generation, connection, draining, registered_at, last_heartbeat, deregistered_at)
				VALUES ('i1', 'acc1', 'build|host-a', 'build', 'host-a', '', '[]', '1.0', 'SHELL', 'tok1', 2, 1, '', 0, 1, NULL, NULL)`,
			`INSERT INTO tasks (id, account_id, type, spec, status, exit_code, error, http_result, timeout_ms,
				queue_timeout_ms, retries, attempts, epoch, instance_id, delegate_name, delegate_hostname,
				denied_instances, created_at, acquired_at, started_at, finished_at, queue_deadline,
				lease_expires_at, log_bytes, log_omitted)
				VALUES ('t1', 'acc1', 'shell', '` + spec + `', 'queued', NULL, '', NULL, 1000, 1000, 0, 0, 0, '', '', '',
				'[]', 1, NULL, NULL, NULL, 2, NULL, 0, 0)`,
		} {
			if _, err := old.ExecContext(ctx, q); err != nil {
				t.Fatalf("build 0001 database: %v\n%s", err, q)
			}
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}

		s := openAt(t, path)
		var versions []string
		rows, err := s.reader.QueryContext(ctx, "SELECT version FROM schema_migrations ORDER BY version")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			versions = append(versions, v)
		}
		rows.Close()
		if diff := cmp.Diff(embeddedVersions(t), versions); diff != "" {
			t.Errorf("versions (-want +got):\n%s", diff)
		}

		tok, err := s.TokenByID(ctx, "tok1")
		if err != nil || tok.Org != "" || tok.Project != "" || tok.Name != "prod" {
			t.Errorf("old token: %+v, %v", tok, err)
		}
		in, err := s.GetInstance(ctx, "i1")
		if err != nil || in.Org != "" || in.Project != "" || in.Capacity != 2 || in.Description != "" {
			t.Errorf("old instance: %+v, %v", in, err)
		}
		var org, project string
		if err := s.reader.QueryRowContext(ctx, "SELECT org, project FROM tasks WHERE id = 't1'").Scan(&org, &project); err != nil || org != "" || project != "" {
			t.Errorf("old task: org=%q project=%q, %v", org, project, err)
		}
		if task := mustGet(t, s, "acc1", "t1"); task.Spec.Org != "" || task.Spec.Shell == nil {
			t.Errorf("old task spec: %+v", task.Spec)
		}
		// The old rows work with the new features.
		if err := s.CreateOrg(ctx, Org{AccountID: "acc1", Name: "eng", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteOrg(ctx, "acc1", "eng"); err != nil {
			t.Errorf("the old account-level token holds a new org: %v", err)
		}
		if _, err := s.UpsertInstance(ctx, Instance{ID: "x", AccountID: "acc1", IdentityKey: "build|host-a", TokenID: "tok1", Org: "eng", RegisteredAt: t0}); err != nil {
			t.Fatal(err)
		}
		if in, err := s.GetInstance(ctx, "i1"); err != nil || in.Org != "eng" || in.Generation != 2 {
			t.Errorf("re-registered old instance: %+v, %v", in, err)
		}
	})
}

// embeddedVersions lists the versions of the embedded migrations, in order.
func embeddedVersions(t *testing.T) []string {
	t.Helper()
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		out = append(out, strings.TrimSuffix(path.Base(n), ".sql"))
	}
	slices.Sort(out)
	return out
}

// TestMigrate0021QueuedTasksFailClearly: a database from before 0021 (its
// columns dropped and its row removed, then migrated again): the secrets
// get ids, a queued task that references one was never bound and fails
// its claim saying to submit it again (it is not resolved by name), and
// a task bound after the upgrade gets its value.
func TestMigrate0021QueuedTasksFailClearly(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		dsn := b.newDSN(t)
		old, err := OpenWith(ctx, dsn, Options{Keys: testKeys})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.CreateSecret(ctx, Secret{AccountID: "acc1", Org: "o1", Name: "DB", CreatedAt: t0}, "org-value"); err != nil {
			t.Fatal(err)
		}
		task := func(id string) Task {
			tk := newTask(id, "acc1", t0)
			tk.Spec.Org, tk.Spec.Project, tk.Spec.Shell.Script = "o1", "p1", "echo ${secrets.DB}"
			return tk
		}
		mustCreate(t, old, task("t1"))
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		raw := b.openRaw(t, dsn)
		for _, q := range []string{
			`ALTER TABLE secrets DROP COLUMN id`,
			`ALTER TABLE tasks DROP COLUMN secret_bindings`,
			`ALTER TABLE pipeline_runs DROP COLUMN acts_kind`,
			`ALTER TABLE pipeline_runs DROP COLUMN acts_id`,
			`DELETE FROM schema_migrations WHERE version = '0021_secret_bindings'`,
		} {
			if _, err := raw.ExecContext(ctx, q); err != nil {
				t.Fatalf("undo 0021: %v\n%s", err, q)
			}
		}
		s := openAt(t, dsn)
		sec, err := s.GetSecret(ctx, "acc1", "o1", "", "DB")
		if err != nil || sec.ID != "sec_acc1/o1//DB" {
			t.Errorf("secret from before 0021: %+v, %v; want an id made of its row", sec, err)
		}
		_, err = s.ClaimTask(ctx, claimFor("t1", "i1"), t0)
		var missing *MissingSecretsError
		if !errors.As(err, &missing) || !strings.Contains(err.Error(), "never bound to the task") || !strings.Contains(err.Error(), "submit the task again") {
			t.Errorf("claim of a task queued before 0021: %v; want it refused, saying to submit it again", err)
		}
		t2 := task("t2")
		t2.SecretBindings = []SecretBinding{BindingOf(sec)}
		mustCreate(t, s, t2)
		if got, err := s.ClaimTask(ctx, claimFor("t2", "i1"), t0); err != nil || got.StoredSecrets["DB"] != "org-value" {
			t.Errorf("claim of a task bound after 0021: %v, %v", got.StoredSecrets, err)
		}
	})
}
