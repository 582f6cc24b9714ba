package executor

import (
	"context"
	"io"

	"github.com/legate-dev/legate/internal/executor/containers"
	"github.com/legate-dev/legate/internal/protocol"
)

// ContainerRuntime is what the task types need of the delegate's container
// runtime (package containers' Runtime): the container task runs on it,
// and the kubernetes and helm tasks read a pipeline stage's workspace from
// its volumes.
type ContainerRuntime interface {
	// NewRun checks a container task against the runtime and returns one
	// run of it, which the container task type drives.
	NewRun(t containers.Task) (containers.Run, error)
	// WorkspaceDir is the host directory of a stage workspace's volume
	// (containers.ErrNoWorkspace when the volume is not there).
	WorkspaceDir(ctx context.Context, ws *protocol.DeployWorkspace) (string, error)
	// RemoveWorkspace removes it when ws says its step is the last.
	RemoveWorkspace(ws *protocol.DeployWorkspace, out io.Writer)
}

// Make sure the runtime is one.
var _ ContainerRuntime = (*containers.Runtime)(nil)

// containerType runs a task in a container of the delegate's runtime
// (Options.Containers).
type containerType struct{}

// usesContainers marks the type for UsesContainers.
func (containerType) usesContainers() {}

func (containerType) New(spec protocol.TaskSpec, opts Options) (Execution, error) {
	c := opts.Containers
	if c == nil {
		return nil, faultf("no container runtime on this delegate (install podman or docker, mount a Docker API socket, or set %s)", containers.EnvContainerRuntime)
	}
	r, err := c.NewRun(containers.Task{
		ID: opts.TaskID, Spec: spec.Container,
		Env: buildEnv(nil, spec.Env, spec.SecretEnv), SecretEnv: spec.SecretEnv,
		Timeout: opts.Timeout, KillGrace: opts.killGrace(), OnStart: opts.OnStart,
	})
	if err != nil {
		return nil, err
	}
	return &containerExec{r: r}, nil
}

// containerExec is one run of a container task: the runtime's run, its
// exit turned into the task's outcome.
type containerExec struct {
	r   containers.Run
	out io.Writer
}

func (e *containerExec) Start(ctx context.Context, out io.Writer) error {
	e.out = out
	return e.r.Start(ctx, out)
}

func (e *containerExec) Done() <-chan struct{} { return e.r.Done() }
func (e *containerExec) Interrupt()            { e.r.Interrupt() }
func (e *containerExec) Terminate()            { e.r.Terminate() }
func (e *containerExec) Cleanup()              { e.r.Cleanup() }

// Finish writes the notice of a stopped run once the runtime read the
// rest of its output.
func (e *containerExec) Finish(stop *Stop) Outcome {
	x := e.r.Finish(stop != nil)
	if stop != nil {
		io.WriteString(e.out, stop.Notice(x.Stopped))
		return stop.Outcome()
	}
	if x.Err == nil {
		return Outcome{Status: protocol.StatusSucceeded, ExitCode: x.Code}
	}
	o := errOutcome(x.Err)
	o.ExitCode = x.Code
	return o
}
