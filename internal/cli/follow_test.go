package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// fastNotices makes the queue notices quick, for tests: correctness does
// not depend on the values, only the time the tests take.
func fastNotices(a *app) { a.queueNoticeAfter, a.explainEvery = time.Millisecond, time.Millisecond }

func (m *fakeManager) setExplanation(e protocol.Explanation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.explanations[e.TaskID] = e
}

func (m *fakeManager) explainCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.explainCalls
}

// TestTaskRunSaysWhyItWaits: a task that stays queued gets the manager's
// explanation on stderr, once, again only when it changes, and none once
// it left the queue. Before, task run waited silently.
func TestTaskRunSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{block: true})
	west := protocol.DelegateVerdict{InstanceID: "i1", Name: "west", Hostname: "host-c",
		Reasons: []protocol.Reason{{Rule: protocol.RuleDisconnected, Message: "last heartbeat 3s ago (window 30s)"},
			{Rule: protocol.RuleSelectors, Message: "missing selectors: gpu"}}}
	m.setExplanation(protocol.Explanation{TaskID: "t_1", Status: protocol.StatusQueued,
		Summary: "no delegate can run this task: 1 excluded: selectors (1)", Delegates: []protocol.DelegateVerdict{west}})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, errOut := newNotifyBuffer(), newNotifyBuffer()
	done := make(chan result, 1)
	go func() {
		done <- runCLIWith(ctx, m.env(), "", out, errOut, fastNotices,
			"task", "run", "--selector", "gpu", "--queue-timeout", "5m", "--script", "nvidia-smi")
	}()
	eventually(t, 10*time.Second, "the first notice", func() bool { return strings.Contains(errOut.String(), "missing selectors: gpu") })

	// Unchanged (only a message's time moves): no new notice.
	west.Reasons = []protocol.Reason{{Rule: protocol.RuleDisconnected, Message: "last heartbeat 4s ago (window 30s)"},
		{Rule: protocol.RuleSelectors, Message: "missing selectors: gpu"}}
	m.setExplanation(protocol.Explanation{TaskID: "t_1", Status: protocol.StatusQueued,
		Summary: "no delegate can run this task: 1 excluded: selectors (1)", Delegates: []protocol.DelegateVerdict{west}})
	calls := m.explainCount()
	eventually(t, 10*time.Second, "three more explanations", func() bool { return m.explainCount() >= calls+3 })
	if n := strings.Count(errOut.String(), "legate: task t_1 is"); n != 1 {
		t.Errorf("%d notices for an unchanged explanation:\n%s", n, errOut.String())
	}

	// A new delegate: a second notice.
	gpu := protocol.DelegateVerdict{InstanceID: "i2", Name: "gpu-box", Hostname: "host-g",
		Reasons: []protocol.Reason{{Rule: protocol.RuleCapacity, Message: "at capacity (1/1 tasks)"}}}
	m.setExplanation(protocol.Explanation{TaskID: "t_1", Status: protocol.StatusQueued,
		Summary: "no delegate can run this task now: 1 busy; 1 excluded: selectors (1)", Delegates: []protocol.DelegateVerdict{gpu, west}})
	eventually(t, 10*time.Second, "the second notice", func() bool { return strings.Contains(errOut.String(), "gpu-box") })

	// The task leaves the queue: the notices stop (the watch ends by itself).
	m.setExplanation(protocol.Explanation{TaskID: "t_1", Status: protocol.StatusRunning, Summary: "task is running on gpu-box"})
	calls = m.explainCount()
	eventually(t, 10*time.Second, "the running status to be seen", func() bool { return m.explainCount() > calls })
	cancel()
	r := <-done
	if code := exitCodeOf(t, r.err); code != ExitInterrupted {
		t.Errorf("exit %d, want %d", code, ExitInterrupted)
	}
	want := "legate: task t_1 is waiting for a delegate: no delegate can run this task: 1 excluded: selectors (1)\n" +
		"  west (host-c): disconnected: last heartbeat 3s ago (window 30s); selectors: missing selectors: gpu\n" +
		"legate: waiting for a delegate to take it (at most its queue timeout, 5m0s); Ctrl-C stops waiting and leaves the task queued (legate task cancel t_1)\n" +
		"legate: task t_1 is still waiting: no delegate can run this task now: 1 busy; 1 excluded: selectors (1)\n" +
		"  gpu-box (host-g): capacity: at capacity (1/1 tasks)\n" +
		"  west (host-c): disconnected: last heartbeat 4s ago (window 30s); selectors: missing selectors: gpu\n" +
		"legate: stopped following task t_1; it keeps running (legate task cancel t_1 to stop it)\n"
	if d := cmp.Diff(want, r.stderr); d != "" {
		t.Errorf("stderr (-want +got):\n%s", d)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q", r.stdout)
	}
}

