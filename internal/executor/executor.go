// Package executor runs tasks on the delegate: shell scripts (bash, in their
// own process group), HTTP requests, containers (on the delegate's
// container runtime: package containers, behind ContainerRuntime),
// Kubernetes deploys (in a child process: the delegate's binary
// re-executed, see kubernetesArg), helm deploys and verifications. Each
// task type is a Type (one file each, listed in types) whose Executions
// Run drives through one lifecycle and one wait loop: start, wait,
// interrupt, terminate after the grace, finish, clean up.
// Run turns every way a run can end, including bad specs, timeouts and
// cancellation, into an Outcome; it never panics and never leaves a
// cancelled or timed-out process group behind. With an Isolator (cgroup
// or process tree, see Isolator) no process a shell task started outlives
// the task, however the task ends.
//
// Output goes to the writer the caller passes; masking secrets is the
// caller's job (see package mask). The writer may block to slow a task
// down (back-pressure): the task's writes then wait on its full pipe, and
// cancellation and timeouts still end it.
package executor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Outcome is what running a task produced.
type Outcome struct {
	// Status is protocol.StatusSucceeded, StatusFailed, StatusTimedOut or
	// StatusCancelled.
	Status string
	// ExitCode is the shell script's exit code when it exited by itself.
	ExitCode *int
	// Error is one line, empty on success.
	Error string
	// HTTPResult is set for http tasks that got a response.
	HTTPResult *protocol.HTTPResult
	// DelegateFault marks a failure caused by the delegate or its position
	// in the network (no bash, no work directory, connection refused), not
	// by the task itself; the task may run elsewhere.
	DelegateFault bool
	// Outputs are the KEY=VALUE lines a shell task wrote to its
	// $LEGATE_OUTPUT file (see ParseOutputs); nil for none.
	Outputs map[string]string
}

// faulted is failed with DelegateFault set.
func faulted(msg string) Outcome {
	o := failed(msg)
	o.DelegateFault = true
	return o
}

// Options configures one run. Zero values mean the documented defaults.
type Options struct {
	// WorkDir is the directory for this task, created (0700) if missing.
	// Required for shell tasks.
	WorkDir string
	// ScriptPath, when set, is the absolute path a shell script is written
	// to instead of WorkDir/ScriptName (for scripts that run in a directory
	// that is not theirs, such as the delegate's INIT_SCRIPT).
	ScriptPath string
	// Env is the base environment ("K=V") of a shell task; the task's Env
	// and then its SecretEnv are added on top (the task wins). Nil means an
	// empty base: the delegate's own environment is never inherited
	// implicitly, so the caller decides what tasks see (and must leave out
	// the delegate's credentials, see config.SecretEnvNames).
	Env []string
	// Timeout bounds the run; 0 (or negative) means no timeout.
	Timeout time.Duration
	// KillGrace is how long a cancelled or timed-out process group gets
	// between SIGTERM and SIGKILL; 0 means 5s.
	KillGrace time.Duration
	// HTTPClient sends http tasks; nil means a client with dial, TLS and
	// response-header timeouts that honors the proxy environment variables.
	HTTPClient *http.Client
	// OnStart, if set, is called once the task started: its process, or
	// the sending of its request, or (a container through the Docker
	// API) the pull of its image, as the CLI's run process would. It is
	// not called when the task fails before.
	OnStart func()
	// Isolator, if set, ends every process a shell task started when the
	// task ends, for any reason (the script exited, failed, timed out or
	// was cancelled), and sets RunMarkerEnv in its environment. Nil means
	// only the shell's process group is ended, and only on cancellation and
	// timeout: background processes of a script that exited are left
	// running (delegate scripts such as INIT_SCRIPT may start daemons).
	Isolator *Isolator
	// Containers runs container tasks (a *containers.Runtime); nil means
	// the delegate has none (a container task then fails as a delegate
	// fault).
	Containers ContainerRuntime
	// TaskID labels a container task's container and volumes.
	TaskID string
	// KubeEnv is the environment of a kubernetes task's child process,
	// where it finds its credentials (KUBECONFIG, or a pod's
	// KUBERNETES_SERVICE_HOST and PORT); nil means the delegate's own,
	// filtered to what leads to credentials and the API (kubeChildEnv).
	KubeEnv []string
	// Helm is the helm binary helm tasks run; empty means $LEGATE_HELM,
	// else helm on PATH (see helmBinary).
	Helm string
}

// DefaultKillGrace is the SIGTERM → SIGKILL grace when Options.KillGrace is 0.
const DefaultKillGrace = 5 * time.Second

// Run executes spec, writing its output to out, until it ends, ctx is
// cancelled (→ StatusCancelled) or the timeout passes (→ StatusTimedOut).
// It looks up spec's Type and drives one Execution of it (see Execution);
// it never panics on bad specs: they end StatusFailed with a clear Error.
// A shell task's output is read to its end (every writer gone), or until
// the pipe stays empty for a second after the task's processes were ended
// (one that was not still holds it). Nothing is written to out after Run
// returns.
func Run(ctx context.Context, spec protocol.TaskSpec, opts Options, out io.Writer) (o Outcome) {
	defer func() {
		if r := recover(); r != nil {
			o = failed(fmt.Sprintf("internal error running %s task: %v", spec.Type, r))
		}
	}()
	if out == nil {
		out = io.Discard
	}
	sw := &syncWriter{w: out}
	if err := validateEnv(spec); err != nil {
		return failed(err.Error())
	}
	t, err := Lookup(spec.Type)
	if err != nil {
		return failed(err.Error())
	}
	if opts.OnStart != nil {
		// A type may say it started before Start returns (a container
		// whose image is pulled first): the manager hears it once.
		opts.OnStart = sync.OnceFunc(opts.OnStart)
	}
	ex, err := t.New(spec, opts)
	if err != nil {
		return errOutcome(err)
	}
	o = execute(ctx, ex, opts, sw)
	o.Error = oneLine(o.Error)
	return o
}

func failed(msg string) Outcome {
	return Outcome{Status: protocol.StatusFailed, Error: oneLine(msg)}
}

func succeeded() Outcome {
	return Outcome{Status: protocol.StatusSucceeded}
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// validateEnv rejects environment names and values that cannot be passed to
// a process. Values are never echoed: they may be secret.
func validateEnv(spec protocol.TaskSpec) error {
	check := func(kind string, m map[string]string) error {
		for k, v := range m {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf("invalid %s name %q: must be non-empty without '=' or NUL", kind, k)
			}
			if strings.ContainsRune(v, 0) {
				return fmt.Errorf("invalid %s %s: value contains NUL", kind, k)
			}
		}
		return nil
	}
	if err := check("env", spec.Env); err != nil {
		return err
	}
	return check("secret_env", spec.SecretEnv)
}

// buildEnv returns base with env and then secret applied on top, one entry
// per name (later wins). It never returns nil, so a process never inherits
// the delegate's environment by accident.
func buildEnv(base []string, env, secret map[string]string) []string {
	out := make([]string, 0, len(base)+len(env)+len(secret))
	idx := make(map[string]int, cap(out))
	add := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			return
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range base {
		add(kv)
	}
	for _, m := range []map[string]string{env, secret} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			add(k + "=" + m[k])
		}
	}
	return out
}

// syncWriter serializes writes from the process output copier and Run. It
// never fails: if out fails, a task must not stall on a full pipe, so the
// output is dropped (the caller's writer reports its own errors).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(p)
	return len(p), nil
}
