package containers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/podmantest"
	"github.com/legate-dev/legate/internal/protocol"
)

// apiForTest returns an Engine API backend on a podman service of the
// test's own, with an owner of its own (see podmanForTest).
func apiForTest(t *testing.T) *Runtime {
	t.Helper()
	sock := podmantest.Service(t, testImage)
	var b [4]byte
	_, _ = rand.Read(b[:])
	owner := "test-dockerapi-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-" + hex.EncodeToString(b[:])
	c, err := Find(func(k string) string {
		if k == "DOCKER_HOST" {
			return "unix://" + sock
		}
		return ""
	}, owner, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != RuntimeDockerAPI || c.api == nil {
		t.Fatalf("DOCKER_HOST=unix://…: runtime %q, want %s", c.Name, RuntimeDockerAPI)
	}
	t.Cleanup(func() { _, _, _ = c.Sweep(context.Background()) })
	return c
}

// apiLeftovers is leftovers for the Engine API backend.
func apiLeftovers(t *testing.T, c *Runtime) string {
	t.Helper()
	ctx := context.Background()
	label := labelFilter(LabelOwner + "=" + c.Owner)
	var cs []struct {
		ID string `json:"Id"`
	}
	if err := c.api.call(ctx, http.MethodGet, "/containers/json", mergeQuery(labelFilter(LabelOwner+"="+c.Owner), url.Values{"all": {"1"}}), nil, &cs); err != nil {
		t.Fatal(err)
	}
	var vs struct{ Volumes []struct{ Name string } }
	if err := c.api.call(ctx, http.MethodGet, "/volumes", label, nil, &vs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range cs {
		out = append(out, x.ID)
	}
	for _, v := range vs.Volumes {
		out = append(out, v.Name)
	}
	return strings.Join(out, " ")
}

// apiCrashLeftover leaves what a delegate killed mid-task leaves: a
// running container and a volume with rt's owner label.
func apiCrashLeftover(t *testing.T, rt *Runtime) {
	t.Helper()
	ctx := context.Background()
	spec := &protocol.ContainerSpec{Image: testImage, Command: []string{"sleep", "600"},
		Volumes: []protocol.Volume{{Name: "w", MountPath: "/w", EmptyDir: &protocol.EmptyDirVolume{}}}}
	run := newContainerRun(rt, "t_crash", spec, nil)
	if _, err := rt.api.createVolume(ctx, run.Volumes["w"], map[string]string{LabelOwner: rt.Owner}); err != nil {
		t.Fatal(err)
	}
	body, err := createBody(rt, spec, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.api.call(ctx, http.MethodPost, "/containers/create", url.Values{"name": {run.Name}}, body, nil); err != nil {
		t.Fatal(err)
	}
	if err := rt.api.call(ctx, http.MethodPost, "/containers/"+run.Name+"/start", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// TestDockerAPIContainers runs the container tests of the CLI backend
// against the Engine API backend, on podman's Docker-compatible service:
// output, exit code, environment and secrets, security context and
// volumes, timeout and cancel, a stage's workspace shared between steps,
// the sweep of what a crashed delegate left.
func TestDockerAPIContainers(t *testing.T) {
	c := apiForTest(t)
	t.Run("SecurityContext", func(t *testing.T) { testContainerSecurityContext(t, c) })
	t.Run("Stopped", func(t *testing.T) { testContainerStopped(t, c) })
	t.Run("Workspace", func(t *testing.T) { testContainerWorkspace(t, c) })
	t.Run("DeployWorkspace", func(t *testing.T) { testDeployWorkspace(t, c) })
	t.Run("Sweep", func(t *testing.T) { testContainerSweep(t, c) })
	t.Run("stdout and stderr", func(t *testing.T) {
		var out bytes.Buffer
		status, why := statusOf(runTask(context.Background(), c,
			taskOf("t_out", containerTask(protocol.ContainerSpec{Command: []string{"/bin/sh", "-c", "echo one; echo two >&2; echo three"}, WorkingDir: "/tmp"})), &out))
		// The two streams are in order each, not with each other.
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		slices.Sort(lines)
		if status != protocol.StatusSucceeded || !slices.Equal(lines, []string{"one", "three", "two"}) || strings.Index(out.String(), "one") > strings.Index(out.String(), "three") {
			t.Fatalf("status %s (%v), output %q", status, why, out.String())
		}
	})
	t.Run("missing image is pulled", func(t *testing.T) {
		// No registry is reachable here: the pull fails, saying so.
		var out bytes.Buffer
		spec := protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "localhost:1/dockerapi-missing:v1", Script: "true"}}
		status, why := statusOf(runTask(context.Background(), c, taskOf("t_pull", spec), &out))
		if status != protocol.StatusFailed || why == nil || !strings.Contains(why.Error(), "pull localhost:1/dockerapi-missing:v1") {
			t.Fatalf("status %s, error %v", status, why)
		}
		if !strings.HasPrefix(out.String(), "[legate: pulling localhost:1/dockerapi-missing:v1]\n") {
			t.Errorf("output %q", out.String())
		}
		if l := leftovers(t, c); l != "" {
			t.Errorf("left behind: %s", l)
		}
	})
}

func TestDemux(t *testing.T) {
	frame := func(stream byte, s string) []byte {
		n := len(s)
		return append([]byte{stream, 0, 0, 0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, s...)
	}
	in := append(append(frame(1, "out\n"), frame(2, "err\n")...), frame(1, strings.Repeat("x", 70000))...)
	var out bytes.Buffer
	if err := demux(bytes.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if want := "out\nerr\n" + strings.Repeat("x", 70000); out.String() != want {
		t.Errorf("demux: %d bytes, want %d", out.Len(), len(want))
	}
}

func TestSplitImage(t *testing.T) {
	for ref, want := range map[string][2]string{
		"alpine":                         {"alpine", "latest"},
		"alpine:3":                       {"alpine", "3"},
		"localhost:5000/a/b":             {"localhost:5000/a/b", "latest"},
		"localhost:5000/a/b:v1":          {"localhost:5000/a/b", "v1"},
		"alpine@sha256:0123456789abcdef": {"alpine@sha256:0123456789abcdef", ""},
	} {
		i, tag := splitImage(ref)
		if [2]string{i, tag} != want {
			t.Errorf("splitImage(%q) = %q, %q; want %q", ref, i, tag, want)
		}
	}
}

// fakeDaemon serves handler on a unix socket and returns its path.
func fakeDaemon(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dockerapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// TestFindDockerAPI: how the Engine API backend is chosen, and what a
// delegate is told when it cannot use it.
func TestFindDockerAPI(t *testing.T) {
	old := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"Version":"18.09.1","ApiVersion":"1.39"}`)
	})
	current := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"Version":"27.3.1","ApiVersion":"1.47"}`)
	})
	missing := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		name     string
		env      map[string]string
		platform string
		want     string // runtime name
		wantErr  string
	}{
		{name: "DOCKER_HOST unix", env: map[string]string{"DOCKER_HOST": "unix://" + current}, want: RuntimeDockerAPI},
		{name: "chosen by name", env: map[string]string{EnvContainerRuntime: "docker-api", "DOCKER_HOST": "unix://" + current}, want: RuntimeDockerAPI},
		{name: "socket missing", env: map[string]string{EnvContainerRuntime: "docker-api", "DOCKER_HOST": "unix://" + missing},
			wantErr: "no Docker API socket at " + missing + ": mount the host's /var/run/docker.sock into the delegate's container"},
		{name: "API too old", env: map[string]string{EnvContainerRuntime: "docker-api", "DOCKER_HOST": "unix://" + old},
			wantErr: `speaks API version "1.39" (Docker 18.09.1); legate needs 1.40 or newer`},
		{name: "tcp DOCKER_HOST", env: map[string]string{EnvContainerRuntime: "docker-api", "DOCKER_HOST": "tcp://10.0.0.1:2375"},
			wantErr: "the Engine API backend speaks to a unix socket only"},
		{name: "CLI flags", env: map[string]string{EnvContainerRuntime: "docker-api", "DOCKER_HOST": "unix://" + current, EnvRunFlags: "--network host"},
			wantErr: "are flags of a runtime's CLI; the docker-api backend has none"},
		{name: "Fargate", env: map[string]string{}, platform: protocol.PlatformFargate, wantErr: NoRuntimeOnFargate},
		{name: "Fargate with a socket named", env: map[string]string{"DOCKER_HOST": "unix://" + current}, platform: protocol.PlatformFargate, want: RuntimeDockerAPI},
		{name: "Fargate with a socket that is not there", env: map[string]string{"DOCKER_HOST": "unix://" + missing}, platform: protocol.PlatformFargate,
			wantErr: "no Docker API socket at " + missing},
		{name: "the default socket, chosen by name", env: map[string]string{EnvContainerRuntime: "docker-api"},
			wantErr: "no Docker API socket at /var/run/docker.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Find(func(k string) string { return tt.env[k] }, "o1", tt.platform)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != tt.want {
				t.Errorf("runtime %q, want %q", c.Name, tt.want)
			}
		})
	}
}

