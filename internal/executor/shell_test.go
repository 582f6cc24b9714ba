package executor

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/executor/pipe"
	"github.com/legate-dev/legate/internal/protocol"
)

// buffer is a goroutine-safe output sink for tests.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func intp(i int) *int { return &i }

func shellSpec(script string) protocol.TaskSpec {
	return protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: script}}
}

func TestShellExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		want   Outcome
		out    string
	}{
		{"success", "echo hello", Outcome{Status: protocol.StatusSucceeded, ExitCode: intp(0)}, "hello\n"},
		{"empty script", "", Outcome{Status: protocol.StatusSucceeded, ExitCode: intp(0)}, ""},
		{"exit 3", "echo before; exit 3", Outcome{Status: protocol.StatusFailed, ExitCode: intp(3), Error: "exit status 3"}, "before\n"},
		{"exit 255", "exit 255", Outcome{Status: protocol.StatusFailed, ExitCode: intp(255), Error: "exit status 255"}, ""},
		{"failing command", "set -e; false; echo unreachable", Outcome{Status: protocol.StatusFailed, ExitCode: intp(1), Error: "exit status 1"}, ""},
		{"syntax error", "if then", Outcome{Status: protocol.StatusFailed, ExitCode: intp(2), Error: "exit status 2"}, ""},
		{"killed by signal", "kill -KILL $$", Outcome{Status: protocol.StatusFailed, Error: "signal: killed"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out buffer
			var started atomic.Int32
			opts := Options{WorkDir: t.TempDir(), OnStart: func() { started.Add(1) }}
			got := Run(t.Context(), shellSpec(tt.script), opts, &out)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcome mismatch (-want +got):\n%s", diff)
			}
			if tt.name != "syntax error" && out.String() != tt.out {
				t.Errorf("output = %q, want %q", out.String(), tt.out)
			}
			if n := started.Load(); n != 1 {
				t.Errorf("OnStart called %d times, want 1", n)
			}
		})
	}
}

func TestShellStdoutStderrInterleaved(t *testing.T) {
	t.Parallel()
	var out buffer
	script := "echo out1; echo err1 >&2; echo out2; echo err2 >&2; printf 'no newline'"
	got := Run(t.Context(), shellSpec(script), Options{WorkDir: t.TempDir()}, &out)
	if got.Status != protocol.StatusSucceeded {
		t.Fatalf("outcome %+v", got)
	}
	if want := "out1\nerr1\nout2\nerr2\nno newline"; out.String() != want {
		t.Fatalf("output = %q, want %q", out.String(), want)
	}
}

