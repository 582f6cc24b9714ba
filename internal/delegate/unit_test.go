package delegate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/protocol"
)

func TestTaskEnvDropsCredentials(t *testing.T) {
	t.Parallel()
	env := []string{
		"PATH=/usr/bin:/bin",
		"DELEGATE_TOKEN=tok-1",
		"HOME=/home/d",
		"HARNESS_TOKEN=tok-2",
		"ACCOUNT_SECRET=tok-3",
		"PROXY_HOST=proxy.corp",
		"PROXY_PORT=3128",
		"PROXY_USER=bob",
		"PROXY_PASSWORD=pw",
		"HTTPS_PROXY=http://bob:pw@proxy.corp:3128",
		"http_proxy=http://proxy.corp:3128",
		"NO_PROXY=.corp",
		"LEGATE_API_KEY=lgk_x",
		"LEGATE_MASTER_KEY=mk",
		"DELEGATE_TOKEN_FILE=/kept", // only exact names are secret
		"MY_DELEGATE_TOKEN=kept",
		"EMPTY=",
		"A=b=c",
	}
	for _, tt := range []struct {
		name             string
		proxyCredentials bool
		want             []string
	}{
		{"default", false, []string{"PATH=/usr/bin:/bin", "HOME=/home/d", "PROXY_HOST=proxy.corp", "PROXY_PORT=3128",
			"HTTPS_PROXY=http://proxy.corp:3128", "http_proxy=http://proxy.corp:3128", "NO_PROXY=.corp",
			"DELEGATE_TOKEN_FILE=/kept", "MY_DELEGATE_TOKEN=kept", "EMPTY=", "A=b=c"}},
		{"proxy credentials to tasks", true, []string{"PATH=/usr/bin:/bin", "HOME=/home/d", "PROXY_HOST=proxy.corp", "PROXY_PORT=3128",
			"PROXY_USER=bob", "PROXY_PASSWORD=pw", "HTTPS_PROXY=http://bob:pw@proxy.corp:3128", "http_proxy=http://proxy.corp:3128",
			"NO_PROXY=.corp", "DELEGATE_TOKEN_FILE=/kept", "MY_DELEGATE_TOKEN=kept", "EMPTY=", "A=b=c"}},
	} {
		got := taskEnv(env, tt.proxyCredentials)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: taskEnv (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestOwnSecrets(t *testing.T) {
	t.Parallel()
	cfg := validConfig("http://127.0.0.1:1", 0)
	cfg.Token = "flag-token"
	cfg.Proxy.HTTPS = &url.URL{Scheme: "http", Host: "proxy:3128", User: url.UserPassword("bob", "p@ss")}
	env := []string{"DELEGATE_TOKEN=env-token", "PROXY_USER=bob", "HTTP_PROXY=http://alice:pw2@proxy:3128",
		"LEGATE_API_KEY=api-key", "LEGATE_MASTER_KEY=master-key", "PATH=/bin", "DELEGATE_TOKEN_FILE=/x"}
	got := ownSecrets(cfg, env, []string{"dev-api-key", "api-key", ""})
	want := []string{"flag-token", "p@ss", "env-token", "api-key", "master-key", "pw2", "dev-api-key"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ownSecrets (-want +got):\n%s", diff)
	}
}

// TestNewStripsCredentialsFromTaskEnv cannot run in parallel: it sets the
// process environment.
func TestNewStripsCredentialsFromTaskEnv(t *testing.T) {
	t.Setenv("DELEGATE_TOKEN", "secret-token-value")
	t.Setenv("HARNESS_TOKEN", "secret-token-value-2")
	t.Setenv("ACCOUNT_SECRET", "secret-token-value-3")
	t.Setenv("LEGATE_TEST_KEEP", "kept")
	a, err := New(Options{
		Config:  validConfig("http://127.0.0.1:1", 0),
		WorkDir: t.TempDir(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		IP:      "127.0.0.1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(a.opts.TaskEnv, "LEGATE_TEST_KEEP=kept") {
		t.Errorf("task environment lost LEGATE_TEST_KEEP")
	}
	for _, kv := range a.opts.TaskEnv {
		if strings.Contains(kv, "secret-token-value") {
			t.Errorf("task environment holds a credential: %s", kv)
		}
	}
}

func TestWSURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ base, want string }{
		{"http://127.0.0.1:8080", "ws://127.0.0.1:8080" + protocol.PathWebSocket},
		{"https://manager.example.com", "wss://manager.example.com" + protocol.PathWebSocket},
		{"http://proxy.local:81/legate", "ws://proxy.local:81/legate" + protocol.PathWebSocket},
		{"https://example.com/a/b", "wss://example.com/a/b" + protocol.PathWebSocket},
		{"https://[::1]:8443/p", "wss://[::1]:8443/p" + protocol.PathWebSocket},
	} {
		if got := wsURL(tc.base); got != tc.want {
			t.Errorf("wsURL(%q) = %q, want %q", tc.base, got, tc.want)
		}
	}
}

func validConfig(url string, capacity int) config.Delegate {
	return config.Delegate{
		AccountID:   "ACCOUNT0000000000000001",
		Token:       "token-value",
		ManagerURLs: []string{url},
		Name:        "unit",
		Hostname:    "unit-host",
		Type:        "SHELL",
		Capacity:    capacity,
	}
}

// acquireServer is a manager stand-in on a real socket that holds every
// acquire until released, then answers already_claimed.
type acquireServer struct {
	mu      sync.Mutex
	ids     []string
	release chan struct{}
}

func (s *acquireServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, protocol.PathDelegateTask+"/"), "/acquire")
	s.mu.Lock()
	s.ids = append(s.ids, id)
	s.mu.Unlock()
	select {
	case <-s.release:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusConflict)
	_ = json.NewEncoder(w).Encode(protocol.ErrorBody{Error: protocol.Error{Code: protocol.CodeAlreadyClaimed, Message: "taken"}})
}

func (s *acquireServer) acquired() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.ids))
}

