package check

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// The docker kinds run exactly as printed: `legate manifest docker` piped
// to sh, and `legate manifest docker --compose` given to podman-compose,
// with the manager's public URL and delegate image and no other input.
// docker is podman here (a `docker` of the test's own that adds the
// runtime and ulimits this host needs, as podmanRun says).
//
// The docker run spec is a same-host trial: the manager's public URL is
// on this host's loopback (--allow-loopback: the container runs on the
// host's network). The compose spec is the real shape: the manager's
// public URL is the name containers reach this host by
// (host.containers.internal, on the compose project's bridge network), so
// nothing is allowed. (A compose spec on the host's network is not run:
// podman-compose 1.0.3, Debian 12's, adds its project network to
// network_mode: host, which podman refuses; docker compose does not.)

// dockerShim writes a `docker` that runs podman with this host's runtime
// and ulimits, and returns the directory to put first in PATH.
func dockerShim(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\nif [ \"$1\" = run ]; then shift; exec podman " + strings.Join(podmanRun, " ") + " \"$@\"; fi\nexec podman \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// delegateNamed is the first connected instance of the delegate name.
func (m hostManager) delegateNamed(t testing.TB, name string) (protocol.Delegate, bool) {
	t.Helper()
	var list protocol.DelegateList
	out := m.cli(t, "delegates", "list", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("decode delegates list: %v\n%s", err, out)
	}
	for _, d := range list.Delegates {
		if d.Name == name && d.Status == protocol.DelegateConnected {
			return d, true
		}
	}
	return protocol.Delegate{}, false
}

// runsATask waits for the delegate name to connect and runs a task on it
// (selected by its tag, the name), which must succeed in a container.
func (m hostManager) runsATask(t *testing.T, name, container string) {
	t.Helper()
	eventually(t, 2*time.Minute, "the delegate "+name+" connected", func() bool {
		_, ok := m.delegateNamed(t, name)
		if !ok && containerStopped(container) {
			t.Fatalf("the delegate's container %s stopped", container)
		}
		return ok
	})
	out := m.cli(t, "task", "run", "-o", "json", "--selector", name, "--script",
		`echo "uid=$(id -u)"; test -e /run/.containerenv && echo in-container`)
	var task protocol.Task
	if err := json.Unmarshal([]byte(out), &task); err != nil {
		t.Fatalf("decode task run: %v\n%s", err, out)
	}
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("task status = %s, want %s", task.Status, protocol.StatusSucceeded)
	}
	logs := m.cli(t, "task", "logs", task.ID)
	for _, want := range []string{"uid=1000", "in-container"} {
		if !strings.Contains(logs, want) {
			t.Errorf("task output lacks %q:\n%s", want, logs)
		}
	}
}

// TestDockerSpecsRunAsPrinted runs the docker run spec through sh and the
// compose spec through podman-compose, as printed; each delegate connects
// to the manager at its public URL and runs a task.
func TestDockerSpecsRunAsPrinted(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the image is not built and run")
	}
	image := needImage(t)
	m := startHostManager(t, image)
	token := strings.TrimSpace(m.cli(t, "token", "create", "as-printed", "--value-only"))
	path := dockerShim(t) + string(os.PathListSeparator) + os.Getenv("PATH")

	t.Run("docker run", func(t *testing.T) {
		t.Parallel()
		name := uniqueName("specs-url-docker")
		// The health port: the host's network is shared with the other
		// tests' delegates (the spec's own setting, printed in it).
		spec := m.cli(t, "manifest", "docker", "--token", token, "--name", name, "--tags", name,
			"--allow-loopback", "--env", "DELEGATE_HTTP_PORT="+freePort(t))
		for _, want := range []string{"--network host", "MANAGER_HOST_AND_PORT=" + m.url, image + " watcher --dir"} {
			if !strings.Contains(spec, want) {
				t.Fatalf("the spec lacks %q:\n%s", want, spec)
			}
		}
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := podman("logs", name)
				t.Logf("--- output of container %s ---\n%s", name, out)
			}
			if out, err := podman("rm", "--force", "--time", "10", name); err != nil {
				t.Errorf("remove container %s: %v\n%s", name, err, out)
			}
		})
		sh := exec.Command("sh")
		sh.Stdin = strings.NewReader(spec)
		sh.Env = append(os.Environ(), "PATH="+path)
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("sh < spec: %v\n%s\nspec:\n%s", err, out, spec)
		}
		m.runsATask(t, name, name)
	})

	t.Run("compose", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("podman-compose"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the compose spec must run in CI: podman-compose is not installed (bash scripts/podman-ensure installs it)")
			}
			t.Skip("podman-compose is not installed (bash scripts/podman-ensure installs it as root): the compose spec is not run")
		}
		// The manager on every address of this host, for the project's
		// bridge network: its gateway is this host.
		m := startHostManagerOn(t, image, "0.0.0.0", "host.containers.internal")
		token := strings.TrimSpace(m.cli(t, "token", "create", "as-printed", "--value-only"))
		name := uniqueName("specs-url-compose")
		spec := m.cli(t, "manifest", "docker", "--compose", "--token", token, "--name", name, "--tags", name)
		for _, want := range []string{`MANAGER_HOST_AND_PORT: "` + m.public + `"`, `image: "` + image + `"`} {
			if !strings.Contains(spec, want) {
				t.Fatalf("the spec lacks %q:\n%s", want, spec)
			}
		}
		if strings.Contains(spec, "network_mode") {
			t.Errorf("a spec with a public URL asks for a network mode:\n%s", spec)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		// podman-compose runs podman itself: the runtime and ulimits come
		// from a containers.conf of the test's own.
		conf := filepath.Join(dir, "containers.conf")
		if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"]\n"+
			"[engine]\nruntime = \"runc\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		compose := func(args ...string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "podman-compose", append([]string{"-p", name, "-f", "compose.yaml"}, args...)...)
			cmd.Dir, cmd.Env = dir, append(os.Environ(), "CONTAINERS_CONF="+conf)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		label := "label=com.docker.compose.project=" + name
		t.Cleanup(func() {
			ids, _ := podman("ps", "--all", "--quiet", "--filter", label)
			if t.Failed() {
				for _, id := range strings.Fields(ids) {
					out, _ := podman("logs", id)
					t.Logf("--- output of container %s ---\n%s", id, out)
				}
			}
			if out, err := compose("down", "--timeout", "10"); err != nil {
				t.Errorf("podman-compose down: %v\n%s", err, out)
			}
			if ids, _ := podman("ps", "--all", "--quiet", "--filter", label); strings.TrimSpace(ids) != "" {
				_, _ = podman(append([]string{"rm", "--force"}, strings.Fields(ids)...)...)
			}
			if exec.Command("podman", "network", "exists", name+"_default").Run() == nil {
				_, _ = podman("network", "rm", "--force", name+"_default")
			}
		})
		if out, err := compose("up", "-d"); err != nil {
			t.Fatalf("podman-compose up: %v\n%s", err, out)
		}
		ids, err := podman("ps", "--all", "--quiet", "--filter", label)
		if err != nil || len(strings.Fields(ids)) != 1 {
			t.Fatalf("the compose project's containers: %q, %v", ids, err)
		}
		m.runsATask(t, name, strings.Fields(ids)[0])
	})
}
