// Package containers is the delegate's container runtime: it runs one
// container task's container on a runtime's CLI, podman or docker
// (cli.go), on a Docker Engine API socket (dockerapi.go, engineapi.go),
// or as a Kubernetes pod (pod.go, podrun.go); it applies the delegate's
// policy for what a container may ask of its host (hostpolicy.go) before
// anything starts, labels what it creates with the delegate's owner and
// sweeps what an earlier run of the delegate left, and keeps a pipeline
// stage's workspace volume, which the deploy steps read (workspace.go).
//
// It is the backend of the executor's container task type and knows
// nothing of the executor: a Run follows the lifecycle the executor's one
// wait loop drives (Start, Done, Interrupt, Terminate, Finish, Cleanup)
// and says how the container ended (an Exit) or what stopping it did; the
// executor turns that into the task's outcome and notices, and consumes a
// Runtime through an interface of its own. An error that is the
// delegate's fault, not the task's, has a DelegateFault method.
//
// Why this seam: the backends are a third of what the executor was, and
// depend on nothing of it but the lifecycle, which a Run mirrors. The
// deploy task types (kubernetes, helm, verify) share the executor's Type,
// Execution, Outcome and wait loop with its other types, so they stay
// there; moving them out would have put those in a third package.
package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Labels every container and volume a delegate creates carries, so that
// the delegate finds them again (after its own crash included).
const (
	// LabelOwner identifies the delegate that created it: a hash of its
	// working directory, stable across its restarts (see Runtime.Owner).
	LabelOwner = "dev.legate.owner"
	// LabelTask is the task's ID.
	LabelTask = "dev.legate.task"
	// LabelRun is unique to one run of the task.
	LabelRun = "dev.legate.run"
	// LabelWorkspace is on a pipeline stage's shared workspace volume
	// (instead of the task and run labels): its key.
	LabelWorkspace = "dev.legate.workspace"
)

// Environment variables that configure task containers on the delegate.
const (
	// EnvContainerRuntime chooses the runtime: "podman", "docker", a path
	// to either, RuntimeDockerAPI (the Engine API on DOCKER_HOST's unix
	// socket, else DefaultDockerSocket), or "none" (no container tasks).
	// Empty: the Engine API when DOCKER_HOST names a unix socket, else
	// podman, else docker, whichever is on PATH first, else the Engine API
	// when DefaultDockerSocket is a socket.
	EnvContainerRuntime = "DELEGATE_CONTAINER_RUNTIME"
	// EnvRuntimeFlags are flags given to the runtime before every
	// subcommand, space-separated (such as "--runtime /usr/sbin/runc").
	EnvRuntimeFlags = "LEGATE_CONTAINER_RUNTIME_FLAGS"
	// EnvRunFlags are flags added to every `run`, space-separated (such as
	// "--ulimit nofile=1024:1024 --network host").
	EnvRunFlags = "LEGATE_CONTAINER_RUN_FLAGS"
	// EnvEFSRoot is the host directory under which EFS file systems are
	// mounted, one directory per file system ID (ROOT/fs-12345678).
	EnvEFSRoot = "LEGATE_EFS_ROOT"
)

// Runtime is how a delegate runs container tasks: its container runtime
// and the delegate's policy for it. A delegate without one (Find's error)
// fails container tasks as a delegate fault.
type Runtime struct {
	// Path is the path of the runtime's CLI (of its socket, for the
	// Engine API backend).
	Path string
	// Name is "podman" or "docker" (the CLI's base name), or
	// RuntimeDockerAPI.
	Name string
	// GlobalFlags come before every subcommand; RunFlags after `run`.
	GlobalFlags, RunFlags []string
	// Owner is the value of LabelOwner on everything this delegate creates.
	Owner string
	// Platform is protocol.PlatformFargate, PlatformEC2 or "".
	Platform string
	// EFSRoot is where EFS file systems are mounted on the host (see
	// EnvEFSRoot); empty refuses EFS volumes.
	EFSRoot string
	// AllowPrivileged runs containers that ask for privileged mode or
	// capabilities beyond the runtime's defaults
	// (LEGATE_CONTAINER_ALLOW_PRIVILEGED); HostPaths are the host
	// directories host_path volumes may mount, with what lies under them
	// (LEGATE_CONTAINER_HOST_PATHS). By default neither: see checkHost.
	AllowPrivileged bool
	HostPaths       []string
	// Pods, when set, runs container tasks as Kubernetes pods instead
	// (Name is RuntimeKubernetes; see pod.go).
	Pods *Pods

	// api, when set, is the Docker Engine API the delegate speaks over a
	// socket instead of a CLI (Name RuntimeDockerAPI, Path the socket).
	api *dockerAPI
}