func TestShellEnv(t *testing.T) {
	t.Parallel()
	var out buffer
	spec := shellSpec(`echo "A=$A B=$B C=$C S=$S D=$D"; compgen -e | sort | tr '\n' ' '`)
	spec.Env = map[string]string{"B": "task", "C": "task", "D": "task"}
	spec.SecretEnv = map[string]string{"S": "s3cr3t", "D": "secret-wins"}
	opts := Options{WorkDir: t.TempDir(), Env: []string{"A=base", "B=base", "A=base2"}}
	got := Run(t.Context(), spec, opts, &out)
	if got.Status != protocol.StatusSucceeded {
		t.Fatalf("outcome %+v, output %q", got, out.String())
	}
	lines := strings.SplitN(out.String(), "\n", 2)
	if want := "A=base2 B=task C=task S=s3cr3t D=secret-wins"; lines[0] != want {
		t.Errorf("env line = %q, want %q", lines[0], want)
	}
	// Only the given variables (plus what bash itself exports) exist: the
	// test process's environment (HOME, GOPATH, ...) is not inherited.
	var unexpected []string
	for _, name := range strings.Fields(lines[1]) {
		switch name {
		case "A", "B", "C", "D", "S", "PWD", "SHLVL", "_", "OLDPWD", protocol.OutputEnv: // the output file is ours
		default:
			unexpected = append(unexpected, name)
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("unexpected inherited variables: %v", unexpected)
	}
}

func TestShellWorkDirAndScript(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a", "b")
	var out buffer
	got := Run(t.Context(), shellSpec("pwd; touch made-here"), Options{WorkDir: dir}, &out)
	if got.Status != protocol.StatusSucceeded {
		t.Fatalf("outcome %+v", got)
	}
	if strings.TrimSpace(out.String()) != dir {
		t.Errorf("pwd = %q, want %q", out.String(), dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "made-here")); err != nil {
		t.Errorf("script did not run in WorkDir: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, ScriptName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("script mode = %v, want 0700", fi.Mode().Perm())
	}
	// A second run overwrites the script (and fixes its mode).
	if err := os.Chmod(filepath.Join(dir, ScriptName), 0o644); err != nil {
		t.Fatal(err)
	}
	out = buffer{}
	if got := Run(t.Context(), shellSpec("echo second"), Options{WorkDir: dir}, &out); got.Status != protocol.StatusSucceeded || out.String() != "second\n" {
		t.Fatalf("second run: %+v %q", got, out.String())
	}
	if fi, _ := os.Stat(filepath.Join(dir, ScriptName)); fi.Mode().Perm() != 0o700 {
		t.Errorf("script mode after rewrite = %v", fi.Mode().Perm())
	}
}

func TestBadSpecs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		spec protocol.TaskSpec
		opts Options
		want string
		// fault is true when the delegate, not the task, is to blame.
		fault bool
	}{
		{"unknown type", protocol.TaskSpec{Type: "docker"}, Options{WorkDir: dir}, `unknown task type "docker"`, false},
		{"empty type", protocol.TaskSpec{}, Options{WorkDir: dir}, `unknown task type ""`, false},
		{"shell without section", protocol.TaskSpec{Type: protocol.TaskShell}, Options{WorkDir: dir}, `shell task has no "shell" section`, false},
		{"http without section", protocol.TaskSpec{Type: protocol.TaskHTTP}, Options{}, `http task has no "http" section`, false},
		{"no work dir", shellSpec("true"), Options{}, "shell task needs a work directory (none configured)", false},
		{"bad env name", protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{}, Env: map[string]string{"A=B": "x"}}, Options{WorkDir: dir}, `invalid env name "A=B": must be non-empty without '=' or NUL`, false},
		{"empty env name", protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{}, Env: map[string]string{"": "x"}}, Options{WorkDir: dir}, `invalid env name "": must be non-empty without '=' or NUL`, false},
		{"NUL in secret", protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{}, SecretEnv: map[string]string{"S": "a\x00b"}}, Options{WorkDir: dir}, `invalid secret_env S: value contains NUL`, false},
		{"work dir is a file", shellSpec("true"), Options{WorkDir: "/dev/null/x"}, "create work directory: mkdir /dev/null: not a directory", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out buffer
			called := false
			tt.opts.OnStart = func() { called = true }
			got := Run(t.Context(), tt.spec, tt.opts, &out)
			want := Outcome{Status: protocol.StatusFailed, Error: tt.want, DelegateFault: tt.fault}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("outcome mismatch (-want +got):\n%s", diff)
			}
			if called {
				t.Error("OnStart called for a task that never started")
			}
		})
	}
}

// TestBashNotFound cannot run in parallel: it empties PATH.
func TestBashNotFound(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	got := Run(t.Context(), shellSpec("true"), Options{WorkDir: t.TempDir()}, nil)
	if got.Status != protocol.StatusFailed || !strings.HasPrefix(got.Error, "bash not found on the delegate's PATH: ") {
		t.Fatalf("outcome %+v", got)
	}
}

var pgidRE = regexp.MustCompile(`pgid=(\d+)`)

// waitPGID waits until out shows the script's "pgid=N" line.
func waitPGID(t *testing.T, out *buffer) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := pgidRE.FindStringSubmatch(out.String()); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no pgid in output %q", out.String())
	return 0
}

