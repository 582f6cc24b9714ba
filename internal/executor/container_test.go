package executor

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/executor/containers"
	"github.com/legate-dev/legate/internal/protocol"
)

// fakeRuntime returns a runtime whose CLI is a script named podman that
// notes each call (its arguments, on a line) and whose `run` runs run, a
// shell snippet; `stop` sends SIGTERM to what `run` runs, and `rm` runs
// rm. It returns the runtime and a func that returns the calls so far, the
// random part of the run's names replaced by RUN and `run`'s arguments
// left out.
func fakeRuntime(t *testing.T, run, rm string) (*containers.Runtime, func() []string) {
	t.Helper()
	dir := t.TempDir()
	calls, pid := filepath.Join(dir, "calls"), filepath.Join(dir, "pid")
	script := `#!/bin/sh
echo "$*" >> ` + shellQuote(calls) + `
case "$1" in
run)
	echo $$ > ` + shellQuote(pid+".new") + ` && mv ` + shellQuote(pid+".new") + " " + shellQuote(pid) + `
	` + run + `
	;;
stop)
	while [ ! -e ` + shellQuote(pid) + ` ]; do sleep 0.01; done
	kill -TERM "$(cat ` + shellQuote(pid) + `)"
	;;
rm)
	` + rm + `
	;;
esac
exit 0
`
	path := filepath.Join(dir, "podman")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := containers.Find(func(k string) string {
		if k == containers.EnvContainerRuntime {
			return path
		}
		return ""
	}, "o1", "")
	if err != nil {
		t.Fatal(err)
	}
	random := regexp.MustCompile(`[0-9a-f]{16}`)
	return c, func() []string {
		b, err := os.ReadFile(calls)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(random.ReplaceAllString(string(b), "RUN")), "\n") {
			if strings.HasPrefix(l, "run ") {
				l = "run"
			}
			out = append(out, l)
		}
		return out
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestContainerLifecycle runs container tasks with a fake runtime through
// every way they end, and checks the outcomes and notices and the
// runtime's calls: the volume made first, the container stopped (with the
// grace) and removed when the task is stopped, and removed again with its
// volume at the end, whatever happened.
func TestContainerLifecycle(t *testing.T) {
	t.Parallel()
	volume := "volume create --label dev.legate.owner=o1 --label dev.legate.run=RUN --label dev.legate.task=t_1 legate-RUN-w"
	removed := []string{"rm --force --time 0 legate-RUN", "volume rm --force legate-RUN-w"}
	stopped := append([]string{"stop --time 1 legate-RUN"}, removed...)
	tests := []struct {
		name     string
		run, rm  string
		timeout  time.Duration
		cancel   bool // once the output says "started"
		want     Outcome
		outEnd   string
		calls    []string
		outWhole bool
	}{
		{name: "exits", run: "echo hello; exit 0",
			want: Outcome{Status: protocol.StatusSucceeded, ExitCode: intp(0)}, outEnd: "hello\n", outWhole: true,
			calls: append([]string{volume, "run"}, removed...)},
		{name: "exit 3", run: "exit 3",
			want:  Outcome{Status: protocol.StatusFailed, ExitCode: intp(3), Error: "exit status 3"},
			calls: append([]string{volume, "run"}, removed...)},
		{name: "runtime refuses", run: "echo no such image >&2; exit 125",
			want:   Outcome{Status: protocol.StatusFailed, ExitCode: intp(125), Error: "podman could not run the container (exit 125; see the task's output)"},
			outEnd: "no such image\n", calls: append([]string{volume, "run"}, removed...)},
		{name: "cancelled", run: "echo started; exec sleep 1000", cancel: true,
			want:   Outcome{Status: protocol.StatusCancelled, Error: "task cancelled"},
			outEnd: "started\n\n[legate: task cancelled; removed the container]\n", outWhole: true,
			calls: append(append([]string{volume, "run"}, stopped...), removed...)},
		{name: "timed out", run: "exec sleep 1000", timeout: 50 * time.Millisecond,
			want:   Outcome{Status: protocol.StatusTimedOut, Error: "task timed out after 50ms"},
			outEnd: "\n[legate: task timed out after 50ms; removed the container]\n", outWhole: true,
			calls: append(append([]string{volume, "run"}, stopped...), removed...)},
		{name: "removal fails", run: "echo started; exec sleep 1000", rm: "echo boom; exit 1", cancel: true,
			want: Outcome{Status: protocol.StatusCancelled, Error: "task cancelled"},
			outEnd: "started\n\n[legate: task cancelled; removed the container (podman rm --force --time 0 legate-RUN: exit status 1: boom)]\n" +
				"\n[legate: remove container: podman rm --force --time 0 legate-RUN: exit status 1: boom]\n", outWhole: true,
			calls: append(append([]string{volume, "run"}, stopped...), removed...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, calls := fakeRuntime(t, tt.run, tt.rm)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			w := &watchWriter{marker: "started", seen: make(chan struct{})}
			if tt.cancel {
				go func() {
					select {
					case <-w.seen:
						cancel()
					case <-ctx.Done():
					}
				}()
			}
			spec := protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "alpine:3",
				Volumes: []protocol.Volume{{Name: "w", MountPath: "/w", EmptyDir: &protocol.EmptyDirVolume{}}}}}
			got := Run(ctx, spec, Options{Containers: c, TaskID: "t_1", Timeout: tt.timeout, KillGrace: time.Second}, w)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			out := regexp.MustCompile(`[0-9a-f]{16}`).ReplaceAllString(w.String(), "RUN")
			if !strings.HasSuffix(out, tt.outEnd) || (tt.outWhole && out != tt.outEnd) {
				t.Errorf("output %q, want it to end with %q", out, tt.outEnd)
			}
			if diff := cmp.Diff(tt.calls, calls()); diff != "" {
				t.Errorf("runtime calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestContainerNoRuntime: a delegate without a container runtime fails a
// container task as its own fault, saying what to install.
func TestContainerNoRuntime(t *testing.T) {
	spec := protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "img"}}
	o := Run(context.Background(), spec, Options{}, nil)
	if o.Status != protocol.StatusFailed || !o.DelegateFault || !strings.Contains(o.Error, "no container runtime") {
		t.Fatalf("without a runtime: %+v", o)
	}
}
