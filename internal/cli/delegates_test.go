package cli

import (
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
	want := "NAME  HOSTNAME  IP  SCOPE    TAGS  VERSION  UPGRADE  AUTO-UPGRADE  STATUS     CONNECTION  LAST-HEARTBEAT  RUNNING  CONFIGURATION  DESCRIPTION\n" +
		"east  host-a    -   account  -     0.1.0    -        manual        connected  websocket   3s ago          0        -              -\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("list (-want +got):\n%s", d)
	}
	r = ok(t, runCLI(t.Context(), m.env(), "", "delegates", "list", "--all"), "delegates", "list", "--all")
	want = "NAME  HOSTNAME  IP  SCOPE    TAGS  VERSION  UPGRADE  AUTO-UPGRADE  STATUS        CONNECTION  LAST-HEARTBEAT  RUNNING  CONFIGURATION  DESCRIPTION\n" +
		"east  host-a    -   account  -     0.1.0    -        manual        connected     websocket   3s ago          0        -              -\n" +
		"tour  host-a    -   account  -     0.1.0    -        manual        deregistered  -           3s ago          0        -              -\n"
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
