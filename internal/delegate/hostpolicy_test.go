package delegate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// A task allowed by the manager (its submitter has task:privileged) still
// meets the delegate's policy: privileged containers and host paths are
// off by default, and the task fails naming the setting before the
// runtime is asked to run anything (a stand-in runtime records its calls).
func TestDelegateRefusesPrivilegedContainerByDefault(t *testing.T) {
	tm := startManager(t, testConfig())
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	fake := "#!/bin/sh\necho \"$@\" >> " + shq(calls) + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "podman"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	startAgent(t, tm, agentOpts{environ: []string{"PATH=" + os.Getenv("PATH"), "DELEGATE_CONTAINER_RUNTIME=" + filepath.Join(bin, "podman")}})
	attack := tm.submit(t, protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{
		Image: "img", Script: "touch /host/pwned", SecurityContext: &protocol.SecurityContext{Privileged: true},
		Volumes: []protocol.Volume{{Name: "root", MountPath: "/host", HostPath: &protocol.HostPathVolume{Path: "/"}}},
	}})
	got := tm.waitTask(t, attack.ID, protocol.StatusFailed)
	if !strings.Contains(got.Error, "LEGATE_CONTAINER_ALLOW_PRIVILEGED=true") {
		t.Errorf("error %q does not name the setting", got.Error)
	}
	hostOnly := tm.submit(t, protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{
		Image: "img", Volumes: []protocol.Volume{{Name: "root", MountPath: "/host", HostPath: &protocol.HostPathVolume{Path: "/"}}},
	}})
	got = tm.waitTask(t, hostOnly.ID, protocol.StatusFailed)
	if !strings.Contains(got.Error, "LEGATE_CONTAINER_HOST_PATHS") {
		t.Errorf("error %q does not name the setting", got.Error)
	}
	b, _ := os.ReadFile(calls)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(" "+line+" ", " run ") || strings.Contains(line, "volume create") {
			t.Errorf("the runtime was asked to run something: %q", line)
		}
	}
}
