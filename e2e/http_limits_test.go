package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// httpConn is a raw HTTP/1.1 connection to the manager: the test can send
// half a request, leave it idle, or never read.
type httpConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialHTTP(t *testing.T, url string) *httpConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &httpConn{t: t, c: c, br: bufio.NewReader(c)}
}

// send writes a request's head (with Host) and then body, as they are.
func (h *httpConn) send(head, body string) {
	h.t.Helper()
	if _, err := io.WriteString(h.c, strings.Replace(head, "\n", "\r\nHost: legate\r\n", 1)+"\r\n"+body); err != nil {
		h.t.Fatal(err)
	}
}

// response reads one answer, waiting at most d.
func (h *httpConn) response(d time.Duration) (*http.Response, string, error) {
	_ = h.c.SetReadDeadline(time.Now().Add(d))
	defer h.c.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// closedByServer waits at most d for the manager to close the connection.
func (h *httpConn) closedByServer(d time.Duration) bool {
	_ = h.c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, h.br)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestRegisterRefusesLargeBodiesUnread announces an 8 MiB registration
// and sends none of it: the manager answers 413 at once instead of
// waiting for (and buffering) the body; a chunked one is cut at the limit.
func TestRegisterRefusesLargeBodiesUnread(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	h := dialHTTP(t, c.url)
	h.send("POST "+protocol.PathRegister+" HTTP/1.1\nContent-Type: application/json\r\nContent-Length: 8388608\r\n", "")
	resp, body, err := h.response(10 * time.Second)
	if err != nil {
		t.Fatalf("no answer to an announced 8 MiB registration (the manager waits for the body): %v", err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "65536") {
		t.Fatalf("got %d %s; want 413 naming the 64 KiB limit", resp.StatusCode, body)
	}

	h = dialHTTP(t, c.url)
	h.send("POST "+protocol.PathRegister+" HTTP/1.1\nTransfer-Encoding: chunked\r\n", "")
	go func() {
		big := `{"account_id":"` + c.account + `","token":"x","name":"n","hostname":"h","description":"` + strings.Repeat("A", 8<<20) + `"}`
		_, _ = fmt.Fprintf(h.c, "%x\r\n%s\r\n0\r\n\r\n", len(big), big)
	}()
	if resp, body, err := h.response(20 * time.Second); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 8 MiB registration: %v %s %v; want 413", resp, body, err)
	}
}

// TestManagerSurvivesAnIdleConnectionFlood runs the manager with 512
// descriptors and opens 500 keep-alive connections that each make one
// request and then stay idle: every one is served, and so are the CLI and a
// delegate afterwards (the connection limit keeps descriptors free, and
// the connections idle the longest make room for new ones).
func TestManagerSurvivesAnIdleConnectionFlood(t *testing.T) {
	t.Parallel()
	c := &cluster{t: t, data: t.TempDir()}
	addr := freePort(t)
	c.url = "http://" + addr
	cmd := exec.Command("sh", "-c", `ulimit -Sn 512 && ulimit -Hn 512 && exec "$0" "$@"`,
		binary, "manager", "--listen", addr, "--data", c.data, "--heartbeat-interval", "500ms")
	c.mgr = startCmd(t, "manager", cmd)
	c.waitReady(addr)
	if lim := nofile(t, c.mgr.cmd.Process.Pid); lim != "512" {
		t.Fatalf("the manager's descriptor limit is %s, want 512", lim)
	}
	for i := 0; i < 500; i++ {
		h := dialHTTP(t, c.url)
		h.send("GET "+protocol.PathHealth+" HTTP/1.1\n", "")
		if resp, _, err := h.response(20 * time.Second); err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d of 500 was not served: %v %v", i+1, resp, err)
		}
	}
	c.mustCLI("delegates", "list")
	tok := c.token("after-flood")
	c.delegate("flood", "flood-host", c.seed004Env(tok, "flood", "")...)
	if r := c.cli("task", "run", "--script", "echo served"); r.code != 0 || r.stdout != "served\n" {
		t.Fatalf("task after the flood: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// startCmd runs cmd like start runs the binary.
func startCmd(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	cmd.Env = baseEnv()
	cmd.Dir = t.TempDir()
	p := &proc{t: t, name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, p.out.String())
		}
	})
	return p
}

