package containers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// defaultGrace is the executor's kill grace when a task names none.
const defaultGrace = 5 * time.Second

// taskOf is the Task the executor makes of spec for task id (its
// environment without the delegate's base, as the executor builds it).
func taskOf(id string, spec protocol.TaskSpec) Task {
	t := Task{ID: id, Spec: spec.Container, SecretEnv: spec.SecretEnv, KillGrace: defaultGrace}
	for _, m := range []map[string]string{spec.Env, spec.SecretEnv} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Env = append(t.Env, k+"="+m[k])
		}
	}
	return t
}

// runTask drives one run of t on c as the executor's wait loop does:
// Start; then Done, or, once ctx ends or t.Timeout passes, Interrupt and,
// unless Done is closed within t.KillGrace, Terminate and Done; then
// Finish; Cleanup last. Its error is NewRun's or Start's.
func runTask(ctx context.Context, c *Runtime, t Task, out io.Writer) (Exit, error) {
	if out == nil {
		out = io.Discard
	}
	r, err := c.NewRun(t)
	if err != nil {
		return Exit{}, err
	}
	defer r.Cleanup()
	if err := r.Start(ctx, out); err != nil {
		return Exit{}, err
	}
	var expired <-chan time.Time
	if t.Timeout > 0 {
		tm := time.NewTimer(t.Timeout)
		defer tm.Stop()
		expired = tm.C
	}
	select {
	case <-r.Done():
		return r.Finish(false), nil
	case <-ctx.Done():
	case <-expired:
	}
	r.Interrupt()
	grace := time.NewTimer(t.KillGrace)
	defer grace.Stop()
	select {
	case <-r.Done():
	case <-grace.C:
		r.Terminate()
		<-r.Done()
	}
	return r.Finish(true), nil
}

// isFault reports whether err is the delegate's fault.
func isFault(err error) bool {
	var f interface{ DelegateFault() bool }
	return errors.As(err, &f) && f.DelegateFault()
}

// exitCode is x's exit code, -1 for none.
func exitCode(x Exit) int {
	if x.Code == nil {
		return -1
	}
	return *x.Code
}

// notifyWriter is a goroutine-safe buffer that closes hit once the output
// contains want (when want is set).
type notifyWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	hit  chan struct{}
	done bool
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.want != "" && !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.hit)
	}
	return len(p), nil
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// statusOf is how a run ended, in the executor's terms: failed (err is
// NewRun's or Start's, or the container's exit), stopped, or succeeded;
// why is the error.
func statusOf(x Exit, err error) (status string, why error) {
	switch {
	case err != nil:
		return protocol.StatusFailed, err
	case x.Stopped != "":
		return "stopped", nil
	case x.Err != nil:
		return protocol.StatusFailed, x.Err
	}
	return protocol.StatusSucceeded, nil
}
