package manager

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// trickle writes one byte of a body to c every interval until the server
// closes the connection or the test ends. The pace is the attack (a body
// that keeps coming, too slowly), not a wait for anything.
func trickle(t *testing.T, c *rawConn, interval time.Duration) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.c.Write([]byte{'x'}); err != nil {
					return
				}
			}
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
}

// TestTrickledBodyIsCutOnEveryRoute sends the headers of a request with a
// body, then the body one byte at a time, slower than any honest client
// but fast enough that the connection never sits idle: the manager must
// close the connection once the read timeout has passed, whether the route
// reads the body (registration, sign-in, the web UI's sign-in form) or
// refused it without reading (a route that takes no body, an unknown path,
// a refused protocol version, refused credentials in the headers). The
// read timeout is a second here; the bound the test waits for the close
// is twenty, and a body that keeps the connection has a thousand bytes to
// send at ten a second.
func TestTrickledBodyIsCutOnEveryRoute(t *testing.T) {
	tm := startTestManager(t, Config{ReadTimeout: time.Second, WriteTimeout: time.Second})
	old := strconv.Itoa(protocol.MinVersion - 1)
	for _, tc := range []struct {
		what, method, path string
		headers            map[string]string
	}{
		{"registration", "POST", protocol.PathRegister, nil},
		{"registration, old protocol version", "POST", protocol.PathRegister, map[string]string{protocol.HeaderProtocolVersion: old}},
		{"registration, wrong token in the headers", "POST", protocol.PathRegister,
			map[string]string{"Authorization": "Bearer wrong", protocol.HeaderAccountID: tm.admin.AccountID}},
		{"registration, wrong method", "PUT", protocol.PathRegister, nil},
		{"sign-in", "POST", protocol.PathSessions, nil},
		{"a route without a body", "GET", protocol.PathHealth, nil},
		{"an unknown API path", "POST", "/api/v1/nowhere", nil},
		{"the web UI's sign-in form", "POST", "/signin", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
		{"a web UI page", "GET", "/delegates", nil},
	} {
		t.Run(tc.what, func(t *testing.T) {
			c := dialRaw(t, tm.url)
			h := map[string]string{"Content-Length": "10000"}
			for k, v := range tc.headers {
				h[k] = v
			}
			c.send(tc.method, tc.path, h, "{")
			trickle(t, c, 100*time.Millisecond)
			if !c.closedByServer(20 * time.Second) {
				t.Fatalf("%s %s: the connection of a trickled body stays open past the read timeout", tc.method, tc.path)
			}
		})
	}
}
