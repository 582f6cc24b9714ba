package delegate

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// wsAckTimeout bounds the wait for the acknowledgement of a numbered
// frame; then the delegate makes the HTTP call instead (which the manager
// applies idempotently with the frame, had it arrived).
const wsAckTimeout = 5 * time.Second

// errNoWSReport: a report cannot go over the WebSocket (none is open, its
// manager predates protocol.WSReportsVersion, it closed, the ack did not
// come in time, or the manager answered unknown_frame or a recoverable
// error): make the HTTP call.
var errNoWSReport = errors.New("report not made over the WebSocket")

// wsCalls matches the acknowledgements of numbered frames to the calls
// that wait for them. Request numbers are unique for the agent's life, so
// an ack that arrives late (or over the next connection) matches nothing.
type wsCalls struct {
	mu      sync.Mutex
	next    int64
	waiting map[int64]chan protocol.Event
}

func (w *wsCalls) open() (int64, chan protocol.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting == nil {
		w.waiting = map[int64]chan protocol.Event{}
	}
	w.next++
	ch := make(chan protocol.Event, 1)
	w.waiting[w.next] = ch
	return w.next, ch
}

func (w *wsCalls) forget(req int64) {
	w.mu.Lock()
	delete(w.waiting, req)
	w.mu.Unlock()
}

// deliver hands an ack to its waiting call (if it still waits); it never
// blocks the connection's reader.
func (w *wsCalls) deliver(ev protocol.Event) {
	w.mu.Lock()
	ch := w.waiting[ev.Req]
	delete(w.waiting, ev.Req)
	w.mu.Unlock()
	if ch != nil {
		ch <- ev
	}
}

// wsCall sends a numbered frame over the WebSocket and waits for its
// ack. It returns errNoWSReport when the HTTP call must be made instead,
// the manager's refusal as a *protocol.Error, or the ack.
func (a *Agent) wsCall(ctx context.Context, f protocol.Frame) (protocol.Event, error) {
	a.wsMu.Lock()
	ws := a.ws
	a.wsMu.Unlock()
	if ws == nil || !ws.reports() {
		return protocol.Event{}, errNoWSReport
	}
	req, ch := a.calls.open()
	defer a.calls.forget(req)
	f.Req = req
	if err := ws.send(ctx, f); err != nil {
		return protocol.Event{}, errNoWSReport
	}
	t := time.NewTimer(wsAckTimeout)
	defer t.Stop()
	select {
	case ev := <-ch:
		if ev.Error == nil {
			a.metrics.wsReport(f.Kind, true)
			return ev, nil
		}
		if ev.Error.Code == protocol.CodeUnknownFrame || ev.Error.Code.Recoverable() {
			// Not understood, or worth a retry: the HTTP call decides.
			a.log.Debug("report over the WebSocket refused; making the HTTP call", "kind", f.Kind, "err", ev.Error)
			a.metrics.wsReport(f.Kind, false)
			return protocol.Event{}, errNoWSReport
		}
		a.metrics.wsReport(f.Kind, true)
		e := *ev.Error
		return ev, &e
	case <-ws.closed():
	case <-t.C:
		a.log.Debug("no acknowledgement over the WebSocket in time; making the HTTP call", "kind", f.Kind, "timeout", wsAckTimeout)
	case <-ctx.Done():
		return protocol.Event{}, ctx.Err()
	}
	a.metrics.wsReport(f.Kind, false)
	return protocol.Event{}, errNoWSReport
}

// reportStartedOnce reports a task started over the WebSocket, or over
// HTTP when it cannot.
func (a *Agent) reportStartedOnce(ctx context.Context, id string, req protocol.StartedRequest) error {
	_, err := a.wsCall(ctx, protocol.Frame{Kind: protocol.FrameStarted, TaskID: id, Started: &req})
	if !errors.Is(err, errNoWSReport) {
		return err
	}
	return a.client().Started(ctx, id, req)
}

// sendResult reports a result over the WebSocket, or over HTTP when it
// cannot.
func (a *Agent) sendResult(ctx context.Context, id string, res protocol.ResultRequest) error {
	_, err := a.wsCall(ctx, protocol.Frame{Kind: protocol.FrameResult, TaskID: id, Result: &res})
	if !errors.Is(err, errNoWSReport) {
		return err
	}
	_, err = a.client().Result(ctx, id, res)
	return err
}

// acquireBatch gathers the claims of offers that arrive while a claim is
// on its way into one acquire frame: the first claim leads (sends a frame
// of everything waiting, at most protocol.MaxAcquireBatch), and hands the
// lead to the first claim that queued meanwhile. No goroutine of its own.
type acquireBatch struct {
	mu      sync.Mutex
	sending bool
	queue   []*claimWait
}

type claimWait struct {
	id   string
	done chan claimOutcome // cap 1
}

type claimOutcome struct {
	lead bool // send the next frame (the claim is at the queue's head)
	resp protocol.AcquireResponse
	err  error
}

// acquireWS claims a task over the WebSocket, in one frame with the other
// claims waiting; errNoWSReport when the HTTP call must be made.
func (a *Agent) acquireWS(ctx context.Context, id string) (protocol.AcquireResponse, error) {
	a.wsMu.Lock()
	ws := a.ws
	a.wsMu.Unlock()
	if ws == nil || !ws.reports() {
		return protocol.AcquireResponse{}, errNoWSReport
	}
	b := &a.claims
	w := &claimWait{id: id, done: make(chan claimOutcome, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, w)
	lead := !b.sending
	b.sending = true
	b.mu.Unlock()
	if !lead {
		// The leader answers every claim it sends, and hands the lead to
		// the head of the queue when it is done: this wait ends.
		o := <-w.done
		if !o.lead {
			return o.resp, o.err
		}
	}
	b.mu.Lock()
	n := min(len(b.queue), protocol.MaxAcquireBatch)
	batch := append([]*claimWait(nil), b.queue[:n]...)
	b.queue = b.queue[n:]
	b.mu.Unlock()
	ids := make([]string, len(batch))
	for i, c := range batch {
		ids[i] = c.id
	}
	ack, err := a.wsCall(ctx, protocol.Frame{Kind: protocol.FrameAcquire, TaskIDs: ids})
	var mine claimOutcome
	for i, c := range batch {
		o := claimOutcome{err: err}
		if err == nil {
			o = claimOutcomeOf(ack.Acquired, i, c.id)
		}
		if c == w {
			mine = o
			continue
		}
		c.done <- o
	}
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.sending = false
	} else {
		b.queue[0].done <- claimOutcome{lead: true}
	}
	b.mu.Unlock()
	return mine.resp, mine.err
}

// claimOutcomeOf is the answer to the i-th claim of an acquire frame;
// a missing answer, or a recoverable refusal, sends the claim over HTTP.
func claimOutcomeOf(answers []protocol.AcquireAnswer, i int, id string) claimOutcome {
	if i >= len(answers) || answers[i].TaskID != id {
		return claimOutcome{err: errNoWSReport}
	}
	an := answers[i]
	switch {
	case an.Error != nil && an.Error.Code.Recoverable():
		return claimOutcome{err: errNoWSReport}
	case an.Error != nil:
		e := *an.Error
		return claimOutcome{err: &e}
	case an.Acquired == nil:
		return claimOutcome{err: errNoWSReport}
	}
	return claimOutcome{resp: *an.Acquired}
}
