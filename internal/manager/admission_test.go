package manager

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/admit"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestAdmissionTurnsAwayWithRetryAfter holds the only admission slot with
// a registration whose body trickles in: another registration, and a
// WebSocket opening, are answered 503 overloaded with a Retry-After,
// before their credentials are looked at; once the slot is free, a
// registration is served again.
func TestAdmissionTurnsAwayWithRetryAfter(t *testing.T) {
	tm := startTestManager(t, Config{Admissions: 1})
	slow := dialRaw(t, tm.url)
	slow.send("POST", protocol.PathRegister, map[string]string{"Content-Length": "1000"}, `{"account_id":`)
	eventually(t, 10*time.Second, "the slow registration holds the admission slot", func() bool { return tm.m.server.Admitting() == 1 })

	call := func(method, path, body string) (*http.Response, []byte) {
		c := dialRaw(t, tm.url)
		h := map[string]string{"Authorization": "Bearer not-a-session"}
		if body != "" {
			h = map[string]string{"Content-Length": strconv.Itoa(len(body))}
		}
		c.send(method, path, h, body)
		resp, b, err := c.response(20 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	register := func() (*http.Response, []byte) {
		return call("POST", protocol.PathRegister, `{"account_id":"`+tm.admin.AccountID+`","token":"wrong","name":"n","hostname":"h"}`)
	}
	for _, tc := range []struct {
		what string
		do   func() (*http.Response, []byte)
	}{
		{"registration", register},
		{"websocket", func() (*http.Response, []byte) { return call("GET", protocol.PathWebSocket, "") }},
	} {
		resp, body := tc.do()
		after, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusServiceUnavailable || errorCode(t, body) != protocol.CodeOverloaded ||
			err != nil || after < 1 || after > int(admit.MaxRetryAfter/time.Second) {
			t.Fatalf("%s while the slot is held: %d %v %s; want 503 overloaded with a Retry-After in seconds", tc.what, resp.StatusCode, resp.Header, body)
		}
	}
	slow.c.Close()
	eventually(t, 10*time.Second, "the slot is given back", func() bool { return tm.m.server.Admitting() == 0 })
	if resp, body := register(); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("registration once the slot is free: %d %s; want 401 (the token is wrong)", resp.StatusCode, body)
	}
}
