package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// newSandboxIsolator returns a tree-mode isolator whose shell tasks run in
// a sandbox, skipping the test where the host allows none.
func newSandboxIsolator(t *testing.T, mode Isolation, uids UIDRange) *Isolator {
	t.Helper()
	iso, err := NewIsolator(IsolatorOptions{Mode: mode, Dir: t.TempDir(), Sandbox: SandboxAuto, UIDs: uids})
	if err != nil && mode == IsolationCgroup {
		t.Skipf("no cgroup here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := iso.Mode(); mode != IsolationAuto && got != mode {
		t.Fatalf("isolator mode %s, want %s", got, mode)
	}
	t.Cleanup(func() { _ = iso.Close() })
	if st := iso.Sandbox(); st.Mode != SandboxNamespaces {
		t.Skipf("no task sandbox on this host: %s", st.Reason)
	}
	return iso
}

// taskWorkDir is the working directory of task id under the isolator's
// directory, as the delegate lays them out.
func taskWorkDir(t *testing.T, iso *Isolator, id string) string {
	t.Helper()
	d := filepath.Join(iso.dir, "tasks", id)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// The attack: while one task runs with a secret in its environment, a
// file in its working directory and one in /tmp, a concurrent task looks
// for them in /proc/*/environ, the task directories and /tmp.
func TestSandboxTaskSeesNothingOfAnother(t *testing.T) {
	iso := newSandboxIsolator(t, IsolationAuto, UIDRange{})
	path := "PATH=" + os.Getenv("PATH")
	victimDir := taskWorkDir(t, iso, "victim-task")
	victim := shellSpec(`echo s3cr3t-file > "$PWD/victim-file"; echo s3cr3t-tmp > /tmp/victim-tmp
touch "$PWD/ready"; until [ -e "$PWD/go" ]; do sleep 0.05; done`)
	victim.SecretEnv = map[string]string{"VICTIM_SECRET": "s3cr3t-env"}
	done := make(chan Outcome, 1)
	go func() {
		done <- Run(t.Context(), victim, Options{WorkDir: victimDir, Env: []string{path}, Isolator: iso}, nil)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(victimDir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the victim task never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var out buffer
	// The script builds what it looks for, so that its own text (which
	// grep finds in its directory) holds none of it.
	attack := shellSpec(`P=s3cr3; P="${P}t-"; V=vic; V="${V}tim"
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep "$P"
ls -R "$(dirname "$PWD")" /tmp /var/tmp /dev/shm
grep -rs "$P" /tmp "$(dirname "$PWD")" /var/tmp /dev/shm; cat "/tmp/$V-tmp" 2>/dev/null; echo attack-done`)
	o := Run(t.Context(), attack, Options{WorkDir: taskWorkDir(t, iso, "attacker-task"), Env: []string{path}, Isolator: iso}, &out)
	if err := os.WriteFile(filepath.Join(victimDir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if vo := <-done; vo.Status != protocol.StatusSucceeded {
		t.Fatalf("victim: %+v", vo)
	}
	got := out.String()
	if o.Status != protocol.StatusSucceeded || !strings.Contains(got, "attack-done") {
		t.Fatalf("attacker: %+v: %s", o, got)
	}
	for _, leak := range []string{"s3cr3t-", "victim-"} {
		if strings.Contains(got, leak) {
			t.Errorf("a task saw another's %q:\n%s", leak, got)
		}
	}
}

// A sandboxed shell's exit code, signal and timeout are reported as
// without a sandbox.
func TestSandboxOutcomes(t *testing.T) {
	iso := newSandboxIsolator(t, IsolationAuto, UIDRange{})
	path := "PATH=" + os.Getenv("PATH")
	cases := []struct {
		script, status, err string
		code                int
		timeout             time.Duration
	}{
		{script: "true", status: protocol.StatusSucceeded, code: 0},
		{script: "exit 3", status: protocol.StatusFailed, err: "exit status 3", code: 3},
		{script: "kill -KILL $$", status: protocol.StatusFailed, err: "signal: killed", code: -1},
		{script: "sleep 300", status: protocol.StatusTimedOut, code: -1, timeout: time.Second},
	}
	for i, c := range cases {
		var out buffer
		o := Run(context.Background(), shellSpec(c.script), Options{WorkDir: taskWorkDir(t, iso, "t"+string(rune('a'+i))),
			Env: []string{path}, Isolator: iso, Timeout: c.timeout, KillGrace: 500 * time.Millisecond}, &out)
		code := -1
		if o.ExitCode != nil {
			code = *o.ExitCode
		}
		if o.Status != c.status || code != c.code || (c.err != "" && o.Error != c.err) {
			t.Errorf("%q: %+v (exit code %d), want %s %q %d; output %q", c.script, o, code, c.status, c.err, c.code, out.String())
		}
	}
}

// A task directory given relative to the delegate's working directory (as
// legate dev's .legate-dev/delegate/tasks/ID is) runs in the sandbox too.
func TestSandboxRelativeTaskDir(t *testing.T) {
	iso := newSandboxIsolator(t, IsolationAuto, UIDRange{})
	dir := taskWorkDir(t, iso, "rel")
	t.Chdir(filepath.Dir(iso.dir))
	rel, err := filepath.Rel(filepath.Dir(iso.dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	o := Run(context.Background(), shellSpec("pwd"), Options{WorkDir: rel, Env: []string{"PATH=" + os.Getenv("PATH")}, Isolator: iso}, &out)
	if o.Status != protocol.StatusSucceeded || strings.TrimSpace(out.String()) != dir {
		t.Errorf("task in %s: %+v, output %q; want succeeded in %s", rel, o, out.String(), dir)
	}
}

// As root with a range of user IDs, each task runs as a user of its own:
// root in its namespace, that user outside, owning what it leaves.
func TestSandboxUserPerTask(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	// Task users must reach the delegate's directory: t.TempDir's
	// parent lets only its owner in.
	parent := filepath.Dir(t.TempDir())
	if err := os.Chmod(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	iso := newSandboxIsolator(t, IsolationAuto, UIDRange{First: 231000, Count: 4})
	dir := taskWorkDir(t, iso, "uid-task")
	var out buffer
	o := Run(t.Context(), shellSpec(`id -u; echo x > left`), Options{WorkDir: dir, Env: []string{"PATH=" + os.Getenv("PATH")}, Isolator: iso}, &out)
	if o.Status != protocol.StatusSucceeded || strings.TrimSpace(out.String()) != "0" {
		t.Fatalf("%+v: %q", o, out.String())
	}
	st, err := os.Stat(filepath.Join(dir, "left"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 231000 {
		t.Errorf("the task's file belongs to user %d, want 231000", uid)
	}
	if n := len(iso.sb.used); n != 0 {
		t.Errorf("%d task users still held after the task", n)
	}
}
