package dispatch

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
)

// heartbeat records a heartbeat and returns the tasks the delegate must
// abort: those it lists that the manager does not consider running on it
// at that epoch, or that are outside the scope of its token. Only the
// first runningLimit entries are looked at (see boundRunning), and those
// this manager does not know cost one store query in all.
func (m *Service) heartbeat(ctx context.Context, d *live, hb protocol.Heartbeat) protocol.HeartbeatResponse {
	now := m.cfg.Now()
	d.touch(now)
	m.metrics.heartbeats.Inc()
	m.cfg.Wedged.Heartbeat(ctx, d.id, hb, now, m.queue.has) // may end the leases of unstarted claims
	d.mu.Lock()
	if hb.Capacity >= 0 && hb.Capacity != d.capacity && hb.Capacity != 0 {
		d.capacity = hb.Capacity
	}
	capacity := d.capacity
	d.mu.Unlock()
	running := m.boundRunning(d, callHeartbeat, capacity, hb.Running)
	d.mu.Lock()
	wasBlocked := d.draining || d.overThreshold != "" || d.configuring != ""
	d.draining = hb.Draining
	d.overThreshold = hb.OverThreshold
	d.configuring = hb.Configuring
	if hb.Perf != nil {
		d.perf = checkPerf(*hb.Perf)
	}
	unblocked := wasBlocked && !d.draining && d.overThreshold == "" && d.configuring == ""
	var unknown []protocol.RunningTask
	listed := make(map[string]bool, len(running))
	var abort []string
	for _, rt := range running {
		if listed[rt.ID] {
			continue // listed twice: answered once
		}
		listed[rt.ID] = true
		if ep, ok := d.running[rt.ID]; ok {
			if ep != rt.Epoch {
				abort = append(abort, rt.ID)
			}
			d.claimed[rt.ID] = now
			continue
		}
		unknown = append(unknown, rt)
	}
	// A lease is extended only by heartbeats that list the task. A task
	// claimed (or last listed) more than two intervals ago that the
	// delegate no longer lists is not running there — for example the
	// answer to its acquire was lost — so its lease is left to expire and
	// the task moves on (requeued, or failed naming the delegate).
	for id := range d.running {
		if !listed[id] && now.Sub(d.claimed[id]) > 2*m.cfg.HeartbeatInterval {
			delete(d.running, id)
			delete(d.claimed, id)
			m.log.Warn("delegate no longer lists a task it held; its lease will expire", "task", id, "instance", d.id)
		}
	}
	d.mu.Unlock()
	d.loadChanged()
	// Tasks this manager did not hand out (restart, another replica): ask
	// the store, once for all of them. When it cannot tell now, they are
	// asked about again at the next heartbeat.
	if len(unknown) > 0 {
		gone, err := m.adoptRunning(ctx, d, callHeartbeat, unknown)
		if err != nil {
			m.log.Debug("look up the tasks a delegate lists", "instance", d.id, "err", err)
		}
		abort = append(abort, gone...)
	}
	if unblocked {
		// Back under its thresholds: offer what waits.
		m.offerQueued(ctx, d)
	}
	if d.awaitingApproval() {
		// The decision may come from another manager whose broadcast was
		// lost: the store is the truth.
		m.refreshApproval(ctx, d)
	}
	return protocol.HeartbeatResponse{Seq: hb.Seq, Abort: abort}
}

// adoptRunning looks up, in one store query, tasks a delegate says it runs
// that this manager did not hand out to it: those that run on its instance
// at the epoch it names, within the scope of its token, are recorded as
// running here; the others are returned, for the delegate to abort. On a
// store error nothing is adopted or returned.
func (m *Service) adoptRunning(ctx context.Context, d *live, call string, running []protocol.RunningTask) (abort []string, err error) {
	if len(running) == 0 {
		return nil, nil
	}
	ids := make([]string, len(running))
	for i, rt := range running {
		ids[i] = rt.ID
	}
	held, err := m.st.TasksHeldBy(ctx, d.id, ids)
	if err != nil {
		return nil, err
	}
	now := m.cfg.Now()
	for _, rt := range running {
		h, ok := held[rt.ID]
		switch {
		case ok && !d.covers(h.Org, h.Project):
			// Held by this instance under a token of wider scope (the
			// identity moved to this token after that one was revoked).
			m.refuseScope(d, call, "task", rt.ID, h.Org, h.Project)
			abort = append(abort, rt.ID)
		case ok && h.Epoch == rt.Epoch:
			d.setRunning(rt.ID, rt.Epoch, now)
		default:
			abort = append(abort, rt.ID)
		}
	}
	return abort, nil
}

