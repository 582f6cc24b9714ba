package executor

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
	"syscall"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Labels every container and volume a delegate creates carries, so that
// the delegate finds them again (after its own crash included).
const (
	// LabelOwner identifies the delegate that created it: a hash of its
	// working directory, stable across its restarts (see Containers.Owner).
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

// Containers is how a delegate runs container tasks. The zero value (nil
// in Options) means the delegate has no runtime: container tasks fail as a
// delegate fault.
type Containers struct {
	// Runtime is the path of the runtime's CLI (of its socket, for the
	// Engine API backend).
	Runtime string
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
	// socket instead of a CLI (Name RuntimeDockerAPI, Runtime the socket).
	api *dockerAPI
}

// FindContainers returns the delegate's container configuration from its
// environment (getenv), or nil when it has no usable runtime, with a
// reason. owner is the delegate's stable owner label value.
func FindContainers(getenv func(string) string, owner, platform string) (*Containers, error) {
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
	return &Containers{
		Runtime: path, Name: name, Owner: owner, Platform: platform,
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
func newContainerRun(c *Containers, taskID string, spec *protocol.ContainerSpec, env []string) containerRun {
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
			r.Volumes[v.Name] = "legate-ws-" + v.EmptyDir.Workspace.Key
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

// runArgs builds the command line (after the runtime's path) that runs
// spec as run: a pure function of its inputs. Secret values never appear
// on it: the environment is passed by name.
func runArgs(c *Containers, spec *protocol.ContainerSpec, run containerRun) ([]string, error) {
	a := append([]string{}, c.GlobalFlags...)
	a = append(a, "run", "--name", run.Name)
	for _, k := range sortedKeys(run.Labels) {
		a = append(a, "--label", k+"="+run.Labels[k])
	}
	a = append(a, c.RunFlags...)
	for _, kv := range run.Env {
		a = append(a, "--env", kv)
	}
	if spec.WorkingDir != "" {
		a = append(a, "--workdir", spec.WorkingDir)
	}
	if r := spec.Resources; r != nil {
		if r.CPU > 0 {
			a = append(a, "--cpus", strconv.FormatFloat(r.CPU, 'f', -1, 64))
		}
		if r.MemoryMiB > 0 {
			a = append(a, "--memory", strconv.FormatInt(r.MemoryMiB, 10)+"m")
		}
	}
	if sc := spec.SecurityContext; sc != nil {
		if sc.Privileged {
			a = append(a, "--privileged")
		}
		if sc.ReadOnlyRootFilesystem {
			a = append(a, "--read-only")
		}
		if u := userSpec(sc); u != "" {
			a = append(a, "--user", u)
		}
		// Drops first: "drop ALL, add NET_BIND_SERVICE" means just that.
		for _, cp := range sc.DropCapability {
			a = append(a, "--cap-drop", cp)
		}
		for _, cp := range sc.AddCapability {
			a = append(a, "--cap-add", cp)
		}
	}
	binds, err := volumeBinds(c, spec, run)
	if err != nil {
		return nil, err
	}
	for _, b := range binds {
		a = append(a, "--volume", b)
	}
	switch {
	case len(spec.Command) > 0:
		a = append(a, "--entrypoint", spec.Command[0], "--", spec.Image)
		a = append(a, spec.Command[1:]...)
	case spec.Script != "":
		// The script itself is in the environment, passed by name
		// (ScriptEnv): a stored secret it references must not be on the
		// delegate's process list.
		a = append(a, "--entrypoint", "/bin/sh", "--", spec.Image, "-c", `eval "$`+ScriptEnv+`"`)
	default:
		a = append(a, "--", spec.Image)
	}
	return a, nil
}

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
func volumeBinds(c *Containers, spec *protocol.ContainerSpec, run containerRun) ([]string, error) {
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

// runtimeCmd runs one short runtime command (rm, volume create, ps) and
// returns its combined output.
func (c *Containers) runtimeCmd(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Runtime, append(append([]string{}, c.GlobalFlags...), args...)...)
	cmd.Env = os.Environ()
	b, err := cmd.CombinedOutput()
	if err != nil {
		return string(b), fmt.Errorf("%s %s: %w: %s", c.Name, strings.Join(args, " "), err, strings.TrimSpace(oneLine(string(b))))
	}
	return string(b), nil
}

// remove removes the run's container (killing it when it still runs) and
// its ephemeral volumes. It uses a fresh context: it must happen after a
// cancellation too.
func (c *Containers) remove(run containerRun, grace time.Duration) error {
	if c.api != nil {
		return c.removeAPI(run, grace)
	}
	ctx := context.Background()
	var errs []error
	if grace > 0 {
		// Ask first: SIGTERM, and SIGKILL after the grace.
		_, _ = c.runtimeCmd(ctx, "stop", "--time", strconv.Itoa(int((grace+time.Second-1)/time.Second)), run.Name)
	}
	if out, err := c.forceRemove(ctx, run.Name); err != nil && !noSuch(out) {
		errs = append(errs, err)
	}
	for _, v := range sortedKeys(run.Volumes) {
		if ws, ok := run.Workspaces[v]; ok && !ws.Remove {
			continue // the stage's later steps use it
		}
		if out, err := c.runtimeCmd(ctx, "volume", "rm", "--force", run.Volumes[v]); err != nil && !noSuch(out) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// forceRemove removes a container, killing it at once if it still runs:
// what asked for a grace did so before (remove's stop), and a leftover of
// a crashed delegate gets none. podman's `rm --force` would otherwise wait
// its default 10 s stop timeout for a process that ignores SIGTERM (a
// shell or sleep as PID 1 does); docker's kills at once and has no --time.
func (c *Containers) forceRemove(ctx context.Context, container string) (string, error) {
	args := []string{"rm", "--force"}
	if c.Name == "podman" {
		args = append(args, "--time", "0")
	}
	return c.runtimeCmd(ctx, append(args, container)...)
}

// alreadyExists reports whether a runtime's output says the object is
// there already (a retried first step of a stage finds its workspace).
func alreadyExists(out string) bool {
	return strings.Contains(strings.ToLower(out), "already exists")
}

// noSuch reports whether a runtime's output says the object was not there.
func noSuch(out string) bool {
	o := strings.ToLower(out)
	return strings.Contains(o, "no such") || strings.Contains(o, "no container with name") || strings.Contains(o, "not found")
}

// Sweep removes every container and volume labelled with this delegate's
// Owner: what an earlier run of the delegate left when it crashed. Call it
// at start, before the delegate takes a task. It returns how many
// containers and volumes it removed.
func (c *Containers) Sweep(ctx context.Context) (containers, volumes int, err error) {
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

// containerType runs a task in a container of the delegate's runtime
// (Options.Containers).
type containerType struct{}

// usesContainers marks the type for UsesContainers.
func (containerType) usesContainers() {}

func (containerType) New(spec protocol.TaskSpec, opts Options) (Execution, error) {
	c := opts.Containers
	if c == nil {
		return nil, faultf("no container runtime on this delegate (install podman or docker, mount a Docker API socket, or set %s)", EnvContainerRuntime)
	}
	cs := spec.Container
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
		return c.newPodExec(spec, opts)
	}
	if c.api != nil {
		return &apiExec{c: c, d: c.api, spec: spec, opts: opts}, nil
	}
	return &containerExec{c: c, spec: spec, opts: opts}, nil
}

// cliExit is how much longer than the kill grace the runtime's CLI gets to
// exit once its container was removed, before it is killed.
const cliExit = 10 * time.Second

// containerExec is one run of a container task: the runtime's CLI runs
// the container in the foreground, its output going to the task's.
type containerExec struct {
	c    *Containers
	spec protocol.TaskSpec
	opts Options

	out io.Writer
	// run is set once there may be something of the run to remove.
	run     *containerRun
	pr      *os.File // the output pipe's read end
	cmd     *exec.Cmd
	reader  *outputReader
	exited  chan struct{} // closed once the CLI was waited for (waitErr set)
	waitErr error
	// removeErr is what Interrupt could not remove.
	removeErr error
}

func (e *containerExec) Start(ctx context.Context, out io.Writer) error {
	c, spec, cs := e.c, e.spec, e.spec.Container
	e.out = out
	// The container sees the task's environment and LEGATE_TASK_ID, not
	// the delegate's base environment (its PATH is the image's).
	cenv := []string{"LEGATE_TASK_ID=" + e.opts.TaskID}
	for _, kv := range buildEnv(nil, spec.Env, nil) {
		if _, secret := spec.SecretEnv[strings.SplitN(kv, "=", 2)[0]]; !secret {
			cenv = append(cenv, kv)
		}
	}
	secretKeys := sortedKeys(spec.SecretEnv)
	cenv = append(cenv, secretKeys...)
	if cs.Script != "" {
		cenv = append(cenv, ScriptEnv)
	}
	run := newContainerRun(c, e.opts.TaskID, cs, cenv)
	args, err := runArgs(c, cs, run)
	if err != nil {
		return faultError{err}
	}
	// Whatever happens from here on, nothing of the run is left behind
	// (Cleanup).
	e.run = &run
	for _, name := range sortedKeys(run.Volumes) {
		ws, shared := run.Workspaces[name]
		if shared && !ws.Create {
			// A later step of the stage: the workspace must be here.
			if _, err := c.runtimeCmd(ctx, "volume", "inspect", run.Volumes[name]); err != nil {
				return fmt.Errorf("the stage workspace %q (volume %s) is not on this delegate: the step of the stage that made it ran on another delegate, or this delegate restarted since and removed it", name, run.Volumes[name])
			}
			continue
		}
		labels := run.Labels
		if shared {
			// Not the run's: it outlives this task (until the stage's last
			// step that uses it, or the next start's sweep).
			labels = map[string]string{LabelOwner: c.Owner, LabelWorkspace: ws.Key}
		}
		vargs := []string{"volume", "create"}
		for _, k := range sortedKeys(labels) {
			vargs = append(vargs, "--label", k+"="+labels[k])
		}
		if out, err := c.runtimeCmd(ctx, append(vargs, run.Volumes[name])...); err != nil && !(shared && alreadyExists(out)) {
			return faultf("create empty_dir volume %s: %v", name, err)
		}
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		return faultf("create output pipe: %v", err)
	}
	e.pr = pr
	// The CLI's own environment: the task's (passed by name into the
	// container) plus what the runtime itself needs to work.
	cliEnv := runtimeEnv()
	for _, k := range secretKeys {
		cliEnv = append(cliEnv, k+"="+spec.SecretEnv[k])
	}
	if cs.Script != "" {
		cliEnv = append(cliEnv, ScriptEnv+"="+cs.Script)
	}
	cmd := &exec.Cmd{
		Path: c.Runtime, Args: append([]string{c.Name}, args...), Env: cliEnv,
		Stdout: pw, Stderr: pw, Dir: os.TempDir(),
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return faultf("start %s: %v", c.Name, err)
	}
	e.cmd = cmd
	e.reader = startOutputReader(pr, out)
	e.exited = make(chan struct{})
	go func() {
		e.waitErr = cmd.Wait()
		close(e.exited)
	}()
	return nil
}

// Done is closed once the runtime's CLI exited.
func (e *containerExec) Done() <-chan struct{} { return e.exited }

// Interrupt stops the container (the runtime sends SIGTERM, and SIGKILL
// after the kill grace) and removes it and its volumes.
func (e *containerExec) Interrupt() {
	e.removeErr = e.c.remove(*e.run, e.opts.killGrace())
}

// Terminate kills the runtime's CLI, which normally exits as soon as
// Interrupt removed its container: it gets cliExit more to do so first.
func (e *containerExec) Terminate() {
	t := time.NewTimer(cliExit)
	defer t.Stop()
	select {
	case <-e.exited:
	case <-t.C:
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (e *containerExec) Finish(stop *Stop) Outcome {
	var o Outcome
	var notice string
	if stop == nil {
		o = exited(e.cmd, e.waitErr)
		if o.ExitCode != nil && *o.ExitCode == 125 && e.c.Name != "" {
			o.Error = fmt.Sprintf("%s could not run the container (exit 125; see the task's output)", e.c.Name)
		}
	} else {
		what := "removed the container"
		if e.removeErr != nil {
			what = fmt.Sprintf("removed the container (%v)", e.removeErr)
		}
		o = stop.Outcome()
		notice = stop.Notice(what)
	}
	e.reader.finish()
	if notice != "" {
		io.WriteString(e.out, notice)
	}
	return o
}

// Cleanup removes the run's container and volumes (again, after
// Interrupt: a fresh context, nothing left to ask for a grace).
func (e *containerExec) Cleanup() {
	if e.pr != nil {
		e.pr.Close()
	}
	if e.run == nil {
		return
	}
	if err := e.c.remove(*e.run, 0); err != nil {
		fmt.Fprintf(e.out, "\n[legate: remove container: %v]\n", err)
	}
}

// runtimeEnv is what the runtime's CLI needs from the delegate's
// environment (its PATH to find conmon and runc, its HOME and XDG
// directories for its storage, DOCKER_HOST and friends) — never the
// delegate's credentials.
func runtimeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH" || k == "HOME" || k == "USER" || k == "TMPDIR",
			strings.HasPrefix(k, "XDG_"), strings.HasPrefix(k, "DOCKER_"),
			strings.HasPrefix(k, "CONTAINER_"), strings.HasPrefix(k, "CONTAINERS_"):
			env = append(env, kv)
		}
	}
	return env
}
