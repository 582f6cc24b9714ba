package executor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Every process a task starts must end with the task: a background job, a
// child that calls setsid, a double-forked daemon (setsid, orphaned, no
// pipe) and a child that ignores SIGTERM.

// marker returns a name unique to the test for `exec -a`, and makes sure
// no process with it survives the test even when the test fails.
func marker(t *testing.T) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	m := "legate-marker-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		for _, pid := range markedProcs(m) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return m
}

// markedProcs returns the live processes whose argv[0] starts with m.
func markedProcs(m string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.HasPrefix(b, []byte(m)) {
			continue // a zombie's cmdline is empty: it is dead
		}
		out = append(out, pid)
	}
	return out
}

// assertNoMarked waits (bounded) until no process named with m is left.
func assertNoMarked(t *testing.T, m string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := markedProcs(m)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, pid := range left {
				b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				names = append(names, fmt.Sprintf("%d:%s", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
			}
			t.Fatalf("processes of the task outlived it: %s", strings.Join(names, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// spawnScript starts the four kinds of processes (plus extra kinds), waits
// until all run, prints "ready" and then does end.
func spawnScript(m string, kinds []string, end string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "M=%s\n", m)
	// ready looks for a process whose argv[0] is $M-KIND with bash's own
	// read (a fork per process, as tr was, made one pass over /proc take
	// seconds on a loaded machine: longer than the timeout case's limit).
	b.WriteString(`ready() { for p in /proc/[0-9]*; do a0=; read -r -d '' a0 2>/dev/null <"$p/cmdline"; [ "$a0" = "$M-$1" ] && return 0; done; return 1; }` + "\n")
	for _, k := range kinds {
		switch k {
		case "bg":
			b.WriteString("( exec -a $M-bg sleep 300 ) &\n")
		case "setsid":
			b.WriteString("setsid bash -c \"exec -a $M-setsid sleep 300\" &\n")
		case "daemon":
			b.WriteString("( setsid bash -c \"exec -a $M-daemon sleep 300\" </dev/null >/dev/null 2>&1 & )\n")
		case "noterm":
			b.WriteString("( trap '' TERM; exec -a $M-noterm sleep 300 ) &\n")
		case "clearenv": // leaves the group, drops the marker, orphaned at exit
			b.WriteString("setsid env -i bash -c \"exec -a $M-clearenv sleep 300\" </dev/null >/dev/null 2>&1 &\n")
		}
	}
	fmt.Fprintf(&b, "for k in %s; do until ready $k; do sleep 0.02; done; done\necho ready\n%s\n", strings.Join(kinds, " "), end)
	return b.String()
}

var allKinds = []string{"bg", "setsid", "daemon", "noterm"}

// newIsolator returns an isolator in mode, skipping the test when the
// machine offers no writable cgroup2 hierarchy for cgroup mode.
func newIsolator(t *testing.T, mode Isolation) *Isolator {
	t.Helper()
	iso, err := NewIsolator(IsolatorOptions{Mode: mode, Dir: t.TempDir()})
	if err != nil && mode == IsolationCgroup {
		t.Skipf("no cgroup here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := iso.Mode(); got != mode {
		t.Fatalf("isolator mode %s, want %s", got, mode)
	}
	t.Cleanup(func() {
		if err := iso.Close(); err != nil {
			t.Errorf("close isolator: %v", err)
		}
	})
	return iso
}

func TestIsolationEndsEveryProcess(t *testing.T) {
	t.Parallel()
	endings := []struct {
		name    string
		end     string
		timeout time.Duration
		cancel  bool
		status  string
	}{
		{name: "success", end: "exit 0", status: protocol.StatusSucceeded},
		{name: "failure", end: "exit 3", status: protocol.StatusFailed},
		{name: "timeout", end: "exec -a $M-end sleep 300", timeout: 10 * time.Second, status: protocol.StatusTimedOut},
		{name: "cancel", end: "exec -a $M-end sleep 300", cancel: true, status: protocol.StatusCancelled},
	}
	for _, name := range []string{string(IsolationCgroup), string(IsolationTree), "cgroup-sandbox", "tree-sandbox"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mode := Isolation(strings.TrimSuffix(name, "-sandbox"))
			var iso *Isolator
			if strings.HasSuffix(name, "-sandbox") {
				iso = newSandboxIsolator(t, mode, UIDRange{})
			} else {
				iso = newIsolator(t, mode)
			}
			kinds := allKinds
			if mode == IsolationCgroup {
				// Beyond what tree mode can find (see Isolator).
				kinds = append(kinds[:len(kinds):len(kinds)], "clearenv")
			}
			for _, e := range endings {
				t.Run(e.name, func(t *testing.T) {
					t.Parallel()
					m := marker(t)
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					var out buffer
					res := make(chan Outcome, 1)
					go func() {
						res <- Run(ctx, shellSpec(spawnScript(m, kinds, e.end)), Options{
							WorkDir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")},
							Timeout: e.timeout, KillGrace: 500 * time.Millisecond, Isolator: iso,
						}, &out)
					}()
					if e.cancel {
						waitOutput(t, &out, "ready\n")
						cancel()
					}
					var o Outcome
					select {
					case o = <-res:
					case <-time.After(60 * time.Second):
						t.Fatal("Run did not return")
					}
					if o.Status != e.status || !strings.Contains(out.String(), "ready\n") {
						t.Fatalf("outcome %+v, output %q; want status %s after ready", o, out.String(), e.status)
					}
					if (e.cancel || e.timeout > 0) && !strings.HasSuffix(out.String(), "; killed all its processes]\n") {
						t.Errorf("output %q does not end with the notice", out.String())
					}
					assertNoMarked(t, m)
				})
			}
		})
	}
}

// waitOutput waits until out contains s.
func waitOutput(t *testing.T, out *buffer, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output %q never showed %q", out.String(), s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIsolationSweepEndsLeftovers: what a delegate that crashed left (a
// task still running in its cgroup, or recorded as a tree run) is ended by
// Sweep of the next isolator on the same directory.
func TestIsolationSweepEndsLeftovers(t *testing.T) {
	t.Parallel()
	for _, mode := range []Isolation{IsolationCgroup, IsolationTree} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			crashed, err := NewIsolator(IsolatorOptions{Mode: mode, Dir: dir})
			if err != nil && mode == IsolationCgroup {
				t.Skipf("no cgroup here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			m := marker(t)
			var out buffer
			res := make(chan Outcome, 1)
			go func() {
				res <- Run(t.Context(), shellSpec(spawnScript(m, allKinds, "exec -a $M-end sleep 300")), Options{
					WorkDir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}, Isolator: crashed,
				}, &out)
			}()
			waitOutput(t, &out, "ready\n")

			next, err := NewIsolator(IsolatorOptions{Mode: mode, Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			n, err := next.Sweep()
			if err != nil || n != 1 {
				t.Fatalf("Sweep = %d, %v; want 1 leftover run", n, err)
			}
			assertNoMarked(t, m)
			if o := <-res; o.Status != protocol.StatusFailed {
				t.Errorf("the swept task ended %+v, want failed (killed)", o)
			}
			if err := next.Close(); err != nil {
				t.Error(err)
			}
			if mode == IsolationCgroup {
				if _, err := os.Stat(next.cg.path); !os.IsNotExist(err) {
					t.Errorf("delegate cgroup %s still there after Close: %v", next.cg.path, err)
				}
			} else if ents, _ := os.ReadDir(filepath.Join(dir, runsDir)); len(ents) != 0 {
				t.Errorf("run records left: %v", ents)
			}
		})
	}
}

// TestCgroupFreezeFallback: without cgroup.kill (kernels before 5.14) the
// cgroup is frozen and each process killed.
func TestCgroupFreezeFallback(t *testing.T) {
	t.Parallel()
	iso := newIsolator(t, IsolationCgroup)
	iso.cg.noKill = true
	m := marker(t)
	o := Run(t.Context(), shellSpec(spawnScript(m, allKinds, "exit 0")), Options{
		WorkDir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}, KillGrace: 200 * time.Millisecond, Isolator: iso,
	}, nil)
	if o.Status != protocol.StatusSucceeded {
		t.Fatalf("outcome %+v", o)
	}
	assertNoMarked(t, m)
}

// TestCgroupStartFailureFallsBackToTree: when the shell cannot be started
// in a cgroup (here: the "cgroup" is a plain directory, as clone3 refused
// by a seccomp filter would also fail), the task still runs, isolated by
// process tree, and so do the next ones.
func TestCgroupStartFailureFallsBackToTree(t *testing.T) {
	t.Parallel()
	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	iso, err := NewIsolator(IsolatorOptions{Mode: IsolationAuto, Dir: t.TempDir(), CgroupParent: fake})
	if err != nil {
		t.Fatal(err)
	}
	if iso.Mode() != IsolationCgroup {
		t.Fatalf("mode %s before the first task, want cgroup", iso.Mode())
	}
	for range 2 {
		m := marker(t)
		o := Run(t.Context(), shellSpec(spawnScript(m, allKinds, "exit 0")), Options{
			WorkDir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}, KillGrace: 200 * time.Millisecond, Isolator: iso,
		}, nil)
		if o.Status != protocol.StatusSucceeded {
			t.Fatalf("outcome %+v", o)
		}
		assertNoMarked(t, m)
		if iso.Mode() != IsolationTree {
			t.Fatalf("mode %s after a failed cgroup start, want tree", iso.Mode())
		}
	}
}

func TestParseIsolation(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Isolation{"": IsolationAuto, "auto": IsolationAuto, " Cgroup ": IsolationCgroup, "tree": IsolationTree} {
		if got, err := ParseIsolation(in); err != nil || got != want {
			t.Errorf("ParseIsolation(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseIsolation("none"); err == nil || !strings.Contains(err.Error(), "want auto, cgroup or tree") {
		t.Errorf("ParseIsolation(none) error = %v", err)
	}
}

// TestCgroupSweepRemovesIdleSiblings: the empty cgroup of a delegate killed
// while idle is removed by the next delegate's Sweep; a live delegate whose
// empty cgroup was removed so makes it again for its next task; one that
// holds a task cgroup is left alone.
func TestCgroupSweepRemovesIdleSiblings(t *testing.T) {
	t.Parallel()
	idle := newIsolator(t, IsolationCgroup)
	busy := newIsolator(t, IsolationCgroup)
	run, err := busy.prepare()
	if err != nil {
		t.Fatal(err)
	}
	defer run.release()
	// A delegate killed right after a task ended: an empty, old task cgroup.
	killed := newIsolator(t, IsolationCgroup)
	left, err := killed.prepare()
	if err != nil {
		t.Fatal(err)
	}
	left.cg.closeFD()
	old := time.Now().Add(-2 * staleRun)
	if err := os.Chtimes(left.cg.path, old, old); err != nil {
		t.Fatal(err)
	}
	sweeper := newIsolator(t, IsolationCgroup)
	if _, err := sweeper.Sweep(); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{idle.cg.path, killed.cg.path} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Fatalf("idle delegate cgroup %s not removed: %v", gone, err)
		}
	}
	if _, err := os.Stat(run.cg.path); err != nil {
		t.Fatalf("a task cgroup of a busy delegate was removed: %v", err)
	}
	m := marker(t)
	o := Run(t.Context(), shellSpec(spawnScript(m, allKinds, "exit 0")), Options{
		WorkDir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}, KillGrace: 200 * time.Millisecond, Isolator: idle,
	}, nil)
	if o.Status != protocol.StatusSucceeded || idle.Mode() != IsolationCgroup {
		t.Fatalf("outcome %+v, mode %s", o, idle.Mode())
	}
	assertNoMarked(t, m)
}