// assertGroupGone fails unless no live process of group pgid is left.
// Killed processes whose parent died wait for their new parent to reap
// them: PID 1, or this test process once a tree-mode Isolator made it a
// subreaper (it reaps when its runs end); zombies count as gone.
func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !groupGone(pgid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			t.Fatalf("process group %d still alive", pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestShellCancelKillsGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out buffer
	spec := shellSpec("echo pgid=$$; sleep 1000 & sleep 1000; wait")
	res := make(chan Outcome, 1)
	go func() { res <- Run(ctx, spec, Options{WorkDir: t.TempDir(), KillGrace: 3 * time.Second}, &out) }()
	pgid := waitPGID(t, &out)
	cancel()
	var got Outcome
	select {
	case got = <-res:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	want := Outcome{Status: protocol.StatusCancelled, Error: "task cancelled"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcome mismatch (-want +got):\n%s", diff)
	}
	if !strings.HasSuffix(out.String(), "\n[legate: task cancelled; killed process group]\n") {
		t.Errorf("output %q lacks the cancel notice at the end", out.String())
	}
	assertGroupGone(t, pgid)
}

func TestShellTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	var out buffer
	spec := shellSpec("echo pgid=$$; sleep 1000 & sleep 1000; wait")
	start := time.Now()
	got := Run(t.Context(), spec, Options{WorkDir: t.TempDir(), Timeout: 300 * time.Millisecond, KillGrace: 3 * time.Second}, &out)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("returned after %v, before the timeout", d)
	}
	want := Outcome{Status: protocol.StatusTimedOut, Error: "task timed out after 300ms"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcome mismatch (-want +got):\n%s", diff)
	}
	if !strings.HasSuffix(out.String(), "\n[legate: task timed out after 300ms; killed process group]\n") {
		t.Errorf("output %q lacks the timeout notice at the end", out.String())
	}
	assertGroupGone(t, waitPGID(t, &out))
}

// TestShellTimeoutSIGKILL: the script and its children ignore SIGTERM, so
// only the SIGKILL after KillGrace ends them.
func TestShellTimeoutSIGKILL(t *testing.T) {
	t.Parallel()
	var out buffer
	spec := shellSpec("trap '' TERM; echo pgid=$$; sleep 1000 & sleep 1000; wait")
	start := time.Now()
	got := Run(t.Context(), spec, Options{WorkDir: t.TempDir(), Timeout: 200 * time.Millisecond, KillGrace: 400 * time.Millisecond}, &out)
	if d := time.Since(start); d < 600*time.Millisecond || d > 5*time.Second {
		t.Errorf("returned after %v; want about timeout + grace (600ms)", d)
	}
	if got.Status != protocol.StatusTimedOut {
		t.Errorf("outcome %+v", got)
	}
	assertGroupGone(t, waitPGID(t, &out))
}

// TestShellBackgroundHoldsPipe: a background process that keeps the output
// pipe open must not keep Run waiting once the script exited.
func TestShellBackgroundHoldsPipe(t *testing.T) {
	t.Parallel()
	var out buffer
	spec := shellSpec("echo pgid=$$; sleep 30 & echo done")
	start := time.Now()
	got := Run(t.Context(), spec, Options{WorkDir: t.TempDir()}, &out)
	d := time.Since(start)
	pgid := waitPGID(t, &out)
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	if d > 5*time.Second {
		t.Errorf("Run took %v with a background process holding the pipe", d)
	}
	want := Outcome{Status: protocol.StatusSucceeded, ExitCode: intp(0)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcome mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(out.String(), "done\n") || !strings.Contains(out.String(), "background processes still hold it") {
		t.Errorf("output %q", out.String())
	}
	// Only cancel and timeout kill the group: the background sleep lives on.
	if err := syscall.Kill(-pgid, 0); err != nil {
		t.Errorf("background process was killed: %v", err)
	}
}

func TestShellCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	got := Run(ctx, shellSpec("touch ran"), Options{WorkDir: dir}, nil)
	if got.Status != protocol.StatusCancelled {
		t.Errorf("outcome %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("script ran although ctx was cancelled")
	}
}

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("broken") }

// TestShellBrokenOutput: an output writer that fails must not stall the
// script on a full pipe.
func TestShellBrokenOutput(t *testing.T) {
	t.Parallel()
	spec := shellSpec("head -c 1000000 /dev/zero; echo; exit 4")
	got := Run(t.Context(), spec, Options{WorkDir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}, Timeout: 20 * time.Second}, brokenWriter{})
	want := Outcome{Status: protocol.StatusFailed, ExitCode: intp(4), Error: "exit status 4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcome mismatch (-want +got):\n%s", diff)
	}
}

