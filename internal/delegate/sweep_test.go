package delegate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestContainerSweepDoesNotHoldRegistration: removing what an earlier run
// left (the runtime's `ps` and `volume ls`, which can take seconds on a
// busy host) does not keep the delegate from connecting, but a container
// task waits for it, since the sweep removes containers by the delegate's
// label. The runtime is a script named podman that records its calls and
// holds `ps` until the test releases it.
func TestContainerSweepDoesNotHoldRegistration(t *testing.T) {
	tm := startManager(t, testConfig())
	dir := t.TempDir()
	calls, release := filepath.Join(dir, "calls"), filepath.Join(dir, "release")
	podman := filepath.Join(dir, "podman")
	script := `#!/bin/sh
echo "$1" >> ` + shq(calls) + `
if [ "$1" = ps ]; then
	while [ ! -e ` + shq(release) + ` ]; do sleep 0.05; done
fi
if [ "$1" = run ]; then echo ran in a container; fi
exit 0
`
	if err := os.WriteFile(podman, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ag := startAgent(t, tm, agentOpts{environ: []string{
		"PATH=" + os.Getenv("PATH"), "DELEGATE_CONTAINER_RUNTIME=" + podman,
	}})
	read := func() []string {
		b, _ := os.ReadFile(calls)
		return strings.Fields(string(b))
	}
	eventually(t, "the sweep's ps started", func() (bool, string) {
		c := read()
		return len(c) > 0 && c[0] == "ps", strings.Join(c, " ")
	})
	// Connected while `ps` still waits.
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
	task := tm.submit(t, protocol.TaskSpec{Type: protocol.TaskContainer,
		Container: &protocol.ContainerSpec{Image: "localhost/none:1", Command: []string{"true"}}})
	tm.waitTask(t, task.ID, protocol.StatusRunning)
	eventually(t, "the delegate says the task waits for the sweep", func() (bool, string) {
		return len(ag.logs.lines("waits for the removal")) > 0, ""
	})
	if c := read(); strings.Join(c, " ") != "ps" {
		t.Fatalf("runtime called %v before the sweep's ps returned, want only ps", c)
	}
	touch(t, release)
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	c := read()
	run := -1
	for i, v := range c {
		if v == "run" {
			run = i
			break
		}
	}
	if len(c) < 2 || c[0] != "ps" || c[1] != "volume" || run < 2 {
		t.Fatalf("runtime calls %v: want the sweep's ps and volume ls before the task's run", c)
	}
	if out, _, _ := tm.logs(t, task.ID, false); !strings.Contains(out, "ran in a container") {
		t.Errorf("task output %q", out)
	}
}
