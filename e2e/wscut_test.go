package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// cutProxy is a reverse proxy on loopback between delegates and the
// manager that can cut WebSocket connections and refuse new ones, while
// plain HTTP keeps working: the network a fallback must survive.
type cutProxy struct {
	url     string
	mu      sync.Mutex
	blocked bool
	ws      map[net.Conn]bool
}

type connKey struct{}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ws: map[net.Conn]bool{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == protocol.PathWebSocket {
				p.mu.Lock()
				blocked := p.blocked
				if !blocked {
					p.ws[r.Context().Value(connKey{}).(net.Conn)] = true
				}
				p.mu.Unlock()
				if blocked {
					http.Error(w, "websocket blocked by test proxy", http.StatusBadGateway)
					return
				}
			}
			rp.ServeHTTP(w, r)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p.url = "http://" + ln.Addr().String()
	return p
}

// cut closes every WebSocket connection and refuses new ones until heal.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for c := range p.ws {
		_ = c.Close()
	}
	p.ws = map[net.Conn]bool{}
}

func (p *cutProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
}

func TestWebSocketCutMidRunFallsBackToPolling(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	proxy := startCutProxy(t, c.url)
	tok := c.token("cut")
	env := c.seed004Env(tok, "cutter", "")
	for i, kv := range env {
		if strings.HasPrefix(kv, "MANAGER_HOST_AND_PORT=") {
			env[i] = "MANAGER_HOST_AND_PORT=" + proxy.url
		}
	}
	c.delegate("cutter", "cut-host", env...)
	c.waitConnected("cut-host", protocol.ConnWebSocket)

	marker := filepath.Join(t.TempDir(), "go")
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--script",
		fmt.Sprintf("echo started; while [ ! -e %s ]; do sleep 0.05; done; echo survived the cut", marker)))
	eventually(t, 10*time.Second, "task running", func() bool { return c.task(id).StartedAt != nil })

	proxy.cut()
	c.waitConnected("cut-host", protocol.ConnPolling)
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "task finished", func() bool { return c.task(id).Status == protocol.StatusSucceeded })
	if logs := c.mustCLI("task", "logs", id); !strings.Contains(logs, "started") || !strings.Contains(logs, "survived the cut") {
		t.Errorf("logs across the cut = %q", logs)
	}
	// New work is picked up over polling.
	for i := 0; i < 3; i++ {
		if r := c.cli("task", "run", "--script", fmt.Sprintf("echo polled-%d", i)); r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("polled-%d", i)) {
			t.Fatalf("task over polling: code %d %q %q", r.code, r.stdout, r.stderr)
		}
	}
	// And once the network heals, the delegate goes back to the WebSocket.
	proxy.heal()
	c.waitConnected("cut-host", protocol.ConnWebSocket)
	if r := c.cli("task", "run", "--script", "echo back on websocket"); r.code != 0 {
		t.Errorf("after heal: %d %s", r.code, r.stderr)
	}
}
