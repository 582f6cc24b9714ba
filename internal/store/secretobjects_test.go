package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSecretObjects: create, read, update, list and delete secrets at the
// three scopes; values are sealed, never returned by a metadata read, and
// a task takes the closest scope's value.
func TestSecretObjects(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.newDSN(t)
		s := openAt(t, dsn)
		ctx := context.Background()
		acct, proj, org := newSecret(t), newSecret(t), newSecret(t)
		create := func(o, p, name, value string) Secret {
			t.Helper()
			sec, err := s.CreateSecret(ctx, Secret{AccountID: "acc1", Org: o, Project: p, Name: name, CreatedAt: t0}, value)
			if err != nil {
				t.Fatal(err)
			}
			return sec
		}
		got := create("", "", "DB", acct)
		if !strings.HasPrefix(got.ID, "sec_") {
			t.Errorf("CreateSecret: ID %q", got.ID)
		}
		if diff := cmp.Diff(Secret{AccountID: "acc1", ID: got.ID, Name: "DB", Version: 1, CreatedAt: t0, UpdatedAt: t0}, got); diff != "" {
			t.Errorf("CreateSecret (-want +got):\n%s", diff)
		}
		create("o1", "", "DB", org)
		create("o1", "p1", "DB", proj)
		create("o1", "", "ORG_ONLY", org+"-x")
		if _, err := s.CreateSecret(ctx, Secret{AccountID: "acc1", Name: "DB", CreatedAt: t0}, "again"); !errors.Is(err, ErrConflict) {
			t.Errorf("second DB at account scope: %v, want ErrConflict", err)
		}
		for _, tc := range []struct {
			org, project string
			want         map[string]string
			missing      []string
		}{
			{"", "", map[string]string{"DB": acct}, []string{"ORG_ONLY", "NONE"}},
			{"o1", "", map[string]string{"DB": org, "ORG_ONLY": org + "-x"}, []string{"NONE"}},
			{"o1", "p1", map[string]string{"DB": proj, "ORG_ONLY": org + "-x"}, []string{"NONE"}},
			{"o1", "p2", map[string]string{"DB": org, "ORG_ONLY": org + "-x"}, []string{"NONE"}},
			{"o2", "p1", map[string]string{"DB": acct}, []string{"ORG_ONLY", "NONE"}},
		} {
			values, missing, err := s.SecretValues(ctx, "acc1", tc.org, tc.project, []string{"DB", "ORG_ONLY", "NONE"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, values); diff != "" {
				t.Errorf("%s/%s values (-want +got):\n%s", tc.org, tc.project, diff)
			}
			if diff := cmp.Diff(tc.missing, missing); diff != "" {
				t.Errorf("%s/%s missing (-want +got):\n%s", tc.org, tc.project, diff)
			}
			found, err := s.FindSecrets(ctx, "acc1", tc.org, tc.project, []string{"DB", "ORG_ONLY", "NONE"})
			if err != nil || len(found) != len(tc.want) {
				t.Errorf("FindSecrets %s/%s: %v, %v", tc.org, tc.project, found, err)
			}
		}
		if f, _ := s.FindSecrets(ctx, "acc1", "o1", "p1", []string{"DB"}); f["DB"].Project != "p1" {
			t.Errorf("FindSecrets took %+v for a task of o1/p1", f["DB"])
		}
		if _, missing, _ := s.SecretValues(ctx, "acc2", "", "", []string{"DB"}); len(missing) != 1 {
			t.Error("another account's task sees the secret")
		}

		upd, err := s.UpdateSecret(ctx, "acc1", "o1", "p1", "DB", proj+"-v2", at(time.Minute))
		if err != nil || upd.Version != 2 || !upd.UpdatedAt.Equal(at(time.Minute)) {
			t.Errorf("UpdateSecret: %+v, %v", upd, err)
		}
		if v, _, _ := s.SecretValues(ctx, "acc1", "o1", "p1", []string{"DB"}); v["DB"] != proj+"-v2" {
			t.Errorf("value after update: %q", v["DB"])
		}
		if _, err := s.UpdateSecret(ctx, "acc1", "o9", "", "DB", "x", at(time.Minute)); !errors.Is(err, ErrNotFound) {
			t.Errorf("update of a missing secret: %v", err)
		}
		list, err := s.ListSecrets(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range list {
			names = append(names, fmt.Sprintf("%s/%s/%s v%d", l.Org, l.Project, l.Name, l.Version))
		}
		if diff := cmp.Diff([]string{"//DB v1", "o1//DB v1", "o1//ORG_ONLY v1", "o1/p1/DB v2"}, names); diff != "" {
			t.Errorf("ListSecrets (-want +got):\n%s", diff)
		}
		if g, err := s.GetSecret(ctx, "acc1", "o1", "p1", "DB"); err != nil || g.Version != 2 {
			t.Errorf("GetSecret: %+v, %v", g, err)
		}
		if err := s.DeleteSecret(ctx, "acc1", "o1", "p1", "DB"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSecret(ctx, "acc1", "o1", "p1", "DB"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second delete: %v", err)
		}
		if v, _, _ := s.SecretValues(ctx, "acc1", "o1", "p1", []string{"DB"}); v["DB"] != org {
			t.Errorf("after the project's is deleted the task takes %q, want the org's", v["DB"])
		}
		assertNowhere(t, s, dsn, acct, org, proj, proj+"-v2")
	})
}

// TestSecretObjectsAreBoundToTheirRow: a sealed value copied to another
// secret's row does not open there.
func TestSecretObjectsAreBoundToTheirRow(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, n := range []string{"A", "B"} {
			if _, err := s.CreateSecret(ctx, Secret{AccountID: "acc1", Name: n, CreatedAt: t0}, "value-"+n); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.writer.ExecContext(ctx, s.rebind(`UPDATE secrets SET value = (SELECT value FROM secrets WHERE name = 'A') WHERE name = 'B'`)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SecretValues(ctx, "acc1", "", "", []string{"B"}); err == nil {
			t.Error("a value copied from another row opened")
		}
	})
}

// TestRotationReseals stored secrets: after a rotation every secret is
// sealed with the new key and opens with it alone.
func TestRotationResealsSecretObjects(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.newDSN(t)
		ctx := context.Background()
		a := mustRing(t, 1)
		sa := openWithKeys(t, dsn, a)
		if _, err := sa.SessionKey(ctx); err != nil {
			t.Fatal(err)
		}
		n := resealBatch + 3 // more than a batch
		for i := range n {
			if _, err := sa.CreateSecret(ctx, Secret{AccountID: "acc1", Org: "o1", Name: fmt.Sprintf("S%d", i), CreatedAt: t0}, fmt.Sprintf("v%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := sa.SealedKeys(ctx); err != nil || !cmp.Equal(got, map[string]int{a.Primary(): n + 1}) {
			t.Fatalf("SealedKeys before: %v, %v", got, err)
		}
		ba := mustRing(t, 2, 1)
		sba := openWithKeys(t, dsn, ba)
		rep, err := sba.Reseal(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(SealReport{SessionKey: true, Secrets: n}, rep); diff != "" {
			t.Errorf("Reseal (-want +got):\n%s", diff)
		}
		if got, err := sba.SealedKeys(ctx); err != nil || !cmp.Equal(got, map[string]int{ba.Primary(): n + 1}) {
			t.Errorf("SealedKeys after: %v, %v", got, err)
		}
		if rep, err := sba.Reseal(ctx); err != nil || rep.Changed() {
			t.Errorf("second Reseal: %+v, %v", rep, err)
		}
		sb := openWithKeys(t, dsn, mustRing(t, 2))
		v, missing, err := sb.SecretValues(ctx, "acc1", "o1", "", []string{"S0", fmt.Sprintf("S%d", n-1)})
		if err != nil || len(missing) > 0 || v["S0"] != "v0" {
			t.Errorf("with the new key alone: %v, %v, %v", v, missing, err)
		}
		if _, _, err := openWithKeys(t, dsn, a).SecretValues(ctx, "acc1", "o1", "", []string{"S0"}); err == nil {
			t.Error("the old key alone still opens a stored secret")
		}
	})
}

// TestClaimHandsOutTheBoundSecret: a claim hands out the secret each name
// was bound to when the task was created, at that version, and never
// another scope's secret of the same name: a bound secret deleted,
// deleted and created again, or updated fails the claim with a
// *MissingSecretsError that says which and what to do, as does a task
// from before bindings (its column ”).
func TestClaimHandsOutTheBoundSecret(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := openAt(t, b.newDSN(t))
		ctx := context.Background()
		if _, err := s.CreateSecret(ctx, Secret{AccountID: "acc1", Org: "o1", Name: "DB", CreatedAt: t0}, "org-value"); err != nil {
			t.Fatal(err)
		}
		n := 0
		// task creates a task at o1/p1 that references DB, bound to the
		// project's DB as it is now.
		task := func() string {
			t.Helper()
			_ = s.DeleteSecret(ctx, "acc1", "o1", "p1", "DB")
			sec, err := s.CreateSecret(ctx, Secret{AccountID: "acc1", Org: "o1", Project: "p1", Name: "DB", CreatedAt: t0}, "project-value")
			if err != nil {
				t.Fatal(err)
			}
			n++
			tk := newTask(fmt.Sprintf("t%d", n), "acc1", t0)
			tk.Spec.Org, tk.Spec.Project = "o1", "p1"
			tk.Spec.Shell.Script = "echo ${secrets.DB}"
			tk.SecretBindings = []SecretBinding{BindingOf(sec)}
			mustCreate(t, s, tk)
			return tk.ID
		}
		id := task()
		got, err := s.ClaimTask(ctx, claimFor(id, "i1"), t0)
		if err != nil || got.StoredSecrets["DB"] != "project-value" {
			t.Errorf("unchanged: %v, %v; want the project's value", got.StoredSecrets, err)
		}
		// Its delegate is lost and the task is queued again (a retry): the
		// next claim hands out the same binding.
		if _, err := s.ExpireLeases(ctx, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ClaimTask(ctx, claimFor(id, "i2"), t0.Add(time.Hour)); err != nil || got.Attempts != 2 || got.StoredSecrets["DB"] != "project-value" {
			t.Errorf("retry: attempt %d, %v, %v; want the project's value", got.Attempts, got.StoredSecrets, err)
		}
		for _, tc := range []struct {
			name   string
			change func()
			want   string
		}{
			{"deleted", func() { _ = s.DeleteSecret(ctx, "acc1", "o1", "p1", "DB") },
				"secret DB (project o1/p1) was deleted after the task was submitted"},
			{"replaced", func() {
				_ = s.DeleteSecret(ctx, "acc1", "o1", "p1", "DB")
				if _, err := s.CreateSecret(ctx, Secret{AccountID: "acc1", Org: "o1", Project: "p1", Name: "DB", CreatedAt: t0}, "another"); err != nil {
					t.Fatal(err)
				}
			}, "secret DB (project o1/p1) was deleted and created again after the task was submitted"},
			{"updated", func() {
				if _, err := s.UpdateSecret(ctx, "acc1", "o1", "p1", "DB", "newer", t0); err != nil {
					t.Fatal(err)
				}
			}, "checked at version 1, it is at version 2 now"},
			{"unbound", func() {
				if _, err := s.w(nil).exec(ctx, `UPDATE tasks SET secret_bindings = '' WHERE id = ?`, fmt.Sprintf("t%d", n)); err != nil {
					t.Fatal(err)
				}
			}, "secret DB was never bound to the task"},
		} {
			id := task()
			tc.change()
			got, err := s.ClaimTask(ctx, claimFor(id, "i1"), t0)
			var missing *MissingSecretsError
			if !errors.As(err, &missing) || !strings.Contains(err.Error(), tc.want) || got.StoredSecrets != nil {
				t.Errorf("%s: %v (secrets %v); want a *MissingSecretsError saying %q", tc.name, err, got.StoredSecrets, tc.want)
				continue
			}
			if strings.Contains(err.Error(), "org-value") || got.Status != "queued" {
				t.Errorf("%s: %v, task %s", tc.name, err, got.Status)
			}
		}
	})
}
