package manager

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// listed is "name/hostname status" for each instance of a listing.
func listed(list protocol.DelegateList) []string {
	var out []string
	for _, d := range list.Delegates {
		out = append(out, d.Name+"/"+d.Hostname+" "+d.Status+" "+d.Connection)
	}
	return out
}

func newToken(t *testing.T, admin *client.Client, name string) string {
	t.Helper()
	tok, err := admin.CreateToken(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Value
}

// TestDeregisteredDelegatesLeaveTheListing: a delegate that stops
// cleanly is no longer listed; --all (all=true) still shows it, marked.
func TestDeregisteredDelegatesLeaveTheListing(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok := newToken(t, admin, "ci")
	gone, _ := tm.registerFake(t, tm.admin.AccountID, tok, "build", "host-a")
	tm.registerFake(t, tm.admin.AccountID, tok, "build", "host-b")
	if err := gone.Deregister(ctx); err != nil {
		t.Fatal(err)
	}

	list, err := admin.ListDelegates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"build/host-b connected "}, listed(list)); diff != "" {
		t.Errorf("default listing (-want +got):\n%s", diff)
	}
	all, err := admin.ListAllDelegates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"build/host-a deregistered ", "build/host-b connected "}, listed(all)); diff != "" {
		t.Errorf("listing with all=true (-want +got):\n%s", diff)
	}
	det, err := admin.DescribeDelegate(ctx, "build")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(det.Instances); n != 2 || det.Instances[0].Status != protocol.DelegateDeregistered {
		t.Errorf("describe shows %d instances, the first %q; want 2, the first deregistered", n, det.Instances[0].Status)
	}

	// A bad value of all is refused, not taken for false.
	req, err := http.NewRequestWithContext(ctx, "GET", tm.url+protocol.PathDelegates+"?all=maybe", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tm.admin.APIKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "use true or false") {
		t.Errorf("all=maybe: %d %s", res.StatusCode, body)
	}

	// The same identity coming back is the same instance, listed again.
	_, resp := tm.registerFake(t, tm.admin.AccountID, tok, "build", "host-a")
	list, err = admin.ListDelegates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"build/host-a connected ", "build/host-b connected "}, listed(list)); diff != "" {
		t.Errorf("after host-a came back (-want +got):\n%s", diff)
	}
	if all.Delegates[0].InstanceID != resp.InstanceID {
		t.Errorf("host-a came back as instance %s, was %s", resp.InstanceID, all.Delegates[0].InstanceID)
	}
}

func TestDeleteDelegate(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok := newToken(t, admin, "ci")
	d, first := tm.registerFake(t, tm.admin.AccountID, tok, "build", "host-a")
	tm.registerFake(t, tm.admin.AccountID, tok, "other", "host-a")

	_, err := admin.DeleteDelegate(ctx, "nobody")
	wantCode(t, "delete an unknown delegate", err, protocol.CodeNotFound)

	// Connected: refused, with what to do.
	_, err = admin.DeleteDelegate(ctx, "build")
	wantCode(t, "delete a connected delegate", err, protocol.CodeConflict)
	for _, want := range []string{`delegate "build" has 1 connected instance (host-a)`, "stop it first", "legate token revoke"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}

	// Stopped: deleted, by any case of its name; the other delegate stays.
	if err := d.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := admin.DeleteDelegate(ctx, "BUILD")
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 1 || out.Name != "build" || out.Instances[0].InstanceID != first.InstanceID ||
		out.Instances[0].Status != protocol.DelegateDeregistered {
		t.Errorf("delete answered %+v", out)
	}
	all, err := admin.ListAllDelegates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"other/host-a connected "}, listed(all)); diff != "" {
		t.Errorf("after delete (-want +got):\n%s", diff)
	}
	_, err = admin.DescribeDelegate(ctx, "build")
	wantCode(t, "describe a deleted delegate", err, protocol.CodeNotFound)
	_, err = admin.DeleteDelegate(ctx, "build")
	wantCode(t, "delete it again", err, protocol.CodeNotFound)

	// Its old session is no good: it registers again, as a new instance.
	_, err = d.Heartbeat(ctx, protocol.Heartbeat{})
	wantCode(t, "heartbeat of a deleted instance", err, protocol.CodeSessionExpired)
	_, again := tm.registerFake(t, tm.admin.AccountID, tok, "build", "host-a")
	if again.InstanceID == first.InstanceID {
		t.Errorf("registered again with the deleted instance ID %s", again.InstanceID)
	}
}

