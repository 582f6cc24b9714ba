package delegate_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// httpBase waits until the agent's health and metrics server listens and
// returns its base URL.
func (ag *testAgent) httpBase(t *testing.T) string {
	t.Helper()
	var addr string
	eventually(t, "health and metrics server of "+ag.hostname, func() (bool, string) {
		addr = ag.agent.HTTPAddr()
		return addr != "", "not listening yet"
	})
	return "http://" + addr
}

// readyz returns the status code and answer of /readyz.
func readyz(t *testing.T, base string) (int, protocol.HealthStatus) {
	t.Helper()
	resp, err := http.Get(base + protocol.PathReady)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s protocol.HealthStatus
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("decode /readyz: %v", err)
	}
	return resp.StatusCode, s
}

func waitReady(t *testing.T, base string, want int) protocol.HealthStatus {
	t.Helper()
	var s protocol.HealthStatus
	eventually(t, fmt.Sprintf("/readyz %d", want), func() (bool, string) {
		var code int
		code, s = readyz(t, base)
		return code == want, fmt.Sprintf("%d %+v", code, s)
	})
	return s
}

// waitMetric scrapes until the series has the value.
func waitMetric(t *testing.T, base, name string, want float64, labels ...string) promtest.Families {
	t.Helper()
	var f promtest.Families
	eventually(t, fmt.Sprintf("%s%v = %v", name, labels, want), func() (bool, string) {
		f = promtest.Scrape(t, base+protocol.PathMetrics)
		got, err := f.Lookup(name, labels...)
		return err == nil && got == want, fmt.Sprintf("%v (%v)", got, err)
	})
	return f
}

