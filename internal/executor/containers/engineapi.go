package containers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// apiCreate is the body of POST /containers/create: what runArgs says on
// a command line, in the Engine API's terms.
type apiCreate struct {
	Image      string
	Entrypoint []string `json:",omitempty"`
	Cmd        []string `json:",omitempty"`
	Env        []string
	WorkingDir string `json:",omitempty"`
	User       string `json:",omitempty"`
	Labels     map[string]string
	HostConfig apiHostConfig
}

type apiHostConfig struct {
	Binds          []string `json:",omitempty"`
	Privileged     bool     `json:",omitempty"`
	ReadonlyRootfs bool     `json:",omitempty"`
	CapAdd         []string `json:",omitempty"`
	CapDrop        []string `json:",omitempty"`
	NanoCPUs       int64    `json:"NanoCpus,omitempty"`
	Memory         int64    `json:",omitempty"`
}

// createBody is runArgs for the Engine API: a pure function of its
// inputs. env holds the values (secret ones too): the body goes over the
// socket, never on a command line.
func createBody(c *Runtime, spec *protocol.ContainerSpec, run containerRun, env []string) (apiCreate, error) {
	b := apiCreate{Image: spec.Image, Env: env, WorkingDir: spec.WorkingDir, Labels: run.Labels}
	if r := spec.Resources; r != nil {
		b.HostConfig.NanoCPUs = int64(r.CPU * 1e9)
		b.HostConfig.Memory = r.MemoryMiB << 20
	}
	if sc := spec.SecurityContext; sc != nil {
		b.HostConfig.Privileged = sc.Privileged
		b.HostConfig.ReadonlyRootfs = sc.ReadOnlyRootFilesystem
		b.User = userSpec(sc)
		b.HostConfig.CapDrop, b.HostConfig.CapAdd = sc.DropCapability, sc.AddCapability
	}
	binds, err := volumeBinds(c, spec, run)
	if err != nil {
		return apiCreate{}, err
	}
	b.HostConfig.Binds = binds
	switch {
	case len(spec.Command) > 0:
		// An entrypoint given drops the image's CMD, as --entrypoint does.
		b.Entrypoint, b.Cmd = spec.Command[:1], spec.Command[1:]
	case spec.Script != "":
		b.Entrypoint, b.Cmd = []string{"/bin/sh"}, []string{"-c", `eval "$` + ScriptEnv + `"`}
	}
	return b, nil
}

// apiExec is one run of a container task through the Engine API: the
// container's log stream goes to the task's output, and a wait call ends
// when the container exited.
type apiExec struct {
	c *Runtime
	d *dockerAPI
	t Task

	out     io.Writer
	run     *containerRun // set once there may be something to remove
	id      string
	cancel  context.CancelFunc // ends the log stream and the wait call
	logs    chan struct{}      // closed once the log stream ended
	exited  chan struct{}      // closed once wait returned (code, waitErr set)
	code    int
	waitErr error
	// removeErr is what Interrupt could not remove.
	removeErr error
}

func (e *apiExec) Start(ctx context.Context, out io.Writer) error {
	c, d, cs := e.c, e.d, e.t.Spec
	e.out = out
	// The task's environment and LEGATE_TASK_ID, not the delegate's.
	env := append([]string{"LEGATE_TASK_ID=" + e.t.ID}, e.t.Env...)
	if cs.Script != "" {
		env = append(env, ScriptEnv+"="+cs.Script)
	}
	run := newContainerRun(c, e.t.ID, cs, nil)
	body, err := createBody(c, cs, run, env)
	if err != nil {
		return faultError{err}
	}
	e.run = &run
	if err := e.volumes(ctx); err != nil {
		return err
	}
	// The CLI pulls within the task's time, in the run process whose
	// start is the task's start; so does this: a long pull is a started
	// task, not a delegate that claimed a task and never started it.
	if e.t.OnStart != nil {
		e.t.OnStart()
	}
	pctx := ctx
	if e.t.Timeout > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, e.t.Timeout)
		defer cancel()
	}
	if err := d.ensureImage(pctx, cs.Image, out); err != nil {
		return err
	}
	var created struct {
		ID string `json:"Id"`
	}
	if err := d.call(ctx, http.MethodPost, "/containers/create", url.Values{"name": {run.Name}}, body, &created); err != nil {
		return fmt.Errorf("create the container: %w", err)
	}
	e.id = created.ID
	if err := d.call(ctx, http.MethodPost, "/containers/"+e.id+"/start", nil, nil, nil); err != nil {
		return fmt.Errorf("start the container: %w", err)
	}
	// The log stream and the wait outlive Start's ctx: Interrupt and
	// Terminate end them.
	lctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.logs, e.exited = make(chan struct{}), make(chan struct{})
	go e.follow(lctx)
	go e.wait(lctx)
	return nil
}

