package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestDevCancelIsQuiet: cancelling a running task through legate dev shows
// no warning in its terminal (which shows warnings and errors only): the
// manager's refusal of the cancelled task's late output and result is
// expected, on both sides.
func TestDevCancelIsQuiet(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	addr := freePort(t)
	c := &cluster{t: t, data: data, url: "http://" + addr}
	c.mgr = start(t, "dev", nil, "dev", "--data", data, "--listen", addr)
	eventually(t, 30*time.Second, "legate dev serving with its delegate", func() bool {
		if c.mgr.exited() {
			t.Fatalf("legate dev exited:\n%s", c.mgr.out.String())
		}
		env, err := readEnv(filepath.Join(data, "admin.env"))
		if err != nil || env["LEGATE_API_KEY"] == "" {
			return false
		}
		c.account, c.apiKey = env["LEGATE_ACCOUNT_ID"], env["LEGATE_API_KEY"]
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		conn.Close()
		for _, d := range c.delegates() {
			if d.Name == "dev-delegate" && d.Status == protocol.DelegateConnected {
				return true
			}
		}
		return false
	})

	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--script", "echo started; exec sleep 301"))
	eventually(t, 30*time.Second, "the task to run and print", func() bool {
		return c.task(id).Status == protocol.StatusRunning && strings.Contains(c.mustCLI("task", "logs", id), "started")
	})
	before := len(c.mgr.out.String())
	c.mustCLI("task", "cancel", id)
	// The delegate's log file (info and up) says when it is done with the
	// task; the manager logs its refusal of the result before it answers.
	logFile := filepath.Join(data, "delegate", "delegate.log")
	eventually(t, 30*time.Second, "the delegate to finish the cancelled task", func() bool {
		b, _ := os.ReadFile(logFile)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `msg="task finished"`) && strings.Contains(line, "task="+id) {
				return true
			}
		}
		return false
	})
	if got := c.task(id); got.Status != protocol.StatusCancelled {
		t.Errorf("task %s is %s, want cancelled", id, got.Status)
	}
	for _, line := range strings.Split(c.mgr.out.String()[before:], "\n") {
		if strings.Contains(line, "level=WARN") {
			t.Errorf("legate dev's terminal shows a warning after the cancel: %s", line)
		}
	}
}
