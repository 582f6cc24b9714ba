package promserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Target is a small HTTP service on loopback whose /metrics the test sets:
// gauges by name and labels, in Prometheus's text format.
type Target struct {
	// Addr is its "host:port", for Start.
	Addr   string
	mu     sync.Mutex
	gauges map[string]float64 // `name{labels}` → value
}

// NewTarget starts a Target; it stops when tb ends.
func NewTarget(tb testing.TB) *Target {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	t := &Target{Addr: l.Addr().String(), gauges: map[string]float64{}}
	srv := &http.Server{Handler: http.HandlerFunc(t.serve), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	tb.Cleanup(func() { srv.Close() })
	return t
}

// Set sets the gauge series (a metric name with labels, as
// `app_error_rate{version="2"}`) to v.
func (t *Target) Set(series string, v float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gauges[series] = v
}

func (t *Target) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	t.mu.Lock()
	lines := make([]string, 0, len(t.gauges))
	for s, v := range t.gauges {
		lines = append(lines, s+" "+strconv.FormatFloat(v, 'g', -1, 64))
	}
	t.mu.Unlock()
	sort.Strings(lines)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	io.WriteString(w, strings.Join(lines, "\n")+"\n")
}

// WaitFor waits until an instant query of s answers at least one series
// (the target was scraped), or fails tb after two minutes.
func (s *Server) WaitFor(tb testing.TB, query string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := s.count(ctx, query)
		if err == nil && n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("promserver: %s answered no series within 2m (last error: %v)", query, err)
		case <-tick.C:
		}
	}
}

// count is the number of series an instant query answers.
func (s *Server) count(ctx context.Context, query string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var a struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return 0, err
	}
	if a.Status != "success" {
		return 0, fmt.Errorf("query %s: %s", query, a.Error)
	}
	return len(a.Data.Result), nil
}