// TestTaskRunQuietWhenItStarts: a task that is no longer queued when the
// notice is due, or whose output comes first, gets no notice.
func TestTaskRunQuietWhenItStarts(t *testing.T) {
	t.Parallel()
	// The manager already says running: nothing to explain.
	m := newFakeManager(t, outcomeSpec{block: true})
	m.setExplanation(protocol.Explanation{TaskID: "t_1", Status: protocol.StatusRunning, Summary: "task is running on d1"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errOut := newNotifyBuffer()
	done := make(chan result, 1)
	go func() {
		done <- runCLIWith(ctx, m.env(), "", newNotifyBuffer(), errOut, fastNotices, "task", "run", "--script", "sleep 600")
	}()
	eventually(t, 10*time.Second, "the explanation to be asked", func() bool { return m.explainCount() > 0 })
	cancel()
	if r := <-done; strings.Contains(r.stderr, "waiting") {
		t.Errorf("stderr = %q, want no notice", r.stderr)
	}

	// Output first: the notice never comes, even when it would be due.
	m = newFakeManager(t, outcomeSpec{chunks: []string{"hi\n"}, status: protocol.StatusSucceeded, exitCode: intp(0)})
	m.setExplanation(protocol.Explanation{TaskID: "t_1", Status: protocol.StatusQueued, Summary: "eligible: 1"})
	r := runCLIWith(t.Context(), m.env(), "", newNotifyBuffer(), newNotifyBuffer(), func(a *app) { a.queueNoticeAfter = time.Hour },
		"task", "run", "--script", "echo hi")
	if r.err != nil || r.stdout != "hi\n" || r.stderr != "" {
		t.Errorf("err %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}
}

// flakyProxy forwards TCP connections to a target until down is called;
// then it cuts the open ones and resets every new one, until up.
type flakyProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	isDown bool
	conns  []net.Conn
}

func newFlakyProxy(t *testing.T, target string) *flakyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.down()
		p.wg.Wait()
	})
	return p
}

func (p *flakyProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *flakyProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.isDown {
			p.mu.Unlock()
			_ = c.(*net.TCPConn).SetLinger(0) // a reset, as from a host that restarts
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *flakyProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (p *flakyProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = true
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
	p.conns = nil
}

func (p *flakyProxy) up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = false
}

// TestFollowSaysManagerUnreachable: while the manager cannot be reached,
// task run and task logs --follow say so once and keep trying, and say
// when it is back; the output continues without a repeat. Before, they
// retried silently.
func TestFollowSaysManagerUnreachable(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"task", "run", "--script", "echo first; sleep 60; echo second"}, {"task", "logs", "--follow", "t_1"}} {
		t.Run(args[1], func(t *testing.T) {
			t.Parallel()
			m := newFakeManager(t, outcomeSpec{chunks: []string{"first\n"}, block: true, status: protocol.StatusSucceeded, exitCode: intp(0)})
			if args[1] == "logs" {
				if r := runCLI(t.Context(), m.env(), "", "task", "run", "--detach", "--script", "true"); r.err != nil {
					t.Fatal(r.err)
				}
			}
			p := newFlakyProxy(t, m.srv.Listener.Addr().String())
			env := map[string]string{EnvURL: p.url(), EnvAPIKey: testKey}
			out, errOut := newNotifyBuffer(), newNotifyBuffer()
			done := make(chan result, 1)
			go func() { done <- runCLIWith(t.Context(), env, "", out, errOut, nil, args...) }()
			<-out.wrote // "first" arrived

			p.down()
			eventually(t, 20*time.Second, "the unreachable notice", func() bool { return strings.Contains(errOut.String(), "unreachable") })
			m.mu.Lock()
			m.outcome.block = false // the next stream ends the task
			m.mu.Unlock()
			p.up()
			r := <-done
			if r.err != nil || r.stdout != "first\n" {
				t.Errorf("err %v, stdout %q", r.err, r.stdout)
			}
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if len(lines) != 2 ||
				!strings.HasPrefix(lines[0], "legate: manager at "+p.url()+" unreachable (connection ") ||
				!strings.HasSuffix(lines[0], "); retrying until it answers (Ctrl-C stops following, the task keeps running)") ||
				lines[1] != "legate: manager at "+p.url()+" is back; following task t_1 again" {
				t.Errorf("stderr:\n%s", r.stderr)
			}
		})
	}
}

func TestNetReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "connection refused"},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, "connection reset"},
		{&net.OpError{Op: "write", Err: &os.SyscallError{Syscall: "write", Err: syscall.EPIPE}}, "connection closed"},
		{&net.DNSError{Name: "nope.invalid", IsNotFound: true}, "host nope.invalid not found"},
		{context.DeadlineExceeded, "timed out"},
		{io.ErrUnexpectedEOF, "connection closed"},
		{&protocol.Error{Code: protocol.CodeUnavailable, Message: "restarting"}, ""},
		{errors.New("something else"), ""},
	}
	for _, tt := range tests {
		got, ok := netReason(tt.err)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("netReason(%v) = %q, %t; want %q", tt.err, got, ok, tt.want)
		}
	}
}

// TestPlainNetError: a failed request to the manager is said plainly,
// with the manager's address and the reason; other errors are unchanged.
func TestPlainNetError(t *testing.T) {
	t.Parallel()
	refused := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/api/v1/tasks",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("submit task: %w", refused), "submit task: manager at http://127.0.0.1:1 unreachable (connection refused)"},
		{fmt.Errorf("get task: %w", &url.Error{Op: "Get", URL: "https://legate.example.com/api/v1/tasks/t_1", Err: io.ErrUnexpectedEOF}),
			"get task: manager at https://legate.example.com unreachable (connection closed)"},
		{errors.New("task t_1 not found"), "task t_1 not found"},
	}
	for _, tt := range tests {
		if got := plainNetError(tt.err); got != tt.want {
			t.Errorf("plainNetError(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
