package manager

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawConn is a TCP connection to the manager that speaks HTTP/1.1 by hand,
// so a test can send half a request, stop reading, or stay idle.
type rawConn struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, url string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// send writes the request line and headers (and Host), then body.
func (rc *rawConn) send(method, path string, headers map[string]string, body string) {
	rc.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: legate\r\n", method, path)
	for k, v := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	if _, err := io.WriteString(rc.c, b.String()); err != nil {
		rc.t.Fatal(err)
	}
}

// response reads one answer, waiting at most d for it.
func (rc *rawConn) response(d time.Duration) (*http.Response, []byte, error) {
	_ = rc.c.SetReadDeadline(time.Now().Add(d))
	defer rc.c.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body, err
}

// closedByServer waits at most d for the server to close the connection
// (it reads and drops whatever arrives before).
func (rc *rawConn) closedByServer(d time.Duration) bool {
	_ = rc.c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, rc.br)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func errorCode(t testing.TB, body []byte) protocol.Code {
	t.Helper()
	var eb protocol.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Fatalf("answer is not an error body: %q", body)
	}
	return eb.Error.Code
}

// credentials fills a route's path and the Authorization header it needs.
func (tm *testManager) credentials(t *testing.T, rt api.Route, session string) (string, map[string]string) {
	t.Helper()
	path := strings.NewReplacer("{id}", "t_x", "{name}", "x", "{org}", "o").Replace(rt.Pattern)
	h := map[string]string{}
	switch rt.Access() {
	case api.AccessDelegate:
		h["Authorization"] = "Bearer " + session
	case api.AccessAPIKey:
		h["Authorization"] = "Bearer " + tm.admin.APIKey
	}
	return path, h
}

