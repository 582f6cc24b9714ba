package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// The tests of this file build legate's container image for real (the
// Containerfile, with scripts/image, once per `go test` run and reused by
// later runs while the binary and the image's files are unchanged) and run
// it with podman: a delegate in a container against a manager process on
// the host, and the image's manager entrypoint. Where podman cannot be used
// they skip and say why, except under CI=true, where they fail.

// podmanRun is how every container of these tests is run: the runc runtime
// and explicit ulimits, which hosts whose cgroup layout crun cannot handle
// need (see scripts/podman-ensure).
var podmanRun = []string{"--runtime", "/usr/sbin/runc", "run",
	"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}

// e2eImageName is the name of the images these tests build; the tag is a
// hash of what goes into the image.
const e2eImageName = "localhost/legate-e2e"

// legateImages builds the delegate image and the scratch manager image at
// most once per test binary.
var legateImages = sync.OnceValues(buildImages)

// images are the references of the images built from the Containerfile.
type images struct {
	delegate, managerScratch string
}

// needPodman skips the test when podman cannot run the images here (fails
// under CI=true), after scripts/podman-ensure had its chance to install it
// and build the base image.
func needPodman(t *testing.T) images {
	t.Helper()
	imgs, err := legateImages()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the image tests must run in CI: %v", err)
		}
		t.Skipf("podman cannot be used here, so the image is not tested: %v", err)
	}
	return imgs
}

// buildImages makes sure podman and the base image are there (running
// scripts/podman-ensure, which installs them as root), then builds both
// images with scripts/image from the binary of this run, unless images of
// the same inputs exist already.
func buildImages() (images, error) {
	ensure := exec.Command("bash", "../scripts/podman-ensure")
	if out, err := ensure.CombinedOutput(); err != nil {
		return images{}, fmt.Errorf("scripts/podman-ensure: %v\n%s", err, out)
	}
	if _, err := os.Stat("/usr/sbin/runc"); err != nil {
		return images{}, fmt.Errorf("no runc runtime at /usr/sbin/runc (podman's default crun cannot run containers on every host): %w", err)
	}
	tag, err := imageInputsHash()
	if err != nil {
		return images{}, err
	}
	imgs := images{delegate: e2eImageName + ":" + tag, managerScratch: e2eImageName + ":" + tag + "-manager-scratch"}
	for _, b := range []struct {
		ref  string
		args []string
	}{
		{imgs.delegate, nil},
		{imgs.managerScratch, []string{"--target", "manager-scratch"}},
	} {
		if exec.Command("podman", "image", "exists", b.ref).Run() == nil {
			continue
		}
		args := []string{"../scripts/image", "--engine", "podman", "--binary", binary}
		if lite, err := delegateOnlyBinary(); err == nil {
			args = append(args, "--delegate-binary", lite)
		}
		args = append(append(args, "--name", e2eImageName, "--version", tag), b.args...)
		cmd := exec.Command("bash", args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return images{}, fmt.Errorf("scripts/image %s: %v\n%s", strings.Join(b.args, " "), err, out.String())
		}
	}
	// Images of earlier binaries pile up (about 20 MB each): untag those
	// older than a day (an image a container uses stays).
	if old, err := exec.Command("podman", "images", "--format", "{{.Repository}}:{{.Tag}}",
		"--filter", "reference="+e2eImageName, "--filter", "until=24h").Output(); err == nil {
		for _, ref := range strings.Fields(string(old)) {
			if ref != imgs.delegate && ref != imgs.managerScratch {
				_ = exec.Command("podman", "rmi", ref).Run()
			}
		}
	}
	return imgs, nil
}

