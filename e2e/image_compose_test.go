package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// This file runs deploy/compose/compose.yaml with podman-compose: PostgreSQL,
// two managers on its database and a delegate, in containers of the images
// this run built. PostgreSQL's image is built locally from Debian's package
// (deploy/compose/postgres.Containerfile), once per machine and Containerfile.

// postgresImage builds the local PostgreSQL image at most once per run.
var postgresImage = sync.OnceValues(buildPostgresImage)

func buildPostgresImage() (string, error) {
	h := sha256.New()
	for _, f := range []string{"../deploy/compose/postgres.Containerfile", "../deploy/compose/postgres-entrypoint"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("hash the PostgreSQL image's inputs: %w", err)
		}
		h.Write(b)
	}
	ref := "localhost/legate-e2e-postgres:" + hex.EncodeToString(h.Sum(nil))[:16]
	if exec.Command("podman", "image", "exists", ref).Run() == nil {
		return ref, nil
	}
	// apt-get in the build needs Debian's mirror: the host's network.
	cmd := exec.Command("podman", "build", "--network", "host", "--runtime", "/usr/sbin/runc",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"--build-arg", "BASE=localhost/debian-min:bookworm",
		"-f", "../deploy/compose/postgres.Containerfile", "-t", ref, "../deploy/compose")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build the PostgreSQL image (apt-get needs Debian's package mirror): %v\n%s", err, out.String())
	}
	return ref, nil
}

// composeProject is one run of compose.yaml under a project name of its own.
type composeProject struct {
	t       *testing.T
	name    string
	env     []string
	workdir string
}

