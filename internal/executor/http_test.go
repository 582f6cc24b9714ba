package executor

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func httpSpec(method, url string) protocol.TaskSpec {
	return protocol.TaskSpec{Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: method, URL: url}}
}

func TestHTTPSuccess(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/health" || r.Header.Get("X-Probe") != "legate" {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		io.WriteString(w, "all good")
	}))
	t.Cleanup(srv.Close)

	spec := httpSpec("", srv.URL+"/health") // default method GET
	spec.HTTP.Headers = map[string]string{"X-Probe": "legate"}
	var out buffer
	started := 0
	got := Run(t.Context(), spec, Options{OnStart: func() { started++ }}, &out)
	want := Outcome{Status: protocol.StatusSucceeded, HTTPResult: &protocol.HTTPResult{Status: 200, BodyExcerpt: "all good"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcome mismatch (-want +got):\n%s", diff)
	}
	line := regexp.MustCompile(`^HTTP GET ` + regexp.QuoteMeta(srv.URL) + `/health -> 200 OK \(\d+ ms\)\nall good\n$`)
	if !line.MatchString(out.String()) {
		t.Errorf("output %q does not match %v", out.String(), line)
	}
	if started != 1 {
		t.Errorf("OnStart called %d times", started)
	}
}

func TestHTTPPostBodyHeadersExpect(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, r.Method+" "+r.Host+" "+r.Header.Get("Content-Type")+" "+string(b))
	}))
	t.Cleanup(srv.Close)

	spec := httpSpec("post", srv.URL)
	spec.HTTP.Body = `{"a":1}`
	spec.HTTP.Headers = map[string]string{"Content-Type": "application/json", "host": "example.test"}
	spec.HTTP.ExpectStatus = 201
	got := Run(t.Context(), spec, Options{HTTPClient: srv.Client()}, nil)
	want := Outcome{Status: protocol.StatusSucceeded, HTTPResult: &protocol.HTTPResult{Status: 201, BodyExcerpt: `POST example.test application/json {"a":1}`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcome mismatch (-want +got):\n%s", diff)
	}
}

func TestHTTPStatus(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/503":
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		case "/404":
			http.NotFound(w, r)
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/302":
			http.Redirect(w, r, "/204", http.StatusFound)
		}
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		path   string
		expect int
		want   Outcome
	}{
		{"/503", 200, Outcome{Status: protocol.StatusFailed, Error: "expected status 200, got 503",
			HTTPResult: &protocol.HTTPResult{Status: 503, BodyExcerpt: "down for maintenance\n"}}},
		{"/503", 503, Outcome{Status: protocol.StatusSucceeded,
			HTTPResult: &protocol.HTTPResult{Status: 503, BodyExcerpt: "down for maintenance\n"}}},
		{"/404", 0, Outcome{Status: protocol.StatusFailed, Error: "expected a 2xx status, got 404",
			HTTPResult: &protocol.HTTPResult{Status: 404, BodyExcerpt: "404 page not found\n"}}},
		{"/204", 0, Outcome{Status: protocol.StatusSucceeded, HTTPResult: &protocol.HTTPResult{Status: 204}}},
		{"/302", 204, Outcome{Status: protocol.StatusSucceeded, HTTPResult: &protocol.HTTPResult{Status: 204}}},
	}
	for _, tt := range tests {
		spec := httpSpec("GET", srv.URL+tt.path)
		spec.HTTP.ExpectStatus = tt.expect
		var out buffer
		got := Run(t.Context(), spec, Options{}, &out)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s expect %d: outcome mismatch (-want +got):\n%s", tt.path, tt.expect, diff)
		}
	}
}