func TestBuildEnv(t *testing.T) {
	t.Parallel()
	got := buildEnv([]string{"A=1", "B=2", "NOVALUE", "A=3"}, map[string]string{"C": "c", "B": "task"}, map[string]string{"B": "secret", "Z": "z"})
	want := []string{"A=3", "B=secret", "NOVALUE", "C=c", "Z=z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("buildEnv mismatch (-want +got):\n%s", diff)
	}
	if env := buildEnv(nil, nil, nil); env == nil || len(env) != 0 {
		t.Errorf("buildEnv(nil) = %#v; want empty non-nil", env)
	}
}

// gateWriter blocks every Write until gate is closed (a manager that does
// not take output yet: the delegate's back-pressure).
type gateWriter struct {
	gate chan struct{}
	buf  buffer
}

func (g *gateWriter) Write(p []byte) (int, error) {
	<-g.gate
	return g.buf.Write(p)
}

// seqOutput is what `seq from to | head -c n` prints.
func seqOutput(from, to, n int) string {
	var b strings.Builder
	for i := from; i <= to && b.Len() < n; i++ {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	return b.String()[:n]
}

// TestShellOutputCompleteAfterExitWithSlowWriter: output still in the pipe
// when the script exits is read to the end, however long the writer takes
// to accept it (exec.Cmd's WaitDelay used to close the pipe a second after
// the exit and lose it).
func TestShellOutputCompleteAfterExitWithSlowWriter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := &gateWriter{gate: make(chan struct{})}
	spec := shellSpec("echo $$ > pid; seq 100000 199999 | head -c 60000") // fits in the pipe: the script exits
	res := make(chan Outcome, 1)
	go func() {
		res <- Run(t.Context(), spec, Options{WorkDir: dir, Env: []string{"PATH=" + os.Getenv("PATH")}}, w)
	}()
	// Hold the writer until the script is gone, and then some more: Run
	// must not return (nor give up on the pipe) while output is unread.
	var pid int
	eventuallyT(t, "the script's pid file", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	eventuallyT(t, "the script to exit", func() bool {
		p, ok := readProc(pid)
		return !ok || p.dead()
	})
	var o Outcome
	returned := false
	select {
	case o = <-res:
		returned = true // it gave up on the output
	case <-time.After(2 * pipe.Idle):
	}
	close(w.gate)
	if !returned {
		o = <-res
	}
	if o.Status != protocol.StatusSucceeded {
		t.Fatalf("outcome %+v", o)
	}
	if got, want := w.buf.String(), seqOutput(100000, 199999, 60000); got != want {
		t.Fatalf("output has %d bytes, want the %d the script wrote (returned before the writer took them: %v)", len(got), len(want), returned)
	}
}

// eventuallyT polls cond for up to 20 s.
func eventuallyT(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestShellTimeoutWhileOutputIsHeld: a task held by back-pressure (its
// writer does not take output) still times out: its processes end at the
// timeout, not when the writer lets go, and its output up to then is kept.
func TestShellTimeoutWhileOutputIsHeld(t *testing.T) {
	t.Parallel()
	iso, err := NewIsolator(IsolatorOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iso.Close() })
	dir := t.TempDir()
	w := &gateWriter{gate: make(chan struct{})}
	res := make(chan Outcome, 1)
	go func() {
		res <- Run(t.Context(), shellSpec("echo $$ > pid; exec yes"), Options{
			WorkDir: dir, Env: []string{"PATH=" + os.Getenv("PATH")}, Timeout: 500 * time.Millisecond, Isolator: iso,
		}, w)
	}()
	var pid int
	eventuallyT(t, "the script's pid file", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	eventuallyT(t, "the held task to be killed at its timeout", func() bool {
		p, ok := readProc(pid)
		return !ok || p.dead()
	})
	close(w.gate)
	o := <-res
	if o.Status != protocol.StatusTimedOut {
		t.Fatalf("outcome %+v", o)
	}
	if out := w.buf.String(); !strings.HasPrefix(out, "y\ny\n") || !strings.HasSuffix(out, "; killed all its processes]\n") {
		t.Fatalf("output (%d bytes) lacks the task's lines or the timeout notice", len(out))
	}
}
