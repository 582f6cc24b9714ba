package delegate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// scopedSpecs creates an org and a project and returns a shell task spec
// of that project and one of the account.
func scopedSpecs(t *testing.T, tm *testManager, projectScript, accountScript string) (project, account protocol.TaskSpec) {
	t.Helper()
	ctx := context.Background()
	if _, err := tm.api.CreateOrg(ctx, "org1"); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.api.CreateProject(ctx, "org1", "proj1"); err != nil {
		t.Fatal(err)
	}
	project = protocol.TaskSpec{Type: protocol.TaskShell, Org: "org1", Project: "proj1", Shell: &protocol.ShellSpec{Script: projectScript}}
	account = protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: accountScript}}
	return project, account
}

// Without a sandbox (forced off here) an account delegate runs the tasks
// of one scope at a time: a task of another scope waits until the running
// ones ended, so it never finds them.
func TestNoSandboxRunsOneScopeAtATime(t *testing.T) {
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{sandbox: "off", oneScope: true})
	shared := t.TempDir()
	ended := filepath.Join(shared, "first-ended")
	first, second := scopedSpecs(t, tm,
		`touch "$PWD/ready"; until [ -e "$PWD/go" ]; do sleep 0.05; done; touch `+shq(ended),
		`[ -e `+shq(ended)+` ] || { echo "ran while a task of another scope ran"; exit 1; }; echo after`)
	a := tm.submit(t, first)
	readyFile := filepath.Join(ag.workDir, "tasks", a.ID, "ready")
	eventually(t, "the first task runs", func() (bool, string) {
		_, err := os.Stat(readyFile)
		return err == nil, "no ready file"
	})
	b := tm.submit(t, second)
	eventually(t, "the second task waits", func() (bool, string) {
		return len(ag.logs.lines("task waits", b.ID)) > 0, "no wait logged"
	})
	if got := tm.task(t, b.ID); got.Status == protocol.StatusSucceeded || got.Status == protocol.StatusFailed {
		t.Fatalf("the second task ended while the first runs: %+v", got)
	}
	touch(t, filepath.Join(ag.workDir, "tasks", a.ID, "go"))
	tm.waitTask(t, a.ID, protocol.StatusSucceeded)
	tm.waitTask(t, b.ID, protocol.StatusSucceeded)
	d, _ := tm.delegateByHost(t, ag.hostname)
	if ti := d.TaskIsolation; ti == nil || ti.Sandbox != protocol.SandboxNone || ti.Scopes != protocol.ScopesOneAtATime {
		t.Errorf("delegate reports task isolation %+v, want no sandbox, one scope at a time", ti)
	}
}

// With the sandbox (the default where the host allows it) a task of the
// account finds nothing of a concurrent project task: not its secret in
// /proc/*/environ, not its directory, not its /tmp file.
func TestSandboxHidesConcurrentTaskOfAnotherScope(t *testing.T) {
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{sandbox: "auto", oneScope: true})
	victim, attacker := scopedSpecs(t, tm,
		`echo s3cr3t-file > "$PWD/victim-file"; echo s3cr3t-tmp > /tmp/victim-tmp; touch "$PWD/ready"
until [ -e "$PWD/go" ]; do sleep 0.05; done`,
		`P=s3cr3; P="${P}t-"; V=vic; V="${V}tim"
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep "$P"
ls -R "$(dirname "$PWD")" /tmp; grep -rs "$P" /tmp "$(dirname "$PWD")"; cat "/tmp/$V-tmp" 2>/dev/null; echo attack-done`)
	victim.SecretEnv = map[string]string{"VICTIM_SECRET": "s3cr3t-env"}
	d := tm.waitDelegate(t, ag.hostname, "registered", func(d protocol.Delegate) bool { return d.TaskIsolation != nil })
	if ti := d.TaskIsolation; ti.Sandbox != protocol.SandboxNamespaces {
		t.Skipf("no sandbox on this host: %s", ti.Summary())
	}
	v := tm.submit(t, victim)
	readyFile := filepath.Join(ag.workDir, "tasks", v.ID, "ready")
	eventually(t, "the victim task runs", func() (bool, string) {
		_, err := os.Stat(readyFile)
		return err == nil, "no ready file"
	})
	a := tm.submit(t, attacker)
	tm.waitTask(t, a.ID, protocol.StatusSucceeded)
	out, _, _ := tm.logs(t, a.ID, false)
	touch(t, filepath.Join(ag.workDir, "tasks", v.ID, "go"))
	tm.waitTask(t, v.ID, protocol.StatusSucceeded)
	if !strings.Contains(out, "attack-done") {
		t.Fatalf("attacker output: %s", out)
	}
	for _, leak := range []string{"s3cr3t-", "victim-"} {
		if strings.Contains(out, leak) {
			t.Errorf("a task saw another's %q:\n%s", leak, out)
		}
	}
}