// TestBodyLimitsPerRoute sends every route that reads a body one byte more
// than its limit, with valid credentials: declared up front (refused
// before a byte of it is sent) and chunked (refused once the limit is
// read).
func TestBodyLimitsPerRoute(t *testing.T) {
	tm := startTestManager(t, Config{})
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(context.Background(), "limits")
	if err != nil {
		t.Fatal(err)
	}
	_, reg := tm.registerFake(t, tm.admin.AccountID, tok.Value, "limits", "limits-host")
	for _, rt := range tm.m.routes() {
		if rt.Body == 0 {
			continue
		}
		t.Run(rt.Method+" "+rt.Pattern, func(t *testing.T) {
			path, h := tm.credentials(t, rt, reg.Session)
			t.Run("declared", func(t *testing.T) {
				c := dialRaw(t, tm.url)
				h := maps(h, "Content-Length", strconv.FormatInt(rt.Body+1, 10), "Content-Type", "application/json")
				c.send(rt.Method, path, h, "") // and not a byte of the body
				resp, body, err := c.response(10 * time.Second)
				if err != nil {
					t.Fatalf("no answer without the body (the manager waits to read it): %v", err)
				}
				if resp.StatusCode != http.StatusRequestEntityTooLarge || errorCode(t, body) != protocol.CodeBadRequest {
					t.Fatalf("got %d %s, want 413 bad_request", resp.StatusCode, body)
				}
			})
			t.Run("chunked", func(t *testing.T) {
				c := dialRaw(t, tm.url)
				c.send(rt.Method, path, maps(h, "Transfer-Encoding", "chunked"), "")
				go func() {
					n := rt.Body + 1
					_, _ = fmt.Fprintf(c.c, "%x\r\n%s\r\n0\r\n\r\n", n, strings.Repeat(" ", int(n)))
				}()
				resp, body, err := c.response(20 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusRequestEntityTooLarge {
					t.Fatalf("got %d %s, want 413", resp.StatusCode, body)
				}
			})
		})
	}
}

// maps returns a copy of h with more key/value pairs.
func maps(h map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestRegistrationsAreReadFewAtATime holds the only slot for bodies without
// credentials with a registration whose body trickles in: another one is
// answered 503 with Retry-After instead of being read, and is read again
// once the slot is free.
func TestRegistrationsAreReadFewAtATime(t *testing.T) {
	tm := startTestManager(t, Config{UnauthenticatedBodies: 1})
	slow := dialRaw(t, tm.url)
	slow.send("POST", protocol.PathRegister, map[string]string{"Content-Length": "1000"}, `{"account_id":`)
	eventually(t, 10*time.Second, "the slow registration holds the slot", func() bool { return tm.m.server.BodiesReading() == 1 })

	register := func() (*http.Response, []byte) {
		c := dialRaw(t, tm.url)
		body := `{"account_id":"` + tm.admin.AccountID + `","token":"wrong","name":"n","hostname":"h"}`
		c.send("POST", protocol.PathRegister, map[string]string{"Content-Length": strconv.Itoa(len(body))}, body)
		resp, b, err := c.response(20 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	resp, body := register()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || errorCode(t, body) != protocol.CodeUnavailable {
		t.Fatalf("second registration: %d %v %s; want 503 unavailable with Retry-After: 1", resp.StatusCode, resp.Header, body)
	}
	slow.c.Close()
	eventually(t, 10*time.Second, "the slot is given back", func() bool { return tm.m.server.BodiesReading() == 0 })
	if resp, body := register(); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("registration once the slot is free: %d %s; want 401 (the token is wrong)", resp.StatusCode, body)
	}
}

// TestSlowBodyIsCut sends half a body and stops: after the read timeout
// the manager answers 408 and closes the connection, on the registration
// (no credentials) and on an admin route alike. The write timeout is as
// short: the answer to a cut body must still be written.
func TestSlowBodyIsCut(t *testing.T) {
	tm := startTestManager(t, Config{ReadTimeout: time.Second, WriteTimeout: time.Second})
	for _, tc := range []struct {
		path string
		auth string
	}{
		{protocol.PathRegister, ""},
		{protocol.PathTasks, "Bearer " + tm.admin.APIKey},
	} {
		t.Run(tc.path, func(t *testing.T) {
			c := dialRaw(t, tm.url)
			h := map[string]string{"Content-Length": "1000"}
			if tc.auth != "" {
				h["Authorization"] = tc.auth
			}
			c.send("POST", tc.path, h, `{"sh`)
			resp, body, err := c.response(20 * time.Second)
			if err != nil {
				t.Fatalf("a body that stopped halfway was not cut: %v", err)
			}
			if resp.StatusCode != http.StatusRequestTimeout || errorCode(t, body) != protocol.CodeUnavailable {
				t.Fatalf("got %d %s; want 408 unavailable", resp.StatusCode, body)
			}
			if !c.closedByServer(20 * time.Second) {
				t.Fatal("the connection stays open after the cut body")
			}
		})
	}
}

// TestIdleKeepAliveIsClosed leaves a keep-alive connection idle after one
// request: the manager closes it after the idle timeout.
func TestIdleKeepAliveIsClosed(t *testing.T) {
	tm := startTestManager(t, Config{IdleTimeout: time.Second})
	c := dialRaw(t, tm.url)
	c.send("GET", protocol.PathHealth, nil, "")
	if resp, _, err := c.response(10 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	if !c.closedByServer(20 * time.Second) {
		t.Fatal("an idle keep-alive connection stays open")
	}
}

func get(t *testing.T, c *rawConn, path string) {
	t.Helper()
	c.send("GET", path, nil, "")
	resp, body, err := c.response(20 * time.Second)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %v %s %v", path, resp, body, err)
	}
}

// connLimitOf is the connection limit of tm's running server. Run sets it
// as it starts, while the listener already accepts into its backlog: a
// test that has connected may get there first, so this waits for it.
func connLimitOf(t *testing.T, tm *testManager) *connLimit {
	t.Helper()
	var l *connLimit
	eventually(t, 10*time.Second, "the server's connection limit", func() bool {
		l = tm.m.conns.Load()
		return l != nil
	})
	return l
}

// TestConnectionLimit fills the manager's connections. Idle keep-alive
// connections make room for new ones (the one idle longest is closed);
// connections that are busy (WebSockets) keep their place, a new
// connection waits until one ends, and meanwhile the manager keeps serving
// the connections it has.
func TestConnectionLimit(t *testing.T) {
	t.Run("idle connections make room", func(t *testing.T) {
		tm := startTestManager(t, Config{MaxConnections: 2})
		a, b := dialRaw(t, tm.url), dialRaw(t, tm.url)
		limit := connLimitOf(t, tm)
		get(t, a, protocol.PathHealth)
		eventually(t, 10*time.Second, "a idle", func() bool { return limit.idleCount() == 1 })
		get(t, b, protocol.PathHealth)
		eventually(t, 10*time.Second, "a and b idle", func() bool { return limit.idleCount() == 2 })
		c := dialRaw(t, tm.url)
		get(t, c, protocol.PathHealth) // let in: a, idle the longest, makes room
		if !a.closedByServer(20 * time.Second) {
			t.Fatal("the connection idle the longest was not closed")
		}
		get(t, b, protocol.PathHealth)
		get(t, c, protocol.PathHealth)
	})
	t.Run("busy connections keep their place", func(t *testing.T) {
		tm := startTestManager(t, Config{MaxConnections: 2})
		ctx := context.Background()
		tok, err := tm.client(t, tm.admin.APIKey).CreateToken(ctx, "ws")
		if err != nil {
			t.Fatal(err)
		}
		var ws []*websocket.Conn
		for _, host := range []string{"ws-a", "ws-b"} {
			_, reg := tm.registerFake(t, tm.admin.AccountID, tok.Value, "ws", host)
			ws = append(ws, dialWS(t, tm.url, reg.Session))
		}
		c := dialRaw(t, tm.url)
		c.send("GET", protocol.PathHealth, nil, "")
		eventually(t, 10*time.Second, "a new connection waits for a place", func() bool { return connLimitOf(t, tm).isWaiting() })
		// The WebSockets are served meanwhile.
		for i, w := range ws {
			hb := protocol.Frame{Kind: protocol.FrameHeartbeat, Heartbeat: &protocol.Heartbeat{Seq: int64(10 + i)}}
			if err := wsjson.Write(ctx, w, hb); err != nil {
				t.Fatal(err)
			}
			readAck(t, w, int64(10+i))
		}
		ws[0].CloseNow()
		if resp, _, err := c.response(20 * time.Second); err != nil || resp.StatusCode != 200 {
			t.Fatalf("the waiting connection once a place is free: %v %v", resp, err)
		}
	})
}

func dialWS(t *testing.T, url, session string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{"Authorization": {"Bearer " + session}}
	c, _, err := websocket.Dial(ctx, "ws://"+strings.TrimPrefix(url, "http://")+protocol.PathWebSocket, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// TestSilentWebSocketIsClosed opens a delegate's WebSocket and sends
// nothing on it: the manager closes it after the liveness window.
func TestSilentWebSocketIsClosed(t *testing.T) {
	tm := startTestManager(t, Config{HeartbeatInterval: 300 * time.Millisecond})
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(context.Background(), "silent")
	if err != nil {
		t.Fatal(err)
	}
	_, reg := tm.registerFake(t, tm.admin.AccountID, tok.Value, "silent", "silent-host")
	c := dialWS(t, tm.url, reg.Session)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var ev protocol.Event
		err := wsjson.Read(ctx, c, &ev)
		if ctx.Err() != nil {
			t.Fatal("a WebSocket that sends nothing stays open")
		}
		if err != nil {
			return // closed by the manager
		}
	}
}

// TestStreamsOutliveTheWriteTimeout holds a long poll and a followed log
// open for longer than the write timeout: neither is cut, and both deliver
// what comes later.
func TestStreamsOutliveTheWriteTimeout(t *testing.T) {
	tm := startTestManager(t, Config{WriteTimeout: time.Second, LongPollWait: 3 * time.Second})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "streams")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "streams", "streams-host")
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Started(ctx, task.ID, protocol.StartedRequest{Epoch: acq.Epoch}); err != nil {
		t.Fatal(err)
	}
	// Followed on one connection, read raw: the client library would
	// hide a cut stream by reconnecting.
	lines := make(chan protocol.LogStreamLine, 16)
	followErr := make(chan error, 1)
	go func() {
		defer close(lines)
		req, _ := http.NewRequest("GET", tm.url+protocol.PathTasks+"/"+task.ID+"/logs?follow=1", nil)
		req.Header.Set("Authorization", "Bearer "+tm.admin.APIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			followErr <- err
			return
		}
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var l protocol.LogStreamLine
			if err := dec.Decode(&l); err != nil {
				followErr <- err
				return
			}
			lines <- l
			if l.Task != nil {
				followErr <- nil
				return
			}
		}
	}()
	if _, err := d.Poll(ctx, 0); err != nil { // the task's offer
		t.Fatal(err)
	}
	// A long poll that ends after its wait (3s, three write timeouts)
	// with no event, while the log follower waits for output.
	evs, err := d.Poll(ctx, 3*time.Second)
	if err != nil || len(evs.Events) != 0 {
		t.Fatalf("long poll past the write timeout: %+v, %v", evs, err)
	}
	if err := d.SendLogs(ctx, task.ID, protocol.LogsRequest{Epoch: acq.Epoch, Chunks: []protocol.LogChunk{{Seq: 1, Data: "late output\n"}}}); err != nil {
		t.Fatal(err)
	}
	zero := 0
	if _, err := d.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero, LastSeq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := <-followErr; err != nil {
		t.Fatalf("followed log past the write timeout: %v", err)
	}
	var got []string
	for l := range lines {
		switch {
		case l.Chunk != nil:
			got = append(got, l.Chunk.Data)
		case l.Task != nil:
			got = append(got, l.Task.Status)
		}
	}
	if diff := cmp.Diff([]string{"late output\n", protocol.StatusSucceeded}, got); diff != "" {
		t.Errorf("followed log (-want +got):\n%s", diff)
	}
}

// TestWriteTimeoutDropsAPeerThatStopsReading asks for a large listing and
// reads none of it: the manager closes the connection after the write
// timeout instead of waiting for the reader forever.
func TestWriteTimeoutDropsAPeerThatStopsReading(t *testing.T) {
	tm := startTestManager(t, Config{WriteTimeout: time.Second})
	ctx := context.Background()
	script := strings.Repeat("echo legate\n", 1<<20/12)
	for i := range 24 { // some 24 MiB of answer: more than the socket buffers hold
		err := tm.st.CreateTask(ctx, store.Task{ID: fmt.Sprintf("t_big%02d", i), AccountID: tm.admin.AccountID,
			Spec: protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: script}}, Status: protocol.StatusQueued,
			TimeoutMS: 1000, QueueTimeoutMS: 3_600_000, CreatedAt: time.Now(), QueueDeadline: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
	}
	limit := connLimitOf(t, tm)
	c := dialRaw(t, tm.url)
	c.send("GET", protocol.PathTasks+"?limit=1000", map[string]string{"Authorization": "Bearer " + tm.admin.APIKey}, "")
	eventually(t, 10*time.Second, "the listing request is being answered", func() bool { return len(limit.slots) >= 1 })
	open := len(limit.slots)
	// The answer is encoded whole before its first write, which fails
	// once the write timeout has passed: about a second, but under -race
	// on a loaded machine encoding 24 MiB takes more than 20 s.
	eventually(t, 2*time.Minute, "the manager drops the connection that does not read", func() bool { return len(limit.slots) < open })
	resp, _, err := c.response(20 * time.Second)
	if err == nil && resp.StatusCode == 200 {
		t.Fatal("the whole answer arrived; want it cut")
	}
}

func TestDefaultMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{
		{0, 1024},
		{512, 384},
		{1024, 768},
		{20000, 18976},
		{65536, 64512},
		{math.MaxUint64, math.MaxInt32},
	} {
		if got := defaultMaxConnections(tc.nofile); got != tc.want {
			t.Errorf("defaultMaxConnections(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}

// TestCredentialsAreCheckedBeforeTheBody announces bodies as large as the
// routes accept, without valid credentials, and sends none of them: the
// answer (401) comes without the manager waiting for a byte of the body.
func TestCredentialsAreCheckedBeforeTheBody(t *testing.T) {
	tm := startTestManager(t, Config{})
	for _, tc := range []struct {
		path, auth string
		limit      int64
	}{
		{protocol.PathTasks, "", api.BodyLarge},
		{protocol.PathTasks, "Bearer not-a-key", api.BodyLarge},
		{protocol.PathDelegateTask + "/t_x/logs", "Bearer s1.forged.session", api.BodyLogs},
		{protocol.PathHeartbeat, "", api.BodyDelegateState},
	} {
		c := dialRaw(t, tm.url)
		h := map[string]string{"Content-Length": strconv.FormatInt(tc.limit, 10)}
		if tc.auth != "" {
			h["Authorization"] = tc.auth
		}
		c.send("POST", tc.path, h, "")
		resp, body, err := c.response(10 * time.Second)
		if err != nil {
			t.Fatalf("POST %s (%q): no answer without the body: %v", tc.path, tc.auth, err)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s (%q): %d %s; want 401", tc.path, tc.auth, resp.StatusCode, body)
		}
	}
}

// TestRegistrationCredentialsInHeaders: a registration whose account and
// token also come in its headers has them checked before its body is read
// — wrong ones are refused without it — and once they hold may carry a
// body past the limit of one whose credentials are only in the body.
func TestRegistrationCredentialsInHeaders(t *testing.T) {
	tm := startTestManager(t, Config{})
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(context.Background(), "headers")
	if err != nil {
		t.Fatal(err)
	}
	var rt api.Route
	for _, r := range tm.m.routes() {
		if r.Pattern == protocol.PathRegister {
			rt = r
		}
	}
	if rt.CredBody <= rt.Body {
		t.Fatalf("register limits: %d with credentials in headers, %d without; want a larger one with", rt.CredBody, rt.Body)
	}
	for _, tc := range []struct {
		what          string
		auth, account string
		length        int64
		want          int
	}{
		{"wrong token", "Bearer not-the-token", tm.admin.AccountID, rt.CredBody, http.StatusUnauthorized},
		{"unknown account", "Bearer " + tok.Value, "acct-nobody", rt.CredBody, http.StatusUnauthorized},
		{"no account header", "Bearer " + tok.Value, "", rt.CredBody, http.StatusBadRequest},
		{"valid, past the larger limit", "Bearer " + tok.Value, tm.admin.AccountID, rt.CredBody + 1, http.StatusRequestEntityTooLarge},
		{"no headers, past the smaller limit", "", "", rt.Body + 1, http.StatusRequestEntityTooLarge},
	} {
		c := dialRaw(t, tm.url)
		h := map[string]string{"Content-Length": strconv.FormatInt(tc.length, 10), "Content-Type": "application/json"}
		if tc.auth != "" {
			h["Authorization"] = tc.auth
		}
		if tc.account != "" {
			h[protocol.HeaderAccountID] = tc.account
		}
		c.send("POST", protocol.PathRegister, h, "") // and not a byte of the body
		resp, body, err := c.response(10 * time.Second)
		if err != nil {
			t.Fatalf("%s: no answer without the body: %v", tc.what, err)
		}
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %s; want %d", tc.what, resp.StatusCode, body, tc.want)
		}
	}
	// Between the two limits: read, and registered, with valid headers.
	req := protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: tm.admin.AccountID, Token: tok.Value,
		Name: "headers", Hostname: "headers-host", Capacity: 4}
	for len(mustMarshal(t, req)) <= int(rt.Body) {
		req.Description = "" // the running list is what grows honestly
		req.Running = append(req.Running, protocol.RunningTask{ID: fmt.Sprintf("t_%030d", len(req.Running)), Epoch: 1})
	}
	if _, err := tm.client(t, "").Register(context.Background(), req); err != nil {
		t.Fatalf("a %d-byte registration with credentials in headers: %v", len(mustMarshal(t, req)), err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
