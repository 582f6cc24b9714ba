package e2e

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// follower is a CLI process that follows something, its stdout read line
// by line and its stderr kept.
type follower struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stderr *syncBuffer
}

func (c *cluster) follow(t *testing.T, args ...string) *follower {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(baseEnv(), "LEGATE_URL="+c.url, "LEGATE_API_KEY="+c.apiKey)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{cmd: cmd, out: bufio.NewReader(stdout), stderr: &syncBuffer{}}
	cmd.Stderr = f.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return f
}

// exitCode waits for the process and returns its exit status.
func (f *follower) exitCode(t *testing.T) int {
	t.Helper()
	err := f.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("wait: %v", err)
	return -1
}

// TestTaskLogsFollowSaysCancelledElsewhere: task logs --follow on a task
// that another command cancels ends with a line that says so, with when
// and by whom. Before, it ended silently, as if the task had finished.
func TestTaskLogsFollowSaysCancelledElsewhere(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("fol")
	c.delegate("fol", "fol-host", c.seed004Env(tok, "fol", "")...)
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--script", "echo started; sleep 600"))
	f := c.follow(t, "task", "logs", "--follow", id)
	if line := readLineWithin(t, f.out, 60*time.Second); line != "started\n" {
		t.Fatalf("first line %q", line)
	}
	c.mustCLI("task", "cancel", id)
	if code := f.exitCode(t); code != 0 {
		t.Errorf("task logs --follow: exit %d; stderr:\n%s", code, f.stderr.String())
	}
	if got, want := f.stderr.String(), "legate: task "+id+" was cancelled at "; !strings.Contains(got, want) || !strings.Contains(got, ": cancelled by ") {
		t.Errorf("stderr %q, want a line %q… with who cancelled it", got, want)
	}
}

// TestFollowInterruptedSaysItKeepsRunning: Ctrl-C (SIGINT) in task logs
// --follow and in run logs --follow says that the task or run keeps
// running and how to cancel it, exits 130, and the task or run does keep
// running. Before, task logs said nothing, and run logs said nothing when
// interrupted while a step's output streamed.
func TestFollowInterruptedSaysItKeepsRunning(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("int")
	c.delegate("int", "int-host", c.seed004Env(tok, "int", "")...)

	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--script", "echo started; sleep 600"))
	f := c.follow(t, "task", "logs", "--follow", id)
	if line := readLineWithin(t, f.out, 60*time.Second); line != "started\n" {
		t.Fatalf("first line %q", line)
	}
	if err := f.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := f.exitCode(t); code != 130 {
		t.Errorf("task logs --follow after SIGINT: exit %d, want 130", code)
	}
	if want := "legate: stopped following task " + id + "; it keeps running (legate task cancel " + id + " to stop it)\n"; f.stderr.String() != want {
		t.Errorf("stderr %q, want %q", f.stderr.String(), want)
	}
	if st := c.task(id).Status; st != protocol.StatusRunning {
		t.Errorf("task %s after Ctrl-C in task logs: %s, want running", id, st)
	}
	c.mustCLI("task", "cancel", id)

	file := t.TempDir() + "/slow.yaml"
	writeTestFile(t, file, "name: slow\nstages:\n  - name: s\n    steps:\n      - name: wait\n        shell: echo started; sleep 600\n")
	c.mustCLI("pipeline", "apply", "-f", file)
	run := strings.TrimSpace(c.mustCLI("pipeline", "run", "slow", "--detach"))
	f = c.follow(t, "run", "logs", "--follow", run)
	if line := readLineWithin(t, f.out, 60*time.Second); line != "started\n" {
		t.Fatalf("first line of the run %q", line)
	}
	if err := f.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := f.exitCode(t); code != 130 {
		t.Errorf("run logs --follow after SIGINT: exit %d, want 130", code)
	}
	if want := "legate: stopped following run " + run + "; it keeps running (legate run cancel " + run + " to stop it)\n"; !strings.HasSuffix(f.stderr.String(), want) {
		t.Errorf("stderr %q, want it to end with %q", f.stderr.String(), want)
	}
	if out := c.mustCLI("run", "get", run); !strings.Contains(out, protocol.RunRunning) {
		t.Errorf("run %s after Ctrl-C in run logs:\n%s\nwant running", run, out)
	}
	c.mustCLI("run", "cancel", run)
}

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