// Find returns the delegate's container runtime from its
// environment (getenv), or nil when it has no usable runtime, with a
// reason. owner is the delegate's stable owner label value.
func Find(getenv func(string) string, owner, platform string) (*Runtime, error) {
	want := strings.TrimSpace(getenv(EnvContainerRuntime))
	if strings.EqualFold(want, "none") {
		return nil, fmt.Errorf("%s=none", EnvContainerRuntime)
	}
	if strings.EqualFold(want, RuntimeKubernetes) {
		return findPods(getenv, owner, platform)
	}
	socket, hostErr := dockerHostSocket(getenv("DOCKER_HOST"))
	if want == "" && platform == protocol.PlatformFargate && socket == "" {
		//lint:ignore ST1005 it starts with a name (Fargate)
		return nil, errors.New(NoRuntimeOnFargate)
	}
	switch {
	case strings.EqualFold(want, RuntimeDockerAPI) && hostErr != nil:
		return nil, fmt.Errorf("%s=%s: %w", EnvContainerRuntime, RuntimeDockerAPI, hostErr)
	case strings.EqualFold(want, RuntimeDockerAPI):
		if socket == "" {
			socket = DefaultDockerSocket
		}
		return findDockerAPI(getenv, socket, owner, platform)
	}
	var errs []string
	if want == "" && socket != "" {
		c, err := findDockerAPI(getenv, socket, owner, platform)
		if err == nil || platform == protocol.PlatformFargate {
			return c, err
		}
		// podman's CLI does not read DOCKER_HOST: one left set on a host
		// that has podman keeps working as before.
		errs = append(errs, "DOCKER_HOST: "+err.Error())
	}
	var candidates []string
	switch want {
	case "":
		candidates = []string{"podman", "docker"}
	default:
		candidates = []string{want}
	}
	var path string
	for _, c := range candidates {
		p, err := exec.LookPath(c)
		if err == nil {
			path = p
			break
		}
		errs = append(errs, err.Error())
	}
	if path == "" && want == "" {
		if fi, err := os.Stat(DefaultDockerSocket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return findDockerAPI(getenv, DefaultDockerSocket, owner, platform)
		}
		errs = append(errs, "no Docker API socket at "+DefaultDockerSocket)
	}
	if path == "" && want == "" && getenv("KUBERNETES_SERVICE_HOST") != "" {
		// A delegate installed in Kubernetes: its tasks' containers are pods.
		return findPods(getenv, owner, platform)
	}
	if path == "" {
		return nil, fmt.Errorf("no container runtime: %s", strings.Join(errs, "; "))
	}
	name := filepath.Base(path)
	if name != "podman" && name != "docker" {
		return nil, fmt.Errorf("%s=%s: use podman, docker, %s or %s", EnvContainerRuntime, want, RuntimeDockerAPI, RuntimeKubernetes)
	}
	return &Runtime{
		Path: path, Name: name, Owner: owner, Platform: platform,
		GlobalFlags: strings.Fields(getenv(EnvRuntimeFlags)),
		RunFlags:    strings.Fields(getenv(EnvRunFlags)),
		EFSRoot:     strings.TrimSpace(getenv(EnvEFSRoot)),
	}, nil
}

// NoRuntimeOnFargate is why a delegate on Fargate has no container
// runtime (unless its operator names one): what it registers and what
// task explain shows.
const NoRuntimeOnFargate = "Fargate has no container runtime: run container tasks from an ECS-on-EC2 or Kubernetes delegate, and select it with a tag"

// dockerHostSocket is the socket path of DOCKER_HOST when it names a unix
// socket ("" when unset or another scheme, with an error for the latter).
func dockerHostSocket(host string) (string, error) {
	host = strings.TrimSpace(host)
	if host == "" {
		return "", nil
	}
	p, ok := strings.CutPrefix(host, "unix://")
	if !ok || p == "" {
		return "", fmt.Errorf("DOCKER_HOST=%s: the Engine API backend speaks to a unix socket only (DOCKER_HOST=unix:///path/to/socket)", host)
	}
	return p, nil
}

