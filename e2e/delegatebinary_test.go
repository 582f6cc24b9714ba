package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/bench"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestDelegateRunsAsTheDelegateOnlyBinary: `legate delegate` with the
// legate-delegate of its build beside it (as in the image) runs as that
// smaller binary, in the same process: it connects, runs tasks and hides
// its credentials from them as the full binary does. With
// LEGATE_DELEGATE_BINARY=off, or a legate-delegate of another build
// beside it, it runs as itself, and says why for the other build.
func TestDelegateRunsAsTheDelegateOnlyBinary(t *testing.T) {
	t.Parallel()
	lite, err := delegateOnlyBinary()
	if err != nil {
		if os.Getenv("LEGATE_E2E_BINARY") != "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	c := startCluster(t)
	token := c.token("lite")
	// runsAs starts `DIR/legate delegate` and returns the process and
	// the binary it runs as, by its log and, where readable, by /proc.
	runsAs := func(host, dir string, env ...string) (*proc, string) {
		t.Helper()
		env = append(append(c.seed004Env(token, "lite", ""), "DELEGATE_HOSTNAME="+host), env...)
		d := startBinary(t, filepath.Join(dir, "legate"), "delegate "+host, env, "delegate", "--grace", "5s")
		c.waitConnected(host, "")
		logged := bench.LoggedBinary(d.out.String())
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", d.cmd.Process.Pid)); err == nil && exe != logged {
			t.Errorf("%s: /proc/PID/exe is %s, the log says %s", host, exe, logged)
		}
		return d, logged
	}
	pair := func(liteSrc string) string {
		dir := t.TempDir()
		copyFile(t, binary, filepath.Join(dir, "legate"))
		copyFile(t, liteSrc, filepath.Join(dir, "legate-delegate"))
		return dir
	}

	dir := pair(lite)
	d, exe := runsAs("lite-host", dir)
	if want := filepath.Join(dir, "legate-delegate"); exe != want {
		t.Fatalf("the delegate runs as %q, want %s\n%s", exe, want, d.out)
	}
	task, r := c.runJSON("--selector", "lite-host", "--script", "echo from-the-delegate-only-binary")
	if task.Status != protocol.StatusSucceeded || !strings.Contains(r.stdout+r.stderr, "from-the-delegate-only-binary") {
		t.Errorf("task on the delegate-only binary: %s (%s)\n%s%s", task.Status, task.Error, r.stdout, r.stderr)
	}
	files := ancestorFiles(t, c.shellOutputOn("lite-host", ancestorsScript))
	mine := files[d.cmd.Process.Pid]
	if mine == nil || !strings.Contains(mine["environ"], "DELEGATE_HOSTNAME=lite-host") {
		t.Fatalf("the task could not read the delegate's environ: %v", mine)
	}
	for name, content := range mine {
		if strings.Contains(content, token) {
			t.Errorf("/proc/PID/%s of the delegate-only binary shows the token", name)
		}
	}
	if strings.Contains(d.out.String(), "could not hide") || strings.Contains(d.out.String(), "running the delegate as") {
		t.Errorf("the delegate warns:\n%s", d.out)
	}

	// Turned off: the same pair, the full binary.
	d, exe = runsAs("off-host", dir, "LEGATE_DELEGATE_BINARY=off")
	if want := filepath.Join(dir, "legate"); exe != want {
		t.Errorf("with LEGATE_DELEGATE_BINARY=off the delegate runs as %q, want %s\n%s", exe, want, d.out)
	}

	// Another build beside it: the full binary, and a warning saying so.
	other := filepath.Join(t.TempDir(), "legate-delegate")
	if err := os.WriteFile(other, []byte("#!/bin/sh\necho legate v0.0.1-another-build\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir = pair(other)
	d, exe = runsAs("other-host", dir)
	if want := filepath.Join(dir, "legate"); exe != want {
		t.Errorf("with another build beside it the delegate runs as %q, want %s\n%s", exe, want, d.out)
	}
	if !strings.Contains(d.out.String(), "another build") || !strings.Contains(d.out.String(), "v0.0.1-another-build") {
		t.Errorf("no warning about the legate-delegate of another build:\n%s", d.out)
	}
	if _, r := c.runJSON("--selector", "other-host", "--script", "true"); r.code != 0 {
		t.Errorf("task on the full binary: exit %d\n%s", r.code, r.stderr)
	}
}
