package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPrincipalsGroupsRolesBindings(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		alice := Principal{ID: "u1", AccountID: "acc1", Kind: "user", Name: "alice", Display: "Alice", PasswordHash: "$argon2id$x", CreatedAt: t0}
		bot := Principal{ID: "u2", AccountID: "acc1", Kind: "service_account", Name: "bot", CreatedAt: t0}
		for _, p := range []Principal{alice, bot, {ID: "u3", AccountID: "acc2", Kind: "user", Name: "alice", CreatedAt: t0}} {
			if err := s.CreatePrincipal(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		wantErr(t, "a user named like a service account", s.CreatePrincipal(ctx, Principal{ID: "u9", AccountID: "acc1", Kind: "user", Name: "bot", CreatedAt: t0}), ErrConflict)
		users, err := s.ListPrincipals(ctx, "acc1", "user")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Principal{alice}, users); diff != "" {
			t.Errorf("users (-want +got):\n%s", diff)
		}
		got, err := s.UpdatePrincipal(ctx, "acc1", "alice", true, nil)
		if err != nil || !got.Disabled || got.PasswordHash != alice.PasswordHash {
			t.Errorf("disable: %+v, %v", got, err)
		}
		if p, err := s.PrincipalByID(ctx, "u1"); err != nil || !p.Disabled {
			t.Errorf("disabled user reads back %+v, %v", p, err)
		}
		_, err = s.UpdatePrincipal(ctx, "acc1", "nobody", true, nil)
		wantErr(t, "disable an unknown user", err, ErrNotFound)

		if err := s.CreateGroup(ctx, Group{ID: "g1", AccountID: "acc1", Name: "ops", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "same group", s.CreateGroup(ctx, Group{ID: "g2", AccountID: "acc1", Name: "ops", CreatedAt: t0}), ErrConflict)
		for _, id := range []string{"u1", "u2", "u1"} {
			if err := s.SetGroupMember(ctx, "g1", id, true); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetGroupMember(ctx, "g1", "u2", false); err != nil {
			t.Fatal(err)
		}
		gs, err := s.ListGroups(ctx, "acc1")
		if err != nil || len(gs) != 1 || !cmp.Equal(gs[0].Members, []string{"u1"}) {
			t.Errorf("groups: %+v, %v", gs, err)
		}
		if ids, err := s.GroupsOf(ctx, "u1"); err != nil || !cmp.Equal(ids, []string{"g1"}) {
			t.Errorf("groups of u1: %v, %v", ids, err)
		}

		role := Role{AccountID: "acc1", Name: "deleter", Description: "d", Permissions: []string{"delegate:delete"}, CreatedAt: t0}
		if err := s.CreateRole(ctx, role); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "same role", s.CreateRole(ctx, role), ErrConflict)
		bs := []Binding{
			{ID: "b1", AccountID: "acc1", Role: "deleter", SubjectKind: "user", SubjectID: "u1", Org: "o1", CreatedAt: t0},
			{ID: "b2", AccountID: "acc1", Role: "viewer", SubjectKind: "group", SubjectID: "g1", CreatedAt: t0},
			{ID: "b3", AccountID: "acc1", Role: "viewer", SubjectKind: "service_account", SubjectID: "u2", CreatedAt: t0},
		}
		for _, bd := range bs {
			if err := s.CreateBinding(ctx, bd); err != nil {
				t.Fatal(err)
			}
		}
		dup := bs[0]
		dup.ID = "b9"
		wantErr(t, "same binding", s.CreateBinding(ctx, dup), ErrConflict)
		wantErr(t, "delete a bound role", s.DeleteRole(ctx, "acc1", "deleter"), ErrInUse)
		mine, err := s.ListBindings(ctx, "acc1", "u1", "g1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Binding{bs[1], bs[0]}, mine); diff != "" {
			t.Errorf("bindings of u1 and g1 (-want +got):\n%s", diff)
		}

		// Deleting a user drops its bindings and memberships and revokes
		// its keys and sessions.
		if err := s.CreateAPIKey(ctx, APIKey{ID: "ak1", AccountID: "acc1", Name: "k", Hash: "h1", OwnerKind: "user", OwnerID: "u1", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		ws := WebSession{ID: "s1", AccountID: "acc1", PrincipalID: "u1", Hash: "sh1", CreatedAt: t0, ExpiresAt: at(time.Hour)}
		if err := s.CreateWebSession(ctx, ws); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeletePrincipal(ctx, "acc1", "alice", at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if k, err := s.APIKeyByHash(ctx, "h1"); err != nil || k.RevokedAt == nil {
			t.Errorf("key of a deleted user: %+v, %v", k, err)
		}
		if got, err := s.WebSessionByHash(ctx, "sh1"); err != nil || got.RevokedAt == nil {
			t.Errorf("session of a deleted user: %+v, %v", got, err)
		}
		if left, err := s.ListBindings(ctx, "acc1", "u1"); err != nil || len(left) != 0 {
			t.Errorf("bindings of a deleted user: %+v, %v", left, err)
		}
		if err := s.DeleteBinding(ctx, bs[1]); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "delete a deleted binding", s.DeleteBinding(ctx, bs[1]), ErrNotFound)
		if err := s.DeleteRole(ctx, "acc1", "deleter"); err != nil {
			t.Errorf("delete an unbound role: %v", err)
		}
		if err := s.DeleteGroup(ctx, "acc1", "ops"); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "delete a deleted group", s.DeleteGroup(ctx, "acc1", "ops"), ErrNotFound)
	})
}

func TestWebSessions(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		old := WebSession{ID: "s0", AccountID: "acc1", PrincipalID: "u1", Hash: "h0", CreatedAt: t0, ExpiresAt: at(time.Minute)}
		cur := WebSession{ID: "s1", AccountID: "acc1", PrincipalID: "u1", Hash: "h1", CreatedAt: at(time.Hour), ExpiresAt: at(2 * time.Hour)}
		for _, ws := range []WebSession{old, cur} {
			if err := s.CreateWebSession(ctx, ws); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.WebSessionByHash(ctx, "h1")
		if diff := cmp.Diff(cur, got); err != nil || diff != "" {
			t.Fatalf("session: %v\n%s", err, diff)
		}
		if err := s.RevokeWebSession(ctx, "s1", at(time.Hour+time.Second)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.WebSessionByHash(ctx, "h1"); err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(at(time.Hour+time.Second)) {
			t.Errorf("revoked session: %+v, %v", got, err)
		}
		_, err = s.WebSessionByHash(ctx, "h0")
		wantErr(t, "an expired session after a revocation", err, ErrNotFound)
	})
}

func TestSignInLinks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		old := SignInLink{ID: "l0", AccountID: "acc1", PrincipalID: "u1", Hash: "lh0", CreatedAt: t0, ExpiresAt: at(time.Minute)}
		cur := SignInLink{ID: "l1", AccountID: "acc1", PrincipalID: "u1", Hash: "lh1", CreatedAt: at(time.Hour), ExpiresAt: at(time.Hour + 5*time.Minute)}
		late := SignInLink{ID: "l2", AccountID: "acc1", PrincipalID: "u1", Hash: "lh2", CreatedAt: at(time.Hour), ExpiresAt: at(time.Hour + 5*time.Minute)}
		for _, l := range []SignInLink{old, cur, late} {
			if err := s.CreateSignInLink(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		_, err := s.UseSignInLink(ctx, "lh0", at(time.Hour))
		wantErr(t, "a link deleted once expired", err, ErrNotFound)
		got, err := s.UseSignInLink(ctx, "lh1", at(time.Hour+time.Minute))
		if err != nil || got.ID != "l1" || got.PrincipalID != "u1" || got.UsedAt == nil {
			t.Fatalf("use: %+v, %v", got, err)
		}
		_, err = s.UseSignInLink(ctx, "lh1", at(time.Hour+2*time.Minute))
		wantErr(t, "a second use", err, ErrLinkUsed)
		_, err = s.UseSignInLink(ctx, "lh2", at(time.Hour+5*time.Minute))
		wantErr(t, "a use at expiry", err, ErrLinkUsed)
		_, err = s.UseSignInLink(ctx, "nope", at(time.Hour))
		wantErr(t, "an unknown link", err, ErrNotFound)
	})
}