// newOfferAgent returns an agent whose acquires block on a real server
// until the test ends, so offered's bookkeeping can be inspected.
func newOfferAgent(t *testing.T, capacity int) (*Agent, *acquireServer) {
	t.Helper()
	srv := &acquireServer{release: make(chan struct{})}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	a, err := New(Options{
		Config:  validConfig(hs.URL, capacity),
		WorkDir: t.TempDir(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		IP:      "127.0.0.1",
		TaskEnv: []string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(srv.release)
		a.taskWG.Wait()
		a.mu.Lock()
		defer a.mu.Unlock()
		if len(a.tasks) != 0 {
			t.Errorf("after the acquires failed: %d tasks; want none", len(a.tasks))
		}
	})
	return a, srv
}

func (a *Agent) taskIDs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]string, 0, len(a.tasks))
	for id := range a.tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func waitAcquired(t *testing.T, srv *acquireServer, want []string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("acquire requests %v", want), func() bool { return slices.Equal(srv.acquired(), want) })
}

func TestOfferedRespectsCapacityDrainingAndDuplicates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		capacity int
		draining bool
		offers   []string
		want     []string
	}{
		{name: "capacity 1", capacity: 1, offers: []string{"t1", "t2", "t3"}, want: []string{"t1"}},
		{name: "unlimited", capacity: 0, offers: []string{"t1", "t2", "t3"}, want: []string{"t1", "t2", "t3"}},
		{name: "duplicate offers", capacity: 0, offers: []string{"t1", "t1", "t1"}, want: []string{"t1"}},
		{name: "empty id", capacity: 0, offers: []string{""}, want: []string{}},
		{name: "draining", capacity: 0, draining: true, offers: []string{"t1", "t2"}, want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, srv := newOfferAgent(t, tc.capacity)
			a.draining = tc.draining
			for _, id := range tc.offers {
				a.offered(context.Background(), id)
			}
			if got := a.taskIDs(); !slices.Equal(got, tc.want) {
				t.Fatalf("tasks held after offers %v: %v, want %v", tc.offers, got, tc.want)
			}
			waitAcquired(t, srv, tc.want)
		})
	}
}

