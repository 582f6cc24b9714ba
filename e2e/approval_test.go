package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestApprovalGatesADelegate: a delegate started with a token that
// requires approval connects, is listed as pending and takes no task
// (the explanation says pending approval) until approved through the
// CLI, then runs it; a rejected delegate logs why and exits. Both
// decisions are in the audit log.
func TestApprovalGatesADelegate(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	out := strings.TrimSpace(c.mustCLI("token", "create", "gated", "--require-approval"))
	if !strings.Contains(out, "requiring approval") {
		t.Errorf("token create --require-approval says %q", out)
	}
	lines := strings.Split(out, "\n")
	tok := strings.TrimSpace(lines[len(lines)-1])
	c.delegate("edge", "edge-1", c.seed004Env(tok, "edge", "")...)
	if got := c.mustCLI("delegates", "list", "--pending", "-o", "name"); got != "edge\n" {
		t.Errorf("delegates list --pending -o name: %q", got)
	}
	if got := c.mustCLI("delegates", "list"); !strings.Contains(got, "connected,pending") {
		t.Errorf("delegates list does not show the delegate pending:\n%s", got)
	}

	id := c.submit("--selector", "edge", "--script", "echo approved-run")
	eventually(t, 20*time.Second, "the explanation to say pending approval", func() bool {
		return strings.Contains(c.cli("task", "explain", id).stdout, "pending approval")
	})
	if tk := c.task(id); tk.Status != protocol.StatusQueued {
		t.Fatalf("task of a pending delegate is %s, want queued", tk.Status)
	}
	if got := c.mustCLI("delegates", "approve", "edge"); !strings.Contains(got, `Delegate "edge" approved (1 instance(s): edge-1)`) {
		t.Errorf("delegates approve: %q", got)
	}
	tk := c.waitTask(id, "succeeded", func(tk protocol.Task) bool { return tk.Status == protocol.StatusSucceeded })
	if tk.DelegateHostname != "edge-1" {
		t.Errorf("task ran on %q, want edge-1", tk.DelegateHostname)
	}

	rogue := start(t, "delegate rogue-1", append(c.seed004Env(tok, "rogue", ""), "DELEGATE_HOSTNAME=rogue-1"), "delegate", "--grace", "20s")
	c.waitConnected("rogue-1", "")
	c.mustCLI("delegates", "reject", "rogue")
	if code := rogue.wait(30 * time.Second); code == 0 {
		t.Errorf("a rejected delegate exited 0")
	}
	if log := rogue.out.String(); !strings.Contains(log, "rejected by an administrator") {
		t.Errorf("the rejected delegate's log does not say why:\n%s", log)
	}
	// Started again, it is refused at once and exits.
	again := start(t, "delegate rogue-1 again", append(c.seed004Env(tok, "rogue", ""), "DELEGATE_HOSTNAME=rogue-1"), "delegate")
	if code := again.wait(30 * time.Second); code == 0 || !strings.Contains(again.out.String(), "rejected") {
		t.Errorf("a rejected delegate started again: exit %d\n%s", code, again.out.String())
	}

	var audit protocol.AuditList
	if err := json.Unmarshal([]byte(c.mustCLI("audit", "list", "--resource", "delegate", "-o", "json")), &audit); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range audit.Events {
		actions = append(actions, e.Action+" "+e.Resource+" "+e.Outcome)
	}
	if strings.Join(actions, "; ") != "delegate.reject rogue success; delegate.approve edge success" {
		t.Errorf("audit list --resource delegate: %v", actions)
	}
}
