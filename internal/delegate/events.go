package delegate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/legate-dev/legate/internal/backoff"
	"github.com/legate-dev/legate/internal/protocol"
)

// connState says whether the WebSocket is up, and wakes whoever waits for
// a change (the poller stops polling when the WebSocket comes back).
type connState struct {
	mu      sync.Mutex
	wsUp    bool
	tried   bool // the first WebSocket attempt has finished
	changed chan struct{}
}

func (c *connState) init() { c.changed = make(chan struct{}) }

func (c *connState) get() (up, tried bool, changed <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wsUp, c.tried, c.changed
}

func (c *connState) set(up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wsUp == up && c.tried {
		return
	}
	c.wsUp, c.tried = up, true
	close(c.changed)
	c.changed = make(chan struct{})
}

// wsSender sends frames over an open WebSocket.
type wsSender interface {
	sendHeartbeat(ctx context.Context, hb protocol.Heartbeat) error
	send(ctx context.Context, f protocol.Frame) error
	// reports says whether the manager takes numbered frames (started,
	// result, acquire; protocol.WSReportsVersion).
	reports() bool
	// closed is closed when the connection ends.
	closed() <-chan struct{}
}

type wsConn struct {
	mu         sync.Mutex
	c          *websocket.Conn
	wsReports  bool
	done       chan struct{}
	closedOnce sync.Once
}

func (w *wsConn) sendHeartbeat(ctx context.Context, hb protocol.Heartbeat) error {
	return w.send(ctx, protocol.Frame{Kind: protocol.FrameHeartbeat, Heartbeat: &hb})
}

func (w *wsConn) send(ctx context.Context, f protocol.Frame) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return wsjson.Write(wctx, w.c, f)
}

func (w *wsConn) reports() bool { return w.wsReports }

func (w *wsConn) closed() <-chan struct{} { return w.done }

func (w *wsConn) markClosed() { w.closedOnce.Do(func() { close(w.done) }) }

// managerVersion is the protocol version a manager's answer names (0 when
// it names none).
func managerVersion(h http.Header) int {
	v, err := strconv.Atoi(h.Get(protocol.HeaderProtocolVersion))
	if err != nil {
		return 0
	}
	return v
}

