package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// An instance identity is bound to the token that registered it: another
// token cannot take it over while that token is valid; the same token
// (restarts, replicas) can; once the token is revoked or deleted, another
// token may.
func TestInstanceBoundToToken(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, tk := range []Token{
			{ID: "tA", AccountID: "acc1", Name: "victim", Hash: "hA", CreatedAt: t0},
			{ID: "tB", AccountID: "acc1", Name: "attacker", Hash: "hB", CreatedAt: t0, Org: "eng", Project: "web"},
		} {
			if err := s.CreateToken(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		reg := func(id, token string) (Instance, error) {
			return s.UpsertInstance(ctx, Instance{ID: id, AccountID: "acc1", IdentityKey: "build|host-a|10.0.0.1",
				Name: "build", Hostname: "host-a", IP: "10.0.0.1", TokenID: token, RegisteredAt: t0})
		}
		if _, err := reg("i1", "tA"); err != nil {
			t.Fatal(err)
		}
		_, err := reg("i2", "tB")
		var ic *IdentityConflictError
		if !errors.As(err, &ic) || !errors.Is(err, ErrIdentityConflict) {
			t.Fatalf("another token: error %v, want an IdentityConflictError", err)
		}
		if diff := cmp.Diff(IdentityConflictError{InstanceID: "i1", TokenID: "tA", TokenName: "victim"}, *ic); diff != "" {
			t.Errorf("conflict (-want +got):\n%s", diff)
		}
		in, err := s.GetInstance(ctx, "i1")
		if err != nil || in.TokenID != "tA" || in.Generation != 1 {
			t.Fatalf("after the refused registration: %+v, %v; want it untouched", in, err)
		}
		// The same token again: a restart, as before.
		if in, err := reg("i3", "tA"); err != nil || in.ID != "i1" || in.Generation != 2 {
			t.Fatalf("same token: %+v, %v", in, err)
		}
		// The bound token revoked: another token takes the identity.
		if _, err := s.RevokeToken(ctx, "acc1", "victim", at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		in, err = reg("i4", "tB")
		if err != nil || in.ID != "i1" || in.TokenID != "tB" || in.Generation != 3 {
			t.Fatalf("after the revocation: %+v, %v", in, err)
		}
		// Bound to a token that no longer exists (deleted): free too.
		if _, err := s.UpsertInstance(ctx, Instance{ID: "i5", AccountID: "acc1", IdentityKey: "old|host-b",
			TokenID: "gone", RegisteredAt: t0}); err != nil {
			t.Fatal(err)
		}
		if in, err := s.UpsertInstance(ctx, Instance{ID: "i6", AccountID: "acc1", IdentityKey: "old|host-b",
			TokenID: "tB", RegisteredAt: t0}); err != nil || in.ID != "i5" || in.TokenID != "tB" {
			t.Fatalf("identity of a deleted token: %+v, %v", in, err)
		}
	})
}

// Registrations of one new identity with two valid tokens race through
// several managers: one token wins, every registration with the other is
// refused, and the row is bound to the winner.
func TestInstanceBindingConcurrent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		stores := openManagers(t, b, managers)
		ctx := context.Background()
		for _, tk := range []Token{
			{ID: "t0", AccountID: "acc1", Name: "zero", Hash: "h0", CreatedAt: t0},
			{ID: "t1", AccountID: "acc1", Name: "one", Hash: "h1", CreatedAt: t0},
		} {
			if err := stores[0].CreateToken(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		const n = 12
		var mu sync.Mutex
		won := map[string]int{}
		refused := map[string]int{}
		race(n, func(i int) {
			tok := fmt.Sprintf("t%d", i%2)
			_, err := stores[i%len(stores)].UpsertInstance(ctx, Instance{ID: fmt.Sprintf("id%d", i), AccountID: "acc1",
				IdentityKey: "build|host-a", Name: "build", Hostname: "host-a", TokenID: tok, RegisteredAt: t0})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won[tok]++
			case errors.Is(err, ErrIdentityConflict):
				refused[tok]++
			default:
				t.Errorf("register %d: %v", i, err)
			}
		})
		list, err := stores[0].ListInstances(ctx, "acc1")
		if err != nil || len(list) != 1 {
			t.Fatalf("instances %+v, %v; want one", list, err)
		}
		winner := list[0].TokenID
		loser := map[string]string{"t0": "t1", "t1": "t0"}[winner]
		if won[winner] != n/2 || refused[winner] != 0 || won[loser] != 0 || refused[loser] != n/2 {
			t.Errorf("bound to %s; registrations won %v, refused %v; want every one with %s to win and every one with %s refused",
				winner, won, refused, winner, loser)
		}
		if list[0].Generation != n/2 {
			t.Errorf("generation %d, want %d (one per accepted registration)", list[0].Generation, n/2)
		}
	})
}

