package check

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/manifest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/testport"
)

// This file is the end-to-end proof of the install artifacts: for every
// kind, `legate manifest KIND` (the real CLI, against a real manager on
// 127.0.0.1) prints the artifact, envOf reads the delegate's environment
// back from it with the real types, and legate's image, built from the
// Containerfile with scripts/image, runs its delegate with exactly that
// environment in podman. The delegate must show up connected with the
// artifact's name and tags and run a task. Where podman cannot be used the
// test skips and says why, except under CI=true, where it fails.

// legateBinary is where the legate binary of this run is built (in a
// temporary directory TestMain removes), and delegateBinary legate-delegate
// (the delegate alone, -tags delegate) in a directory of its own;
// buildLegate builds both once.
var legateBinary, delegateBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "legate-check-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	legateBinary = filepath.Join(dir, "legate")
	delegateBinary = filepath.Join(dir, "delegate-only", "legate-delegate")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is the root of legate's repository, seen from this module.
const repoRoot = "../.."

// buildLegate builds the static legate and legate-delegate binaries from
// the repository's root at most once per test binary, as
// e2e/harness_test.go does (CGO_ENABLED=0, no other flag but -tags
// delegate), so both builds of one checkout are the same files and share
// one image (see kindsImage).
var buildLegate = sync.OnceValue(func() error {
	for _, b := range [][]string{{"-o", legateBinary}, {"-tags", "delegate", "-o", delegateBinary}} {
		build := exec.Command("go", append(append([]string{"build"}, b...), "./cmd/legate")...)
		build.Dir = repoRoot
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", filepath.Base(b[len(b)-1]), err, out)
		}
	}
	return nil
})

// podmanRun is how every container here is run: the runc runtime and
// explicit ulimits, which hosts whose cgroup layout crun cannot handle need
// (see scripts/podman-ensure and deploy/image/README.md).
var podmanRun = []string{"--runtime", "/usr/sbin/runc", "run",
	"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}

// imageName is the name of the image e2e/image_test.go builds too: with
// the same tag (a hash of the same inputs) one build serves both, and the
// e2e test's pruning of old tags covers this one's.
const imageName = "localhost/legate-e2e"

// kindsImage builds the delegate image at most once per test binary.
var kindsImage = sync.OnceValues(buildKindsImage)

// buildKindsImage makes sure podman and the base image are there
// (scripts/podman-ensure installs them as root), then builds the image
// with scripts/image from this run's binary, unless an image of the same
// inputs exists already.
func buildKindsImage() (string, error) {
	ensure := exec.Command("bash", filepath.Join(repoRoot, "scripts/podman-ensure"))
	if out, err := ensure.CombinedOutput(); err != nil {
		return "", fmt.Errorf("scripts/podman-ensure: %v\n%s", err, out)
	}
	if _, err := os.Stat("/usr/sbin/runc"); err != nil {
		return "", fmt.Errorf("no runc runtime at /usr/sbin/runc (podman's default crun cannot run containers on every host): %w", err)
	}
	if err := buildLegate(); err != nil {
		return "", err
	}
	tag, err := imageInputsHash()
	if err != nil {
		return "", err
	}
	ref := imageName + ":" + tag
	if exec.Command("podman", "image", "exists", ref).Run() == nil {
		return ref, nil
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot, "scripts/image"), "--engine", "podman",
		"--binary", legateBinary, "--delegate-binary", delegateBinary, "--name", imageName, "--version", tag)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/image: %v\n%s", err, out.String())
	}
	return ref, nil
}