// imageInputsHash is a hash of the binaries and of the files the image is
// built from: the tag of this run's images.
func imageInputsHash() (string, error) {
	h := sha256.New()
	files := []string{binary}
	if lite, err := delegateOnlyBinary(); err == nil {
		files = append(files, lite)
	}
	for _, f := range append(files, "../Containerfile", "../.dockerignore", "../deploy/image/legate-healthcheck", "../scripts/image") {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("hash the image's inputs: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// podman runs podman with args and returns its combined output.
func podman(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", args...).CombinedOutput()
	return string(out), err
}

// uniqueName is a name for a container, volume or network no other test
// (of this run or of another checkout on the machine) uses.
func uniqueName(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// container is a running container of a test.
type container struct {
	t    testing.TB
	name string
}

// logs is the container's output so far.
func (c container) logs() string {
	out, _ := podman(c.t, "logs", c.name)
	return out
}

// stopped reports whether podman says the container is no longer running
// (not when podman could not answer, as may happen on a busy machine).
func (c container) stopped() bool {
	out, err := podman(c.t, "inspect", "--format", "{{.State.Running}}", c.name)
	return err == nil && strings.TrimSpace(out) == "false"
}

// runContainer starts a detached container on the host's network with the
// given podman flags, image and arguments, and removes it (with its
// anonymous volumes) when the test ends, printing its output when the test
// failed.
func runContainer(t testing.TB, image string, flags []string, args ...string) container {
	t.Helper()
	c := container{t: t, name: uniqueName("legate-e2e")}
	run := append(append([]string{}, podmanRun...), "--detach", "--name", c.name, "--network", "host")
	run = append(append(append(run, flags...), image), args...)
	if out, err := podman(t, run...); err != nil {
		t.Fatalf("podman run %s: %v\n%s", image, err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- output of container %s ---\n%s", c.name, c.logs())
		}
		if out, err := podman(t, "rm", "--force", "--volumes", "--time", "10", c.name); err != nil {
			t.Errorf("remove container %s: %v\n%s", c.name, err, out)
		}
	})
	return c
}

// imageDelegate is a delegate running in a container of the image.
type imageDelegate struct {
	container
	// hostname is the container's hostname, which the delegate registers
	// with (its identity).
	hostname string
	// httpPort is the port of its /healthz, /readyz and /metrics on the
	// host's network.
	httpPort string
}

// runImageDelegate runs the image's delegate (`IMAGE delegate`, the
// image's default command) with the environment env, as a manifest or a
// user sets it, on the host's network so that it reaches a manager on
// 127.0.0.1. Two variables are set for it, because every delegate of the
// machine shares that network and the tests run in parallel: the container
// gets a hostname of its own (the delegate's identity), and
// DELEGATE_HTTP_PORT, whatever env says, is a free port (its health server).
// The container is removed when the test ends.
func runImageDelegate(t *testing.T, env map[string]string) imageDelegate {
	t.Helper()
	imgs := needPodman(t)
	d := imageDelegate{hostname: uniqueName("img-delegate")}
	_, d.httpPort, _ = strings.Cut(freePort(t), ":")
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	flags := []string{"--hostname", d.hostname}
	for _, k := range keys {
		if k != "DELEGATE_HTTP_PORT" {
			flags = append(flags, "--env", k+"="+env[k])
		}
	}
	flags = append(flags, "--env", "DELEGATE_HTTP_PORT="+d.httpPort)
	d.container = runContainer(t, imgs.delegate, flags, "delegate")
	return d
}

// waitImageDelegate waits until the manager lists the containerised
// delegate as connected and returns it. A container starts more slowly than
// a process, on a busy machine in particular: the wait is long, and ends
// early when the container stops.
func (c *cluster) waitImageDelegate(d imageDelegate) protocol.Delegate {
	c.t.Helper()
	var got protocol.Delegate
	eventually(c.t, 90*time.Second, "containerised delegate "+d.hostname+" connected", func() bool {
		dl, ok := c.findDelegate(d.hostname)
		if ok && dl.Status == protocol.DelegateConnected {
			got = dl
			return true
		}
		if d.stopped() {
			c.t.Fatalf("the delegate's container stopped:\n%s", d.logs())
		}
		return false
	})
	return got
}

func TestImageDelegateRunsTaskInContainer(t *testing.T) {
	t.Parallel()
	needPodman(t)
	c := startCluster(t)
	token := c.token("image")
	d := runImageDelegate(t, map[string]string{
		"ACCOUNT_ID":            c.account,
		"DELEGATE_TOKEN":        token,
		"MANAGER_HOST_AND_PORT": c.url,
		"DELEGATE_NAME":         "image-delegate",
		"DELEGATE_TAGS":         "image, E2E",
	})
	got := c.waitImageDelegate(d)
	if got.Name != "image-delegate" {
		t.Errorf("delegate name = %q, want image-delegate", got.Name)
	}
	// `legate delegate` runs as the image's legate-delegate, the delegate
	// alone (skipped when this run tests a binary built elsewhere).
	if _, err := delegateOnlyBinary(); err == nil && !strings.Contains(d.logs(), "binary=/usr/local/bin/legate-delegate ") {
		t.Errorf("the image's delegate does not run as /usr/local/bin/legate-delegate:\n%s", d.logs())
	}
	if diff := cmp.Diff([]string{"e2e", "image"}, got.Tags); diff != "" {
		t.Errorf("delegate tags (-want +got):\n%s", diff)
	}

	// The task proves it ran in the container: as the image's user, on its
	// hostname, with podman's marker file.
	task, r := c.runJSON("--selector", "image", "--script",
		`echo "user=$(id -un) uid=$(id -u) host=$(hostname) pwd=$PWD"; test -e /run/.containerenv && echo in-container`)
	if r.code != 0 || task.Status != protocol.StatusSucceeded {
		t.Fatalf("task run: exit %d, status %s\nstderr: %s", r.code, task.Status, r.stderr)
	}
	if task.DelegateHostname != d.hostname {
		t.Errorf("task ran on %q, want the container %q", task.DelegateHostname, d.hostname)
	}
	logs := c.mustCLI("task", "logs", task.ID)
	for _, want := range []string{"user=legate uid=1000 host=" + d.hostname, "in-container"} {
		if !strings.Contains(logs, want) {
			t.Errorf("task output lacks %q:\n%s", want, logs)
		}
	}

	// The image's HEALTHCHECK asks the delegate's /healthz.
	if out, err := podman(t, "healthcheck", "run", d.name); err != nil {
		t.Errorf("podman healthcheck run (the delegate): %v\n%s", err, out)
	}
	if code, body := httpGet(t, "http://127.0.0.1:"+d.httpPort+protocol.PathReady); code != http.StatusOK {
		t.Errorf("delegate GET /readyz = %d %s, want 200", code, body)
	}
}

func TestImageManagerServesReadyz(t *testing.T) {
	t.Parallel()
	imgs := needPodman(t)
	for _, tc := range []struct {
		name, image string
		// healthcheck: the image has one (the scratch image has none).
		healthcheck bool
	}{
		{"debian", imgs.delegate, true},
		{"scratch", imgs.managerScratch, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := freePort(t)
			// The image's own working directory (a volume) holds the data:
			// no --data.
			m := runContainer(t, tc.image, nil, "manager", "--listen", addr)
			eventually(t, 90*time.Second, "the containerised manager's /readyz", func() bool {
				if m.stopped() {
					t.Fatalf("the manager's container stopped:\n%s", m.logs())
				}
				code, _ := httpGet(t, "http://"+addr+protocol.PathReady)
				return code == http.StatusOK
			})
			if out, err := podman(t, "exec", m.name, "legate", "version"); err != nil || !strings.HasPrefix(out, "legate ") {
				t.Errorf("legate version in the container: %v\n%s", err, out)
			}
			// Its data directory is under the working directory, the
			// image's volume /var/lib/legate.
			if !strings.Contains(m.logs(), "admin credentials in legate-data/admin.env") {
				t.Errorf("the manager did not write legate-data/admin.env under its working directory:\n%s", m.logs())
			}
			if tc.healthcheck {
				if out, err := podman(t, "healthcheck", "run", m.name); err != nil {
					t.Errorf("podman healthcheck run (the manager): %v\n%s", err, out)
				}
			}
		})
	}
}

// httpGet returns the status code and body of a GET, or 0 when the request
// failed.
func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}