// volumes creates the run's empty_dir volumes, and checks that a stage's
// workspace made by an earlier step is here.
func (e *apiExec) volumes(ctx context.Context) error {
	run := e.run
	for _, name := range sortedKeys(run.Volumes) {
		ws, shared := run.Workspaces[name]
		vol := run.Volumes[name]
		if shared && !ws.Create {
			if err := e.d.call(ctx, http.MethodGet, "/volumes/"+url.PathEscape(vol), nil, nil, nil); err != nil {
				return fmt.Errorf("the stage workspace %q (volume %s) is not on this delegate: the step of the stage that made it ran on another delegate, or this delegate restarted since and removed it", name, vol)
			}
			continue
		}
		labels := run.Labels
		if shared {
			labels = map[string]string{LabelOwner: e.c.Owner, LabelWorkspace: ws.Key}
		}
		exists, err := e.d.createVolume(ctx, vol, labels)
		if err == nil && exists && !shared {
			err = fmt.Errorf("volume %s exists already", vol)
		}
		if err != nil {
			return faultf("create empty_dir volume %s: %v", name, err)
		}
	}
	return nil
}

// follow copies the container's log stream (from its start) to the
// task's output until the container stopped.
func (e *apiExec) follow(ctx context.Context) {
	defer close(e.logs)
	q := url.Values{"follow": {"1"}, "stdout": {"1"}, "stderr": {"1"}}
	resp, err := e.d.send(ctx, http.MethodGet, "/containers/"+e.id+"/logs", q, nil)
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(e.out, "[legate: container logs: %v]\n", err)
		}
		return
	}
	defer resp.Body.Close()
	if err := demux(resp.Body, e.out); err != nil && ctx.Err() == nil {
		fmt.Fprintf(e.out, "\n[legate: container logs: %v]\n", err)
	}
}

func (e *apiExec) wait(ctx context.Context) {
	defer close(e.exited)
	resp, err := e.d.send(ctx, http.MethodPost, "/containers/"+e.id+"/wait", nil, nil)
	if err != nil {
		e.waitErr = err
		return
	}
	defer resp.Body.Close()
	var w struct {
		StatusCode int
		Error      *struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		e.waitErr = fmt.Errorf("wait for the container: %w", err)
		return
	}
	if w.Error != nil && w.Error.Message != "" {
		e.waitErr = errors.New(w.Error.Message)
	}
	e.code = w.StatusCode
}

func (e *apiExec) Done() <-chan struct{} { return e.exited }

// Interrupt stops the container (SIGTERM, SIGKILL after the kill grace)
// and removes it and its volumes.
func (e *apiExec) Interrupt() {
	e.removeErr = e.c.remove(*e.run, e.t.KillGrace)
}

// Terminate ends the calls that still wait on the daemon, which normally
// answer as soon as Interrupt removed the container: they get cliExit
// more to do so first.
func (e *apiExec) Terminate() {
	t := time.NewTimer(cliExit)
	defer t.Stop()
	select {
	case <-e.exited:
	case <-t.C:
		e.cancel()
	}
}

func (e *apiExec) Finish(stopped bool) Exit {
	var x Exit
	switch {
	case stopped:
		x.Stopped = removedWhat(e.removeErr)
	case e.waitErr != nil:
		x.Err = faultf("wait for the container: %v", e.waitErr)
	case e.code == 0:
		x.Code = intPtr(0)
	default:
		x = Exit{Code: intPtr(e.code), Err: fmt.Errorf("exit status %d", e.code)}
	}
	// The log stream ends with the container; a daemon that keeps it open
	// gets logDrain.
	t := time.NewTimer(logDrain)
	select {
	case <-e.logs:
	case <-t.C:
		e.cancel()
		<-e.logs
	}
	t.Stop()
	return x
}

// Cleanup removes the run's container and volumes.
func (e *apiExec) Cleanup() {
	if e.cancel != nil {
		defer e.cancel()
	}
	if e.run == nil {
		return
	}
	if err := e.c.remove(*e.run, 0); err != nil {
		fmt.Fprintf(e.out, "\n[legate: remove container: %v]\n", err)
	}
}

// removeAPI is remove for the Engine API backend.
func (c *Runtime) removeAPI(run containerRun, grace time.Duration) error {
	ctx := context.Background()
	var errs []error
	if grace > 0 {
		secs := int((grace + time.Second - 1) / time.Second)
		sctx, cancel := context.WithTimeout(ctx, grace+dockerCallTimeout)
		resp, err := c.api.send(sctx, http.MethodPost, "/containers/"+run.Name+"/stop", url.Values{"t": {fmt.Sprint(secs)}}, nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
	}
	if err := c.api.removeContainer(ctx, run.Name); err != nil {
		errs = append(errs, err)
	}
	for _, v := range sortedKeys(run.Volumes) {
		if ws, ok := run.Workspaces[v]; ok && !ws.Remove {
			continue
		}
		if err := c.api.removeVolume(ctx, run.Volumes[v]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// findDockerAPI is Find for the Engine API backend on socket.
func findDockerAPI(getenv func(string) string, socket, owner, platform string) (*Runtime, error) {
	if strings.TrimSpace(getenv(EnvRuntimeFlags)) != "" || strings.TrimSpace(getenv(EnvRunFlags)) != "" {
		return nil, fmt.Errorf("%s and %s are flags of a runtime's CLI; the %s backend has none (configure the daemon instead)", EnvRuntimeFlags, EnvRunFlags, RuntimeDockerAPI)
	}
	d := newDockerAPI(socket)
	if err := d.probe(context.Background()); err != nil {
		return nil, err
	}
	return &Runtime{
		Path: socket, Name: RuntimeDockerAPI, Owner: owner, Platform: platform,
		EFSRoot: strings.TrimSpace(getenv(EnvEFSRoot)), api: d,
	}, nil
}