// imageInputsHash is a hash of the binary and of the files the image is
// built from: the tag of the image. It is e2e/image_test.go's hash, byte
// for byte (the binary's base name included), so that both find one image.
func imageInputsHash() (string, error) {
	h := sha256.New()
	for _, f := range []string{legateBinary, delegateBinary, "Containerfile", ".dockerignore", "deploy/image/legate-healthcheck", "scripts/image"} {
		if f != legateBinary && f != delegateBinary {
			f = filepath.Join(repoRoot, f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("hash the image's inputs: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// needImage returns the image, or skips the test saying why podman cannot
// be used here (fails under CI=true, where the image must be tested).
func needImage(t *testing.T) string {
	t.Helper()
	ref, err := kindsImage()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the image tests must run in CI: %v", err)
		}
		t.Skipf("podman cannot be used here, so the artifacts are not run in the image: %v", err)
	}
	return ref
}

// eventually polls cond until it holds or d has passed.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}

// freePort is a port that nothing listens on now, outside the kernel's
// ephemeral range (internal/testport says why: a delegate on the host's
// network binds it on every address).
func freePort(t testing.TB) string {
	t.Helper()
	return testport.Free(t)
}

// uniqueName is a name no other test of this or another checkout uses.
func uniqueName(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// hostManager is a `legate manager` process on 127.0.0.1 and the admin
// credentials of its admin.env.
type hostManager struct {
	url, account, apiKey string
	// public is its --public-url.
	public string
}

// syncBuffer collects a process's output safely.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startHostManager starts the manager on a free port with a data directory
// of the test's own and waits for its admin.env and its /readyz; it is
// stopped when the test ends. Its public URL is its own address on
// 127.0.0.1 (as --public-url), and image, when not "", is its
// --delegate-image: the defaults of its install specs.
func startHostManager(t *testing.T, image string) hostManager {
	t.Helper()
	return startHostManagerOn(t, image, "127.0.0.1", "")
}

// startHostManagerOn is startHostManager listening on listenHost (the CLI
// still reaches it on 127.0.0.1) with the public URL http://publicHost:PORT
// ("" = its own address).
func startHostManagerOn(t *testing.T, image, listenHost, publicHost string) hostManager {
	t.Helper()
	data := t.TempDir()
	port := freePort(t)
	addr := "127.0.0.1:" + port
	public := "http://" + addr
	if publicHost != "" {
		public = "http://" + net.JoinHostPort(publicHost, port)
	}
	args := []string{"manager", "--listen", net.JoinHostPort(listenHost, port), "--data", data, "--heartbeat-interval", "500ms", "--public-url", public}
	if image != "" {
		args = append(args, "--delegate-image", image)
	}
	cmd := exec.Command(legateBinary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	cmd.Dir = t.TempDir()
	out, done := startProcess(t, cmd, "the manager", 30*time.Second)
	m := hostManager{url: "http://" + addr, public: public}
	eventually(t, 60*time.Second, "the manager's admin.env", func() bool {
		select {
		case <-done:
			t.Fatalf("the manager exited:\n%s", out.String())
		default:
		}
		env, err := readEnvFile(filepath.Join(data, "admin.env"))
		if err != nil || env["LEGATE_API_KEY"] == "" {
			return false
		}
		m.account, m.apiKey = env["LEGATE_ACCOUNT_ID"], env["LEGATE_API_KEY"]
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return m
}

// readEnvFile reads the KEY=VALUE lines of a file such as admin.env.
func readEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	return env, nil
}

// cli runs the legate CLI against the manager with the admin key and a
// minimal environment (no AWS_REGION or LEGATE_* of the machine), and
// returns its stdout; a non-zero exit fails the test.
func (m hostManager) cli(t testing.TB, args ...string) string {
	t.Helper()
	stdout, stderr, err := m.tryCLI(args...)
	if err != nil {
		t.Fatalf("legate %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// tryCLI is cli that returns the error (a non-zero exit) and stderr.
func (m hostManager) tryCLI(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, legateBinary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"LEGATE_URL=" + m.url, "LEGATE_API_KEY=" + m.apiKey}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// delegate is the delegate of the manager's list with this hostname.
func (m hostManager) delegate(t testing.TB, hostname string) (protocol.Delegate, bool) {
	t.Helper()
	var list protocol.DelegateList
	out := m.cli(t, "delegates", "list", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("decode delegates list: %v\n%s", err, out)
	}
	for _, d := range list.Delegates {
		if d.Hostname == hostname {
			return d, true
		}
	}
	return protocol.Delegate{}, false
}

// podman runs podman with args and returns its combined output.
func podman(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", args...).CombinedOutput()
	return string(out), err
}

// runDelegateContainer runs the image's delegate (`IMAGE delegate`) with
// exactly the environment env, on the host's network so that it reaches
// the manager on 127.0.0.1, under a hostname of its own (the delegate's
// identity), and removes the container when the test ends. It returns the
// container's name.
//
// One variable is overridden: DELEGATE_HTTP_PORT, the port of the
// delegate's /healthz, /readyz and /metrics, is a free port, because every
// container here shares the host's network and would otherwise all bind
// 3460. The artifacts leave it to its default, which in their own
// Kubernetes pod, ECS task or host is the delegate's alone.
func runDelegateContainer(t *testing.T, image, hostname string, env map[string]string) string {
	t.Helper()
	name := uniqueName("legate-kinds")
	args := append(append([]string{}, podmanRun...), "--detach", "--name", name, "--network", "host", "--hostname", hostname)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != "DELEGATE_HTTP_PORT" {
			args = append(args, "--env", k+"="+env[k])
		}
	}
	args = append(args, "--env", "DELEGATE_HTTP_PORT="+freePort(t), image, "delegate")
	if out, err := podman(args...); err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := podman("logs", name)
			t.Logf("--- output of container %s ---\n%s", name, out)
		}
		if out, err := podman("rm", "--force", "--volumes", "--time", "10", name); err != nil {
			t.Errorf("remove container %s: %v\n%s", name, err, out)
		}
	})
	return name
}

// containerStopped reports whether podman says the container no longer
// runs (not when podman could not answer, as on a busy machine).
func containerStopped(name string) bool {
	out, err := podman("inspect", "--format", "{{.State.Running}}", name)
	return err == nil && strings.TrimSpace(out) == "false"
}

// tagsOf is how the manager lists the tags of DELEGATE_TAGS: split at
// commas, trimmed, lowercased, sorted, without duplicates.
func tagsOf(s string) []string {
	seen := map[string]bool{}
	var tags []string
	for _, tag := range strings.Split(s, ",") {
		tag = strings.ToLower(strings.TrimSpace(tag))
		if tag != "" && !seen[tag] {
			seen[tag] = true
			tags = append(tags, tag)
		}
	}
	sort.Strings(tags)
	return tags
}

// TestEveryKindRunsInTheImage generates every kind's artifact with the
// real CLI, with the manager's public URL and delegate image (its
// --public-url and --delegate-image; on loopback here, so
// --allow-loopback), and runs the image's delegate with the environment
// read back from it. The kinds run in parallel, against one manager.
func TestEveryKindRunsInTheImage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the image is not built and run")
	}
	image := needImage(t)
	m := startHostManager(t, image)
	token := strings.TrimSpace(m.cli(t, "token", "create", "kinds", "--value-only"))

	for _, tc := range []struct {
		name, kind string
		flags      []string
	}{
		{"kubernetes", manifest.KindKubernetes, nil},
		{"helm", manifest.KindHelm, nil},
		{"docker", manifest.KindDocker, nil},
		{"docker-compose", manifest.KindDocker, []string{"--compose"}},
		{"ecs", manifest.KindECS, []string{"--region", "eu-west-1"}},
		{"fargate", manifest.KindFargate, []string{"--region", "eu-west-1", "--execution-role-arn", testRole}},
		// No systemd here: the unit's environment file is the
		// environment, and the image's delegate runs what the unit's
		// ExecStart would (legate delegate).
		{"systemd", manifest.KindSystemd, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := "kind-" + tc.name
			args := append([]string{"manifest", tc.kind, "--token", token,
				"--name", name, "--tags", name + ",Image Kinds"}, tc.flags...)
			// The manager's URL is on loopback: refused, with the flags
			// that fix it, unless this is a trial on its host.
			if _, stderr, err := m.tryCLI(args...); err == nil || !strings.Contains(stderr, "--public-url") || !strings.Contains(stderr, "--allow-loopback") {
				t.Errorf("a spec with the manager's loopback URL: %v, stderr %q; want a refusal naming --public-url and --allow-loopback", err, stderr)
			}
			artifact := m.cli(t, append(args, "--allow-loopback")...)
			if tc.kind != manifest.KindSystemd && !strings.Contains(artifact, image) {
				t.Fatalf("the artifact does not name the manager's delegate image %s:\n%s", image, artifact)
			}
			env, err := envOf(tc.kind, artifact)
			if err != nil {
				t.Fatalf("read the environment of the artifact: %v\n%s", err, artifact)
			}
			if env["MANAGER_HOST_AND_PORT"] != m.url {
				t.Errorf("the artifact's MANAGER_HOST_AND_PORT = %q, want the manager's public URL %s", env["MANAGER_HOST_AND_PORT"], m.url)
			}
			for k, v := range env {
				if strings.HasPrefix(v, "valueFrom:") {
					t.Fatalf("%s comes from outside the artifact (%s): the test cannot run it", k, v)
				}
			}

			hostname := uniqueName(name)
			container := runDelegateContainer(t, image, hostname, env)
			var got protocol.Delegate
			eventually(t, 2*time.Minute, "the delegate of "+tc.name+" connected", func() bool {
				d, ok := m.delegate(t, hostname)
				if ok && d.Status == protocol.DelegateConnected {
					got = d
					return true
				}
				if containerStopped(container) {
					t.Fatalf("the delegate's container stopped")
				}
				return false
			})
			// The artifact's name, tags and type, as the artifact says them
			// (and as asked of legate manifest).
			if got.Name != env["DELEGATE_NAME"] || got.Name != name {
				t.Errorf("delegate name = %q, want the artifact's DELEGATE_NAME %q (asked %q)", got.Name, env["DELEGATE_NAME"], name)
			}
			if diff := cmp.Diff(tagsOf(env["DELEGATE_TAGS"]), got.Tags); diff != "" {
				t.Errorf("delegate tags, against the artifact's DELEGATE_TAGS %q (-want +got):\n%s", env["DELEGATE_TAGS"], diff)
			}
			if diff := cmp.Diff([]string{"image kinds", name}, got.Tags); diff != "" {
				t.Errorf("delegate tags, against the asked ones (-want +got):\n%s", diff)
			}
			if !strings.EqualFold(got.Type, env["DELEGATE_TYPE"]) {
				t.Errorf("delegate type = %q, want the artifact's DELEGATE_TYPE %q", got.Type, env["DELEGATE_TYPE"])
			}

			// A task selected by the artifact's own tag runs in that
			// container: its hostname, the image's user, podman's marker.
			selector := tagsOf(env["DELEGATE_TAGS"])
			out := m.cli(t, "task", "run", "-o", "json", "--selector", strings.Join(selector, ","), "--script",
				`echo "host=$(hostname) uid=$(id -u)"; test -e /run/.containerenv && echo in-container`)
			var task protocol.Task
			if err := json.Unmarshal([]byte(out), &task); err != nil {
				t.Fatalf("decode task run: %v\n%s", err, out)
			}
			if task.Status != protocol.StatusSucceeded {
				t.Fatalf("task status = %s, want %s", task.Status, protocol.StatusSucceeded)
			}
			if task.DelegateHostname != hostname {
				t.Errorf("task ran on %q, want the container %q", task.DelegateHostname, hostname)
			}
			logs := m.cli(t, "task", "logs", task.ID)
			for _, want := range []string{"host=" + hostname + " uid=1000", "in-container"} {
				if !strings.Contains(logs, want) {
					t.Errorf("task output lacks %q:\n%s", want, logs)
				}
			}
		})
	}
}

// startProcess starts cmd with its output in a buffer it returns, with
// done closed when it exits; at the test's end it is sent SIGTERM (killed
// after grace), and its output logged as what's if the test failed.
func startProcess(t *testing.T, cmd *exec.Cmd, what string, grace time.Duration) (out *syncBuffer, done <-chan struct{}) {
	t.Helper()
	out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", what, out.String())
		}
	})
	return out, exited
}
