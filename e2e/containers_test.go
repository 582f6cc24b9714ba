package e2e

// The tests of this file run task containers with real podman and the
// local Debian base image that scripts/podman-ensure builds. Without them
// they skip saying why (under CI=true they fail: CI installs podman).

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

const containerImage = "localhost/debian-min:bookworm"

// podmanOrSkip returns the runtime's global flags (runc, as podman needs
// here), or skips the test saying why no container can be run.
func podmanOrSkip(t *testing.T) []string {
	t.Helper()
	unusable := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no container runtime can be used: %s (CI installs one with scripts/podman-ensure)", why)
		}
		t.Skipf("no container runtime can be used: %s (run scripts/podman-ensure)", why)
	}
	if _, err := exec.LookPath("podman"); err != nil {
		unusable("podman is not installed")
	}
	var flags []string
	if _, err := os.Stat("/usr/sbin/runc"); err == nil {
		flags = []string{"--runtime", "/usr/sbin/runc"}
	}
	if out, err := exec.Command("podman", append(flags, "image", "exists", containerImage)...).CombinedOutput(); err != nil {
		unusable("image " + containerImage + " missing: " + strings.TrimSpace(string(out)))
	}
	return flags
}

// containerDelegateEnv is a delegate's environment for container tasks
// with podman on this machine.
func containerDelegateEnv(flags []string) []string {
	return []string{
		"DELEGATE_CONTAINER_RUNTIME=podman",
		"LEGATE_CONTAINER_RUNTIME_FLAGS=" + strings.Join(flags, " "),
		"LEGATE_CONTAINER_RUN_FLAGS=--network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024",
	}
}

