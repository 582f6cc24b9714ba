package containers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// testImage is the local Debian base (scripts/podman-ensure builds it):
// id, chown and touch are in it.
const testImage = "localhost/debian-min:bookworm"

// podmanForTest returns a runtime for tests that run real containers, or
// skips (fails under CI=true) saying why none can be used.
func podmanForTest(t *testing.T) *Runtime {
	t.Helper()
	unusable := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no container runtime can be used: %s (CI installs one with scripts/podman-ensure)", why)
		}
		t.Skipf("no container runtime can be used: %s (run scripts/podman-ensure)", why)
	}
	// The owner is the test's name and a random part: a run of the suite
	// that was killed mid-test (or one running at the same time) leaves
	// containers under its own owner, which this run's Sweep and
	// leftovers checks must not count.
	var b [4]byte
	_, _ = rand.Read(b[:])
	owner := "test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-" + hex.EncodeToString(b[:])
	c, err := Find(func(k string) string {
		switch k {
		case EnvContainerRuntime:
			return "podman"
		case EnvRuntimeFlags:
			if _, err := os.Stat("/usr/sbin/runc"); err == nil {
				return "--runtime /usr/sbin/runc"
			}
		case EnvRunFlags:
			return "--network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024"
		}
		return ""
	}, owner, "")
	if err != nil {
		unusable(err.Error())
	}
	if out, err := exec.Command(c.Path, append(c.GlobalFlags, "image", "exists", testImage)...).CombinedOutput(); err != nil {
		unusable("image " + testImage + " missing: " + strings.TrimSpace(string(out)))
	}
	return c
}

func containerTask(c protocol.ContainerSpec) protocol.TaskSpec {
	c.Image = testImage
	return protocol.TaskSpec{Type: protocol.TaskContainer, Container: &c}
}

