package delegate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestForceStopEndsATaskHeldByItsOutputWhileTheManagerIsDown: a task that
// writes without pause is held by back-pressure once the manager stops
// taking its output; the second stop request still ends it, the agent
// returns, and the output not sent (its tail) and the result are kept on
// disk for the next start.
func TestForceStopEndsATaskHeldByItsOutputWhileTheManagerIsDown(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{grace: time.Hour})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	pidFile := filepath.Join(t.TempDir(), "pid")
	task := tm.submitScript(t, "echo $$ > "+shq(pidFile)+"\nexec yes\n")
	pid := waitPID(t, pidFile)
	eventually(t, "output to reach the manager", func() (bool, string) {
		out, _, _ := tm.logs(t, task.ID, false)
		return len(out) > 0, fmt.Sprintf("%d bytes", len(out))
	})
	tm.stop()
	eventually(t, "the agent to fail to deliver output", func() (bool, string) {
		return len(ag.logs.lines("output not delivered yet", "task="+task.ID)) > 0, "not yet"
	})

	ag.cancel()
	ag.force()
	if err := ag.mustReturn(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !processGone(pid) {
		t.Errorf("task process %d still runs after Run returned", pid)
	}
	for _, f := range []string{task.ID + ".logs.json", task.ID + ".result.json"} {
		if _, err := os.Stat(filepath.Join(ag.workDir, "spool", f)); err != nil {
			t.Errorf("not kept for the next start: %v", err)
		}
	}
}
