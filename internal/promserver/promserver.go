// Package promserver starts a real Prometheus for a test (Debian's
// prometheus package, installed by scripts/prom-ensure): on a free
// loopback port, with its own data directory and a scrape config for the
// targets the test gives, scraped every second. It is stopped when the
// test ends.
package promserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a running Prometheus.
type Server struct {
	// URL is its base URL (http://127.0.0.1:PORT).
	URL string
}

// Binary returns the prometheus binary ($LEGATE_PROMETHEUS, else
// prometheus on PATH, else /usr/bin/prometheus), or skips tb (fails it
// under CI=true) when there is none.
func Binary(tb testing.TB) string {
	tb.Helper()
	if b := os.Getenv("LEGATE_PROMETHEUS"); b != "" {
		return b
	}
	if b, err := exec.LookPath("prometheus"); err == nil {
		return b
	}
	if _, err := os.Stat("/usr/bin/prometheus"); err == nil {
		return "/usr/bin/prometheus"
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("Prometheus is required under CI=true: bash scripts/prom-ensure installs it")
	}
	tb.Skip("skipping: no prometheus binary (bash scripts/prom-ensure installs it, or set LEGATE_PROMETHEUS)")
	return ""
}

// Start starts a Prometheus that scrapes job's targets ("host:port",
// path /metrics) every second, waits until it answers queries, and stops
// it when tb ends.
func Start(tb testing.TB, job string, targets ...string) *Server {
	tb.Helper()
	bin := Binary(tb)
	dir := tb.TempDir()
	quoted := make([]string, len(targets))
	for i, t := range targets {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: %q\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: [%s]\n",
		job, strings.Join(quoted, ", "))
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	// A port picked free may be taken before Prometheus binds it: try again.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s, err := start(tb, bin, cfg, filepath.Join(dir, fmt.Sprintf("data%d", attempt)))
		if err == nil {
			return s
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	tb.Fatalf("promserver: %v", lastErr)
	return nil
}

// start runs one Prometheus and waits until it is ready or has exited.
func start(tb testing.TB, bin, cfg, data string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	var log syncBuffer
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+data, "--web.listen-address="+addr,
		"--storage.tsdb.retention.time=1h", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}
	s := &Server{URL: "http://" + addr}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx, s.URL) {
			tb.Cleanup(stop)
			return s, nil
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("prometheus exited: %s", log.String())
		case <-ctx.Done():
			stop()
			return nil, fmt.Errorf("prometheus did not answer on %s within 2m: %s", addr, log.String())
		case <-tick.C:
		}
	}
}

// ready reports whether Prometheus answers /-/ready with 200.
func ready(ctx context.Context, base string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/-/ready", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 64<<10 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