// With capacity 2, two tasks offered together must both be acquired at
// once. offered counts a task being acquired twice (its placeholder in
// a.tasks and a.reserved), so the second offer is refused while the first
// acquire is in flight.
func TestOfferedCapacityTwoAcquiresTwoAtOnce(t *testing.T) {
	t.Parallel()
	a, srv := newOfferAgent(t, 2)
	a.offered(context.Background(), "t1")
	a.offered(context.Background(), "t2")
	a.offered(context.Background(), "t3")
	if got, want := a.taskIDs(), []string{"t1", "t2"}; !slices.Equal(got, want) {
		t.Fatalf("tasks held after offering t1, t2, t3 with capacity 2: %v, want %v", got, want)
	}
	waitAcquired(t, srv, []string{"t1", "t2"})
}

// TestOfferArrivingWhileResultIsDeliveredIsNotLost: when a task ends, the
// manager offers the next queued task to the delegate while it handles the
// result, before it answers (manager.handleResult calls offerQueued). The
// agent must not drop that offer because the finished task still holds its
// slot: nothing offers the task again until the manager's rebroadcast, a
// second or more later.
func TestOfferArrivingWhileResultIsDeliveredIsNotLost(t *testing.T) {
	t.Parallel()
	var a *Agent
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, protocol.PathDelegateTask+"/")
		mu.Lock()
		calls = append(calls, path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch path {
		case "t1/acquire":
			_ = json.NewEncoder(w).Encode(protocol.AcquireResponse{TaskID: "t1", Epoch: 1, TimeoutMS: 60_000,
				Spec: protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}}})
		case "t1/started", "t1/logs":
			w.WriteHeader(http.StatusNoContent)
		case "t1/result":
			a.offered(context.Background(), "t2") // the manager's offer, sent before its answer
			_ = json.NewEncoder(w).Encode(protocol.Task{ID: "t1", Status: protocol.StatusSucceeded})
		default:
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(protocol.ErrorBody{Error: protocol.Error{Code: protocol.CodeAlreadyClaimed, Message: "taken"}})
		}
	}))
	t.Cleanup(srv.Close)
	var err error
	a, err = New(Options{
		Config:  validConfig(srv.URL, 1),
		WorkDir: t.TempDir(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		IP:      "127.0.0.1",
		TaskEnv: []string{"PATH=" + os.Getenv("PATH")},
	})
	if err != nil {
		t.Fatal(err)
	}
	a.offered(context.Background(), "t1")
	a.taskWG.Wait() // t1, and t2 if it was taken
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(calls, "t1/result") {
		t.Fatalf("t1 was not reported: calls %v", calls)
	}
	if !slices.Contains(calls, "t2/acquire") {
		t.Fatalf("the offer of t2 made while t1's result was being delivered was dropped: calls %v", calls)
	}
}

// TestConcurrentReauthRegistersOnce: when several calls notice a lost
// session at once, the agent must register only once. A second
// registration supersedes the first (the manager bumps the instance's
// generation), which ends the session and WebSocket the first one just
// opened.
func TestConcurrentReauthRegistersOnce(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	var mu sync.Mutex
	registers := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != protocol.PathRegister {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		registers++
		n := registers
		mu.Unlock()
		if n == 1 {
			<-hold // the first registration is slow
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(protocol.RegisterResponse{ProtocolVersion: protocol.Version, InstanceID: "d_1",
			Session: "s1.session", SessionExpiresAt: time.Now().Add(time.Hour), HeartbeatIntervalMS: 1000})
	}))
	t.Cleanup(srv.Close)
	a, err := New(Options{
		Config:  validConfig(srv.URL, 0),
		WorkDir: t.TempDir(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		IP:      "127.0.0.1",
		TaskEnv: []string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gen := a.regGen.Load() // both callers saw the session fail under this registration
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a.reauth(ctx, gen) }()
	waitFor(t, "the first registration to reach the manager", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return registers == 1
	})
	go func() { defer wg.Done(); a.reauth(ctx, gen) }()
	// The second caller is past its check and waits for the first.
	waitFor(t, "the second caller to wait for the registration lock", func() bool {
		for _, s := range goroutineStacks() {
			if strings.Contains(s, "sync.(*Mutex).Lock") && strings.Contains(s, "(*Agent).reauth") {
				return true
			}
		}
		return false
	})
	close(hold)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if registers != 1 {
		t.Fatalf("%d registrations for one lost session, want 1", registers)
	}
	if got := a.regGen.Load(); got != gen+1 {
		t.Fatalf("registration generation %d, want %d", got, gen+1)
	}
}