func TestSetPasswordEndsSignIns(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, p := range []Principal{
			{ID: "u1", AccountID: "acc1", Kind: "user", Name: "alice", PasswordHash: "old", CreatedAt: t0},
			{ID: "u2", AccountID: "acc1", Kind: "user", Name: "bob", PasswordHash: "bob's", CreatedAt: t0},
		} {
			if err := s.CreatePrincipal(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		for _, ws := range []WebSession{
			{ID: "s1", AccountID: "acc1", PrincipalID: "u1", Hash: "h1", CreatedAt: t0, ExpiresAt: at(time.Hour)},
			{ID: "s2", AccountID: "acc1", PrincipalID: "u1", Hash: "h2", CreatedAt: t0, ExpiresAt: at(time.Hour)},
			{ID: "s3", AccountID: "acc1", PrincipalID: "u2", Hash: "h3", CreatedAt: t0, ExpiresAt: at(time.Hour)},
		} {
			if err := s.CreateWebSession(ctx, ws); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range []SignInLink{
			{ID: "l1", AccountID: "acc1", PrincipalID: "u1", Hash: "lh1", CreatedAt: t0, ExpiresAt: at(5 * time.Minute)},
			{ID: "l2", AccountID: "acc1", PrincipalID: "u2", Hash: "lh2", CreatedAt: t0, ExpiresAt: at(5 * time.Minute)},
		} {
			if err := s.CreateSignInLink(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		p, err := s.SetPassword(ctx, "acc1", "alice", "new", "s2", at(time.Minute))
		if err != nil || p.ID != "u1" || p.PasswordHash != "new" {
			t.Fatalf("set password: %+v, %v", p, err)
		}
		if got, err := s.GetPrincipal(ctx, "acc1", "alice"); err != nil || got.PasswordHash != "new" {
			t.Errorf("alice after: %+v, %v", got, err)
		}
		for hash, revoked := range map[string]bool{"h1": true, "h2": false, "h3": false} {
			ws, err := s.WebSessionByHash(ctx, hash)
			if err != nil || (ws.RevokedAt != nil) != revoked {
				t.Errorf("session %s: %+v, %v; want revoked %v", hash, ws, err, revoked)
			}
		}
		_, err = s.UseSignInLink(ctx, "lh1", at(2*time.Minute))
		wantErr(t, "alice's unused link", err, ErrNotFound)
		if _, err := s.UseSignInLink(ctx, "lh2", at(2*time.Minute)); err != nil {
			t.Errorf("bob's link: %v", err)
		}
		_, err = s.SetPassword(ctx, "acc1", "nobody", "x", "", at(time.Minute))
		wantErr(t, "an unknown user", err, ErrNotFound)
	})
}

// UpdateRole changes a custom role in place and returns it as it was, so
// the caller can say what changed.
func TestUpdateRole(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		was := Role{AccountID: "acc1", Name: "deleter", Description: "d", Permissions: []string{"delegate:delete"}, CreatedAt: t0}
		if err := s.CreateRole(ctx, was); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateRole(ctx, Role{AccountID: "acc2", Name: "deleter", Description: "other", Permissions: []string{"task:view"}, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		words := "new words"
		old, now, err := s.UpdateRole(ctx, "acc1", "deleter", RoleChange{Description: &words, Permissions: []string{"delegate:delete", "delegate:view"}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(was, old); diff != "" {
			t.Errorf("the role as it was (-want +got):\n%s", diff)
		}
		if now.Description != words || len(now.Permissions) != 2 {
			t.Errorf("the role as it is: %+v", now)
		}
		rs, err := s.ListRoles(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		want := []Role{{AccountID: "acc1", Name: "deleter", Description: "new words", Permissions: []string{"delegate:delete", "delegate:view"}, CreatedAt: t0}}
		if diff := cmp.Diff(want, rs); diff != "" {
			t.Errorf("roles after the update (-want +got):\n%s", diff)
		}
		if rs, err := s.ListRoles(ctx, "acc2"); err != nil || len(rs) != 1 || rs[0].Description != "other" {
			t.Errorf("the other account's role changed: %+v, %v", rs, err)
		}
		// A field left out stays: a description-only change keeps the
		// permissions as they are in the store, not as a caller read them.
		other := "only the words"
		if _, now, err := s.UpdateRole(ctx, "acc1", "deleter", RoleChange{Description: &other}); err != nil ||
			now.Description != other || !slices.Equal(now.Permissions, []string{"delegate:delete", "delegate:view"}) {
			t.Errorf("description only: %+v, %v", now, err)
		}
		if _, now, err := s.UpdateRole(ctx, "acc1", "deleter", RoleChange{Permissions: []string{"task:view"}}); err != nil ||
			now.Description != other || !slices.Equal(now.Permissions, []string{"task:view"}) {
			t.Errorf("permissions only: %+v, %v", now, err)
		}
		_, _, err = s.UpdateRole(ctx, "acc1", "nobody", RoleChange{Permissions: []string{"task:view"}})
		wantErr(t, "update an unknown role", err, ErrNotFound)
	})
}

// Add and Remove edit a role's permissions inside the update's own write:
// two concurrent edits adding different permissions both take effect.
func TestUpdateRoleAddRemove(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		if err := s.CreateRole(ctx, Role{AccountID: "acc1", Name: "r", Permissions: []string{"task:view"}, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			a, c := fmt.Sprintf("p%d:a", i), fmt.Sprintf("p%d:b", i)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for j, p := range []string{a, c} {
				wg.Go(func() {
					_, _, errs[j] = s.UpdateRole(ctx, "acc1", "r", RoleChange{Add: []string{p}})
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			rs, err := s.ListRoles(ctx, "acc1")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(rs[0].Permissions, a) || !slices.Contains(rs[0].Permissions, c) {
				t.Fatalf("round %d: two concurrent additions, the role has %v", i, rs[0].Permissions)
			}
		}
		// A removal stands for what it was expanded to; the role needs at
		// least one of it.
		_, now, err := s.UpdateRole(ctx, "acc1", "r", RoleChange{Remove: []RoleRemoval{{Asked: "p0:*", Permissions: []string{"p0:a", "p0:b", "p0:c"}}}, Add: []string{"x:y"}})
		if err != nil || slices.Contains(now.Permissions, "p0:a") || slices.Contains(now.Permissions, "p0:b") || !slices.Contains(now.Permissions, "x:y") {
			t.Errorf("remove p0:*, add x:y: %v, %v", now.Permissions, err)
		}
		_, _, err = s.UpdateRole(ctx, "acc1", "r", RoleChange{Remove: []RoleRemoval{{Asked: "p0:a", Permissions: []string{"p0:a"}}}})
		var ee *RoleEditError
		if !errors.As(err, &ee) || ee.Missing != "p0:a" {
			t.Errorf("remove a permission the role lacks: %v", err)
		}
		if err := s.CreateRole(ctx, Role{AccountID: "acc1", Name: "one", Permissions: []string{"task:view"}, CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		_, _, err = s.UpdateRole(ctx, "acc1", "one", RoleChange{Remove: []RoleRemoval{{Asked: "task:view", Permissions: []string{"task:view"}}}})
		if !errors.As(err, &ee) || ee.Missing != "" {
			t.Errorf("remove the last permission: %v", err)
		}
		rs, err := s.ListRoles(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Name == "one" && !slices.Equal(r.Permissions, []string{"task:view"}) {
				t.Errorf("a refused edit changed the role: %+v", r)
			}
		}
	})
}
