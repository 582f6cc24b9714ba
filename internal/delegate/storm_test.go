package delegate_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// overloadProxy forwards to a manager over a real socket, and answers the
// first turnAway requests of path as a saturated manager does: 503
// overloaded with Retry-After.
func overloadProxy(t *testing.T, target, path string, turnAway int, retryAfter time.Duration) (string, *proxyTimes) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	times := &proxyTimes{}
	mu := &times.mu
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		refuse := r.URL.Path == path && turnAway > 0
		if refuse {
			turnAway--
			times.refused = time.Now()
		}
		if r.URL.Path == protocol.PathEvents && times.firstPoll.IsZero() {
			times.firstPoll = time.Now()
		}
		mu.Unlock()
		if refuse {
			w.Header().Set("Retry-After", fmt.Sprint(int(retryAfter/time.Second)))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"error":{"code":%q,"message":"busy"}}`, protocol.CodeOverloaded)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, times
}

// proxyTimes is when the proxy turned a request away, and when the first
// long poll reached it (zero: none). Read them once the delegate is in.
type proxyTimes struct {
	mu                 sync.Mutex
	refused, firstPoll time.Time
}

// pollAfterRefusal is how long after the refusal the first poll came (ok
// false: no poll, or no refusal).
func (p *proxyTimes) pollAfterRefusal() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.firstPoll.IsZero() || p.refused.IsZero() {
		return 0, false
	}
	return p.firstPoll.Sub(p.refused), true
}

var retryInRE = regexp.MustCompile(`retry_in=([0-9.a-zµ]+)`)

// loggedRetries returns the retry_in of the log lines that contain msg.
func loggedRetries(t *testing.T, buf *logBuffer, msg string) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, line := range buf.lines(msg) {
		m := retryInRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("no retry_in in %q", line)
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatalf("retry_in in %q: %v", line, err)
		}
		out = append(out, d)
	}
	return out
}

// TestDelegateHonoursRetryAfter: a manager that turns a registration, then
// a WebSocket opening, away with Retry-After is not asked again before
// that time (the backoff alone would come back within a second), not by
// a long poll either, and the delegate gets in once it is let in.
func TestDelegateHonoursRetryAfter(t *testing.T) {
	const hint = 3 * time.Second
	for _, path := range []string{protocol.PathRegister, protocol.PathWebSocket} {
		t.Run(path, func(t *testing.T) {
			tm := startManager(t, testConfig())
			proxy, times := overloadProxy(t, tm.url, path, 1, hint)
			ag := startAgent(t, tm, agentOpts{urls: []string{proxy}})
			tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
			msg := "cannot register yet; retrying"
			if path == protocol.PathWebSocket {
				msg = "websocket unavailable; polling meanwhile"
			}
			retries := loggedRetries(t, ag.logs, msg)
			if len(retries) != 1 || retries[0] < hint {
				t.Fatalf("retries after the 503 with Retry-After %s: %v; want one, not before the hint", hint, retries)
			}
			// The long poll that stands in for a WebSocket turned away
			// waits for the hint too. (The delegate reads the hint after
			// the proxy sent it: a poll before refused+hint came early.)
			if d, ok := times.pollAfterRefusal(); path == protocol.PathWebSocket && ok && d < hint {
				t.Fatalf("a long poll %s after the WebSocket was turned away with Retry-After %s", d, hint)
			}
		})
	}
}
