package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// delegateRun is a delegate process with stdout and stderr kept apart.
type delegateRun struct {
	cmd            *exec.Cmd
	dir            string
	stdout, stderr *syncBuffer
	done           chan struct{}
	err            error
}

func startDelegateRun(t *testing.T, env []string, args ...string) *delegateRun {
	t.Helper()
	r := &delegateRun{dir: t.TempDir(), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(binary, append([]string{"delegate"}, args...)...)
	r.cmd.Env = append(baseEnv(), env...)
	r.cmd.Dir = r.dir
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("--- delegate stdout ---\n%s\n--- stderr ---\n%s", r.stdout.String(), r.stderr.String())
		}
	})
	return r
}

// exitCode waits for the process and returns its exit code.
func (r *delegateRun) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("delegate did not exit")
	}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		return ee.ExitCode()
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return 0
}

// logFile returns WORKDIR/delegate.log.
func (r *delegateRun) logFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "delegate.log"))
	if err != nil {
		t.Fatalf("delegate.log: %v", err)
	}
	return string(b)
}

// lines returns the log lines with msg=msg (the text handler's format).
func lines(out, msg string) []string {
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " msg="+msg+" ") || strings.Contains(l, ` msg="`+msg+`"`) || strings.HasSuffix(l, " msg="+msg) {
			found = append(found, l)
		}
	}
	return found
}

func TestDelegateLogFile(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("logfile")

	t.Run("LOGGING_LEVEL=debug: the same lines on stdout and in delegate.log", func(t *testing.T) {
		env := append(c.seed004Env(tok, "logs", ""), "DELEGATE_HOSTNAME=logs-debug", "LOGGING_LEVEL=debug")
		r := startDelegateRun(t, env, "--grace", "10s", "--perf-interval", "100ms")
		c.waitConnected("logs-debug", "")
		task, res := c.runJSON("--script", "echo hello", "--selector", "logs-debug")
		if task.Status != "succeeded" {
			t.Fatalf("task %+v; stderr %s", task, res.stderr)
		}
		eventually(t, 20*time.Second, "a performance line", func() bool {
			return len(lines(r.stdout.String(), "performance")) > 0
		})
		r.cmd.Process.Signal(syscall.SIGTERM)
		if code := r.exitCode(t); code != 0 {
			t.Fatalf("delegate exited %d after SIGTERM", code)
		}
		out := r.stdout.String()
		if diff := cmp.Diff(out, r.logFile(t)); diff != "" {
			t.Errorf("delegate.log differs from stdout (-stdout +file):\n%s", diff)
		}
		if r.stderr.String() != "" {
			t.Errorf("stderr: %q; want every line on stdout", r.stderr.String())
		}
		start := lines(out, "delegate starting")
		if len(start) != 1 || !strings.Contains(start[0], "log_level=DEBUG") {
			t.Errorf("start lines %q; want one with log_level=DEBUG", start)
		}
		for _, msg := range []string{"registered with the manager", "task acquired", "task finished", "delegate stopped"} {
			if len(lines(out, msg)) == 0 {
				t.Errorf("no %q line in the log", msg)
			}
		}
		perf := lines(out, "performance")[0]
		for _, field := range []string{"cpu_process=", "cpu_system=", "max_executing=", "max_validating=", "rss_mb=", "goroutines="} {
			if !strings.Contains(perf, " "+field) {
				t.Errorf("performance line %q has no %s", perf, field)
			}
		}
	})

	t.Run("LOGGING_LEVEL=WARNING keeps info lines out; --log-level overrides it", func(t *testing.T) {
		for _, tc := range []struct {
			host     string
			args     []string
			wantInfo bool
		}{
			{host: "logs-warn"},
			{host: "logs-flag", args: []string{"--log-level", "info"}, wantInfo: true},
		} {
			env := append(c.seed004Env(tok, "logs", ""), "DELEGATE_HOSTNAME="+tc.host, "LOGGING_LEVEL=WARNING")
			r := startDelegateRun(t, env, append([]string{"--grace", "10s"}, tc.args...)...)
			c.waitConnected(tc.host, "")
			r.cmd.Process.Signal(syscall.SIGTERM)
			if code := r.exitCode(t); code != 0 {
				t.Fatalf("%s exited %d after SIGTERM", tc.host, code)
			}
			out := r.stdout.String()
			if got := len(lines(out, "registered with the manager")) > 0; got != tc.wantInfo {
				t.Errorf("%s %v: info lines logged = %v, want %v", tc.host, tc.args, got, tc.wantInfo)
			}
			if diff := cmp.Diff(out, r.logFile(t)); diff != "" {
				t.Errorf("%s: delegate.log differs from stdout (-stdout +file):\n%s", tc.host, diff)
			}
		}
	})

	t.Run("a bad LOGGING_LEVEL stops the delegate with a message naming it", func(t *testing.T) {
		env := append(c.seed004Env(tok, "logs", ""), "DELEGATE_HOSTNAME=logs-bad", "LOGGING_LEVEL=verbose")
		r := startDelegateRun(t, env)
		if code := r.exitCode(t); code == 0 {
			t.Fatalf("delegate with LOGGING_LEVEL=verbose exited 0")
		}
		msg := strings.TrimSpace(r.stderr.String())
		if !strings.Contains(msg, "LOGGING_LEVEL") || strings.Contains(msg, "\n") {
			t.Errorf("stderr %q; want one line naming LOGGING_LEVEL", msg)
		}
		if _, err := os.Stat(filepath.Join(r.dir, "delegate.log")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("delegate.log after a refused start: %v; want none", err)
		}
	})
}