// TestDelegateDeletedWhileConnectedRegistersAgain: when an instance's row
// goes while its delegate is in contact (a deletion that raced with its
// return, or a prune on another manager), the next liveness flush ends its
// session, so it registers again instead of working unlisted.
func TestDelegateDeletedWhileConnectedRegistersAgain(t *testing.T) {
	tm := startTestManager(t, Config{HeartbeatInterval: time.Hour})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok := newToken(t, admin, "ci")
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok, "build", "host-a")
	// Straight in the store, as another manager would, ignoring this
	// manager's view: nothing counts as connected after the far future.
	if _, err := tm.st.DeleteDelegate(ctx, tm.admin.AccountID, "build", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Heartbeat(ctx, protocol.Heartbeat{}); err != nil {
		t.Fatalf("heartbeat before the flush: %v", err)
	}
	tm.m.dispatch.Flush(ctx)
	_, err := d.Heartbeat(ctx, protocol.Heartbeat{})
	wantCode(t, "heartbeat after the flush", err, protocol.CodeSessionExpired)
}

// TestDeleteRefusedForADelegateOfAnotherManager runs two managers on one
// PostgreSQL database: a delegate just registered with one of them cannot
// be deleted through the other, before any heartbeat was recorded.
func TestDeleteRefusedForADelegateOfAnotherManager(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg := Config{HeartbeatInterval: time.Hour} // no liveness flush during the test
	tms := startTestManagers(t, dsn, cfg, cfg)
	a, b := tms[0], tms[1]
	ctx := context.Background()
	tok := newToken(t, a.client(t, a.admin.APIKey), "ci")
	a.registerFake(t, a.admin.AccountID, tok, "build", "host-a")
	onB := b.client(t, b.admin.APIKey)
	_, err := onB.DeleteDelegate(ctx, "build")
	wantCode(t, "delete through the other manager", err, protocol.CodeConflict)
	list, err := onB.ListDelegates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"build/host-a connected "}, listed(list)); diff != "" {
		t.Errorf("listing on the other manager (-want +got):\n%s", diff)
	}
}

// TestPruneRemovesInstancesOutOfContact: one prune pass removes the
// instances silent or deregistered for longer than PruneDelegatesAfter,
// and keeps those in contact.
func TestPruneRemovesInstancesOutOfContact(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	tm := startTestManager(t, Config{Now: clock.Now, HeartbeatInterval: time.Hour, SessionTTL: 24 * time.Hour, PruneDelegatesAfter: 7 * time.Hour})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok := newToken(t, admin, "ci")
	silent, _ := tm.registerFake(t, tm.admin.AccountID, tok, "build", "silent")
	left, _ := tm.registerFake(t, tm.admin.AccountID, tok, "build", "left")
	alive, _ := tm.registerFake(t, tm.admin.AccountID, tok, "build", "alive")
	if err := left.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	for range 8 { // eight hours; "alive" heartbeats every hour
		clock.Add(time.Hour)
		if _, err := alive.Heartbeat(ctx, protocol.Heartbeat{}); err != nil {
			t.Fatal(err)
		}
		tm.m.dispatch.Flush(ctx)
	}
	if n := tm.m.dispatch.Prune(ctx, clock.Now()); n != 2 {
		t.Errorf("pruned %d instances, want 2", n)
	}
	all, err := admin.ListAllDelegates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"build/alive connected polling"}, listed(all)); diff != "" {
		t.Errorf("after prune (-want +got):\n%s", diff)
	}
	_, err = silent.Heartbeat(ctx, protocol.Heartbeat{})
	wantCode(t, "heartbeat of a pruned instance", err, protocol.CodeSessionExpired)
	if n := tm.m.dispatch.Prune(ctx, clock.Now()); n != 0 {
		t.Errorf("second pass pruned %d instances", n)
	}
}

// TestPruneLoopRuns: the manager prunes by itself, without a request.
func TestPruneLoopRuns(t *testing.T) {
	// Liveness window 300ms: PruneDelegatesAfter is raised to 600ms, a
	// pass runs every 100ms.
	tm := startTestManager(t, Config{HeartbeatInterval: 100 * time.Millisecond, PruneDelegatesAfter: time.Millisecond})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok := newToken(t, admin, "ci")
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok, "build", "host-a")
	if err := d.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the deregistered instance pruned", func() bool {
		all, err := admin.ListAllDelegates(ctx)
		return err == nil && len(all.Delegates) == 0
	})
}
