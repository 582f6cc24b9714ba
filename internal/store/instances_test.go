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

	"github.com/legate-dev/legate/internal/protocol"
)

// mustUpsert registers instances, failing the test on an error.
func mustUpsert(t testing.TB, s *Store, ins ...Instance) {
	t.Helper()
	for _, in := range ins {
		if _, err := s.UpsertInstance(context.Background(), in); err != nil {
			t.Fatalf("UpsertInstance(%s): %v", in.ID, err)
		}
	}
}

// instanceIDs lists the IDs of an account's instances, sorted.
func instanceIDs(t testing.TB, s *Store, acc string) []string {
	t.Helper()
	list, err := s.ListInstances(context.Background(), acc)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range list {
		out = append(out, in.ID)
	}
	slices.Sort(out)
	return out
}

// recordedFor says which of an instance's recorded results exist.
func recordedFor(t testing.TB, s *Store, acc, id string) (capabilities, configuration bool) {
	t.Helper()
	caps, err := s.LiveCapabilities(context.Background(), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps {
		capabilities = capabilities || c.InstanceID == id
	}
	// ConfigurationResults joins the instances: read the table itself.
	var n int
	if err := s.r(nil).queryRow(context.Background(), `SELECT COUNT(*) FROM configuration_results WHERE instance_id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return capabilities, n > 0
}

func recordResults(t testing.TB, s *Store, id string) {
	t.Helper()
	ctx := context.Background()
	err := s.RecordCapabilities(ctx, []CapabilityResult{{InstanceID: id, Criteria: "https://git", OK: true, CheckedAt: t0, ExpiresAt: at(6 * time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.RecordConfigurationResult(ctx, ConfigurationResult{InstanceID: id, Configuration: "base", Version: 1, StartedAt: t0, FinishedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
}

func TestInstances(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()

		in1 := Instance{
			ID: "i1", AccountID: "acc1", IdentityKey: "build|host-a|10.0.0.1", Name: "build", Hostname: "host-a",
			IP: "10.0.0.1", Tags: []string{"linux", "x86"}, Version: "1.0.0", Type: "SHELL", TokenID: "t1",
			Capacity: 4, Connection: "", RegisteredAt: t0, TaskIsolation: &protocol.TaskIsolation{Sandbox: protocol.SandboxNamespaces, Scopes: protocol.ScopesMixed},
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
			LastHeartbeat: ptr(at(time.Hour)), TaskIsolation: &protocol.TaskIsolation{Sandbox: protocol.SandboxNone, Scopes: protocol.ScopesOneAtATime},
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

func TestDeleteDelegate(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		cutoff := at(time.Hour) // contact at or after it counts as connected
		build := func(id, host string) Instance {
			return Instance{ID: id, AccountID: "acc1", IdentityKey: "build|" + host, Name: "Build", Hostname: host, RegisteredAt: t0}
		}
		b1, b2, b3 := build("b1", "host-1"), build("b2", "host-2"), build("b3", "host-3")
		b1.LastHeartbeat = ptr(cutoff)                        // connected
		b2.LastHeartbeat = ptr(cutoff.Add(-time.Microsecond)) // silent since before the cutoff
		b3.LastHeartbeat = ptr(cutoff.Add(time.Minute))       // deregistered below
		alpha := Instance{ID: "a1", AccountID: "acc1", IdentityKey: "alpha|host-1", Name: "alpha", Hostname: "host-1", RegisteredAt: t0}
		other := Instance{ID: "o1", AccountID: "acc2", IdentityKey: "build|host-1", Name: "build", Hostname: "host-1", RegisteredAt: t0}
		mustUpsert(t, s, b1, b2, b3, alpha, other)
		if err := s.DeregisterInstance(ctx, "b3", cutoff.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"b1", "b2", "b3", "a1"} {
			recordResults(t, s, id)
		}

		_, err := s.DeleteDelegate(ctx, "acc1", "nobody", cutoff)
		wantErr(t, "unknown name", err, ErrNotFound)

		// b1 is connected: refused, nothing removed.
		_, err = s.DeleteDelegate(ctx, "acc1", "build", cutoff)
		var busy *DelegateBusyError
		if !errors.As(err, &busy) || !errors.Is(err, ErrConflict) {
			t.Fatalf("delete with a connected instance: %v, want a DelegateBusyError", err)
		}
		if diff := cmp.Diff(&DelegateBusyError{Name: "Build", Connected: []string{"host-1"}}, busy); diff != "" {
			t.Errorf("refusal (-want +got):\n%s", diff)
		}
		if got, want := err.Error(), `delete delegate "build": delegate "Build" has 1 connected instance (host-1)`; got != want {
			t.Errorf("error text %q, want %q", got, want)
		}

		// b1 goes silent, but a task runs on b2: refused.
		if _, err := s.TouchInstances(ctx, []InstanceTouch{{ID: "b1", LastHeartbeat: t0}}); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, s, newTask("run1", "acc1", t0))
		mustClaim(t, s, "run1", "b2", t0)
		_, err = s.DeleteDelegate(ctx, "acc1", "build", cutoff)
		if !errors.As(err, &busy) || busy.Running != 1 || len(busy.Connected) != 0 {
			t.Fatalf("delete with a running task: %v, want a DelegateBusyError with 1 running task", err)
		}
		if diff := cmp.Diff([]string{"a1", "b1", "b2", "b3"}, instanceIDs(t, s, "acc1")); diff != "" {
			t.Errorf("instances after the refusals (-want +got):\n%s", diff)
		}

		// The task ends: the whole group goes, by any case of its name,
		// with what was recorded for it; the other delegate and the other
		// account's delegate of the same name stay.
		if _, err := s.CompleteTask(ctx, "run1", 1, Result{Status: protocol.StatusSucceeded}, t0); err != nil {
			t.Fatal(err)
		}
		gone, err := s.DeleteDelegate(ctx, "acc1", "BUILD", cutoff)
		if err != nil {
			t.Fatal(err)
		}
		var goneIDs []string
		for _, in := range gone {
			goneIDs = append(goneIDs, in.ID)
		}
		if diff := cmp.Diff([]string{"b1", "b2", "b3"}, goneIDs); diff != "" {
			t.Errorf("deleted (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"a1"}, instanceIDs(t, s, "acc1")); diff != "" {
			t.Errorf("instances of acc1 after delete (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"o1"}, instanceIDs(t, s, "acc2")); diff != "" {
			t.Errorf("instances of acc2 after delete (-want +got):\n%s", diff)
		}
		for _, id := range []string{"b1", "b2", "b3"} {
			if c, r := recordedFor(t, s, "acc1", id); c || r {
				t.Errorf("%s: capability results kept %v, configuration result kept %v", id, c, r)
			}
		}
		if c, r := recordedFor(t, s, "acc1", "a1"); !c || !r {
			t.Errorf("a1 lost its results: capability %v, configuration %v", c, r)
		}
		if task := mustGet(t, s, "acc1", "run1"); task.DelegateName != "dlg-b2" {
			t.Errorf("the task forgot which delegate ran it: %q", task.DelegateName)
		}
		_, err = s.DeleteDelegate(ctx, "acc1", "build", cutoff)
		wantErr(t, "delete again", err, ErrNotFound)

		// A deleted delegate that comes back registers anew.
		mustUpsert(t, s, build("b4", "host-1"))
		if diff := cmp.Diff([]string{"a1", "b4"}, instanceIDs(t, s, "acc1")); diff != "" {
			t.Errorf("instances after a new registration (-want +got):\n%s", diff)
		}
	})
}

func TestPruneInstances(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		before := at(6 * time.Hour)
		in := func(id string, registered time.Time, heartbeat *time.Time) Instance {
			return Instance{ID: id, AccountID: "acc1", IdentityKey: "d|" + id, Name: "d", Hostname: id,
				RegisteredAt: registered, LastHeartbeat: heartbeat}
		}
		mustUpsert(t, s,
			in("old", t0, ptr(at(time.Hour))),         // silent for 5 hours before the cutoff: pruned
			in("never", t0, nil),                      // registered, never heard from: pruned
			in("recent", t0, ptr(before)),             // heard from at the cutoff: kept
			in("fresh", before.Add(time.Second), nil), // registered after: kept
			in("left", t0, ptr(at(time.Hour))),        // deregistered long ago: pruned
			in("leftlate", t0, ptr(at(time.Hour))),    // deregistered recently: kept
			in("busy", t0, ptr(at(time.Hour))),        // silent but its task still runs: kept
			Instance{ID: "other", AccountID: "acc2", IdentityKey: "x", Name: "x", Hostname: "x", RegisteredAt: t0}, // another account: pruned
		)
		if err := s.DeregisterInstance(ctx, "left", at(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.DeregisterInstance(ctx, "leftlate", before); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, s, newTask("run1", "acc1", t0))
		mustClaim(t, s, "run1", "busy", t0)
		recordResults(t, s, "old")

		// Bounded batches: two, then the rest, then nothing.
		var pruned []string
		for i, want := range []int{2, 2, 0} {
			ids, err := s.PruneInstances(ctx, before, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != want {
				t.Fatalf("batch %d pruned %v, want %d instances", i, ids, want)
			}
			pruned = append(pruned, ids...)
		}
		slices.Sort(pruned)
		if diff := cmp.Diff([]string{"left", "never", "old", "other"}, pruned); diff != "" {
			t.Errorf("pruned (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"busy", "fresh", "leftlate", "recent"}, instanceIDs(t, s, "acc1")); diff != "" {
			t.Errorf("kept (-want +got):\n%s", diff)
		}
		if c, r := recordedFor(t, s, "acc1", "old"); c || r {
			t.Errorf("results of a pruned instance kept: capability %v, configuration %v", c, r)
		}
		if ids, err := s.PruneInstances(ctx, before, 0); err != nil || ids != nil {
			t.Errorf("limit 0: %v, %v", ids, err)
		}
	})
}

// TestPruneInstancesOnSeveralManagers prunes one database from several
// stores at once, as the managers of one PostgreSQL database do: every
// stale instance is removed exactly once and no fresh one is.
func TestPruneInstancesOnSeveralManagers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.newDSN(t)
		stores := []*Store{openAt(t, dsn), openAt(t, dsn), openAt(t, dsn)}
		ctx := context.Background()
		before := at(6 * time.Hour)
		const stale, fresh = 300, 20
		for i := range stale + fresh {
			hb := at(time.Hour)
			if i >= stale {
				hb = before.Add(time.Minute)
			}
			id := fmt.Sprintf("i%03d", i)
			mustUpsert(t, stores[0], Instance{ID: id, AccountID: "acc1", IdentityKey: id, Name: "d", Hostname: id, RegisteredAt: t0, LastHeartbeat: &hb})
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for _, s := range stores {
			wg.Go(func() {
				for {
					ids, err := s.PruneInstances(ctx, before, 25)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, id := range ids {
						seen[id]++
					}
					mu.Unlock()
					if len(ids) == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
		if len(seen) != stale {
			t.Errorf("pruned %d instances, want %d", len(seen), stale)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s reported pruned %d times", id, n)
			}
		}
		if got := len(instanceIDs(t, stores[0], "acc1")); got != fresh {
			t.Errorf("%d instances left, want %d", got, fresh)
		}
	})
}