func (m *Service) handleHeartbeat(w http.ResponseWriter, r *http.Request, d *live) {
	var hb protocol.Heartbeat
	if !api.DecodeBody(w, r, &hb) {
		return
	}
	if err := checkRunning(hb.Running); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	d.setConnectionIfEmpty(protocol.ConnPolling)
	api.WriteJSON(w, http.StatusOK, m.heartbeat(r.Context(), d, hb))
}

func (l *live) setConnectionIfEmpty(kind string) {
	l.mu.Lock()
	if l.connection == "" {
		l.connection = kind
	}
	l.mu.Unlock()
}

// handleEvents is the long-poll fallback: it answers as soon as an event is
// queued for the delegate, or with an empty list after the wait.
func (m *Service) handleEvents(w http.ResponseWriter, r *http.Request, d *live) {
	wait := m.cfg.LongPollWait
	if v := r.URL.Query().Get("wait_ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "wait_ms must be a non-negative integer")
			return
		}
		if ms < wait.Milliseconds() { // compared in ms: a huge wait_ms must not overflow a Duration
			wait = time.Duration(ms) * time.Millisecond
		}
	}
	// A poll that overlaps an open WebSocket (the delegate is switching
	// back) does not make the delegate a polling one.
	d.mu.Lock()
	first := d.connection != protocol.ConnPolling && d.wsOpen == 0
	if d.wsOpen == 0 {
		d.connection = protocol.ConnPolling
	}
	d.polls++
	d.mu.Unlock()
	// gone: the delegate's connection closed while it waited (failover.go).
	gone := false
	defer func() {
		d.mu.Lock()
		d.polls--
		d.mu.Unlock()
		if gone {
			m.channelClosed(r.Context(), d, protocol.ConnPolling)
		}
	}()
	if first {
		m.offerQueued(r.Context(), d)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if ev := d.take(); len(ev) > 0 {
			api.WriteJSON(w, http.StatusOK, protocol.EventsResponse{Events: ev})
			return
		}
		select {
		case <-d.notify:
		case <-d.kick:
			api.WriteJSON(w, http.StatusOK, protocol.EventsResponse{Events: d.takeOrRevoked()})
			return
		case <-timer.C:
			api.WriteJSON(w, http.StatusOK, protocol.EventsResponse{Events: []protocol.Event{}})
			return
		case <-m.stopping:
			api.WriteJSON(w, http.StatusOK, protocol.EventsResponse{Events: []protocol.Event{{Kind: protocol.EventReconnect, Reason: "manager shutting down"}}})
			return
		case <-r.Context().Done():
			gone = true
			return
		}
		d.touch(m.cfg.Now())
	}
}

func (l *live) connectionKind() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.connection
}

// takeOrRevoked returns pending events, which end with the reason the
// channel was closed when there is one.
func (l *live) takeOrRevoked() []protocol.Event {
	ev := l.take()
	if ev == nil {
		ev = []protocol.Event{}
	}
	return ev
}

