package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// reportsDelegate starts a delegate that reaches the manager at mgrURL and
// serves its metrics; it returns the metrics URL.
func (c *cluster) reportsDelegate(t *testing.T, name, host, mgrURL string, extra ...string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	env := c.seed004Env(c.token(name), name, "")
	for i, kv := range env {
		if strings.HasPrefix(kv, "MANAGER_HOST_AND_PORT=") {
			env[i] = "MANAGER_HOST_AND_PORT=" + mgrURL
		}
	}
	env = append(append(env, "DELEGATE_HTTP_PORT="+port), extra...)
	c.delegate(name, host, env...)
	c.waitConnected(host, protocol.ConnWebSocket)
	return "http://127.0.0.1:" + port + protocol.PathMetrics
}

// wsReports is the delegate's count of reports of kind sent over the
// WebSocket with outcome (0 when none was).
func wsReports(t *testing.T, metricsURL, name, kind, outcome string) float64 {
	t.Helper()
	v, err := promtest.Scrape(t, metricsURL).Lookup("legate_delegate_ws_reports_total", "delegate", name, "kind", kind, "outcome", outcome)
	if err != nil {
		return 0
	}
	return v
}

// TestTasksReportOverWebSocket: a delegate of this release claims its
// tasks, reports them started and their results over its WebSocket (the
// manager acknowledges each), not over HTTP.
func TestTasksReportOverWebSocket(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	murl := c.reportsDelegate(t, "wsrep", "wsrep-host", c.url)
	for i := range 3 {
		task, r := c.runJSON("--selector", "wsrep", "--script", fmt.Sprintf("echo report-%d", i))
		if task.Status != protocol.StatusSucceeded || task.StartedAt == nil || !strings.Contains(r.stdout, fmt.Sprintf("report-%d", i)) {
			t.Fatalf("task %d: %+v\n%s\n%s", i, task, r.stdout, r.stderr)
		}
	}
	for _, kind := range []string{protocol.FrameAcquire, protocol.FrameStarted, protocol.FrameResult} {
		if got := wsReports(t, murl, "wsrep", kind, "acked"); got < 1 {
			t.Errorf("%s frames acknowledged = %v, want at least 1", kind, got)
		}
		if got := wsReports(t, murl, "wsrep", kind, "http"); got != 0 {
			t.Errorf("%s reports made over HTTP after all = %v, want 0", kind, got)
		}
	}
	if got := wsReports(t, murl, "wsrep", protocol.FrameResult, "acked"); got != 3 {
		t.Errorf("results acknowledged over the WebSocket = %v, want 3", got)
	}
}

// TestResultAfterWebSocketCut: the WebSocket is cut while a task runs and
// stays refused: the task's result arrives over HTTP, once, and the task
// keeps the start it reported over the WebSocket.
func TestResultAfterWebSocketCut(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	proxy := startCutProxy(t, c.url)
	murl := c.reportsDelegate(t, "wscut", "wscut-host", proxy.url)

	marker := filepath.Join(t.TempDir(), "go")
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "wscut", "--script",
		fmt.Sprintf("echo before; while [ ! -e %s ]; do sleep 0.05; done; echo after the cut", marker)))
	eventually(t, 15*time.Second, "task started", func() bool { return c.task(id).StartedAt != nil })
	eventually(t, 15*time.Second, "started acknowledged over the WebSocket", func() bool {
		return wsReports(t, murl, "wscut", protocol.FrameStarted, "acked") == 1
	})

	proxy.cut()
	c.waitConnected("wscut-host", protocol.ConnPolling)
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "task succeeded", func() bool { return c.task(id).Status == protocol.StatusSucceeded })
	if got := wsReports(t, murl, "wscut", protocol.FrameResult, "acked"); got != 0 {
		t.Errorf("results acknowledged over the cut WebSocket = %v, want 0", got)
	}
	if logs := c.mustCLI("task", "logs", id); !strings.Contains(logs, "before") || !strings.Contains(logs, "after the cut") {
		t.Errorf("logs across the cut = %q", logs)
	}
	// Healed, the delegate reports over the WebSocket again.
	proxy.heal()
	c.waitConnected("wscut-host", protocol.ConnWebSocket)
	eventually(t, 20*time.Second, "a task reported over the WebSocket again", func() bool {
		if r := c.cli("task", "run", "--selector", "wscut", "--script", "echo back"); r.code != 0 {
			t.Fatalf("task after heal: %d %s", r.code, r.stderr)
		}
		return wsReports(t, murl, "wscut", protocol.FrameResult, "acked") >= 1
	})
}

// TestDelegateHTTPReports: a delegate that keeps to the HTTP calls (as one
// of an older release does, or told to with DELEGATE_HTTP_REPORTS=true)
// runs tasks against this manager as before.
func TestDelegateHTTPReports(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	murl := c.reportsDelegate(t, "httprep", "httprep-host", c.url, "DELEGATE_HTTP_REPORTS=true")
	for i := range 3 {
		task, r := c.runJSON("--selector", "httprep", "--script", fmt.Sprintf("echo http-%d", i))
		if task.Status != protocol.StatusSucceeded || task.StartedAt == nil || !strings.Contains(r.stdout, fmt.Sprintf("http-%d", i)) {
			t.Fatalf("task %d: %+v\n%s\n%s", i, task, r.stdout, r.stderr)
		}
	}
	for _, kind := range []string{protocol.FrameAcquire, protocol.FrameStarted, protocol.FrameResult} {
		for _, outcome := range []string{"acked", "http"} {
			if got := wsReports(t, murl, "httprep", kind, outcome); got != 0 {
				t.Errorf("%s reports over the WebSocket (%s) = %v, want none", kind, outcome, got)
			}
		}
	}
}

// TestDelegateOfOlderManager: the WebSocket's upgrade answer names
// protocol 4 (a manager of an earlier release, as a proxy makes it look
// here): the delegate sends it no frame it would not know, and claims and
// reports over HTTP.
func TestDelegateOfOlderManager(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	u, err := url.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(r *http.Response) error {
		r.Header.Set(protocol.HeaderProtocolVersion, strconv.Itoa(protocol.WSReportsVersion-1))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	murl := c.reportsDelegate(t, "oldmgr", "oldmgr-host", srv.URL)
	for i := range 3 {
		task, r := c.runJSON("--selector", "oldmgr", "--script", fmt.Sprintf("echo old-%d", i))
		if task.Status != protocol.StatusSucceeded || task.StartedAt == nil || !strings.Contains(r.stdout, fmt.Sprintf("old-%d", i)) {
			t.Fatalf("task %d: %+v\n%s\n%s", i, task, r.stdout, r.stderr)
		}
	}
	for _, kind := range []string{protocol.FrameAcquire, protocol.FrameStarted, protocol.FrameResult} {
		for _, outcome := range []string{"acked", "http"} {
			if got := wsReports(t, murl, "oldmgr", kind, outcome); got != 0 {
				t.Errorf("%s reports over the WebSocket (%s) = %v, want none", kind, outcome, got)
			}
		}
	}
}