// leftovers lists the containers and volumes labelled with c's owner.
func leftovers(t *testing.T, c *Runtime) string {
	t.Helper()
	if c.api != nil {
		return apiLeftovers(t, c)
	}
	f := "label=" + LabelOwner + "=" + c.Owner
	a, err := c.runtimeCmd(context.Background(), "ps", "--all", "--quiet", "--filter", f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.runtimeCmd(context.Background(), "volume", "ls", "--quiet", "--filter", f)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(a + b)
}

func TestContainerSecurityContext(t *testing.T) { testContainerSecurityContext(t, podmanForTest(t)) }

// testContainerSecurityContext runs the table of container tasks against
// a backend (the CLI's and the Engine API's).
func testContainerSecurityContext(t *testing.T, c *Runtime) {
	uid, gid := int64(1234), int64(4321)
	host := t.TempDir()
	c.HostPaths = []string{host}
	tests := []struct {
		name       string
		spec       protocol.TaskSpec
		wantStatus string
		wantOut    []string
	}{
		{name: "run_as_user and run_as_group", spec: containerTask(protocol.ContainerSpec{Command: []string{"id"},
			SecurityContext: &protocol.SecurityContext{RunAsUser: &uid, RunAsGroup: &gid}}),
			wantStatus: protocol.StatusSucceeded, wantOut: []string{"uid=1234", "gid=4321"}},
		{name: "read_only_root_filesystem", spec: containerTask(protocol.ContainerSpec{Script: "touch /x",
			SecurityContext: &protocol.SecurityContext{ReadOnlyRootFilesystem: true}}),
			wantStatus: protocol.StatusFailed, wantOut: []string{"Read-only file system"}},
		{name: "writable root without it", spec: containerTask(protocol.ContainerSpec{Script: "touch /x && echo wrote"}),
			wantStatus: protocol.StatusSucceeded, wantOut: []string{"wrote"}},
		{name: "drop_capability CHOWN", spec: containerTask(protocol.ContainerSpec{Script: "touch /tmp/f && chown 1:1 /tmp/f",
			SecurityContext: &protocol.SecurityContext{DropCapability: []string{"CHOWN"}}}),
			wantStatus: protocol.StatusFailed, wantOut: []string{"Operation not permitted"}},
		{name: "add_capability CHOWN after dropping ALL", spec: containerTask(protocol.ContainerSpec{Script: "touch /tmp/f && chown 1:1 /tmp/f && echo chowned",
			SecurityContext: &protocol.SecurityContext{DropCapability: []string{"ALL"}, AddCapability: []string{"CHOWN"}}}),
			wantStatus: protocol.StatusSucceeded, wantOut: []string{"chowned"}},
		{name: "read-only host_path", spec: containerTask(protocol.ContainerSpec{Script: "ls /h && touch /h/x",
			Volumes: []protocol.Volume{{Name: "h", MountPath: "/h", HostPath: &protocol.HostPathVolume{Path: host, ReadOnly: true}}}}),
			wantStatus: protocol.StatusFailed, wantOut: []string{"Read-only file system"}},
		{name: "empty_dir writable as another user", spec: containerTask(protocol.ContainerSpec{Script: "echo a > /w/f && cat /w/f",
			Volumes: []protocol.Volume{{Name: "w", MountPath: "/w", EmptyDir: &protocol.EmptyDirVolume{}}}}),
			wantStatus: protocol.StatusSucceeded, wantOut: []string{"a"}},
		{name: "exit code", spec: containerTask(protocol.ContainerSpec{Script: "exit 7"}), wantStatus: protocol.StatusFailed},
		{name: "secret env masked by name", spec: func() protocol.TaskSpec {
			s := containerTask(protocol.ContainerSpec{Script: `echo "[$TOKEN] [$PLAIN] [$LEGATE_TASK_ID]"`})
			s.Env, s.SecretEnv = map[string]string{"PLAIN": "p"}, map[string]string{"TOKEN": "s3cret"}
			return s
		}(), wantStatus: protocol.StatusSucceeded, wantOut: []string{"[s3cret] [p] [t_sec]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			x, err := runTask(context.Background(), c, taskOf("t_sec", tt.spec), &out)
			if status, why := statusOf(x, err); status != tt.wantStatus {
				t.Fatalf("status %s (%v), want %s; output:\n%s", status, why, tt.wantStatus, out.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tt.name == "exit code" && exitCode(x) != 7 {
				t.Errorf("exit code %d, want 7", exitCode(x))
			}
			if l := leftovers(t, c); l != "" {
				t.Errorf("left behind: %s", l)
			}
		})
	}
}

// TestContainerStopped: a timed-out and a cancelled container are gone
// (container and empty_dir volume) when the run ends.
func TestContainerStopped(t *testing.T) { testContainerStopped(t, podmanForTest(t)) }

func testContainerStopped(t *testing.T, c *Runtime) {
	spec := containerTask(protocol.ContainerSpec{Script: "echo started; sleep 600",
		Volumes: []protocol.Volume{{Name: "w", MountPath: "/w", EmptyDir: &protocol.EmptyDirVolume{}}}})
	t.Run("timeout", func(t *testing.T) {
		task := taskOf("t_to", spec)
		task.Timeout, task.KillGrace = 5*time.Second, time.Second
		x, err := runTask(context.Background(), c, task, nil)
		if err != nil || x.Stopped != "removed the container" {
			t.Fatalf("%+v, %v; want stopped and removed", x, err)
		}
		if l := leftovers(t, c); l != "" {
			t.Errorf("left behind: %s", l)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		w := &notifyWriter{want: "started", hit: make(chan struct{})}
		go func() { <-w.hit; cancel() }()
		task := taskOf("t_cancel", spec)
		task.KillGrace = time.Second
		x, err := runTask(ctx, c, task, w)
		if err != nil || x.Stopped != "removed the container" {
			t.Fatalf("%+v, %v; want stopped and removed", x, err)
		}
		if l := leftovers(t, c); l != "" {
			t.Errorf("left behind: %s", l)
		}
	})
}

// TestContainerSweep: what a crashed delegate left (a running container
// and a volume with its owner label) is removed by Sweep; another owner's
// are not.
func TestContainerSweep(t *testing.T) { testContainerSweep(t, podmanForTest(t)) }

func testContainerSweep(t *testing.T, c *Runtime) {
	other := *c
	other.Owner = c.Owner + "-other"
	ctx := context.Background()
	for _, rt := range []*Runtime{c, &other} {
		if rt.api != nil {
			apiCrashLeftover(t, rt)
			continue
		}
		run := newContainerRun(rt, "t_crash", &protocol.ContainerSpec{Image: testImage, Volumes: []protocol.Volume{{Name: "w", MountPath: "/w", EmptyDir: &protocol.EmptyDirVolume{}}}}, nil)
		args, err := runArgs(rt, &protocol.ContainerSpec{Image: testImage, Command: []string{"sleep", "600"}}, run)
		if err != nil {
			t.Fatal(err)
		}
		vol := []string{"volume", "create", "--label", LabelOwner + "=" + rt.Owner, run.Volumes["w"]}
		if _, err := rt.runtimeCmd(ctx, vol...); err != nil {
			t.Fatal(err)
		}
		// Detached, as a delegate killed mid-task leaves it.
		args = append(args[:len(rt.GlobalFlags)+1], append([]string{"--detach"}, args[len(rt.GlobalFlags)+1:]...)...)
		if _, err := rt.runtimeCmd(ctx, args[len(rt.GlobalFlags):]...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _, _ = other.Sweep(context.Background()) })
	nc, nv, err := c.Sweep(ctx)
	if err != nil || nc != 1 || nv != 1 {
		t.Fatalf("Sweep = %d containers, %d volumes, %v; want 1, 1", nc, nv, err)
	}
	if l := leftovers(t, c); l != "" {
		t.Errorf("left behind: %s", l)
	}
	if l := leftovers(t, &other); l == "" {
		t.Errorf("Sweep removed another owner's container and volume")
	}
}

func TestContainerFargateRefused(t *testing.T) {
	c := &Runtime{Path: "/nonexistent/podman", Name: "podman", Platform: protocol.PlatformFargate}
	_, err := c.NewRun(taskOf("t", containerTask(protocol.ContainerSpec{SecurityContext: &protocol.SecurityContext{Privileged: true}})))
	if err == nil || isFault(err) || !strings.Contains(err.Error(), "container.security_context.privileged: privileged containers are not supported on Fargate") {
		t.Fatalf("got %v", err)
	}
}

// TestContainerWorkspace: a stage workspace made by the first step keeps
// what it wrote for the next, whose run as another user reads it; the last
// step removes it; a later step that finds no workspace fails saying so
// instead of running on an empty one.
func TestContainerWorkspace(t *testing.T) { testContainerWorkspace(t, podmanForTest(t)) }

func testContainerWorkspace(t *testing.T, c *Runtime) {
	t.Cleanup(func() { _, _, _ = c.Sweep(context.Background()) })
	ws := func(w protocol.Workspace, script string) protocol.TaskSpec {
		return containerTask(protocol.ContainerSpec{Script: script,
			Volumes: []protocol.Volume{{Name: "ws", MountPath: "/ws", EmptyDir: &protocol.EmptyDirVolume{Workspace: &w}}}})
	}
	// A key of the run's own: volume names are global to the runtime's
	// storage, which other runs of these tests (and both backends) share.
	var b [4]byte
	_, _ = rand.Read(b[:])
	k1 := "k1" + hex.EncodeToString(b[:])
	steps := []struct {
		name       string
		spec       protocol.TaskSpec
		wantStatus string
		wantOut    string
		wantLeft   bool
	}{
		{"first writes", ws(protocol.Workspace{Key: k1, Create: true}, "echo built > /ws/artifact && chmod -R a+rwX /ws"), protocol.StatusSucceeded, "", true},
		{"second reads", ws(protocol.Workspace{Key: k1}, "cat /ws/artifact"), protocol.StatusSucceeded, "built", true},
		{"last reads and removes", ws(protocol.Workspace{Key: k1, Remove: true}, "cat /ws/artifact"), protocol.StatusSucceeded, "built", false},
		{"gone", ws(protocol.Workspace{Key: k1}, "cat /ws/artifact"), protocol.StatusFailed, "", false},
	}
	for _, s := range steps {
		var out bytes.Buffer
		status, why := statusOf(runTask(context.Background(), c, taskOf("t_ws", s.spec), &out))
		if status != s.wantStatus || !strings.Contains(out.String(), s.wantOut) {
			t.Fatalf("%s: status %s (%v), want %s with %q; output:\n%s", s.name, status, why, s.wantStatus, s.wantOut, out.String())
		}
		if s.name == "gone" && (why == nil || !strings.Contains(why.Error(), `the stage workspace "ws" (volume legate-ws-`+k1+`) is not on this delegate`)) {
			t.Errorf("gone: error %v", why)
		}
		if l := leftovers(t, c); (l != "") != s.wantLeft {
			t.Errorf("%s: left behind %q, want something: %v", s.name, l, s.wantLeft)
		}
	}
}

func TestDeployWorkspace(t *testing.T) { testDeployWorkspace(t, podmanForTest(t)) }

// testDeployWorkspace: a deploy step of a stage reads, on the delegate's
// own filesystem, what a container step wrote to the stage's workspace
// (WorkspaceDir), and the last step removes the volume (RemoveWorkspace);
// then the workspace is reported missing, not read as empty.
func testDeployWorkspace(t *testing.T, c *Runtime) {
	t.Cleanup(func() { _, _, _ = c.Sweep(context.Background()) })
	var b [4]byte
	_, _ = rand.Read(b[:])
	key := "dw" + hex.EncodeToString(b[:])
	spec := containerTask(protocol.ContainerSpec{Script: "echo built > /ws/artifact && chmod -R a+rwX /ws",
		Volumes: []protocol.Volume{{Name: "ws", MountPath: "/ws", EmptyDir: &protocol.EmptyDirVolume{Workspace: &protocol.Workspace{Key: key, Create: true}}}}})
	var out bytes.Buffer
	if status, why := statusOf(runTask(context.Background(), c, taskOf("t_dw", spec), &out)); status != protocol.StatusSucceeded {
		t.Fatalf("the container step: %s (%v)\n%s", status, why, out.String())
	}
	ws := &protocol.DeployWorkspace{Name: "ws", Key: key, Remove: true}
	dir, err := c.WorkspaceDir(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "artifact")); err != nil || strings.TrimSpace(string(got)) != "built" {
		t.Fatalf("read the workspace at %s: %q %v", dir, got, err)
	}
	out.Reset()
	c.RemoveWorkspace(ws, &out)
	if out.Len() != 0 {
		t.Fatalf("RemoveWorkspace: %s", out.String())
	}
	if _, err := c.WorkspaceDir(context.Background(), ws); !errors.Is(err, ErrNoWorkspace) {
		t.Fatalf("after the removal: %v, want ErrNoWorkspace", err)
	}
}