// DetectPlatform says where the delegate runs: DELEGATE_PLATFORM when set
// ("fargate", "ec2"), else Fargate when ECS says so (AWS_EXECUTION_ENV
// AWS_ECS_FARGATE), else EC2 in any other ECS task (ECS metadata
// variables), else "" (a plain host).
func DetectPlatform(getenv func(string) string) (string, error) {
	switch p := strings.ToLower(strings.TrimSpace(getenv("DELEGATE_PLATFORM"))); p {
	case protocol.PlatformFargate, protocol.PlatformEC2:
		return p, nil
	case "":
	default:
		return "", fmt.Errorf("DELEGATE_PLATFORM=%q: use fargate or ec2, or leave it unset", p)
	}
	ecs := getenv("ECS_CONTAINER_METADATA_URI_V4") != "" || getenv("ECS_CONTAINER_METADATA_URI") != ""
	if getenv("AWS_EXECUTION_ENV") == "AWS_ECS_FARGATE" {
		return protocol.PlatformFargate, nil
	}
	if ecs || getenv("AWS_EXECUTION_ENV") == "AWS_ECS_EC2" {
		return protocol.PlatformEC2, nil
	}
	return "", nil
}

// containerRun is what one run of a container task is called.
type containerRun struct {
	Name    string            // container name
	Labels  map[string]string // on the container and its volumes
	Volumes map[string]string // empty_dir volume name in the spec → runtime volume name
	// Workspaces are the empty_dir volumes that are a pipeline stage's
	// shared workspace (by name in the spec): created only by the step
	// that says so, removed only by the step that says so.
	Workspaces map[string]protocol.Workspace
	// Env is passed with --env: "K=V" for plain values, "K" for secret
	// ones (the value comes from the CLI's environment, never the command
	// line).
	Env []string
}

// newContainerRun names the run of task taskID.
func newContainerRun(c *Runtime, taskID string, spec *protocol.ContainerSpec, env []string) containerRun {
	var b [8]byte
	_, _ = rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	r := containerRun{
		Name:       "legate-" + run,
		Labels:     map[string]string{LabelOwner: c.Owner, LabelTask: taskID, LabelRun: run},
		Volumes:    map[string]string{},
		Workspaces: map[string]protocol.Workspace{},
		Env:        env,
	}
	for _, v := range spec.Volumes {
		switch {
		case v.EmptyDir != nil && v.EmptyDir.Workspace != nil:
			r.Volumes[v.Name] = WorkspaceVolume(v.EmptyDir.Workspace.Key)
			r.Workspaces[v.Name] = *v.EmptyDir.Workspace
		case v.EmptyDir != nil:
			r.Volumes[v.Name] = "legate-" + run + "-" + v.Name
		}
	}
	return r
}

// ScriptEnv is the variable that carries a container task's script into
// the container, where `/bin/sh -c 'eval "$LEGATE_SCRIPT"'` runs it.
const ScriptEnv = "LEGATE_SCRIPT"

// userSpec is the --user value ("UID", "UID:GID") of a security context,
// "" for the image's user.
func userSpec(sc *protocol.SecurityContext) string {
	switch {
	case sc.RunAsUser != nil && sc.RunAsGroup != nil:
		return fmt.Sprintf("%d:%d", *sc.RunAsUser, *sc.RunAsGroup)
	case sc.RunAsUser != nil:
		return strconv.FormatInt(*sc.RunAsUser, 10)
	case sc.RunAsGroup != nil:
		// No runtime sets the group alone: the image's user is not
		// known here. Root's UID keeps the image's usual default.
		return fmt.Sprintf("0:%d", *sc.RunAsGroup)
	}
	return ""
}