// TestDockerAPISocketPermission: the message for a socket the delegate
// may not open says which user it runs as and what to set.
func TestDockerAPISocketPermission(t *testing.T) {
	err := socketError("/var/run/docker.sock", &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)})
	for _, w := range []string{"permission denied on the Docker API socket /var/run/docker.sock", fmt.Sprintf("the delegate runs as uid %d", os.Getuid()), "--group-add", `"user": "0"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v: lacks %q", err, w)
		}
	}
}

// TestDockerHostLeftOnAPodmanHost: a DOCKER_HOST whose socket is not
// there does not take podman's CLI away (podman does not read it); with
// no CLI either, the reason names both.
func TestDockerHostLeftOnAPodmanHost(t *testing.T) {
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	env := map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(bin, "gone.sock")}
	getenv := func(k string) string { return env[k] }
	_, err := Find(getenv, "o1", "")
	if err == nil || !strings.Contains(err.Error(), "DOCKER_HOST: no Docker API socket at "+env["DOCKER_HOST"][len("unix://"):]) ||
		!strings.Contains(err.Error(), `"podman": executable file not found`) {
		t.Fatalf("without a CLI: %v", err)
	}
	if err := os.WriteFile(filepath.Join(bin, "podman"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Find(getenv, "o1", "")
	if err != nil || c.Name != "podman" {
		t.Fatalf("with podman on PATH: %+v, %v", c, err)
	}
}

// TestDockerAPIPullProgress: a missing image is pulled (with a tag: the
// API pulls every tag of a repository without one); the pull's progress
// goes to the output one line per layer and step, at most maxPullLines,
// then a count of what was left out; an error line fails the pull.
func TestDockerAPIPullProgress(t *testing.T) {
	var mu sync.Mutex // the daemon's handler runs on its own goroutines
	var pulled []string
	have := false
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/json"):
			if !have {
				w.WriteHeader(http.StatusNotFound)
				io.WriteString(w, `{"message":"no such image"}`)
			}
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/images/create"):
			pulled = append(pulled, r.URL.Query().Get("fromImage")+" "+r.URL.Query().Get("tag"))
			if r.URL.Query().Get("tag") == "bad" {
				io.WriteString(w, `{"status":"Pulling"}`+"\n"+`{"error":"manifest unknown"}`+"\n")
				return
			}
			for i := range 60 {
				for _, st := range []string{"Downloading", "Downloading", "Pull complete"} {
					fmt.Fprintf(w, `{"status":%q,"id":"layer%02d","progressDetail":{"current":%d}}`+"\n", st, i, i)
				}
			}
			have = true
		}
	})
	d := newDockerAPI(sock)
	var out bytes.Buffer
	if err := d.ensureImage(context.Background(), "registry.example/app", &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1+maxPullLines+1 || lines[0] != "[legate: pulling registry.example/app]" ||
		lines[1] != "Downloading layer00" || lines[2] != "Pull complete layer00" ||
		lines[len(lines)-1] != "[legate: 70 more pull lines not shown]" {
		t.Errorf("output:\n%s", out.String())
	}
	mu.Lock()
	have = false
	mu.Unlock()
	err := d.ensureImage(context.Background(), "registry.example/app:bad", io.Discard)
	if err == nil || err.Error() != "pull registry.example/app:bad: manifest unknown" {
		t.Errorf("failed pull: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"registry.example/app latest", "registry.example/app bad"}; !slices.Equal(pulled, want) {
		t.Errorf("pulled %q, want %q", pulled, want)
	}
}

// TestDockerAPIStartedBeforeThePull: a container task through the Engine
// API is started (OnStart, once) when its image pull begins, as the CLI's
// run process is: a long pull is a running task, not a claimed task that
// never started (which the manager takes away from its delegate).
func TestDockerAPIStartedBeforeThePull(t *testing.T) {
	started := make(chan struct{})
	sock := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/json"):
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"no such image"}`)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/images/create"):
			// The pull goes on until the task is reported started (a
			// bound, not a margin: before the fix it never was).
			select {
			case <-started:
				io.WriteString(w, `{"error":"manifest unknown"}`+"\n")
			case <-time.After(time.Minute):
				io.WriteString(w, `{"error":"not started during the pull"}`+"\n")
			}
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"not in this fake"}`)
		}
	})
	c := &Runtime{Path: sock, Name: RuntimeDockerAPI, Owner: "pullstart", api: newDockerAPI(sock)}
	calls := 0
	task := taskOf("t1", protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "registry.example/slow:v1", Script: "true"}})
	task.OnStart = func() {
		calls++
		close(started)
	}
	_, err := runTask(context.Background(), c, task, io.Discard)
	if calls != 1 {
		t.Errorf("OnStart called %d times, want once, when the pull began", calls)
	}
	if err == nil || !strings.Contains(err.Error(), "manifest unknown") {
		t.Errorf("error %v, want the pull's: manifest unknown", err)
	}
}