// TaskHolder says who holds a task and the task's scope; TasksHeldBy
// answers a long list of IDs with the ones that run on the instance.
func TestTaskHolderAndTasksHeldBy(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		web := newTask("web", "acc1", t0)
		web.Spec.Org, web.Spec.Project = "eng", "web"
		mustCreate(t, s, web, newTask("acct", "acc1", t0), newTask("other", "acc1", t0), newTask("queued", "acc1", t0),
			newTask("done", "acc1", t0), newTask("b", "acc2", t0))
		mustClaim(t, s, "web", "i1", t0)
		mustClaim(t, s, "acct", "i1", t0)
		mustClaim(t, s, "other", "i2", t0)
		mustClaim(t, s, "done", "i1", t0)
		mustClaim(t, s, "b", "i1", t0) // cannot happen (claims check the account); held anyway
		if _, err := s.CompleteTask(ctx, "done", 1, Result{Status: protocol.StatusSucceeded}, t0); err != nil {
			t.Fatal(err)
		}

		h, err := s.TaskHolder(ctx, "acc1", "web")
		if diff := cmp.Diff(TaskHolding{InstanceID: "i1", Org: "eng", Project: "web"}, h); err != nil || diff != "" {
			t.Errorf("TaskHolder(web) error %v (-want +got):\n%s", err, diff)
		}
		if h, err := s.TaskHolder(ctx, "acc1", "queued"); err != nil || h != (TaskHolding{}) {
			t.Errorf("TaskHolder(queued) = %+v, %v", h, err)
		}
		_, err = s.TaskHolder(ctx, "acc1", "b")
		wantErr(t, "TaskHolder of another account's task", err, ErrNotFound)
		_, err = s.TaskHolder(ctx, "acc1", "nope")
		wantErr(t, "TaskHolder of an unknown task", err, ErrNotFound)

		listed := []string{"web", "acct", "web", "other", "queued", "done", "nope"}
		for i := range 10000 {
			listed = append(listed, fmt.Sprintf("made-up-%d", i))
		}
		got, err := s.TasksHeldBy(ctx, "i1", listed)
		want := map[string]HeldTask{"web": {Epoch: 1, Org: "eng", Project: "web"}, "acct": {Epoch: 1}}
		if diff := cmp.Diff(want, got); err != nil || diff != "" {
			t.Errorf("TasksHeldBy error %v (-want +got):\n%s", err, diff)
		}
		if got, err := s.TasksHeldBy(ctx, "i1", nil); err != nil || len(got) != 0 {
			t.Errorf("TasksHeldBy(nil) = %v, %v", got, err)
		}
	})
}