// compose runs podman-compose with args on the project.
func (p composeProject) compose(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman-compose", append([]string{"-p", p.name, "-f", "compose.yaml"}, args...)...)
	cmd.Dir = p.workdir
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// container is the name of the container of a service.
func (p composeProject) container(service string) string {
	out, err := podman(p.t, "ps", "--all", "--format", "{{.Names}}",
		"--filter", "label=com.docker.compose.project="+p.name, "--filter", "label=com.docker.compose.service="+service)
	if err != nil {
		p.t.Fatalf("find the container of %s: %v\n%s", service, err, out)
	}
	return strings.TrimSpace(out)
}

// down removes everything of the project: containers, volumes and network,
// printing the containers' output first when the test failed.
func (p composeProject) down() {
	t := p.t
	if t.Failed() {
		for _, s := range []string{"postgres", "manager-a", "manager-b", "token", "delegate"} {
			if name := p.container(s); name != "" {
				out, _ := podman(t, "logs", name)
				t.Logf("--- output of %s (%s) ---\n%s", s, name, out)
			}
		}
	}
	if out, err := p.compose("down", "--volumes", "--timeout", "10"); err != nil {
		t.Errorf("podman-compose down: %v\n%s", err, out)
	}
	// What down leaves (podman-compose 1.0 keeps the network), and all of
	// it when down failed.
	label := "label=io.podman.compose.project=" + p.name
	if ids, _ := podman(t, "ps", "--all", "--quiet", "--filter", label); strings.TrimSpace(ids) != "" {
		podman(t, append([]string{"rm", "--force", "--volumes"}, strings.Fields(ids)...)...)
	}
	if vols, _ := podman(t, "volume", "ls", "--quiet", "--filter", label); strings.TrimSpace(vols) != "" {
		podman(t, append([]string{"volume", "rm", "--force"}, strings.Fields(vols)...)...)
	}
	if exec.Command("podman", "network", "exists", p.name+"_default").Run() == nil {
		if out, err := podman(t, "network", "rm", "--force", p.name+"_default"); err != nil {
			t.Errorf("remove network %s_default: %v\n%s", p.name, err, out)
		}
	}
}

func TestImageCompose(t *testing.T) {
	t.Parallel()
	imgs := needPodman(t)
	if _, err := exec.LookPath("podman-compose"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the compose test must run in CI: podman-compose is not installed (bash scripts/podman-ensure installs it)")
		}
		t.Skip("podman-compose is not installed (bash scripts/podman-ensure installs it as root): the compose set-up is not tested")
	}
	pg, err := postgresImage()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("no PostgreSQL image for the compose set-up: %v", err)
	}

	// podman-compose runs podman itself: the runtime and ulimits come from
	// a containers.conf of the test's own.
	conf := filepath.Join(t.TempDir(), "containers.conf")
	if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"]\n"+
		"[engine]\nruntime = \"runc\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, portA, _ := strings.Cut(freePort(t), ":")
	_, portB, _ := strings.Cut(freePort(t), ":")
	p := composeProject{t: t, name: uniqueName("legate-e2e-compose"), workdir: "../deploy/compose", env: append(os.Environ(),
		"CONTAINERS_CONF="+conf,
		"LEGATE_IMAGE="+imgs.delegate,
		"LEGATE_POSTGRES_IMAGE="+pg,
		"LEGATE_MANAGER_A_PORT="+portA,
		"LEGATE_MANAGER_B_PORT="+portB,
		"LEGATE_DELEGATE_NAME=compose-e2e",
		"LEGATE_DELEGATE_TAGS=compose-e2e,ha",
	)}
	t.Cleanup(p.down)
	if out, err := p.compose("up", "-d"); err != nil {
		t.Fatalf("podman-compose up: %v\n%s", err, out)
	}

	// Both managers ready: the database is up, manager-a created the
	// account and manager-b shares it.
	for _, port := range []string{portA, portB} {
		eventually(t, 3*time.Minute, "manager on port "+port+" ready", func() bool {
			code, _ := httpGet(t, "http://127.0.0.1:"+port+protocol.PathReady)
			return code == http.StatusOK
		})
	}
	// The CLI on the host talks to manager-b with its admin key.
	var env map[string]string
	eventually(t, time.Minute, "manager-b's admin.env", func() bool {
		out, err := podman(t, "exec", p.container("manager-b"), "cat", "/var/lib/legate/admin.env")
		if err != nil {
			return false
		}
		env = map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		return env["LEGATE_API_KEY"] != ""
	})
	b := &cluster{t: t, url: "http://127.0.0.1:" + portB, account: env["LEGATE_ACCOUNT_ID"], apiKey: env["LEGATE_API_KEY"]}
	a := &cluster{t: t, url: "http://127.0.0.1:" + portA, apiKey: env["LEGATE_API_KEY"]}

	// The delegate (connected to manager-a) is connected for both managers.
	for _, c := range []*cluster{a, b} {
		eventually(t, 3*time.Minute, "the compose delegate connected, seen from "+c.url, func() bool {
			for _, d := range c.delegates() {
				if d.Name == "compose-e2e" && d.Status == protocol.DelegateConnected {
					return true
				}
			}
			return false
		})
	}

	// A task submitted through manager-b runs on it, in its container.
	task, r := b.runJSON("--selector", "ha", "--script", `echo "ran as uid=$(id -u) on $(hostname)"`)
	if r.code != 0 || task.Status != protocol.StatusSucceeded {
		t.Fatalf("task run through manager-b: exit %d, status %s\nstderr: %s", r.code, task.Status, r.stderr)
	}
	if logs := b.mustCLI("task", "logs", task.ID); !strings.Contains(logs, "ran as uid=1000 on "+task.DelegateHostname) {
		t.Errorf("task output = %q, want it to show the delegate's container (uid 1000, hostname %s)", logs, task.DelegateHostname)
	}

	// High availability: the delegate is connected to manager-a, the first
	// of its MANAGER_HOST_AND_PORT. Stop manager-a: the delegate moves to
	// manager-b (the second), which then holds its connection, and a new
	// task submitted through manager-b runs on it. (A delegate stays with
	// the manager it moved to: should a call to manager-a have failed on
	// this busy machine, it is on manager-b already, and the test stops
	// manager-b instead and sees it move back.)
	holder, other, stop := a, b, "manager-a"
	eventually(t, time.Minute, "one manager holding the delegate's connection", func() bool {
		switch na, nb := connectedTo(a.url), connectedTo(b.url); {
		case na == 1 && nb == 0:
			holder, other, stop = a, b, "manager-a"
			return true
		case na == 0 && nb == 1:
			holder, other, stop = b, a, "manager-b"
			return true
		}
		return false
	})
	if holder != a {
		t.Logf("the delegate is on manager-b already (a call to manager-a failed): stopping manager-b instead")
	}
	if out, err := podman(t, "stop", "--time", "30", p.container(stop)); err != nil {
		t.Fatalf("podman stop %s: %v\n%s", stop, err, out)
	}
	eventually(t, 2*time.Minute, "the delegate connected to the other manager after "+stop+" stopped", func() bool {
		return connectedTo(other.url) == 1
	})
	other.waitConnected(task.DelegateHostname, "")
	after, r := other.runJSON("--selector", "ha", "--script", `echo "after failover on $(hostname)"`)
	if r.code != 0 || after.Status != protocol.StatusSucceeded {
		t.Fatalf("task run through the other manager after %s stopped: exit %d, status %s\nstderr: %s", stop, r.code, after.Status, r.stderr)
	}
	if after.DelegateHostname != task.DelegateHostname {
		t.Errorf("the task after failover ran on %q, want the compose delegate %q", after.DelegateHostname, task.DelegateHostname)
	}
	if logs := other.mustCLI("task", "logs", after.ID); !strings.Contains(logs, "after failover on "+task.DelegateHostname) {
		t.Errorf("task output after failover = %q, want it to show the delegate's container %s", logs, task.DelegateHostname)
	}
}

// connectedTo is the number of delegates connected to the manager at url
// (WebSocket or polling), from its /metrics; -1 when it does not answer.
func connectedTo(url string) int {
	f, err := promtest.TryScrape(url + protocol.PathMetrics)
	if err != nil {
		return -1
	}
	n := 0
	for _, conn := range []string{protocol.ConnWebSocket, protocol.ConnPolling} {
		v, err := f.Lookup("legate_manager_delegates_connected", "connection", conn)
		if err != nil {
			return -1
		}
		n += int(v)
	}
	return n
}
