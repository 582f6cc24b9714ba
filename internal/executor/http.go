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

func runHTTP(ctx context.Context, spec protocol.TaskSpec, opts Options, out io.Writer) Outcome {
	h := spec.HTTP
	if h == nil {
		return failed(`http task has no "http" section`)
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
		return failed(fmt.Sprintf("invalid URL: %v", err))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return failed(fmt.Sprintf("invalid URL %q: must be an http:// or https:// URL with a host", u.Redacted()))
	}
	if h.ExpectStatus != 0 && (h.ExpectStatus < 100 || h.ExpectStatus > 599) {
		return failed(fmt.Sprintf("invalid expect_status %d: must be 0 (any 2xx) or 100-599", h.ExpectStatus))
	}
	if err := ctx.Err(); err != nil {
		return Outcome{Status: protocol.StatusCancelled, Error: "task cancelled before it started"}
	}

	runCtx, cancel := withTimeout(ctx, opts.Timeout)
	defer cancel()
	var body io.Reader
	if h.Body != "" {
		body = strings.NewReader(h.Body)
	}
	req, err := http.NewRequestWithContext(runCtx, method, u.String(), body)
	if err != nil {
		return failed(fmt.Sprintf("invalid request: %v", err))
	}
	for k, v := range h.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}

	client := opts.HTTPClient
	if client == nil {
		t := defaultTransport()
		defer t.CloseIdleConnections()
		client = &http.Client{Transport: t}
	}
	shown := u.Redacted()
	if opts.OnStart != nil {
		opts.OnStart()
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		if runCtx.Err() != nil {
			return stopped(ctx, opts.Timeout, out, "request aborted")
		}
		fmt.Fprintf(out, "HTTP %s %s -> error: %v\n", method, shown, err)
		// No answer at all: the endpoint is not reachable from here, which
		// another delegate may do better.
		return faulted(err.Error())
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyExcerpt+1))
	elapsed := time.Since(start)
	fmt.Fprintf(out, "HTTP %s %s -> %s (%d ms)\n", method, shown, resp.Status, elapsed.Milliseconds())
	res := &protocol.HTTPResult{Status: resp.StatusCode}
	if len(raw) > MaxBodyExcerpt {
		raw = raw[:MaxBodyExcerpt]
		res.BodyTruncated = true
	}
	res.BodyExcerpt = excerpt(raw)
	writeBody(out, res)
	if err != nil {
		var o Outcome
		if runCtx.Err() != nil {
			o = stopped(ctx, opts.Timeout, out, "request aborted")
		} else {
			o = failed(fmt.Sprintf("read response body: %v", err))
		}
		o.HTTPResult = res
		return o
	}

	o := succeeded()
	switch {
	case h.ExpectStatus != 0 && resp.StatusCode != h.ExpectStatus:
		o = failed(fmt.Sprintf("expected status %d, got %d", h.ExpectStatus, resp.StatusCode))
	case h.ExpectStatus == 0 && (resp.StatusCode < 200 || resp.StatusCode > 299):
		o = failed(fmt.Sprintf("expected a 2xx status, got %d", resp.StatusCode))
	}
	o.HTTPResult = res
	return o
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