// handleWebSocket upgrades to the event channel: manager → delegate events,
// delegate → manager heartbeats (acknowledged as events). It returns once
// the connection is closed and its reader has ended.
func (m *Service) handleWebSocket(w http.ResponseWriter, r *http.Request, d *live) {
	select {
	case <-m.stopping:
		api.WriteError(w, http.StatusServiceUnavailable, protocol.CodeUnavailable, "manager shutting down")
		return
	default:
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		m.log.Debug("websocket accept", "err", err)
		return
	}
	if !m.enter() {
		_ = c.Close(websocket.StatusGoingAway, "manager shutting down")
		return
	}
	defer m.bg.Done()
	c.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	d.mu.Lock()
	d.wsOpen++
	d.connection = protocol.ConnWebSocket
	d.mu.Unlock()
	// closedUnder: the connection closed or failed without this manager
	// ending it (failover.go).
	closedUnder := false
	defer func() {
		d.mu.Lock()
		d.wsOpen--
		d.mu.Unlock()
		if closedUnder {
			m.channelClosed(ctx, d, protocol.ConnWebSocket)
		}
	}()
	m.log.Debug("websocket open", "instance", d.id, "name", d.name)

	reports := newWSReports()
	readErr := make(chan error, 1)
	go func() { readErr <- m.readFrames(ctx, c, d, reports) }()
	readerDone := false
	defer func() {
		// Every path below has closed the connection (or cancelled ctx,
		// which closes it): the reader's read returns.
		cancel()
		if !readerDone {
			<-readErr
		}
		reports.wg.Wait()
	}()
	m.offerQueued(ctx, d)

	closeWith := func(code websocket.StatusCode, reason string) {
		cancel()
		_ = c.Close(code, reason)
	}
	for {
		if ev := d.take(); len(ev) > 0 {
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			for i, e := range ev {
				if err := wsjson.Write(wctx, c, e); err != nil {
					wcancel()
					d.requeue(ev[i:])
					closeWith(websocket.StatusInternalError, "write failed")
					m.lostWebSocket(d)
					closedUnder = true
					return
				}
			}
			wcancel()
			continue
		}
		select {
		case <-d.notify:
		case <-d.kick:
			ev := d.take()
			for _, e := range ev {
				wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
				_ = wsjson.Write(wctx, c, e)
				wcancel()
			}
			closeWith(websocket.StatusPolicyViolation, "session ended")
			return
		case <-m.stopping:
			closeWith(websocket.StatusGoingAway, "manager shutting down")
			return
		case err := <-readErr:
			readerDone = true
			m.log.Debug("websocket closed", "instance", d.id, "err", err)
			closeWith(websocket.StatusNormalClosure, "")
			m.lostWebSocket(d)
			closedUnder = true
			return
		}
	}
}

// readFrames reads a delegate's WebSocket frames until the connection
// fails or closes, or ctx ends: heartbeats are recorded and their acks
// queued for the writer; numbered frames (started, result, acquire) are
// handed to reports, which acknowledges each. The delegate heartbeats
// every interval, so a WebSocket without a frame for the liveness window
// has a silent peer: the read's deadline closes it.
func (m *Service) readFrames(ctx context.Context, c *websocket.Conn, d *live, reports *wsReports) error {
	for {
		var f protocol.Frame
		rctx, rcancel := context.WithTimeout(ctx, m.window())
		err := wsjson.Read(rctx, c, &f)
		silent := err != nil && rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		rcancel()
		if silent {
			m.log.Info("closed a silent WebSocket: no frame for the liveness window", "instance", d.id, "name", d.name, "window", m.window())
		}
		if err != nil {
			return err
		}
		d.touch(m.cfg.Now())
		if f.Kind == protocol.FrameHeartbeat && f.Heartbeat != nil {
			if err := checkRunning(f.Heartbeat.Running); err != nil {
				// Not something a delegate sends: end the channel.
				m.log.Warn("refused a heartbeat; closing the delegate's WebSocket", "instance", d.id, "err", err)
				return err
			}
			resp := m.heartbeat(ctx, d, *f.Heartbeat)
			d.push(protocol.Event{Kind: protocol.EventHeartbeatAck, Seq: resp.Seq, Abort: resp.Abort})
			continue
		}
		if f.Req != 0 {
			m.frame(ctx, d, f, reports)
		}
	}
}

// lostWebSocket records that the event channel dropped; the delegate falls
// back to polling and the next poll marks it as polling.
func (m *Service) lostWebSocket(d *live) {
	d.mu.Lock()
	if d.connection == protocol.ConnWebSocket && d.wsOpen <= 1 {
		d.connection = ""
	}
	d.mu.Unlock()
}
