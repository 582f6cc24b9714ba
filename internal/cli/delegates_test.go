package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestDelegatesListAllShowsDeregistered(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	hb := testNow.Add(-3 * time.Second)
	m.delegates = []protocol.Delegate{
		{Name: "east", Hostname: "host-a", Version: "0.1.0", Status: protocol.DelegateConnected,
			Connection: protocol.ConnWebSocket, LastHeartbeat: &hb},
		{Name: "tour", Hostname: "host-a", Version: "0.1.0", Status: protocol.DelegateDeregistered, LastHeartbeat: &hb},
	}
	r := ok(t, runCLI(t.Context(), m.env(), "", "delegates", "list"), "delegates", "list")
	want := "NAME  STATUS     CONNECTION  VERSION  TAGS  TASKS\n" +
		"east  connected  websocket   0.1.0    -     0\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("list (-want +got):\n%s", d)
	}
	r = ok(t, runCLI(t.Context(), m.env(), "", "delegates", "list", "--all"), "delegates", "list", "--all")
	want = "NAME  STATUS        CONNECTION  VERSION  TAGS  TASKS\n" +
		"east  connected     websocket   0.1.0    -     0\n" +
		"tour  deregistered  -           0.1.0    -     0\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("list --all (-want +got):\n%s", d)
	}
}

func TestDelegatesDelete(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	m.delegates = []protocol.Delegate{
		{Name: "build", Hostname: "host-a", Status: protocol.DelegateDisconnected},
		{Name: "build", Hostname: "host-b", Status: protocol.DelegateDeregistered},
		{Name: "east", Hostname: "host-c", Status: protocol.DelegateConnected},
	}
	run := func(args ...string) result { return runCLI(t.Context(), m.env(), "", args...) }

	r := ok(t, run("delegates", "delete", "build"), "delegates", "delete", "build")
	if want := "Deleted delegate \"build\" (2 instances: host-a, host-b).\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	failsWith(t, run("delegates", "delete", "build"), `no delegate named "build" in this account`)
	failsWith(t, run("delegates", "delete", "east"), "stop it first")

	m.delegates = append(m.delegates, protocol.Delegate{Name: "west", Hostname: "host-d", Status: protocol.DelegateDeregistered})
	r = ok(t, run("delegates", "rm", "west", "--json"), "delegates", "rm", "west", "--json")
	got := decode[protocol.DeletedDelegate](t, r)
	if got.Name != "west" || len(got.Instances) != 1 || got.Instances[0].Hostname != "host-d" {
		t.Errorf("--json: %+v", got)
	}
	if r = run("delegates", "delete"); r.err == nil || !strings.Contains(r.err.Error(), "accepts 1 arg") {
		t.Errorf("delete without a name: %v", r.err)
	}
}

func TestTokenCreateValueOnly(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	r := ok(t, runCLI(t.Context(), m.env(), "", "token", "create", "tour", "--value-only"), "token", "create", "--value-only")
	if r.stdout != "tok_secret_tour\n" || r.stderr != "" {
		t.Errorf("stdout %q, stderr %q: want the value alone", r.stdout, r.stderr)
	}
	// The name exists: nothing on stdout (TOKEN=$(...) stays empty), the
	// reason on stderr, exit 1 (so that TOKEN=$(...) && ... stops).
	r = runCLI(t.Context(), m.env(), "", "token", "create", "tour", "--value-only")
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	failsWith(t, r, "already exists")

	r = runCLI(t.Context(), m.env(), "", "token", "create", "other", "--value-only", "--json")
	if r.err == nil || !strings.Contains(r.err.Error(), "--json and --value-only") {
		t.Errorf("--json with --value-only: %v", r.err)
	}
}

func TestDelegatesListFiltersAndPages(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	hb := testNow.Add(-3 * time.Second)
	m.delegates = []protocol.Delegate{{Name: "east", Hostname: "host-a", Version: "0.1.0", Status: protocol.DelegateConnected,
		Connection: protocol.ConnWebSocket, LastHeartbeat: &hb}}
	run := func(args ...string) result { return runCLI(t.Context(), m.env(), "", args...) }
	r := ok(t, run("delegates", "list", "--limit", "1", "--page", "a", "--name", "ea", "--tag", "gpu", "--connected", "false", "--scope", "o1/p1"), "delegates", "list", "--limit")
	if !strings.Contains(r.stderr, "More delegates: legate delegates list --page east") {
		t.Errorf("stderr %q: want how to ask for the next page", r.stderr)
	}
	r = ok(t, run("delegates", "list", "--pending", "--json"), "delegates", "list", "--pending", "--json")
	if got := decode[protocol.DelegateList](t, r); got.Next != "" || len(got.Delegates) != 0 {
		t.Errorf("--pending --json: %+v", got)
	}
	ok(t, run("delegates", "list"), "delegates", "list")
	m.mu.Lock()
	got := append([]string(nil), m.delegateQueries...)
	m.mu.Unlock()
	want := []string{"connected=false&limit=1&name=ea&page=a&scope=o1%2Fp1&tag=gpu", "approval=pending", ""}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("queries (-want +got):\n%s", d)
	}
	for args, want := range map[string]string{
		"--connected maybe": `--connected "maybe": use true or false`,
		"--scope o1/":       `--scope "o1/": use ORG or ORG/PROJECT`,
		"--limit 1001":      "--limit 1001: use 1 to 1000 (0: every delegate)",
	} {
		r := run(append([]string{"delegates", "list"}, strings.Fields(args)...)...)
		var ue usageError
		if !errors.As(r.err, &ue) || r.err.Error() != want {
			t.Errorf("%s: err %v, want usage error %q", args, r.err, want)
		}
	}
}

// TestDelegatesUnresponsive: a connected delegate the manager marked
// unresponsive shows so in the STATUS column, and describe says what it
// ignored and when it is offered work again.
func TestDelegatesUnresponsive(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	hb := testNow.Add(-3 * time.Second)
	since := testNow.Add(-90 * time.Second)
	u := &protocol.DelegateUnresponsive{Since: testNow.Add(-time.Minute), RetryAt: testNow.Add(4 * time.Minute),
		Reason: "ignored 3 task offers since 2026-11-28T15:04:05Z", IgnoredOffers: 3, IgnoredSince: &since}
	d := protocol.Delegate{Name: "east", Hostname: "host-a", Version: "0.1.0", Status: protocol.DelegateConnected,
		Connection: protocol.ConnWebSocket, LastHeartbeat: &hb, Unresponsive: u}
	m.delegates = []protocol.Delegate{d}
	m.details = map[string]protocol.DelegateDetails{"east": {Name: "east", Instances: []protocol.DelegateDetail{{Delegate: d}}}}
	r := ok(t, runCLI(t.Context(), m.env(), "", "delegates", "list"), "delegates", "list")
	if !strings.Contains(r.stdout, "unresponsive  websocket") {
		t.Errorf("list does not show the status:\n%s", r.stdout)
	}
	r = ok(t, runCLI(t.Context(), m.env(), "", "delegates", "describe", "east"), "delegates", "describe")
	if !strings.Contains(r.stdout, "ignored 3 task offers since 2026-11-28T15:04:05Z (offered no task since 1m ago)") {
		t.Errorf("describe does not say what it ignored:\n%s", r.stdout)
	}
}
