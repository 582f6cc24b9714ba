package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTaskRunSaysWhyItWaits: a task whose selectors no connected delegate
// has is explained on stderr within moments, and task run keeps waiting
// until the manager gives up on it (exit 3). Before, it waited silently
// for the whole liveness window.
func TestTaskRunSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	// A 4 s heartbeat: the manager ends a task that no delegate can run
	// after one liveness window (12 s), long after the notice (1 s).
	c := startCluster(t, "--heartbeat-interval", "4s")
	tok := c.token("wait")
	c.delegate("plain", "wait-host", c.seed004Env(tok, "plain", "linux")...)
	r := c.cli("task", "run", "--selector", "gpu", "--script", "nvidia-smi")
	if r.code != 3 {
		t.Fatalf("exit %d, want 3 (not assigned); stderr:\n%s", r.code, r.stderr)
	}
	notice := strings.Index(r.stderr, " is waiting for a delegate: ")
	end := strings.Index(r.stderr, " not_assigned: ")
	if notice < 0 || end < notice || !strings.Contains(r.stderr[notice:end], "plain (wait-host): selectors: missing selectors: gpu") {
		t.Errorf("stderr does not explain the wait before the end:\n%s", r.stderr)
	}
	if n := strings.Count(r.stderr, "legate: task "); n != 2 {
		t.Errorf("%d task notices, want the wait and the end:\n%s", n, r.stderr)
	}
}

// TestFollowSaysManagerUnreachable: task run says when the manager goes
// away and when it is back, and the output continues. Before, it retried
// silently.
func TestFollowSaysManagerUnreachable(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("gone")
	c.delegate("gone", "gone-host", c.seed004Env(tok, "gone", "")...)
	flag := filepath.Join(t.TempDir(), "go-on")
	cmd := exec.Command(binary, "task", "run", "--script", "echo first; while [ ! -e "+flag+" ]; do sleep 0.1; done; echo second")
	cmd.Env = append(baseEnv(), "LEGATE_URL="+c.url, "LEGATE_API_KEY="+c.apiKey)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	out := bufio.NewReader(stdout)
	if line := readLineWithin(t, out, 30*time.Second); line != "first\n" {
		t.Fatalf("first line %q", line)
	}

	c.mgr.signal(syscall.SIGTERM)
	if code := c.mgr.wait(15 * time.Second); code != 0 {
		t.Fatalf("manager exit code %d on SIGTERM", code)
	}
	eventually(t, 20*time.Second, "the CLI to say the manager is gone", func() bool {
		return strings.Contains(stderr.String(), "legate: manager at "+c.url)
	})
	c.startManager(strings.TrimPrefix(c.url, "http://"))
	eventually(t, 30*time.Second, "the CLI to say the manager is back", func() bool {
		return strings.Contains(stderr.String(), " is back; following task ")
	})
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if line := readLineWithin(t, out, 60*time.Second); line != "second\n" {
		t.Errorf("second line %q", line)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("task run: %v; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "; retrying until it answers (Ctrl-C stops following, the task keeps running)") {
		t.Errorf("stderr, want one notice that it is gone and one that it is back:\n%s", stderr.String())
	}
}
