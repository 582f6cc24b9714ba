package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Two delegates with one name and hostname in two clusters (two
// StatefulSets' pod legate-delegate-0, told apart here by their IP
// addresses): the first keeps the identity and runs the tasks, the second
// is refused with a message that names both, and describe shows it. They
// do not supersede each other over and over. A restart (the old process
// dead) still takes over at once.
func TestE2EDuplicateIdentityRefusesTheSecond(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("dup")
	// KUBERNETES: identified by name and hostname alone, as StatefulSet pods are.
	base := replaceEnv(c.seed004Env(tok, "dup", "dup"), "DELEGATE_TYPE", "KUBERNETES")
	first := c.delegate("dup", "legate-delegate-0", append(base, "DELEGATE_IP=10.1.0.7")...)
	second := start(t, "delegate dup second", append(base, "DELEGATE_HOSTNAME=legate-delegate-0", "DELEGATE_IP=10.2.0.9"), "delegate", "--grace", "20s")

	const refused = "two delegate processes use one identity"
	eventually(t, 30*time.Second, "the second process refused", func() bool {
		return strings.Contains(second.out.String(), refused)
	})
	log := second.out.String()
	for _, want := range []string{"10.1.0.7", "10.2.0.9", "legate-delegate-0", "DELEGATE_NAME"} {
		if !strings.Contains(log, want) {
			t.Errorf("the refused delegate's log does not name %q:\n%s", want, log)
		}
	}
	if second.exited() {
		t.Errorf("the refused delegate exited; it should wait, refused, to take over if the first stops:\n%s", log)
	}

	var det protocol.DelegateDetails
	if err := json.Unmarshal([]byte(c.mustCLI("delegates", "describe", "dup", "--json")), &det); err != nil {
		t.Fatal(err)
	}
	if len(det.Instances) != 1 || !strings.Contains(det.Instances[0].DuplicateIdentity, "10.2.0.9") ||
		!strings.Contains(det.Instances[0].DuplicateIdentity, "10.1.0.7") {
		t.Errorf("describe --json does not show the duplicate: %+v", det.Instances)
	}
	if out := c.mustCLI("delegates", "describe", "dup"); !strings.Contains(out, refused) {
		t.Errorf("describe does not show the duplicate:\n%s", out)
	}

	// The first keeps running tasks, and they stop superseding each other.
	for range 3 {
		task, r := c.runJSON("--selector", "dup", "--script", "pwd")
		if task.Status != protocol.StatusSucceeded {
			t.Fatalf("task %+v\nstderr %s", task, r.stderr)
		}
		if out := c.mustCLI("task", "logs", task.ID); !strings.HasPrefix(out, first.cmd.Dir) {
			t.Errorf("the task ran in %q, not in the first process's directory %s", out, first.cmd.Dir)
		}
	}
	if n := strings.Count(first.out.String(), "registered with the manager"); n > 2 {
		t.Errorf("the first process registered %d times: the two still supersede each other:\n%s", n, first.out.String())
	}
	if n := strings.Count(second.out.String(), "registered with the manager"); n > 1 {
		t.Errorf("the second process registered %d times:\n%s", n, second.out.String())
	}

	// A restart: the refused one stops, the first is killed and started
	// again at once: the new process takes over and runs tasks.
	second.signal(syscall.SIGTERM)
	second.wait(60 * time.Second)
	first.signal(syscall.SIGKILL)
	first.wait(30 * time.Second)
	again := start(t, "delegate dup again", append(base, "DELEGATE_HOSTNAME=legate-delegate-0", "DELEGATE_IP=10.1.0.7"), "delegate", "--grace", "20s")
	task, r := c.runJSON("--selector", "dup", "--script", "pwd")
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("task after a restart %+v\nstderr %s", task, r.stderr)
	}
	if out := c.mustCLI("task", "logs", task.ID); !strings.HasPrefix(out, again.cmd.Dir) {
		t.Errorf("after a restart the task ran in %q, not in the new process's directory %s", out, again.cmd.Dir)
	}
	if strings.Contains(again.out.String(), refused) {
		t.Errorf("the restarted process was refused:\n%s", again.out.String())
	}
}
