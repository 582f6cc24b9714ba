package manager

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// getStatus fetches a health endpoint and decodes its answer.
func getStatus(t *testing.T, url string) (int, protocol.HealthStatus) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s protocol.HealthStatus
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("decode %s: %v", url, err)
	}
	return resp.StatusCode, s
}

// waitMetric scrapes until the series has the value (bounded).
func waitMetric(t *testing.T, url, name string, want float64, labels ...string) promtest.Families {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		f := promtest.Scrape(t, url)
		got, err := f.Lookup(name, labels...)
		if err == nil && got == want {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v (%v), want %v", name, labels, got, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestManagerHealthAndMetrics(t *testing.T) {
	// Whole seconds: the store keeps microseconds.
	clock := &fakeClock{now: time.Now().Truncate(time.Second)}
	tm := startTestManager(t, Config{Now: clock.Now, HeartbeatInterval: time.Hour})
	ctx := context.Background()
	metricsURL := tm.url + protocol.PathMetrics

	if code, s := getStatus(t, tm.url+protocol.PathReady); code != http.StatusOK || s.Status != "ready" {
		t.Errorf("/readyz = %d %+v, want 200 ready", code, s)
	}
	if err := tm.client(t, "").Health(ctx); err != nil {
		t.Errorf("client Health: %v", err)
	}

	f := promtest.Scrape(t, metricsURL)
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"legate_manager_queue_depth", nil},
		{"legate_manager_queue_oldest_age_seconds", nil},
		{"legate_manager_delegates_connected", []string{"connection", "websocket"}},
		{"legate_manager_delegates_connected", []string{"connection", "polling"}},
		{"legate_manager_heartbeats_received_total", nil},
		{"legate_manager_pickup_latency_seconds", nil},
		{"legate_manager_stale_reports_total", []string{"kind", "result"}},
	} {
		if got := f.Value(t, c.name, c.labels...); got != 0 {
			t.Errorf("fresh manager: %s%v = %v, want 0", c.name, c.labels, got)
		}
	}
	if typ := f.Type("legate_manager_pickup_latency_seconds"); typ != "HISTOGRAM" {
		t.Errorf("pickup latency is a %s", typ)
	}

	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	// One delegate polls, one opens the WebSocket.
	poller, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "grp", "poll-host")
	if _, err := poller.Poll(ctx, 0); err != nil {
		t.Fatal(err)
	}
	_, wsReg := tm.registerFake(t, tm.admin.AccountID, tok.Value, "grp", "ws-host")
	h := http.Header{}
	h.Set("Authorization", "Bearer "+wsReg.Session)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tm.url, "http")+protocol.PathWebSocket, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	f = waitMetric(t, metricsURL, "legate_manager_delegates_connected", 1, "connection", "websocket")
	if got := f.Value(t, "legate_manager_delegates_connected", "connection", "polling"); got != 1 {
		t.Errorf("polling delegates = %v, want 1", got)
	}

	for range 2 {
		if _, err := poller.Heartbeat(ctx, protocol.Heartbeat{Seq: 1}); err != nil {
			t.Fatal(err)
		}
	}
	f = promtest.Scrape(t, metricsURL)
	if got := f.Value(t, "legate_manager_heartbeats_received_total"); got != 2 {
		t.Errorf("heartbeats received = %v, want 2", got)
	}

	// Three tasks wait 4s (on the test's clock), then start.
	var ids []string
	for range 3 {
		task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	clock.Add(4 * time.Second)
	f = promtest.Scrape(t, metricsURL)
	if got := f.Value(t, "legate_manager_queue_depth"); got != 3 {
		t.Errorf("queue depth = %v, want 3", got)
	}
	if got := f.Value(t, "legate_manager_queue_oldest_age_seconds"); got != 4 {
		t.Errorf("oldest queued age = %v, want 4", got)
	}
	for _, id := range ids {
		acq, err := poller.Acquire(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := poller.Started(ctx, id, protocol.StartedRequest{Epoch: acq.Epoch}); err != nil {
			t.Fatal(err)
		}
		// A repeated start report is not a second pickup.
		if err := poller.Started(ctx, id, protocol.StartedRequest{Epoch: acq.Epoch}); err != nil {
			t.Fatal(err)
		}
	}
	f = promtest.Scrape(t, metricsURL)
	if n, sum := f.Histogram(t, "legate_manager_pickup_latency_seconds"); n != 3 || sum != 12 {
		t.Errorf("pickup latency: count %d sum %v, want 3 and 12", n, sum)
	}
	if got := f.Value(t, "legate_manager_queue_depth"); got != 0 {
		t.Errorf("queue depth after pickup = %v, want 0", got)
	}
	if got := f.Value(t, "legate_manager_queue_oldest_age_seconds"); got != 0 {
		t.Errorf("oldest queued age with nothing queued = %v, want 0", got)
	}

	// Errors are counted by code where they are written.
	_, err = admin.SubmitTask(ctx, protocol.TaskSpec{})
	wantCode(t, "empty task", err, protocol.CodeBadRequest)
	_, err = tm.client(t, "wrong-key").ListDelegates(ctx)
	wantCode(t, "wrong API key", err, protocol.CodeUnauthenticated)
	// A result for an old epoch and a report from a delegate that does
	// not hold the task are stale.
	_, err = poller.Result(ctx, ids[0], protocol.ResultRequest{Epoch: 7, Status: protocol.StatusSucceeded})
	wantCode(t, "result of a stale epoch", err, protocol.CodeStaleLease)
	wsClient := tm.client(t, wsReg.Session)
	err = wsClient.SendLogs(ctx, ids[1], protocol.LogsRequest{Epoch: 1, Chunks: []protocol.LogChunk{{Seq: 1, Data: "x"}}})
	wantCode(t, "logs from a delegate that does not hold the task", err, protocol.CodeStaleLease)
	resp, err := http.Get(tm.url + "/api/no/such/route") // other paths are the web UI's
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	f = promtest.Scrape(t, metricsURL)
	for code, want := range map[protocol.Code]float64{
		protocol.CodeBadRequest:      1,
		protocol.CodeUnauthenticated: 1,
		protocol.CodeStaleLease:      2,
		protocol.CodeNotFound:        1,
	} {
		if got := f.Value(t, "legate_manager_api_errors_total", "code", string(code)); got != want {
			t.Errorf("api errors %s = %v, want %v", code, got, want)
		}
	}
	if f.Has("legate_manager_api_errors_total", "code", string(protocol.CodeInternal)) {
		t.Error("an internal error was counted")
	}
	for kind, want := range map[string]float64{"result": 1, "log": 1, "started": 0} {
		if got := f.Value(t, "legate_manager_stale_reports_total", "kind", kind); got != want {
			t.Errorf("stale reports %s = %v, want %v", kind, got, want)
		}
	}
}

// TestManagerNotReady: /readyz answers 503 while shutting down and when
// the store does not answer; /healthz stays 200.
func TestManagerNotReady(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir()+"/legate.db")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(ctx, st, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler()
	get := func(path string) (int, protocol.HealthStatus) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var s protocol.HealthStatus
		if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
			t.Fatalf("%s: %v: %s", path, err, rec.Body.String())
		}
		return rec.Code, s
	}
	if code, s := get(protocol.PathReady); code != http.StatusOK {
		t.Fatalf("/readyz = %d %+v, want 200", code, s)
	}
	st.Close()
	if code, s := get(protocol.PathReady); code != http.StatusServiceUnavailable || !strings.Contains(s.Reason, "store") {
		t.Errorf("/readyz with the store closed = %d %+v, want 503 naming the store", code, s)
	}
	m.dispatch.BeginStop()
	if code, s := get(protocol.PathReady); code != http.StatusServiceUnavailable || !strings.Contains(s.Reason, "shutting down") {
		t.Errorf("/readyz while stopping = %d %+v, want 503 shutting down", code, s)
	}
	if code, _ := get(protocol.PathHealth); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
}

// TestOffersWidenedCounted: a task its only eligible delegate was offered
// alone and did not acquire within the offer window is offered wider,
// and legate_manager_offers_widened_total counts it.
func TestOffersWidenedCounted(t *testing.T) {
	tm := startTestManager(t, Config{HeartbeatInterval: time.Hour})
	ctx := context.Background()
	metricsURL := tm.url + protocol.PathMetrics
	if got := promtest.Scrape(t, metricsURL).Value(t, "legate_manager_offers_widened_total"); got != 0 {
		t.Errorf("fresh manager: offers widened = %v, want 0", got)
	}
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	slow, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "grp", "slow-host")
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	// The delegate does not acquire it: the sole offer widens.
	waitMetric(t, metricsURL, "legate_manager_offers_widened_total", 1)
	if _, err := slow.Acquire(ctx, task.ID); err != nil {
		t.Fatalf("acquire after the widened offer: %v", err)
	}
}
