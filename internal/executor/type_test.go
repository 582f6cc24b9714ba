package executor

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestLookup(t *testing.T) {
	t.Parallel()
	for _, name := range protocol.TaskTypes() {
		if ty, err := Lookup(name); err != nil || ty == nil {
			t.Errorf("Lookup(%q) = %v, %v: every task type of the protocol needs a Type", name, ty, err)
		}
	}
	if len(types) != len(protocol.TaskTypes()) {
		t.Errorf("%d types registered, the protocol has %d", len(types), len(protocol.TaskTypes()))
	}
	for _, name := range []string{"", "docker", "Shell", " shell"} {
		ty, err := Lookup(name)
		if want := `unknown task type "` + name + `"`; err == nil || err.Error() != want || ty != nil {
			t.Errorf("Lookup(%q) = %v, %v; want the error %s", name, ty, err, want)
		}
	}
	for name, want := range map[string]bool{protocol.TaskContainer: true, protocol.TaskShell: false, protocol.TaskHTTP: false, "docker": false} {
		if got := UsesContainers(name); got != want {
			t.Errorf("UsesContainers(%q) = %v, want %v", name, got, want)
		}
	}
}

// procRun is an Execution of a plain process (sh -c script), for the
// tests of wait: Interrupt sends SIGTERM to its process group, Terminate
// SIGKILL, and both note when they were called.
type procRun struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu                      sync.Mutex
	interrupted, terminated time.Time
}

// startProc starts script and returns once it printed "ready".
func startProc(t *testing.T, script string) *procRun {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &procRun{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("%q did not say ready: %q %v", script, sc.Text(), sc.Err())
	}
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(p.done)
	}()
	return p
}

func (p *procRun) Start(context.Context, io.Writer) error { return nil }
func (p *procRun) Done() <-chan struct{}                  { return p.done }
func (p *procRun) Finish(*Stop) Outcome                   { return Outcome{} }
func (p *procRun) Cleanup()                               {}

func (p *procRun) Interrupt() {
	p.mu.Lock()
	p.interrupted = time.Now()
	p.mu.Unlock()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
}

func (p *procRun) Terminate() {
	p.mu.Lock()
	p.terminated = time.Now()
	p.mu.Unlock()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// TestWait runs real processes through the wait loop every task type
// shares: one that ends by itself is left alone; one whose context is
// cancelled or whose timeout passes is interrupted, and terminated only
// when it is still there a grace later.
func TestWait(t *testing.T) {
	t.Parallel()
	const long = time.Hour // a grace or timeout the test never waits for
	tests := []struct {
		name           string
		script         string
		cancel         bool
		timeout, grace time.Duration
		want           *Stop
		interrupt      bool
		terminate      bool
	}{
		{name: "ends by itself", script: "echo ready; exit 3", timeout: long, grace: long},
		{name: "timed out, ends on SIGTERM", script: "echo ready; exec sleep 1000",
			timeout: 20 * time.Millisecond, grace: long, want: &Stop{Timeout: 20 * time.Millisecond}, interrupt: true},
		{name: "timed out, ignores SIGTERM", script: "trap '' TERM; echo ready; exec sleep 1000",
			timeout: 20 * time.Millisecond, grace: 300 * time.Millisecond, want: &Stop{Timeout: 20 * time.Millisecond}, interrupt: true, terminate: true},
		{name: "cancelled, ends on SIGTERM", script: "echo ready; exec sleep 1000", cancel: true,
			grace: long, want: &Stop{}, interrupt: true},
		{name: "cancelled, ignores SIGTERM", script: "trap '' TERM; echo ready; exec sleep 1000", cancel: true,
			timeout: long, grace: 300 * time.Millisecond, want: &Stop{}, interrupt: true, terminate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startProc(t, tt.script)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			got := wait(ctx, p, tt.timeout, tt.grace)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("stop (-want +got):\n%s", diff)
			}
			select {
			case <-p.done:
			default:
				t.Error("wait returned before the process ended")
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if !p.interrupted.IsZero() != tt.interrupt || !p.terminated.IsZero() != tt.terminate {
				t.Errorf("interrupted %v, terminated %v; want %v, %v", !p.interrupted.IsZero(), !p.terminated.IsZero(), tt.interrupt, tt.terminate)
			}
			if tt.terminate {
				if d := p.terminated.Sub(p.interrupted); d < tt.grace {
					t.Errorf("terminated %v after the interrupt, before the grace of %v", d, tt.grace)
				}
			}
		})
	}
}

// TestWaitShell: the shell's execution through the wait loop, without an
// Isolator: the script and its background process ignore SIGTERM, so the
// process group is killed once the grace passed, and the loop waits until
// it is.
func TestWaitShell(t *testing.T) {
	t.Parallel()
	var out buffer
	spec := shellSpec("trap '' TERM; echo pgid=$$; sleep 1000 & echo ready; wait")
	ty, err := Lookup(spec.Type)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := ty.New(spec, Options{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Cleanup()
	w := &watchWriter{marker: "ready", seen: make(chan struct{})}
	if err := ex.Start(t.Context(), &syncWriter{w: io.MultiWriter(&out, w)}); err != nil {
		t.Fatal(err)
	}
	<-w.seen
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	const grace = 300 * time.Millisecond
	start := time.Now()
	if got := wait(ctx, ex, 0, grace); got == nil || *got != (Stop{}) {
		t.Fatalf("stop %+v, want cancelled", got)
	}
	if d := time.Since(start); d < grace {
		t.Errorf("wait returned after %v, before the grace", d)
	}
	assertGroupGone(t, waitPGID(t, &out))
	o := ex.Finish(&Stop{})
	if diff := cmp.Diff(Outcome{Status: protocol.StatusCancelled, Error: "task cancelled"}, o); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
}
