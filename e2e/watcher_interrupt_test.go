package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestWatcherInterruptDrainsThenCancels: Ctrl-C in the terminal of a
// `legate watcher` (SIGINT to its whole process group, the delegate it
// started included) drains: the running task finishes and succeeds, then
// the watcher and its delegate exit. A second Ctrl-C cancels the running
// task. Before, the delegate took the terminal's SIGINT as its first stop
// request and the watcher's SIGTERM as its second: the first Ctrl-C
// cancelled the task.
func TestWatcherInterruptDrainsThenCancels(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	for _, tc := range []struct {
		name       string
		interrupts int
		want       string
	}{
		{"once", 1, protocol.StatusSucceeded},
		{"twice", 2, protocol.StatusCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := "watched-" + tc.name
			env := append(c.seed004Env(c.token(host), host, host), "DELEGATE_HOSTNAME="+host)
			w := start(t, "watcher "+host, env, "watcher", "--dir", t.TempDir())
			c.waitConnected(host, "")

			// The task says it started, then runs until the test lets it
			// finish (a file it waits for), bounded by its own timeout.
			dir := t.TempDir()
			started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
			script := "touch " + started + "; i=0; while [ ! -e " + release + " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo finished"
			id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", host, "--timeout", "2m", "--script", script))
			eventually(t, time.Minute, "the task started", func() bool { _, err := os.Stat(started); return err == nil })

			// What a terminal does at Ctrl-C: SIGINT to the foreground
			// process group (the watcher's: startBinary made it one).
			interrupt := func() {
				if err := syscall.Kill(-w.cmd.Process.Pid, syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
			}
			interrupt()
			eventually(t, time.Minute, "the delegate drains", func() bool { return strings.Contains(w.out.String(), "draining") })
			if tc.interrupts == 2 {
				interrupt()
			} else {
				// Still running after the drain began: let it finish.
				if got := c.task(id).Status; got != protocol.StatusRunning {
					t.Fatalf("the task after one Ctrl-C: %s, want running (draining)\n%s", got, w.out.String())
				}
				if err := os.WriteFile(release, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if code := w.wait(time.Minute); code != 0 {
				t.Fatalf("the watcher exited %d\n%s", code, w.out.String())
			}
			if got := c.task(id).Status; got != tc.want {
				t.Fatalf("the task after %d Ctrl-C: %s, want %s\n%s", tc.interrupts, got, tc.want, w.out.String())
			}
		})
	}
}