// volumeBinds are the spec's volumes as SOURCE:TARGET[:ro], the form of
// both the CLI's --volume and the Engine API's HostConfig.Binds.
func volumeBinds(c *Runtime, spec *protocol.ContainerSpec, run containerRun) ([]string, error) {
	var binds []string
	for i, v := range spec.Volumes {
		mp := path.Clean(v.MountPath)
		switch {
		case v.EmptyDir != nil:
			binds = append(binds, run.Volumes[v.Name]+":"+mp)
		case v.HostPath != nil:
			opt := ""
			if v.HostPath.ReadOnly {
				opt = ":ro"
			}
			binds = append(binds, path.Clean(v.HostPath.Path)+":"+mp+opt)
		case v.EFS != nil:
			if c.EFSRoot == "" {
				return nil, fmt.Errorf("container.volumes[%d].efs: this delegate has no EFS mount root (set %s to the directory where EFS file systems are mounted)", i, EnvEFSRoot)
			}
			src := filepath.Join(c.EFSRoot, v.EFS.FilesystemID, path.Clean("/"+v.EFS.RootDirectory))
			binds = append(binds, src+":"+mp)
		}
	}
	return binds, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Sweep removes every container and volume labelled with this delegate's
// Owner: what an earlier run of the delegate left when it crashed. Call it
// at start, before the delegate takes a task. It returns how many
// containers and volumes it removed.
func (c *Runtime) Sweep(ctx context.Context) (containers, volumes int, err error) {
	if c.Pods != nil {
		return c.Pods.sweep(ctx, c.Owner)
	}
	if c.api != nil {
		return c.api.sweep(ctx, LabelOwner+"="+c.Owner)
	}
	filter := "label=" + LabelOwner + "=" + c.Owner
	out, err := c.runtimeCmd(ctx, "ps", "--all", "--quiet", "--filter", filter)
	if err != nil {
		return 0, 0, err
	}
	var errs []error
	for _, id := range strings.Fields(out) {
		if o, err := c.forceRemove(ctx, id); err != nil && !noSuch(o) {
			errs = append(errs, err)
			continue
		}
		containers++
	}
	out, err = c.runtimeCmd(ctx, "volume", "ls", "--quiet", "--filter", filter)
	if err != nil {
		return containers, 0, errors.Join(append(errs, err)...)
	}
	for _, name := range strings.Fields(out) {
		if o, err := c.runtimeCmd(ctx, "volume", "rm", "--force", name); err != nil && !noSuch(o) {
			errs = append(errs, err)
			continue
		}
		volumes++
	}
	return containers, volumes, errors.Join(errs...)
}

// A Task is one container task, as the executor hands it over.
type Task struct {
	// ID is the task's: it labels its container and volumes, and is
	// LEGATE_TASK_ID inside.
	ID string
	// Spec is the task's container section.
	Spec *protocol.ContainerSpec
	// Env is the task's environment, "K=V" in the executor's order, its
	// secret values included; SecretEnv are the secret ones (which never
	// go on a command line or into a pod's spec).
	Env       []string
	SecretEnv map[string]string
	// Timeout is the task's (0: none): it bounds an image pull of the
	// Engine API backend and a pod's own deadline.
	Timeout time.Duration
	// KillGrace is the SIGTERM → SIGKILL grace of a stopped container.
	KillGrace time.Duration
	// OnStart, if set, is called when the task counts as started before
	// Start returns: the Engine API backend's image pull (the CLI pulls in
	// its run process, whose start is the task's).
	OnStart func()
}

// A Run is one run of a container task on one backend, driven by the
// executor's wait loop from one goroutine: Start; then Done, or Interrupt
// and, unless Done is closed within the kill grace, Terminate, and Done;
// then Finish; Cleanup last, always (also when Start failed or was never
// called).
type Run interface {
	// Start creates what the run needs (volumes, a pod's Secret) and
	// starts the container, its output going to out (which never fails
	// and may be written from any goroutine). ctx bounds only what Start
	// does itself.
	Start(ctx context.Context, out io.Writer) error
	// Done is closed once the container ended: by itself, or once what
	// Interrupt removed is gone (or Terminate ended the wait for it).
	Done() <-chan struct{}
	// Interrupt stops the container with the kill grace (SIGTERM, then
	// SIGKILL) and removes it.
	Interrupt()
	// Terminate ends what still waits on the container by force.
	Terminate()
	// Finish, once Done is closed, reads the rest of the container's
	// output and returns how it ended; stopped says Interrupt was called.
	Finish(stopped bool) Exit
	// Cleanup removes what the run created, writing to out what it could
	// not remove.
	Cleanup()
}

// An Exit is how a run ended.
type Exit struct {
	// Code is the container's exit code, when it has one.
	Code *int
	// Err is nil when the container exited 0, else why the task failed:
	// with a DelegateFault method when that is the delegate's fault.
	Err error
	// Stopped says what stopping the run did ("removed the container"),
	// for the executor's notice; set when Finish was told it was stopped.
	Stopped string
}

// NewRun checks t against this runtime (the task's container section,
// the delegate's platform, its host policy, what a pod cannot be given)
// and returns one run of it. It starts nothing and creates nothing.
func (c *Runtime) NewRun(t Task) (Run, error) {
	cs := t.Spec
	if err := cs.Validate(); err != nil {
		return nil, err
	}
	if err := cs.CheckPlatform(c.Platform); err != nil {
		return nil, err
	}
	if err := c.checkHost(cs); err != nil {
		return nil, err
	}
	if c.Pods != nil {
		return c.newPodExec(t)
	}
	if c.api != nil {
		return &apiExec{c: c, d: c.api, t: t}, nil
	}
	return &cliExec{c: c, t: t}, nil
}

// faultError is an error that is the delegate's fault (its runtime, its
// position in the network), not the task's: the executor's outcome says
// so, and the task may run elsewhere.
type faultError struct{ error }

// DelegateFault marks the error as the delegate's fault.
func (faultError) DelegateFault() bool { return true }

// faultf returns a faultError.
func faultf(format string, args ...any) error {
	return faultError{fmt.Errorf(format, args...)}
}

// oneLine folds a message onto one line (as the executor does a task's
// error).
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

func intPtr(i int) *int { return &i }
