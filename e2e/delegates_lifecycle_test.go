package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// allDelegates is `legate delegates list --all --json`: deregistered
// instances included.
func (c *cluster) allDelegates() []protocol.Delegate {
	c.t.Helper()
	var list protocol.DelegateList
	if err := json.Unmarshal([]byte(c.mustCLI("delegates", "list", "--all", "--json")), &list); err != nil {
		c.t.Fatal(err)
	}
	return list.Delegates
}

// TestDeleteDelegate: `legate delegates delete` refuses a connected
// delegate with what to do, and removes it once it stopped.
func TestDeleteDelegate(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("del")
	p := c.delegate("doomed", "doomed-host", c.seed004Env(tok, "doomed", "")...)

	r := c.cli("delegates", "delete", "doomed")
	if r.code != 1 || !strings.Contains(r.stderr, `delegate "doomed" has 1 connected instance (doomed-host)`) ||
		!strings.Contains(r.stderr, "stop it first") {
		t.Errorf("delete of a connected delegate: exit %d, stderr %q", r.code, r.stderr)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(20 * time.Second); code != 0 {
		t.Fatalf("delegate exit code %d after SIGTERM", code)
	}
	if out := c.mustCLI("delegates", "delete", "doomed"); out != "Deleted delegate \"doomed\" (1 instance: doomed-host).\n" {
		t.Errorf("delete: %q", out)
	}
	if all := c.allDelegates(); len(all) != 0 {
		t.Errorf("delegates list --all after delete: %+v", all)
	}
	r = c.cli("delegates", "delete", "doomed")
	if r.code != 1 || !strings.Contains(r.stderr, `no delegate named "doomed"`) {
		t.Errorf("delete again: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestManagerPrunesDelegatesOutOfContact: a delegate killed without a
// chance to deregister is removed by the manager once it has been silent
// for --prune-delegates-after.
func TestManagerPrunesDelegatesOutOfContact(t *testing.T) {
	t.Parallel()
	// Heartbeat 500ms: the liveness window is 1.5s, the shortest prune
	// time 3s.
	c := startCluster(t, "--prune-delegates-after", "3s")
	tok := c.token("prune")
	p := c.delegate("vanishing", "vanishing-host", c.seed004Env(tok, "vanishing", "")...)
	c.delegate("staying", "staying-host", c.seed004Env(tok, "staying", "")...)
	p.signal(syscall.SIGKILL)
	eventually(t, 30*time.Second, "the killed delegate pruned", func() bool {
		for _, d := range c.allDelegates() {
			if d.Hostname == "vanishing-host" {
				return false
			}
		}
		return true
	})
	if d, ok := c.findDelegate("staying-host"); !ok || d.Status != protocol.DelegateConnected {
		t.Errorf("the delegate in contact: %+v, listed %v; want it connected", d, ok)
	}
	r := c.cli("manager", "--prune-delegates-after", "1s", "--heartbeat-interval", "1s", "--data", t.TempDir())
	if r.code == 0 || !strings.Contains(r.stderr, "--prune-delegates-after 1s: use 0 (never) or at least 6s") {
		t.Errorf("a prune time within the liveness window: exit %d, stderr %q", r.code, r.stderr)
	}
}