func TestHTTPBadSpecs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec protocol.TaskSpec
		want string
	}{
		{"ftp", httpSpec("GET", "ftp://example.com/x"), `invalid URL "ftp://example.com/x": must be an http:// or https:// URL with a host`},
		{"no scheme", httpSpec("GET", "example.com/x"), `invalid URL "example.com/x": must be an http:// or https:// URL with a host`},
		{"no host", httpSpec("GET", "http:///path"), `invalid URL "http:///path": must be an http:// or https:// URL with a host`},
		{"empty", httpSpec("GET", ""), `invalid URL "": must be an http:// or https:// URL with a host`},
		{"unparsable", httpSpec("GET", "http://[::1"), `invalid URL: missing ']' in host`},
		{"password redacted", httpSpec("GET", "ftp://user:pw@host/"), `invalid URL "ftp://user:xxxxx@host/": must be an http:// or https:// URL with a host`},
		{"bad method", httpSpec("GE T", "http://127.0.0.1:1/"), `invalid request: net/http: invalid method "GE T"`},
		{"bad expect", protocol.TaskSpec{Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{URL: "http://127.0.0.1:1/", ExpectStatus: 42}}, "invalid expect_status 42: must be 0 (any 2xx) or 100-599"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Run(t.Context(), tt.spec, Options{OnStart: func() { t.Error("OnStart called") }}, nil)
			want := Outcome{Status: protocol.StatusFailed, Error: tt.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("outcome mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var out buffer
	got := Run(t.Context(), httpSpec("GET", "http://"+addr+"/"), Options{}, &out)
	if got.Status != protocol.StatusFailed || !strings.Contains(got.Error, "connection refused") || got.HTTPResult != nil {
		t.Errorf("outcome %+v", got)
	}
	if !got.DelegateFault {
		t.Error("an unreachable endpoint is the delegate's position, not the task: want DelegateFault")
	}
	if !strings.HasPrefix(out.String(), "HTTP GET http://"+addr+"/ -> error: ") {
		t.Errorf("output %q", out.String())
	}
}

func TestHTTPBodyTruncation(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 4095) + strings.Repeat("é", 100) // "é" is 2 bytes: byte 4096 cuts one
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/long":
			io.WriteString(w, body)
		case "/exact":
			io.WriteString(w, strings.Repeat("y", MaxBodyExcerpt))
		}
	}))
	t.Cleanup(srv.Close)

	var out buffer
	got := Run(t.Context(), httpSpec("GET", srv.URL+"/long"), Options{}, &out)
	if got.Status != protocol.StatusSucceeded || got.HTTPResult == nil {
		t.Fatalf("outcome %+v", got)
	}
	r := got.HTTPResult
	if !r.BodyTruncated || r.BodyExcerpt != strings.Repeat("x", 4095) || !utf8.ValidString(r.BodyExcerpt) {
		t.Errorf("excerpt len %d truncated %v", len(r.BodyExcerpt), r.BodyTruncated)
	}
	if !strings.HasSuffix(out.String(), "\n[legate: body truncated to its first 4096 bytes]\n") {
		t.Errorf("output lacks the truncation notice: %q", out.String()[len(out.String())-80:])
	}

	got = Run(t.Context(), httpSpec("GET", srv.URL+"/exact"), Options{}, nil)
	if r := got.HTTPResult; r == nil || r.BodyTruncated || len(r.BodyExcerpt) != MaxBodyExcerpt {
		t.Errorf("exact-size body: %+v", got)
	}
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"ab\xc3", "ab"},               // cut 2-byte rune
		{"ab\xe2\x82", "ab"},           // cut 3-byte rune
		{"ab\xf0\x9f\x98", "ab"},       // cut 4-byte rune
		{"ab\xf0\x9f\x98\x80", "ab😀"},  // complete
		{"a\xffb", "a\uFFFDb"},         // invalid in the middle
		{"\x80\x80\x80\x80", "\uFFFD"}, // only continuation bytes
		{"é", "é"},
	}
	for _, tt := range tests {
		if got := excerpt([]byte(tt.in)); got != tt.want {
			t.Errorf("excerpt(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// slowServer answers only when the request is abandoned or after 30 s.
func slowServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPTimeout(t *testing.T) {
	t.Parallel()
	srv := slowServer(t)
	var out buffer
	start := time.Now()
	got := Run(t.Context(), httpSpec("GET", srv.URL), Options{Timeout: 200 * time.Millisecond}, &out)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	want := Outcome{Status: protocol.StatusTimedOut, Error: "task timed out after 200ms"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcome mismatch (-want +got):\n%s", diff)
	}
	if want := "\n[legate: task timed out after 200ms; request aborted]\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestHTTPCancel(t *testing.T) {
	t.Parallel()
	srv := slowServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out buffer
	got := Run(ctx, httpSpec("GET", srv.URL), Options{OnStart: func() {
		time.AfterFunc(100*time.Millisecond, cancel)
	}}, &out)
	want := Outcome{Status: protocol.StatusCancelled, Error: "task cancelled"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcome mismatch (-want +got):\n%s", diff)
	}
	if want := "\n[legate: task cancelled; request aborted]\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

// TestHTTPTimeoutDuringBody: headers arrive, then the body stalls.
func TestHTTPTimeoutDuringBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	got := Run(t.Context(), httpSpec("GET", srv.URL), Options{Timeout: 300 * time.Millisecond}, nil)
	want := Outcome{Status: protocol.StatusTimedOut, Error: "task timed out after 300ms",
		HTTPResult: &protocol.HTTPResult{Status: 200, BodyExcerpt: "partial"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcome mismatch (-want +got):\n%s", diff)
	}
}
