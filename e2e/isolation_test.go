package e2e

// End-to-end tests of task isolation on a delegate that runs tasks of more
// than one scope: a real delegate process runs a project task holding a
// secret while a task of the account attacks it.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// victimScript writes a file to its directory and to /tmp, then waits
// until the test creates "go" in its directory; attackScript looks for
// its secret in /proc/*/environ, the task directories and /tmp. The
// values carry a nonce (processes of another run do not count) and the
// attack builds what it looks for, so its own text holds none of it.
func victimScript(nonce string) string {
	return `echo s3cr3t-file-` + nonce + ` > victim-file; echo s3cr3t-tmp-` + nonce + ` > /tmp/victim-tmp-` + nonce + `; touch ready
until [ -e go ]; do sleep 0.05; done`
}

const attackScript = `P=s3cr3; P="${P}t-"; V=vic; V="${V}tim"
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep "$P"
ls -R "$(dirname "$PWD")" /tmp; grep -rs "$P" /tmp "$(dirname "$PWD")"; cat /tmp/$V-tmp-* 2>/dev/null; echo attack-done`

// nonce is unique to the test run; the victim's /tmp file is removed
// after the test (without a sandbox it lands in the host's /tmp).
func nonce(t *testing.T) string {
	n := fmt.Sprintf("%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = os.Remove("/tmp/victim-tmp-" + n) })
	return n
}

// isolationCluster starts a cluster with an org and a project and one
// account delegate with env; it returns the cluster and the delegate's
// working directory.
func isolationCluster(t *testing.T, env ...string) (*cluster, string) {
	c := startCluster(t)
	c.mustCLI("org", "create", "eng")
	c.mustCLI("project", "create", "--org", "eng", "web")
	p := c.delegate("shared", "shared-h", append(c.seed004Env(c.token("shared-tok"), "shared", ""), env...)...)
	return c, p.cmd.Dir
}

func TestSandboxedTaskSeesNothingOfAnotherScope(t *testing.T) {
	t.Parallel()
	c, dir := isolationCluster(t, "LEGATE_TASK_SANDBOX=auto")
	desc := c.mustCLI("delegates", "describe", "shared")
	if !strings.Contains(desc, "Isolation:") {
		t.Fatalf("describe shows no task isolation:\n%s", desc)
	}
	if !strings.Contains(desc, "sandbox per task (namespaces)") {
		t.Skipf("no sandbox on this host:\n%s", desc)
	}
	n := nonce(t)
	victim := c.submit("--org", "eng", "--project", "web", "--secret-env", "VICTIM_SECRET=s3cr3t-env-"+n, "--script", victimScript(n))
	victimDir := filepath.Join(dir, "tasks", victim)
	waitFile(t, filepath.Join(victimDir, "ready"), "the victim task runs")
	out := c.mustCLI("task", "run", "--script", attackScript)
	if err := os.WriteFile(filepath.Join(victimDir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if tk := c.waitTerminal(victim); tk.Status != "succeeded" {
		t.Errorf("victim ended %s: %s", tk.Status, tk.Error)
	}
	if !strings.Contains(out, "attack-done") {
		t.Fatalf("attacker output: %s", out)
	}
	for _, leak := range []string{n, victim} {
		if strings.Contains(out, leak) {
			t.Errorf("a task of the account saw the project task's %q:\n%s", leak, out)
		}
	}
}

// Without a sandbox (forced off) and without LEGATE_ALLOW_MIXED_SCOPES,
// the delegate runs the account's task only once the project's ended.
func TestWithoutSandboxOneScopeAtATime(t *testing.T) {
	t.Parallel()
	c, dir := isolationCluster(t, "LEGATE_TASK_SANDBOX=off", "LEGATE_ALLOW_MIXED_SCOPES=false")
	if desc := c.mustCLI("delegates", "describe", "shared"); !strings.Contains(desc, "tasks of one scope at a time") {
		t.Fatalf("describe does not say tasks of one scope run at a time:\n%s", desc)
	}
	n := nonce(t)
	victim := c.submit("--org", "eng", "--project", "web", "--secret-env", "VICTIM_SECRET=s3cr3t-env-"+n, "--script", victimScript(n))
	victimDir := filepath.Join(dir, "tasks", victim)
	waitFile(t, filepath.Join(victimDir, "ready"), "the victim task runs")
	attacker := c.submit("--script", attackScript)
	// Acquired (running, not started): it waits on the delegate.
	tk := c.waitTask(attacker, "acquired", func(tk protocol.Task) bool { return tk.Status == protocol.StatusRunning })
	if tk.StartedAt != nil {
		t.Fatalf("the account's task started while the project's runs: %+v", tk)
	}
	if tk := c.task(victim); tk.Status != protocol.StatusRunning {
		t.Fatalf("victim %s while the attacker waits", tk.Status)
	}
	if out := c.mustCLI("task", "logs", attacker); out != "" {
		t.Fatalf("the account's task ran while the project's ran: %q", out)
	}
	if err := os.WriteFile(filepath.Join(victimDir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if tk := c.waitTerminal(attacker); tk.Status != "succeeded" {
		t.Fatalf("attacker ended %s: %s", tk.Status, tk.Error)
	}
	out := c.mustCLI("task", "logs", attacker)
	// What it left in the host's /tmp the next task may read (no sandbox);
	// its environment and processes are gone.
	if !strings.Contains(out, "attack-done") || strings.Contains(out, "s3cr3t-env-"+n) {
		t.Errorf("attacker output:\n%s\n%+v", out, c.task(attacker))
	}
}