// eventLoop keeps an event channel open: the WebSocket when it can, with
// long polling whenever it cannot (or always, with POLL_FOR_TASKS=true).
func (a *Agent) eventLoop(ctx context.Context) {
	if a.cfg.PollForTasks {
		a.conn.set(false)
		a.log.Info("polling for tasks (POLL_FOR_TASKS=true)")
		a.pollLoop(ctx)
		return
	}
	var poller sync.WaitGroup
	poller.Go(func() { a.pollLoop(ctx) })
	defer poller.Wait()
	b := backoff.Backoff{Min: 500 * time.Millisecond, Max: 30 * time.Second, Full: true}
	for {
		connected, err := a.runWebSocket(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			b.Reset()
		}
		d := b.After(retryAfter(err))
		a.log.Warn("websocket unavailable; polling meanwhile", "err", err, "retry_in", d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

func wsURL(base string) string {
	switch {
	case strings.HasPrefix(base, "https://"):
		return "wss://" + strings.TrimPrefix(base, "https://") + protocol.PathWebSocket
	case strings.HasPrefix(base, "http://"):
		return "ws://" + strings.TrimPrefix(base, "http://") + protocol.PathWebSocket
	}
	return base + protocol.PathWebSocket
}

// runWebSocket dials and serves one WebSocket until it fails. It reports
// whether the connection was established.
func (a *Agent) runWebSocket(ctx context.Context) (bool, error) {
	gen := a.regGen.Load()
	cl := a.client()
	h := http.Header{}
	sess, _ := a.session.Load().(string)
	h.Set("Authorization", "Bearer "+sess)
	h.Set(protocol.HeaderProtocolVersion, fmt.Sprint(protocol.Version))
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, resp, err := websocket.Dial(dctx, wsURL(cl.BaseURL()), &websocket.DialOptions{HTTPClient: a.opts.HTTPClient, HTTPHeader: h})
	cancel()
	if err != nil {
		if resp != nil {
			if after := protocol.ParseRetryAfter(resp.Header.Get("Retry-After")); after > 0 {
				a.notBefore.Store(time.Now().Add(after).UnixNano()) // before the poller wakes
			}
		}
		a.conn.set(false)
		if resp != nil && resp.StatusCode >= 400 {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			pe := protocol.DecodeError(resp.StatusCode, body)
			pe.RetryAfter = protocol.ParseRetryAfter(resp.Header.Get("Retry-After"))
			a.handleCallError(ctx, pe, gen)
			return false, pe
		}
		a.rotateManager()
		return false, err
	}
	c.SetReadLimit(1 << 20)
	// The manager at the other end of this connection (behind a load
	// balancer, not always the one that registered the delegate) says its
	// version in the upgrade's answer.
	conn := &wsConn{c: c, done: make(chan struct{}),
		wsReports: !a.cfg.HTTPReports && managerVersion(resp.Header) >= protocol.WSReportsVersion}
	a.wsMu.Lock()
	a.ws = conn
	a.wsMu.Unlock()
	a.conn.set(true)
	a.metrics.webSocket(true)
	a.log.Info("connected to the manager", "connection", protocol.ConnWebSocket, "manager", cl.BaseURL())
	defer func() {
		a.metrics.webSocket(false)
		a.wsMu.Lock()
		a.ws = nil
		a.wsMu.Unlock()
		conn.markClosed()
		a.conn.set(false)
		_ = c.CloseNow()
	}()
	// Heartbeat at once so the manager sees current state on this channel.
	_ = conn.sendHeartbeat(ctx, a.heartbeat())
	// A missing ack for three intervals means a half-open connection.
	for {
		rctx, rcancel := context.WithTimeout(ctx, 3*a.heartbeatInterval()+5*time.Second)
		var ev protocol.Event
		err := wsjson.Read(rctx, c, &ev)
		rcancel()
		if err != nil {
			if ctx.Err() != nil {
				_ = c.Close(websocket.StatusGoingAway, "delegate stopping")
				return true, ctx.Err()
			}
			var ce websocket.CloseError
			if errors.As(err, &ce) && ce.Code == websocket.StatusPolicyViolation {
				// The manager ended this session (superseded or revoked).
				a.handleCallError(ctx, &protocol.Error{Code: protocol.CodeSessionExpired, Message: ce.Reason}, gen)
			}
			return true, err
		}
		a.handleEvent(ctx, ev)
	}
}

// pollLoop long-polls for events whenever the WebSocket is down. It never
// sleeps after an empty poll; it only backs off after errors. It logs that
// the delegate is connected (over polling) once a poll was answered, not
// when it starts polling: a delegate that lost its manager polls in vain.
func (a *Agent) pollLoop(ctx context.Context) {
	b := backoff.Backoff{Min: 250 * time.Millisecond, Max: 15 * time.Second}
	polling := false   // polling since the WebSocket went down (or always)
	announced := false // "connected" logged since polling began or last failed
	for {
		up, tried, changed := a.conn.get()
		if !a.cfg.PollForTasks && (up || !tried) {
			polling, announced = false, false
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		if !polling && !a.cfg.PollForTasks {
			a.metrics.fellBackToPolling()
		}
		polling = true
		if wait := time.Until(time.Unix(0, a.notBefore.Load())); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-time.After(wait):
			}
			continue
		}
		gen := a.regGen.Load()
		evs, err := a.poll(ctx, changed)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errWebSocketBack) {
				continue
			}
			announced = false
			a.metrics.polled(false)
			if !a.handleCallError(ctx, err, gen) {
				var pe *protocol.Error
				if errors.As(err, &pe) && (pe.Code == protocol.CodeTokenRevoked || pe.Code == protocol.CodeDelegateRejected) {
					return
				}
			}
			d := b.After(retryAfter(err))
			a.log.Warn("poll failed", "err", err, "retry_in", d.Round(time.Millisecond))
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				a.rotateManager()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
			continue
		}
		b.Reset()
		a.metrics.polled(true)
		// An answer that only asks the delegate to reconnect comes from a
		// manager that is shutting down: not a connection to announce.
		if !announced && !onlyReconnect(evs.Events) {
			a.log.Info("connected to the manager", "connection", protocol.ConnPolling, "manager", a.client().BaseURL())
			announced = true
		}
		for _, ev := range evs.Events {
			a.handleEvent(ctx, ev)
		}
	}
}

// errWebSocketBack ends a poll when the WebSocket comes back.
var errWebSocketBack = errors.New("the WebSocket is back")

// poll makes one long poll. Unless the delegate always polls, the poll
// ends with errWebSocketBack when the connection state changes (changed
// is closed).
func (a *Agent) poll(ctx context.Context, changed <-chan struct{}) (protocol.EventsResponse, error) {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var watcher sync.WaitGroup
	defer watcher.Wait()
	defer close(stop)
	if !a.cfg.PollForTasks {
		watcher.Go(func() {
			select {
			case <-changed:
				cancel(errWebSocketBack)
			case <-stop:
			}
		})
	}
	// Until a poll succeeds, poll without waiting: the answer confirms at
	// once that polling works (the delegate is connected).
	wait := 25 * time.Second
	if !a.metrics.pollConfirmed() {
		wait = 0
	}
	evs, err := a.client().Poll(pctx, wait)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(pctx), errWebSocketBack) {
		return evs, errWebSocketBack
	}
	return evs, err
}

// onlyReconnect reports whether evs holds reconnect requests and nothing
// else.
func onlyReconnect(evs []protocol.Event) bool {
	for _, ev := range evs {
		if ev.Kind != protocol.EventReconnect {
			return false
		}
	}
	return len(evs) > 0
}
