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