// The result closes the log: chunks it counts are still taken, chunks
// numbered past its last one are refused, also after a delegate fault
// that ended the task.
func TestLogClosedByResult(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		faulty := newTask("faulty", "acc1", t0)
		faulty.Retries = 0
		mustCreate(t, s, newTask("t1", "acc1", t0), newTask("quiet", "acc1", t0), faulty)
		for _, id := range []string{"t1", "quiet", "faulty"} {
			mustClaim(t, s, id, "i1", t0)
		}
		noCap := LogCap{}
		if err := s.AppendLogs(ctx, "t1", 1, chunks(1, "a", "b"), noCap); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CompleteTask(ctx, "t1", 1, Result{Status: protocol.StatusSucceeded, LastSeq: 3}, at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		// A repeated result does not move the end.
		if _, err := s.CompleteTask(ctx, "t1", 1, Result{Status: protocol.StatusSucceeded, LastSeq: 100}, at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CompleteTask(ctx, "quiet", 1, Result{Status: protocol.StatusFailed}, at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, requeued, err := s.RequeueTask(ctx, "faulty", 1, "i1", "executor broke", 1, at(time.Minute)); err != nil || requeued {
			t.Fatalf("RequeueTask: requeued %v, %v; want the task failed", requeued, err)
		}
		tests := []struct {
			name    string
			id      string
			chunks  []protocol.LogChunk
			wantErr error
		}{
			{"late chunk the result counts", "t1", chunks(3, "c"), nil},
			{"redelivered chunk", "t1", chunks(2, "b"), nil},
			{"chunk past the result", "t1", chunks(4, "injected"), ErrLogClosed},
			{"batch reaching past the result", "t1", chunks(3, "c", "injected"), ErrLogClosed},
			{"far past the result", "t1", chunks(1<<40, "injected"), ErrLogClosed},
			{"result without output", "quiet", chunks(1, "injected"), ErrLogClosed},
			{"chunk the fault counts", "faulty", chunks(1, "x"), nil},
			{"chunk past the fault", "faulty", chunks(2, "injected"), ErrLogClosed},
		}
		for _, tt := range tests {
			err := s.AppendLogs(ctx, tt.id, 1, tt.chunks, noCap)
			if tt.wantErr == nil {
				if err != nil {
					t.Errorf("%s: %v", tt.name, err)
				}
				continue
			}
			wantErr(t, tt.name, err, tt.wantErr)
			wantErr(t, tt.name+" (as a terminal task)", err, ErrTaskTerminal)
		}
		want := []StoredChunk{storedChunk(1, chunk(1, "a")), storedChunk(1, chunk(2, "b")), storedChunk(1, chunk(3, "c"))}
		if diff := cmp.Diff(want, readAll(t, s, "t1")); diff != "" {
			t.Errorf("ReadLogs (-want +got):\n%s", diff)
		}
		if got := readAll(t, s, "quiet"); len(got) != 0 {
			t.Errorf("quiet task has output %+v", got)
		}
	})
}

// Configurations have a scope; an org or project that a configuration
// names cannot be deleted.
func TestConfigurationScope(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		if err := s.CreateOrg(ctx, Org{AccountID: "acc1", Name: "eng", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateProject(ctx, Project{AccountID: "acc1", Org: "eng", Name: "web", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		web, err := s.CreateConfiguration(ctx, Configuration{AccountID: "acc1", Name: "web-tools", Script: "true",
			Org: "eng", Project: "web", CreatedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := s.CreateConfiguration(ctx, Configuration{AccountID: "acc1", Name: "eng-tools", Script: "true",
			Org: "eng", CreatedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		list, err := s.ListConfigurations(ctx, "acc1")
		if diff := cmp.Diff([]Configuration{eng, web}, list); err != nil || diff != "" {
			t.Errorf("ListConfigurations error %v (-want +got):\n%s", err, diff)
		}
		if web.Org != "eng" || web.Project != "web" {
			t.Errorf("created %+v", web)
		}
		script := "false"
		got, err := s.UpdateConfiguration(ctx, "acc1", "web-tools", ConfigurationUpdate{Script: &script}, at(time.Minute))
		if err != nil || got.Org != "eng" || got.Project != "web" {
			t.Errorf("an update keeps the scope: %+v, %v", got, err)
		}
		wantErr(t, "delete a project a configuration names", s.DeleteProject(ctx, "acc1", "eng", "web"), ErrInUse)
		if err := s.DeleteConfiguration(ctx, "acc1", "web-tools"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteProject(ctx, "acc1", "eng", "web"); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "delete an org a configuration names", s.DeleteOrg(ctx, "acc1", "eng"), ErrInUse)
		if err := s.DeleteConfiguration(ctx, "acc1", "eng-tools"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteOrg(ctx, "acc1", "eng"); err != nil {
			t.Fatal(err)
		}
	})
}
