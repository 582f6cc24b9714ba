package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/e2e/promformat"
	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// readyStatus returns the status code of a /readyz answer (0 when nothing
// answers) and its body.
func readyStatus(url string) (int, protocol.HealthStatus) {
	var s protocol.HealthStatus
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url + protocol.PathReady)
	if err != nil {
		return 0, s
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&s)
	return resp.StatusCode, s
}

// prometheusReads fetches url (a /metrics endpoint) and checks that
// Prometheus's own parser reads it as promtest's does: the tests here and
// legate's unit tests read metrics with promtest, whose parser uses the
// standard library only.
func prometheusReads(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := promformat.Check(string(body)); err != nil {
		t.Errorf("%s: %v\n%s", url, err, body)
	}
}

// TestHealthAndMetrics runs a delegate process with DELEGATE_HTTP_PORT
// before its manager is up: /readyz is 503 until it connects, 200 after;
// then both processes' /metrics parse (with Prometheus's parser too) and
// count the task that ran.
func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("metrics")
	// Stop the manager: the delegate starts with no manager to reach.
	c.mgr.signal(syscall.SIGTERM)
	if code := c.mgr.wait(15 * time.Second); code != 0 {
		t.Fatalf("manager exit %d", code)
	}
	_, port, err := net.SplitHostPort(freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	dURL := "http://127.0.0.1:" + port
	env := append(c.seed004Env(tok, "metrics-del", ""), "DELEGATE_HOSTNAME=metrics-host", "DELEGATE_HTTP_PORT="+port)
	d := start(t, "delegate metrics-host", env, "delegate", "--grace", "20s")
	var code int
	var s protocol.HealthStatus
	eventually(t, 15*time.Second, "delegate /readyz to answer", func() bool {
		code, s = readyStatus(dURL)
		return code != 0
	})
	if code != http.StatusServiceUnavailable || !strings.Contains(s.Reason, "not registered") {
		t.Errorf("delegate /readyz before the manager is up = %d %+v, want 503 not registered", code, s)
	}
	resp, err := http.Get(dURL + protocol.PathHealth)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("delegate /healthz = %d, want 200 while alive", resp.StatusCode)
	}

	c.startManager(strings.TrimPrefix(c.url, "http://"))
	eventually(t, 20*time.Second, "delegate /readyz 200", func() bool {
		code, _ := readyStatus(dURL)
		return code == http.StatusOK
	})
	if code, _ := readyStatus(c.url); code != http.StatusOK {
		t.Errorf("manager /readyz = %d, want 200", code)
	}
	c.waitConnected("metrics-host", protocol.ConnWebSocket)

	task, r := c.runJSON("--selector", "metrics-del", "--script", "echo measured")
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("task %s: %s\n%s", task.Status, r.stderr, r.stdout)
	}

	prometheusReads(t, dURL+protocol.PathMetrics)
	df := promtest.Scrape(t, dURL+protocol.PathMetrics)
	del := []string{"delegate", "metrics-del"}
	if got := df.Value(t, "legate_delegate_tasks_completed_total", append(del, "type", protocol.TaskShell)...); got != 1 {
		t.Errorf("delegate completed = %v, want 1", got)
	}
	if got := df.Value(t, "legate_delegate_tasks_executing", append(del, "type", protocol.TaskShell)...); got != 0 {
		t.Errorf("delegate executing = %v, want 0", got)
	}
	if n, _ := df.Histogram(t, "legate_delegate_task_duration_seconds", append(del, "type", protocol.TaskShell)...); n != 1 {
		t.Errorf("delegate task duration count = %d, want 1", n)
	}
	if got := df.Value(t, "legate_delegate_connected", del...); got != 1 {
		t.Errorf("delegate connected = %v, want 1", got)
	}
	if !df.Has("legate_delegate_heartbeat_age_seconds", del...) || !df.Has("process_resident_memory_bytes") {
		t.Errorf("delegate metrics lack heartbeat age or process metrics: %v", df.Names())
	}

	prometheusReads(t, c.url+protocol.PathMetrics)
	mf := promtest.Scrape(t, c.url+protocol.PathMetrics)
	if got := mf.Value(t, "legate_manager_delegates_connected", "connection", protocol.ConnWebSocket); got != 1 {
		t.Errorf("manager websocket delegates = %v, want 1", got)
	}
	if n, _ := mf.Histogram(t, "legate_manager_pickup_latency_seconds"); n != 1 {
		t.Errorf("manager pickup latency count = %d, want 1", n)
	}
	if got := mf.Value(t, "legate_manager_queue_depth"); got != 0 {
		t.Errorf("manager queue depth = %v, want 0", got)
	}
	eventually(t, 20*time.Second, "manager to count heartbeats", func() bool {
		v, err := promtest.Scrape(t, c.url+protocol.PathMetrics).Lookup("legate_manager_heartbeats_received_total")
		return err == nil && v > 0
	})

	d.signal(syscall.SIGTERM)
	if code := d.wait(30 * time.Second); code != 0 {
		t.Errorf("delegate exit %d", code)
	}
}
