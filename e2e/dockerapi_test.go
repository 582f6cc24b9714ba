package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/podmantest"
	"github.com/legate-dev/legate/internal/protocol"
)

// podmanService starts podman's Docker-API service for the test
// (podmantest.Service) once podmanOrSkip found podman and the image.
func podmanService(t *testing.T) string {
	t.Helper()
	podmanOrSkip(t)
	return podmantest.Service(t, "")
}

// TestContainerTaskThroughDockerAPISocket: a delegate with no podman or
// docker on its PATH and DOCKER_HOST naming a Docker-API socket (podman's
// service, as the instance's Docker on ECS on EC2) registers the
// docker-api runtime and runs container tasks through the socket: output,
// exit code, environment.
func TestContainerTaskThroughDockerAPISocket(t *testing.T) {
	t.Parallel()
	sock := podmanService(t)
	c := startCluster(t)
	tok := c.token("dapi")
	// A PATH with a shell and nothing else: no container CLI.
	bin := t.TempDir()
	for _, b := range []string{"sh", "bash"} {
		if p, err := exec.LookPath(b); err == nil {
			if err := os.Symlink(p, filepath.Join(bin, b)); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.delegate("dapi", "ctr-dockerapi", append(c.seed004Env(tok, "dapi", ""), "PATH="+bin, "DOCKER_HOST=unix://"+sock)...)
	d, _ := c.findDelegate("ctr-dockerapi")
	if d.ContainerRuntime != "docker-api" {
		t.Fatalf("registered container runtime %q (reason %q), want docker-api", d.ContainerRuntime, d.ContainerReason)
	}
	r := c.cli("task", "run", "--image", containerImage, "--env", "WHO=api", "--script", `echo "hello from $WHO"; id -u`)
	if r.code != 0 || !strings.Contains(r.stdout, "hello from api\n0\n") {
		t.Fatalf("task run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	task, r := c.runJSON("--image", containerImage, "--script", "echo failing; exit 3")
	if task.Status != protocol.StatusFailed || task.ExitCode == nil || *task.ExitCode != 3 {
		t.Fatalf("exit 3: %s %v %q\nstderr: %s", task.Status, task.ExitCode, task.Error, r.stderr)
	}
}

// TestFargateDelegateExplainsNoContainerRuntime: a delegate on Fargate
// (podman on its PATH does not matter there) registers no container
// runtime, and task explain says why a container task does not go to it.
func TestFargateDelegateExplainsNoContainerRuntime(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("fgx")
	c.delegate("fgx", "ctr-fargate-explain", append(c.seed004Env(tok, "fgx", ""), "DELEGATE_PLATFORM=fargate")...)
	d, _ := c.findDelegate("ctr-fargate-explain")
	if d.ContainerRuntime != "" || !strings.Contains(d.ContainerReason, "Fargate has no container runtime") {
		t.Fatalf("registered container runtime %q, reason %q", d.ContainerRuntime, d.ContainerReason)
	}
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--image", containerImage, "--", "true"))
	out := c.mustCLI("task", "explain", id)
	if !strings.Contains(out, "Fargate has no container runtime: run container tasks from an ECS-on-EC2 or Kubernetes delegate") {
		t.Errorf("task explain:\n%s", out)
	}
	if out := c.mustCLI("delegates", "describe", "fgx"); !strings.Contains(out, "Containers:") || !strings.Contains(out, "none: Fargate has no container runtime") {
		t.Errorf("delegates describe:\n%s", out)
	}
}