// waitReady waits for admin.env and the listener, as startManager does.
func (c *cluster) waitReady(addr string) {
	c.t.Helper()
	eventually(c.t, 15*time.Second, "manager admin.env", func() bool {
		env, err := readEnv(filepath.Join(c.data, "admin.env"))
		if err != nil || env["LEGATE_API_KEY"] == "" {
			return false
		}
		c.account, c.apiKey = env["LEGATE_ACCOUNT_ID"], env["LEGATE_API_KEY"]
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
}

// nofile is the soft "Max open files" of a process.
func nofile(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			return strings.Fields(line)[3]
		}
	}
	t.Fatal("no Max open files in /proc/PID/limits")
	return ""
}

// TestSilentDelegateIsDroppedAndReconnects stops a delegate process
// (SIGSTOP): its WebSocket goes silent and the manager closes it after the
// liveness window (the stopped process's socket is left half-closed). When
// the delegate runs again it reconnects and takes tasks as before.
func TestSilentDelegateIsDroppedAndReconnects(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("silent")
	d := c.delegate("silent", "silent-host", c.seed004Env(tok, "silent", "")...)
	c.waitConnected("silent-host", protocol.ConnWebSocket)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(c.url, "http://"))
	d.signal(syscall.SIGSTOP)
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = d.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	eventually(t, 20*time.Second, "the manager closes the stopped delegate's WebSocket", func() bool {
		return closedByPeer(t, d.cmd.Process.Pid, port) > 0
	})
	d.signal(syscall.SIGCONT)
	stopped = false
	c.waitConnected("silent-host", protocol.ConnWebSocket)
	if r := c.cli("task", "run", "--script", "echo back"); r.code != 0 || r.stdout != "back\n" {
		t.Fatalf("task after the reconnect: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// closedByPeer counts the TCP sockets of process pid connected to port
// that the peer has closed (CLOSE_WAIT).
func closedByPeer(t *testing.T, pid int, port string) int {
	t.Helper()
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", p)
	n := 0
	for _, file := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local rem st ... inode is the 10th field.
			if len(f) > 9 && strings.HasSuffix(f[2], want) && f[3] == "08" && inodes[f[9]] {
				n++
			}
		}
	}
	return n
}

