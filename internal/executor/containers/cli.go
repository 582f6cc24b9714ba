package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/legate-dev/legate/internal/executor/pipe"
	"github.com/legate-dev/legate/internal/protocol"
)

// runArgs builds the command line (after the runtime's path) that runs
// spec as run: a pure function of its inputs. Secret values never appear
// on it: the environment is passed by name.
func runArgs(c *Runtime, spec *protocol.ContainerSpec, run containerRun) ([]string, error) {
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

// runtimeCmd runs one short runtime command (rm, volume create, ps) and
// returns its combined output.
func (c *Runtime) runtimeCmd(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Path, append(append([]string{}, c.GlobalFlags...), args...)...)
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
func (c *Runtime) remove(run containerRun, grace time.Duration) error {
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
func (c *Runtime) forceRemove(ctx context.Context, container string) (string, error) {
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

// cliExit is how much longer than the kill grace the runtime's CLI gets to
// exit once its container was removed, before it is killed.
const cliExit = 10 * time.Second

// cliExec is one run of a container task: the runtime's CLI runs the
// container in the foreground, its output going to the task's.
type cliExec struct {
	c *Runtime
	t Task

	out io.Writer
	// run is set once there may be something of the run to remove.
	run     *containerRun
	pr      *os.File // the output pipe's read end
	cmd     *exec.Cmd
	reader  *pipe.Reader
	exited  chan struct{} // closed once the CLI was waited for (waitErr set)
	waitErr error
	// removeErr is what Interrupt could not remove.
	removeErr error
}

func (e *cliExec) Start(ctx context.Context, out io.Writer) error {
	c, cs := e.c, e.t.Spec
	e.out = out
	// The container sees the task's environment and LEGATE_TASK_ID, not
	// the delegate's base environment (its PATH is the image's).
	cenv := []string{"LEGATE_TASK_ID=" + e.t.ID}
	for _, kv := range e.t.Env {
		if _, secret := e.t.SecretEnv[strings.SplitN(kv, "=", 2)[0]]; !secret {
			cenv = append(cenv, kv)
		}
	}
	secretKeys := sortedKeys(e.t.SecretEnv)
	cenv = append(cenv, secretKeys...)
	if cs.Script != "" {
		cenv = append(cenv, ScriptEnv)
	}
	run := newContainerRun(c, e.t.ID, cs, cenv)
	args, err := runArgs(c, cs, run)
	if err != nil {
		return faultError{err}
	}
	// Whatever happens from here on, nothing of the run is left behind
	// (Cleanup).
	e.run = &run
	if err := e.volumes(ctx); err != nil {
		return err
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
		cliEnv = append(cliEnv, k+"="+e.t.SecretEnv[k])
	}
	if cs.Script != "" {
		cliEnv = append(cliEnv, ScriptEnv+"="+cs.Script)
	}
	cmd := &exec.Cmd{
		Path: c.Path, Args: append([]string{c.Name}, args...), Env: cliEnv,
		Stdout: pw, Stderr: pw, Dir: os.TempDir(),
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return faultf("start %s: %v", c.Name, err)
	}
	e.cmd = cmd
	e.reader = pipe.Start(pr, out)
	e.exited = make(chan struct{})
	go func() {
		e.waitErr = cmd.Wait()
		close(e.exited)
	}()
	return nil
}

// volumes creates the run's empty_dir volumes, and checks that a stage's
// workspace made by an earlier step is here.
func (e *cliExec) volumes(ctx context.Context) error {
	c, run := e.c, e.run
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
	return nil
}

// Done is closed once the runtime's CLI exited.
func (e *cliExec) Done() <-chan struct{} { return e.exited }

// Interrupt stops the container (the runtime sends SIGTERM, and SIGKILL
// after the kill grace) and removes it and its volumes.
func (e *cliExec) Interrupt() {
	e.removeErr = e.c.remove(*e.run, e.t.KillGrace)
}

// Terminate kills the runtime's CLI, which normally exits as soon as
// Interrupt removed its container: it gets cliExit more to do so first.
func (e *cliExec) Terminate() {
	t := time.NewTimer(cliExit)
	defer t.Stop()
	select {
	case <-e.exited:
	case <-t.C:
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (e *cliExec) Finish(stopped bool) Exit {
	var x Exit
	if stopped {
		x.Stopped = removedWhat(e.removeErr)
	} else {
		x = e.exit()
	}
	e.reader.Finish()
	return x
}

// exit is how the runtime's CLI exited by itself.
func (e *cliExec) exit() Exit {
	if e.waitErr == nil {
		return Exit{Code: intPtr(0)}
	}
	st := e.cmd.ProcessState
	x := Exit{Err: e.waitErr} // "exit status 3" or "signal: killed"
	var ee *exec.ExitError
	if !errors.As(e.waitErr, &ee) || st == nil {
		x.Err = fmt.Errorf("wait for %s run: %v", e.c.Name, e.waitErr)
	}
	if st != nil && st.ExitCode() >= 0 {
		x.Code = intPtr(st.ExitCode())
	}
	if x.Code != nil && *x.Code == 125 && e.c.Name != "" {
		x.Err = fmt.Errorf("%s could not run the container (exit 125; see the task's output)", e.c.Name)
	}
	return x
}

// removedWhat is what stopping a container did, for the executor's
// notice.
func removedWhat(removeErr error) string {
	if removeErr != nil {
		return fmt.Sprintf("removed the container (%v)", removeErr)
	}
	return "removed the container"
}

// Cleanup removes the run's container and volumes (again, after
// Interrupt: a fresh context, nothing left to ask for a grace).
func (e *cliExec) Cleanup() {
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