// goroutineStacks returns the stack of every goroutine, whole: the buffer
// grows until they all fit (other tests run in parallel).
func goroutineStacks() []string {
	for size := 1 << 20; ; size *= 2 {
		buf := make([]byte, size)
		if n := runtime.Stack(buf, true); n < size {
			return strings.Split(string(buf[:n]), "\n\n")
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLogRefusal: the manager's refusal of a task's output or result is
// logged once, at info after the manager aborted the task (a user
// cancelled it), as a warning otherwise.
func TestLogRefusal(t *testing.T) {
	t.Parallel()
	refused := &protocol.Error{Code: protocol.CodeStaleLease, Message: "stale"}
	for _, tc := range []struct {
		name           string
		aborted        bool
		output, result error
		want           []string // "LEVEL msg"
	}{
		{name: "nothing refused", output: nil, result: nil, want: nil},
		{name: "result after an abort", aborted: true, result: refused,
			want: []string{"INFO manager refused the result: the task is no longer held by this delegate (it aborted the task)"}},
		{name: "output and result after an abort", aborted: true, output: refused, result: refused,
			want: []string{"INFO manager refused the result: the task is no longer held by this delegate (it aborted the task)"}},
		{name: "output only after an abort", aborted: true, output: refused,
			want: []string{"INFO manager refused the task's output: the task is no longer held by this delegate (it aborted the task)"}},
		{name: "result without an abort", result: refused,
			want: []string{"WARN manager refused the result: the task is no longer held by this delegate"}},
		{name: "output and result without an abort", output: refused, result: refused,
			want: []string{"WARN manager refused the result: the task is no longer held by this delegate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var rec recordHandler
			task := &runningTask{epoch: 1, cancel: func(error) {}}
			task.aborted.Store(tc.aborted)
			logRefusal(slog.New(&rec), task, tc.output, tc.result)
			if diff := cmp.Diff(tc.want, rec.lines()); diff != "" {
				t.Errorf("log lines (-want +got):\n%s", diff)
			}
		})
	}
}

// recordHandler keeps the level and message of every record.
type recordHandler struct {
	mu  sync.Mutex
	got []string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, r.Level.String()+" "+r.Message)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordHandler) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got
}

// TestDeferredOffersTakenInQueueOrder: offers that found no free slot are
// taken, when one frees, in the manager's queue order (the events' rank:
// priority with aging), not in the map's order.
func TestDeferredOffersTakenInQueueOrder(t *testing.T) {
	t.Parallel()
	for _, order := range [][]string{{"low", "urgent", "mid"}, {"mid", "low", "urgent"}, {"urgent", "mid", "low"}, {"low", "mid", "urgent"}, {"mid", "urgent", "low"}} {
		a, srv := newOfferAgent(t, 1)
		ctx := context.Background()
		a.mu.Lock()
		a.tasks["busy"] = &runningTask{}
		a.mu.Unlock()
		rank := map[string]int64{"urgent": 100, "mid": 200, "low": 300}
		for _, id := range order {
			a.handleEvent(ctx, protocol.Event{Kind: protocol.EventTaskAvailable, TaskID: id, Rank: rank[id]})
		}
		a.freeSlot(ctx, "busy")
		if got := a.taskIDs(); !slices.Equal(got, []string{"urgent"}) {
			t.Fatalf("offers %v deferred, then a slot freed: took %v; want urgent (smallest rank)", order, got)
		}
		waitAcquired(t, srv, []string{"urgent"})
	}
}