// TestHTTPTimeoutsOfTheManager runs a manager with short read (1 s),
// write (2 s) and idle (4 s) timeouts. A body that stops halfway is cut
// and an idle keep-alive connection is closed, while a followed task log
// and a delegate's long poll, which last longer than the read and write
// timeouts together, are not: each delivers what comes at the end, on the
// same connection (read raw here: the CLI and the delegate would hide a cut
// by reconnecting). The CLI's follower and a polling delegate work too.
func TestHTTPTimeoutsOfTheManager(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "--read-timeout", "1s", "--write-timeout", "2s", "--idle-timeout", "4s")
	ctx := context.Background()
	tok := c.token("timeouts")
	poller := c.delegate("timeouts", "poll-host", append(c.seed004Env(tok, "timeouts", ""), "POLL_FOR_TASKS=true")...)
	marker := filepath.Join(t.TempDir(), "go")
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "poll-host", "--script",
		fmt.Sprintf("echo first; while [ ! -e %s ]; do sleep 0.05; done; echo last", marker)))
	follow, out, _ := c.streamCLI("task", "logs", id, "--follow")
	if line, err := out.ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("followed log: %q %v", line, err)
	}
	rawFollow := make(chan string, 1)
	go func() { rawFollow <- c.followRaw(id) }()
	// A delegate of the test's own, holding a long poll.
	d, err := client.New(c.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := d.Register(ctx, protocol.RegisterRequest{AccountID: c.account, Token: tok, Name: "raw", Hostname: "raw-host", IP: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	d.SetSecret(reg.Session)
	hbCtx, stopHeartbeats := context.WithCancel(ctx)
	defer stopHeartbeats()
	go func() { // keeps it connected, as a delegate's heartbeat loop does
		for hbCtx.Err() == nil {
			_, _ = d.Heartbeat(hbCtx, protocol.Heartbeat{})
			select {
			case <-hbCtx.Done():
			case <-time.After(time.Duration(reg.HeartbeatIntervalMS) * time.Millisecond / 2):
			}
		}
	}()
	polled := make(chan string, 1)
	go func() { polled <- c.pollRaw(reg.Session) }()

	// A body that stops halfway: 408 and closed after the read timeout.
	h := dialHTTP(t, c.url)
	h.send("POST "+protocol.PathTasks+" HTTP/1.1\nAuthorization: Bearer "+c.apiKey+"\r\nContent-Length: 100\r\n", `{"shell":`)
	if resp, body, err := h.response(20 * time.Second); err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("half a body: %v %s %v; want 408", resp, body, err)
	}
	if !h.closedByServer(20 * time.Second) {
		t.Fatal("connection of the cut body stays open")
	}
	// An idle keep-alive connection: closed after the idle timeout.
	h = dialHTTP(t, c.url)
	h.send("GET "+protocol.PathHealth+" HTTP/1.1\n", "")
	if resp, _, err := h.response(20 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	if !h.closedByServer(20 * time.Second) {
		t.Fatal("an idle keep-alive connection stays open")
	}

	// Both took longer than the read and write timeouts together: the
	// followers and the long poll are still there.
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := <-rawFollow; got != "first\nlast\n"+protocol.StatusSucceeded {
		t.Errorf("followed log, read raw: %q; want the whole output and the task", got)
	}
	rest, _ := io.ReadAll(out)
	if err := follow.Wait(); err != nil || string(rest) != "last\n" {
		t.Fatalf("legate task logs --follow: %q, %v", rest, err)
	}
	next := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "raw-host", "--script", "true"))
	if got := <-polled; got != protocol.EventTaskAvailable+" "+next {
		t.Errorf("long poll: %q; want the offer of %s", got, next)
	}
	if r := c.cli("task", "run", "--selector", "poll-host", "--script", "echo polled"); r.code != 0 || r.stdout != "polled\n" {
		t.Fatalf("task on the polling delegate: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(poller.out.String(), "poll failed") {
		t.Errorf("a long poll of the polling delegate failed:\n%s", poller.out.String())
	}
}

// followRaw follows a task's log on one connection and returns the
// output and the final status, or what went wrong.
func (c *cluster) followRaw(id string) string {
	req, _ := http.NewRequest("GET", c.url+protocol.PathTasks+"/"+id+"/logs?follow=1", nil)
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var out strings.Builder
	dec := json.NewDecoder(resp.Body)
	for {
		var l protocol.LogStreamLine
		if err := dec.Decode(&l); err != nil {
			return out.String() + " (cut: " + err.Error() + ")"
		}
		if l.Chunk != nil {
			out.WriteString(l.Chunk.Data)
		}
		if l.Task != nil {
			return out.String() + l.Task.Status
		}
	}
}

// pollRaw holds one long poll (up to a minute) and returns the first
// event's kind and task, or what went wrong.
func (c *cluster) pollRaw(session string) string {
	req, _ := http.NewRequest("GET", c.url+protocol.PathEvents+"?wait_ms=60000", nil)
	req.Header.Set("Authorization", "Bearer "+session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var evs protocol.EventsResponse
	if err := json.NewDecoder(resp.Body).Decode(&evs); err != nil {
		return "cut: " + err.Error()
	}
	if len(evs.Events) == 0 {
		return "no event"
	}
	return evs.Events[0].Kind + " " + evs.Events[0].TaskID
}

// TestPlainHTTPOnTheNetworkWarns starts a manager on every interface
// without TLS: it warns, in one line, what to do. One on loopback does not.
func TestPlainHTTPOnTheNetworkWarns(t *testing.T) {
	t.Parallel()
	const warning = "serving plain HTTP on"
	open := &cluster{t: t, data: t.TempDir()}
	_, port, _ := net.SplitHostPort(freePort(t))
	open.startManager("0.0.0.0:" + port)
	var lines []string
	for _, l := range strings.Split(open.mgr.out.String(), "\n") {
		if strings.Contains(l, warning) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "--tls-cert") || !strings.Contains(lines[0], "proxy") {
		t.Errorf("warnings of a plain HTTP manager on 0.0.0.0: %q; want one line saying --tls-cert or a proxy", lines)
	}
	local := startCluster(t)
	if strings.Contains(local.mgr.out.String(), warning) {
		t.Errorf("a manager on loopback warns:\n%s", local.mgr.out.String())
	}
}

// TestTaskDurationsAreBounded asks for timeouts that overflow a duration,
// through the CLI and the API: both refuse, naming the field and the
// bound, instead of a task that ends at once or never times out.
func TestTaskDurationsAreBounded(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	r := c.cli("task", "run", "--timeout", "2562047h", "--script", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "--timeout 2562047h0m0s is out of range") {
		t.Errorf("task run --timeout 2562047h: exit %d, stderr %q; want 2 and the bound", r.code, r.stderr)
	}
	for _, field := range []string{"timeout_ms", "queue_timeout_ms"} {
		body := `{"shell":{"script":"true"},"` + field + `":9223372036854775807}`
		req, _ := http.NewRequest("POST", c.url+protocol.PathTasks, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), field+" 9223372036854775807 is out of range: use 1 to 604800000 (7 days)") {
			t.Errorf("%s overflowing: %d %s; want 400 naming the field and its bound", field, resp.StatusCode, b)
		}
	}
}