// podmanList lists the IDs of the containers (all of them, running or
// not) with a label.
func podmanList(t *testing.T, flags []string, label string) string {
	t.Helper()
	out, err := exec.Command("podman", append(flags, "ps", "--all", "--quiet", "--filter", "label="+label)...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman ps: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestContainerTaskThroughTheCLI: legate task run --image runs the command
// as the user and group asked (seen with id); a stored secret referenced in
// a container's script reaches it and is masked in the output.
func TestContainerTaskThroughTheCLI(t *testing.T) {
	t.Parallel()
	flags := podmanOrSkip(t)
	c := startCluster(t)
	tok := c.token("ctr")
	c.delegate("ctr", "ctr-cli", append(c.seed004Env(tok, "ctr", ""), containerDelegateEnv(flags)...)...)

	r := c.cli("task", "run", "--image", containerImage, "--run-as-user", "1234", "--run-as-group", "4321",
		"--read-only-root", "--drop-cap", "ALL", "--", "id")
	if r.code != 0 || !strings.Contains(r.stdout, "uid=1234(1234) gid=4321(4321)") {
		t.Fatalf("task run id: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	value := uniqueSecret(t, "ctr")
	file := filepath.Join(t.TempDir(), "v")
	if err := os.WriteFile(file, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("secret", "create", "CTR_TOKEN", "--from-file", file)
	r = c.cli("task", "run", "--image", containerImage, "--script", `echo "token=${secrets.CTR_TOKEN} len=$(printf %s "${secrets.CTR_TOKEN}" | wc -c)"`)
	if r.code != 0 || !strings.Contains(r.stdout, "token=") || !strings.Contains(r.stdout, "len="+strconv.Itoa(len(value))) {
		t.Fatalf("task run with a stored secret: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, value) {
		t.Errorf("the secret's value is in the output:\n%s", r.stdout)
	}
}

// TestContainerLeftByAKilledDelegateIsRemoved: a delegate killed with
// kill -9 while its container runs leaves the container; the same
// delegate (same host name and working directory) removes it when it
// starts again, before it runs a container task.
func TestContainerLeftByAKilledDelegateIsRemoved(t *testing.T) {
	t.Parallel()
	flags := podmanOrSkip(t)
	c := startCluster(t)
	tok := c.token("kill")
	env := append(c.seed004Env(tok, "kill", ""), containerDelegateEnv(flags)...)
	env = append(env, "DELEGATE_HOSTNAME=ctr-kill")
	work := t.TempDir()
	d := start(t, "delegate ctr-kill", env, "delegate", "--workdir", work)
	c.waitConnected("ctr-kill", "")

	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--image", containerImage,
		"--volume", "empty_dir:/ws", "--script", "echo started; sleep 600"))
	label := "dev.legate.task=" + id
	eventually(t, 60*time.Second, "the task's container to run", func() bool {
		out, err := exec.Command("podman", append(flags, "ps", "--quiet", "--filter", "label="+label)...).CombinedOutput()
		return err == nil && strings.TrimSpace(string(out)) != ""
	})
	d.signal(syscall.SIGKILL)
	d.wait(30 * time.Second)
	if podmanList(t, flags, label) == "" {
		t.Fatal("the container is gone before the restart: the test proves nothing")
	}
	t.Cleanup(func() {
		// Should the test fail, leave nothing behind.
		if ids := podmanList(t, flags, label); ids != "" {
			_ = exec.Command("podman", append(append(flags, "rm", "--force"), strings.Fields(ids)...)...).Run()
		}
		if out, err := exec.Command("podman", append(flags, "volume", "ls", "--quiet", "--filter", "label="+label)...).Output(); err == nil && len(strings.Fields(string(out))) > 0 {
			_ = exec.Command("podman", append(append(flags, "volume", "rm", "--force"), strings.Fields(string(out))...)...).Run()
		}
	})

	d2 := start(t, "delegate ctr-kill again", env, "delegate", "--workdir", work)
	// The sweep runs while the delegate registers (container tasks wait
	// for it); wait for the new delegate's word that it is done (the
	// manager may still list the killed one as connected).
	eventually(t, 60*time.Second, "the restarted delegate to say it removed what the killed one left", func() bool {
		return strings.Contains(d2.out.String(), "removed the containers and volumes an earlier run of this delegate left")
	})
	if ids := podmanList(t, flags, label); ids != "" {
		t.Errorf("after the restart the killed run's container is still there: %s", ids)
	}
	out, err := exec.Command("podman", append(flags, "volume", "ls", "--quiet", "--filter", "label="+label)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("after the restart the killed run's volume is still there: %s %v", out, err)
	}
}

// TestFargateDelegateRefusesPrivileged: a delegate on Fargate refuses a
// privileged container task before anything runs, with the seed's rule.
func TestFargateDelegateRefusesPrivileged(t *testing.T) {
	t.Parallel()
	flags := podmanOrSkip(t)
	c := startCluster(t)
	tok := c.token("fg")
	env := append(c.seed004Env(tok, "fg", ""), containerDelegateEnv(flags)...)
	c.delegate("fg", "ctr-fargate", append(env, "DELEGATE_PLATFORM=fargate")...)
	task, r := c.runJSON("--image", containerImage, "--privileged", "--", "id")
	if r.code != 1 || task.Status != protocol.StatusFailed ||
		!strings.Contains(task.Error, "container.security_context.privileged: privileged containers are not supported on Fargate") {
		t.Fatalf("privileged task on Fargate: exit %d, %s %q\nstderr: %s", r.code, task.Status, task.Error, r.stderr)
	}
	task, r = c.runJSON("--image", containerImage, "--volume", "empty_dir:/ws:1024", "--", "id")
	if task.Status != protocol.StatusFailed || !strings.Contains(task.Error, "container.volumes[0].empty_dir.size_mib 1024") ||
		!strings.Contains(task.Error, "21504") {
		t.Errorf("small empty_dir on Fargate: exit %d, %s %q", r.code, task.Status, task.Error)
	}
}

const workspacePipeline = `name: ws
stages:
  - name: build
    steps:
      - name: write
        container:
          image: localhost/debian-min:bookworm
          script: echo "built by write" > /ws/artifact
          volumes: [{name: ws, mount_path: /ws, empty_dir: {}}]
      - name: read
        container:
          image: localhost/debian-min:bookworm
          command: [cat, /ws/artifact]
          volumes: [{name: ws, mount_path: /ws, empty_dir: {}}]
`

// TestPipelineStepsShareAWorkspace: two container steps of a stage that
// name the same empty_dir share it: the second reads what the first
// wrote; nothing of it is left when the run ends.
func TestPipelineStepsShareAWorkspace(t *testing.T) {
	t.Parallel()
	flags := podmanOrSkip(t)
	c := startCluster(t)
	tok := c.token("ws")
	work := t.TempDir()
	start(t, "delegate ctr-ws", append(append(c.seed004Env(tok, "ws", ""), containerDelegateEnv(flags)...), "DELEGATE_HOSTNAME=ctr-ws"),
		"delegate", "--workdir", work)
	c.waitConnected("ctr-ws", "")
	file := filepath.Join(t.TempDir(), "ws.yaml")
	if err := os.WriteFile(file, []byte(workspacePipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("pipeline", "apply", "-f", file)
	r := c.cli("pipeline", "run", "ws")
	if r.code != 0 || !strings.Contains(r.stdout, "built by write") {
		t.Fatalf("pipeline run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// The delegate's owner label: its host name and working directory.
	sum := sha256.Sum256([]byte("ctr-ws\x00" + work))
	owner := "dev.legate.owner=" + hex.EncodeToString(sum[:8])
	out, err := exec.Command("podman", append(flags, "volume", "ls", "--quiet", "--filter", "label="+owner)...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" || podmanList(t, flags, owner) != "" {
		t.Errorf("left after the run: volumes %q (%v), containers %q", out, err, podmanList(t, flags, owner))
	}
}