func TestDelegateMetricsCountTasks(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{capacity: 1, httpAddr: "127.0.0.1:0", grace: waitLong})
	base := ag.httpBase(t)
	waitReady(t, base, http.StatusOK)
	resp, err := http.Get(base + protocol.PathHealth)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d", resp.StatusCode)
	}

	// Two tasks succeed, one fails, one times out.
	for _, c := range []struct {
		spec   protocol.TaskSpec
		status string
	}{
		{protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "echo one"}}, protocol.StatusSucceeded},
		{protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "echo two"}}, protocol.StatusSucceeded},
		{protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "exit 3"}}, protocol.StatusFailed},
		{protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "exec sleep 30"}, TimeoutMS: 300}, protocol.StatusTimedOut},
	} {
		task := tm.submit(t, c.spec)
		tm.waitTask(t, task.ID, c.status)
	}
	f := promtest.Scrape(t, base+protocol.PathMetrics)
	shell := []string{"delegate", "test-delegate", "type", protocol.TaskShell}
	for name, want := range map[string]float64{
		"legate_delegate_tasks_completed_total": 2,
		"legate_delegate_tasks_failed_total":    1,
		"legate_delegate_tasks_timed_out_total": 1,
		"legate_delegate_tasks_executing":       0,
		"legate_delegate_task_duration_seconds": 4, // the sample count
	} {
		if got := f.Value(t, name, shell...); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if typ := f.Type("legate_delegate_task_duration_seconds"); typ != "HISTOGRAM" {
		t.Errorf("task duration is a %s", typ)
	}
	if got := f.Value(t, "legate_delegate_connected", "delegate", "test-delegate"); got != 1 {
		t.Errorf("connected = %v, want 1", got)
	}
	for _, name := range []string{"legate_delegate_reconnects_total", "legate_delegate_polling_fallbacks_total"} {
		if got := f.Value(t, name, "delegate", "test-delegate"); got != 0 {
			t.Errorf("%s = %v, want 0", name, got)
		}
	}
	if age := f.Value(t, "legate_delegate_heartbeat_age_seconds", "delegate", "test-delegate"); age < 0 {
		t.Errorf("heartbeat age = %v", age)
	}
	// (Offers that came while the one slot was busy with the previous task
	// may already count as rejected for capacity.)
	for _, reason := range []string{"threshold", "capability", "draining", "acquire"} {
		if got := f.Value(t, "legate_delegate_tasks_rejected_total", "reason", reason); got != 0 {
			t.Errorf("rejected %s = %v before any rejection", reason, got)
		}
	}

	// A task whose capability fails here is rejected.
	tm.submit(t, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Capabilities: []string{"tcp://127.0.0.1:1"}})
	waitMetric(t, base, "legate_delegate_tasks_rejected_total", 1, "reason", "capability")

	// A running task shows as executing.
	marker := filepath.Join(t.TempDir(), "go")
	busy := tm.submitScript(t, waitMarkerScript(marker))
	tm.waitTask(t, busy.ID, protocol.StatusRunning)
	waitMetric(t, base, "legate_delegate_tasks_executing", 1, shell...)

	// Draining: not ready, still alive; running work finishes.
	ag.cancel()
	s := waitReady(t, base, http.StatusServiceUnavailable)
	if !strings.Contains(s.Reason, "draining") {
		t.Errorf("/readyz while draining: %+v", s)
	}
	touch(t, marker)
	tm.waitTask(t, busy.ID, protocol.StatusSucceeded)
	if err := ag.mustReturn(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestDelegateReadyzFollowsTheManager: /readyz is 503 until the delegate
// reaches the manager, 200 while connected, 503 again while the manager is
// gone; the delegate counts the reconnect and the fallback to polling.
func TestDelegateReadyzFollowsTheManager(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	tok := tm.token(t, "early")
	tm.stop()
	ag := startAgent(t, tm, agentOpts{token: tok.Value, httpAddr: "127.0.0.1:0"})
	base := ag.httpBase(t)
	if code, s := readyz(t, base); code != http.StatusServiceUnavailable || !strings.Contains(s.Reason, "not registered") {
		t.Errorf("/readyz with no manager = %d %+v, want 503 not registered", code, s)
	}
	f := promtest.Scrape(t, base+protocol.PathMetrics)
	if got := f.Value(t, "legate_delegate_connected", "delegate", "test-delegate"); got != 0 {
		t.Errorf("connected with no manager = %v", got)
	}

	tm.restart()
	waitReady(t, base, http.StatusOK)
	waitMetric(t, base, "legate_delegate_connected", 1)

	tm.stop()
	waitReady(t, base, http.StatusServiceUnavailable)
	f = waitMetric(t, base, "legate_delegate_connected", 0)
	if got := f.Value(t, "legate_delegate_polling_fallbacks_total"); got < 1 {
		t.Errorf("polling fallbacks after the WebSocket dropped = %v, want at least 1", got)
	}

	tm.restart()
	waitReady(t, base, http.StatusOK)
	f = waitMetric(t, base, "legate_delegate_connected", 1)
	if got := f.Value(t, "legate_delegate_reconnects_total"); got < 1 {
		t.Errorf("reconnects = %v, want at least 1", got)
	}
}

// TestDelegatePollingIsConnected: a delegate told to poll is connected
// (and ready) once a poll answers, without counting a fallback.
func TestDelegatePollingIsConnected(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{poll: true, httpAddr: "127.0.0.1:0"})
	base := ag.httpBase(t)
	waitReady(t, base, http.StatusOK)
	f := waitMetric(t, base, "legate_delegate_connected", 1)
	if got := f.Value(t, "legate_delegate_polling_fallbacks_total"); got != 0 {
		t.Errorf("fallbacks of a delegate told to poll = %v, want 0", got)
	}
	tm.waitConnected(t, ag.hostname, protocol.ConnPolling)
	task := tm.submitScript(t, "echo polled")
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	f = promtest.Scrape(t, base+protocol.PathMetrics)
	if got := f.Value(t, "legate_delegate_tasks_completed_total", "type", protocol.TaskShell); got != 1 {
		t.Errorf("completed = %v, want 1", got)
	}
}

// TestDelegateHTTPPortInUse: Run fails at once with an error that names
// DELEGATE_HTTP_PORT when the port is taken.
func TestDelegateHTTPPortInUse(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	first := startAgent(t, tm, agentOpts{httpAddr: "127.0.0.1:0"})
	addr := strings.TrimPrefix(first.httpBase(t), "http://")
	second := startAgent(t, tm, agentOpts{httpAddr: addr})
	err := second.mustReturn(t)
	if err == nil || !strings.Contains(err.Error(), "DELEGATE_HTTP_PORT") {
		t.Fatalf("Run with the port taken: %v, want an error naming DELEGATE_HTTP_PORT", err)
	}
}

// TestDelegateMetricsCountValidating: /metrics shows the capability checks
// in progress (the performance line's max_validating counts the same), as
// it shows the tasks executing.
func TestDelegateMetricsCountValidating(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{httpAddr: "127.0.0.1:0", grace: waitLong})
	base := ag.httpBase(t)
	waitReady(t, base, http.StatusOK)
	waitMetric(t, base, "legate_delegate_tasks_validating", 0, "delegate", "test-delegate")

	release := make(chan struct{})
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(endpoint.Close)
	task := tm.submit(t, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "echo ok"}, Capabilities: []string{endpoint.URL}})
	waitMetric(t, base, "legate_delegate_tasks_validating", 1, "delegate", "test-delegate")
	close(release)
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	waitMetric(t, base, "legate_delegate_tasks_validating", 0, "delegate", "test-delegate")
}
