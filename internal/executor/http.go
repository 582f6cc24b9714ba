package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/legate-dev/legate/internal/protocol"
)

// MaxBodyExcerpt is how much of an http task's response body is kept in
// its result and written to its output.
const MaxBodyExcerpt = 4 << 10

// httpType sends one HTTP request and checks the status of its answer.
type httpType struct{}

func (httpType) New(spec protocol.TaskSpec, opts Options) (Execution, error) {
	h := spec.HTTP
	if h == nil {
		return nil, errors.New(`http task has no "http" section`)
	}
	method := strings.ToUpper(strings.TrimSpace(h.Method))
	if method == "" {
		method = http.MethodGet
	}
	u, err := url.Parse(strings.TrimSpace(h.URL))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		// The raw URL is not echoed: it may hold credentials.
		return nil, fmt.Errorf("invalid URL: %v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid URL %q: must be an http:// or https:// URL with a host", u.Redacted())
	}
	if h.ExpectStatus != 0 && (h.ExpectStatus < 100 || h.ExpectStatus > 599) {
		return nil, fmt.Errorf("invalid expect_status %d: must be 0 (any 2xx) or 100-599", h.ExpectStatus)
	}
	return &httpRun{spec: h, method: method, url: u, client: opts.HTTPClient}, nil
}

// httpRun is one run of an http task: its request is sent from its own
// goroutine, and aborted by Interrupt only.
type httpRun struct {
	spec   *protocol.HTTPSpec
	method string
	url    *url.URL
	client *http.Client // nil: one of its own (transport)

	out       io.Writer
	transport *http.Transport
	cancel    context.CancelFunc
	reqCtx    context.Context
	done      chan struct{}
	// Set by the request's goroutine before done is closed: its outcome,
	// or aborted (by Interrupt) with what came of the answer so far.
	o       Outcome
	aborted bool
	res     *protocol.HTTPResult
}

func (h *httpRun) Start(ctx context.Context, out io.Writer) error {
	// Only Interrupt aborts the request: Run decides whether it was
	// cancelled or timed out.
	h.reqCtx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	var body io.Reader
	if h.spec.Body != "" {
		body = strings.NewReader(h.spec.Body)
	}
	req, err := http.NewRequestWithContext(h.reqCtx, h.method, h.url.String(), body)
	if err != nil {
		return fmt.Errorf("invalid request: %v", err)
	}
	for k, v := range h.spec.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	client := h.client
	if client == nil {
		h.transport = defaultTransport()
		client = &http.Client{Transport: h.transport}
	}
	h.out = out
	h.done = make(chan struct{})
	go h.send(client, req)
	return nil
}

// send sends the request and reads its answer.
func (h *httpRun) send(client *http.Client, req *http.Request) {
	defer close(h.done)
	out, shown := h.out, h.url.Redacted()
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		if h.reqCtx.Err() != nil {
			h.aborted = true
			return
		}
		fmt.Fprintf(out, "HTTP %s %s -> error: %v\n", h.method, shown, err)
		// No answer at all: the endpoint is not reachable from here, which
		// another delegate may do better.
		h.o = faulted(err.Error())
		return
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyExcerpt+1))
	elapsed := time.Since(start)
	fmt.Fprintf(out, "HTTP %s %s -> %s (%d ms)\n", h.method, shown, resp.Status, elapsed.Milliseconds())
	res := &protocol.HTTPResult{Status: resp.StatusCode}
	if len(raw) > MaxBodyExcerpt {
		raw = raw[:MaxBodyExcerpt]
		res.BodyTruncated = true
	}
	res.BodyExcerpt = excerpt(raw)
	writeBody(out, res)
	h.res = res
	if err != nil {
		if h.reqCtx.Err() != nil {
			h.aborted = true
		} else {
			h.o = failed(fmt.Sprintf("read response body: %v", err))
			h.o.HTTPResult = res
		}
		return
	}
	expect := h.spec.ExpectStatus
	h.o = succeeded()
	switch {
	case expect != 0 && resp.StatusCode != expect:
		h.o = failed(fmt.Sprintf("expected status %d, got %d", expect, resp.StatusCode))
	case expect == 0 && (resp.StatusCode < 200 || resp.StatusCode > 299):
		h.o = failed(fmt.Sprintf("expected a 2xx status, got %d", resp.StatusCode))
	}
	h.o.HTTPResult = res
}

func (h *httpRun) Done() <-chan struct{} { return h.done }

// Interrupt aborts the request.
func (h *httpRun) Interrupt() { h.cancel() }

// Terminate aborts the request too: an aborted request ends at once.
func (h *httpRun) Terminate() { h.cancel() }

func (h *httpRun) Finish(stop *Stop) Outcome {
	if !h.aborted {
		return h.o
	}
	if stop == nil { // only Interrupt aborts; Run passes its stop
		stop = &Stop{}
	}
	io.WriteString(h.out, stop.Notice("request aborted"))
	o := stop.Outcome()
	o.HTTPResult = h.res
	return o
}

func (h *httpRun) Cleanup() {
	if h.cancel != nil {
		h.cancel()
	}
	if h.transport != nil {
		h.transport.CloseIdleConnections()
	}
}

func writeBody(out io.Writer, res *protocol.HTTPResult) {
	if res.BodyExcerpt == "" {
		return
	}
	b := res.BodyExcerpt
	if !strings.HasSuffix(b, "\n") {
		b += "\n"
	}
	if res.BodyTruncated {
		b += fmt.Sprintf("[legate: body truncated to its first %d bytes]\n", MaxBodyExcerpt)
	}
	io.WriteString(out, b)
}

// excerpt returns b as valid UTF-8: a rune cut at the end is dropped and
// other invalid bytes become U+FFFD.
func excerpt(b []byte) string {
	// Drop an incomplete rune at the end (at most utf8.UTFMax-1 bytes).
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			break // ASCII: nothing cut
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				b = b[:len(b)-i]
			}
			break
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// defaultTransport is used when Options.HTTPClient is nil: the standard
// transport's proxy and TLS settings with bounded dial, handshake and
// response-header waits, and no connection reuse across runs.
func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	t.ResponseHeaderTimeout = 5 * time.Minute
	t.DisableKeepAlives = true
	return t
}
