package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// What `task run` and `task logs --follow` say while they wait: why a task
// stays queued, and that the manager cannot be reached.

// Defaults of the app's queueNoticeAfter and explainEvery.
const (
	// defaultQueueNoticeAfter is how long a task may stay queued before
	// task run says why it waits: a task that starts sooner gets no notice.
	defaultQueueNoticeAfter = time.Second
	// defaultExplainEvery is how often task run asks again why a task
	// waits, to say so when the answer changes.
	defaultExplainEvery = 2 * time.Second
	// maxNoticeDelegates bounds the delegate lines of one notice.
	maxNoticeDelegates = 10
)

// syncWriter serializes the writes of several goroutines to one stream.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// connectionNotices returns a StreamOptions.OnEvent that says on w, once
// per outage, that the manager at base cannot be reached while following
// task id and that it keeps trying, and says when the manager answers
// again. A stream that breaks and reconnects at once says nothing.
func connectionNotices(w io.Writer, base, id string) func(client.StreamEvent) {
	down := false
	return func(e client.StreamEvent) {
		switch e.Kind {
		case client.StreamConnected:
			if down {
				fmt.Fprintf(w, "legate: manager at %s is back; following task %s again\n", escape(base), escape(id))
				down = false
			}
		case client.StreamFailed:
			if !down {
				fmt.Fprintf(w, "legate: %s; retrying until it answers (Ctrl-C stops following, the task keeps running)\n",
					escapeLines(managerProblem(base, e.Err)))
				down = true
			}
		}
	}
}

// managerProblem says in a few words why the manager at base did not
// answer as it should: "manager at URL unreachable (connection refused)",
// or its error answer.
func managerProblem(base string, err error) string {
	if reason, ok := netReason(err); ok {
		return "manager at " + base + " unreachable (" + reason + ")"
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return "manager at " + base + " answered: " + pe.Error()
	}
	return "manager at " + base + ": " + err.Error()
}

// netReason names a network failure in a few words; ok is false when err
// is not one (an answer of the manager).
func netReason(err error) (reason string, ok bool) {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", true
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset", true
	case errors.Is(err, syscall.EPIPE):
		// Writing a request on a connection the other end has reset.
		return "connection closed", true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to host", true
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "host " + dns.Name + " not found", true
		}
		return "cannot resolve " + dns.Name, true
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timed out", true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed", true
	case isNetError(err):
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			return oe.Err.Error(), true
		}
		return "network error", true
	}
	return "", false
}

// queueWatch says on w why a submitted task waits in the queue: once it
// has been queued for queueNoticeAfter, the manager's explanation (what
// legate task explain prints), and again whenever the explanation changes,
// until the task leaves the queue, stop is called or ctx ends. stop ends
// the watch and waits for it; it may be called more than once.
func (a *app) queueWatch(ctx context.Context, c *client.Client, task protocol.Task, w io.Writer) (stop func()) {
	if task.Status != protocol.StatusQueued {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.explainWhileQueued(ctx, c, task, w)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

func (a *app) explainWhileQueued(ctx context.Context, c *client.Client, task protocol.Task, w io.Writer) {
	after, every := a.queueNoticeAfter, a.explainEvery
	if after <= 0 {
		after = defaultQueueNoticeAfter
	}
	if every <= 0 {
		every = defaultExplainEvery
	}
	t := time.NewTimer(after)
	defer t.Stop()
	last, first := "", true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		actx, cancel := context.WithTimeout(ctx, client.DefaultRequestTimeout)
		e, err := c.ExplainTask(actx, task.ID)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// Unreachable or refused: the log stream says so; try again.
		case e.Status != protocol.StatusQueued:
			return // it starts (or ended): the output or the outcome follows
		case explanationKey(e) != last:
			last = explanationKey(e)
			// One write, so that the notice is not cut by other output.
			_, _ = io.WriteString(w, queueNotice(task, e, first))
			first = false
		}
		t.Reset(every)
	}
}

// explanationKey is what makes two explanations different for a person:
// the summary and, per delegate, whether it is eligible and which rules
// exclude it. The rules' messages are left out: some count time ("last
// heartbeat 12s ago") and would change at every look.
func explanationKey(e protocol.Explanation) string {
	var b strings.Builder
	b.WriteString(e.Summary + "\x00" + e.Outlook)
	for _, v := range e.Delegates {
		fmt.Fprintf(&b, "\n%s\x00%s\x00%s\x00%t\x00%t", v.InstanceID, v.Name, v.Hostname, v.Eligible, v.Allowlisted)
		for _, r := range v.Reasons {
			b.WriteString("\x00" + r.Rule)
		}
	}
	return b.String()
}

// queueNotice renders an explanation of a waiting task: a first line with
// the summary, one line per delegate (at most maxNoticeDelegates), and, the
// first time, what happens next.
func queueNotice(task protocol.Task, e protocol.Explanation, first bool) string {
	var b strings.Builder
	head := "is waiting for a delegate"
	if !first {
		head = "is still waiting"
	}
	line := fmt.Sprintf("legate: task %s %s", task.ID, head)
	if s := strings.TrimSpace(e.Summary); s != "" {
		line += ": " + s
	}
	b.WriteString(escape(line) + "\n")
	for i, v := range e.Delegates {
		if i == maxNoticeDelegates {
			fmt.Fprintf(&b, "  … and %d more (legate task explain %s)\n", len(e.Delegates)-i, escape(task.ID))
			break
		}
		why := verdictReasons(v)
		if v.Eligible {
			why = "eligible"
			if v.Allowlisted {
				why += ", allowlisted"
			}
		}
		b.WriteString("  " + escape(v.Name+" ("+v.Hostname+"): "+why) + "\n")
	}
	if len(e.Delegates) == 0 && !waitsForKnown(e) {
		b.WriteString("  no delegate is registered: start one with a token (legate token create NAME, then legate delegate)\n")
	}
	switch {
	case e.Outlook != "":
		// What the manager will do: end it soon, or wait for a known
		// delegate that is not connected. Said again when it changes.
		fmt.Fprintf(&b, "legate: %s; Ctrl-C stops waiting and leaves the task queued (legate task cancel %s)\n",
			escape(e.Outlook), escape(task.ID))
	case first:
		limit := ""
		if task.QueueTimeoutMS > 0 {
			limit = " (at most its queue timeout, " + (time.Duration(task.QueueTimeoutMS) * time.Millisecond).String() + ")"
		}
		fmt.Fprintf(&b, "legate: waiting for a delegate to take it%s; Ctrl-C stops waiting and leaves the task queued (legate task cancel %s)\n",
			limit, escape(task.ID))
	}
	return b.String()
}

// waitsForKnown reports whether the manager keeps a task queued for a
// known delegate that is not connected now (a one-shot or scaled-to-zero
// fleet): then "no delegate is registered" would be wrong advice.
func waitsForKnown(e protocol.Explanation) bool {
	return strings.HasPrefix(e.Outlook, "waiting")
}
