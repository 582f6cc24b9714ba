package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// Modes of a simulated delegate's event channel.
const (
	modeWebSocket = "websocket" // one WebSocket, heartbeats as frames on it
	modePolling   = "polling"   // long polls held open, heartbeats over HTTP
	modePoll3s    = "poll3s"    // polls without waiting every period (the baseline), heartbeats over HTTP
)

// simSpec describes a group of simulated delegates.
type simSpec struct {
	name string // delegate (group) name
	tags []string
	mode string
	// overThreshold, when set, is sent in every heartbeat: the delegate is
	// connected and matches its tags but takes no task (it keeps tasks for
	// its tags queued, instead of having the manager end them as
	// unrunnable).
	overThreshold string
	// period of modePoll3s.
	period time.Duration
}

// sim is one simulated delegate.
type sim struct {
	spec     simSpec
	hostname string
	session  string
	c        *client.Client
	hc       *http.Client
	interval time.Duration

	mu      sync.Mutex
	ws      *websocket.Conn
	nextHB  time.Time
	sessExp time.Time
	seq     int64
	// cancel ends the delegate's event channel (set once, at connect).
	cancel context.CancelFunc
	// busy holds the tasks this delegate is acquiring or reporting: a
	// repeated offer of one of them is ignored, as the real delegate does.
	busy map[string]bool
	// reports: the manager takes acquire, started and result frames on
	// the WebSocket (protocol.WSReportsVersion); the delegate claims its
	// offers in acquire frames, one frame in flight at a time (offerQ
	// gathers the offers that arrive meanwhile), and reports over the
	// WebSocket. Otherwise it makes the HTTP calls.
	reports   bool
	offerQ    []string
	acquiring bool
	nextReq   int64
	calls     map[int64]chan protocol.Event
}

// offer is a task announced to a simulated delegate (with reports, the
// delegate's offerQ holds the tasks and taskID is empty).
type offer struct {
	d      *sim
	taskID string
}

// swarm runs simulated delegates against one manager: one goroutine per
// delegate reads its event channel; a fixed set of heartbeat schedulers
// and task workers do the rest.
type swarm struct {
	url, account, token string
	log                 *slog.Logger
	clients             []*http.Client // one per source address
	offers              chan offer
	// onResult is called with the ID of each task whose result report the
	// manager took.
	onResult func(id string)
	// httpReports: acquire and report over HTTP even when the manager
	// takes them on the WebSocket (the protocol before version 5).
	httpReports bool

	mu     sync.Mutex
	shards [][]*sim // heartbeat scheduling shards
	n      int

	// cancel stops the workers and heartbeat schedulers; each delegate
	// has its own cancel for its event channel.
	cancel context.CancelFunc
	wg     sync.WaitGroup

	hbSent, hbAcked, hbFailed                 atomic.Int64
	offered, repeated, acquired, lost, failed atomic.Int64
	drops                                     atomic.Int64
	// httpCalls counts the delegates' HTTP requests (WebSocket upgrades
	// included).
	httpCalls atomic.Int64
	// onDrop, when set, is called (on the delegate's reader goroutine,
	// counted in wg) when a delegate loses its WebSocket: the storm
	// scenario reconnects it.
	onDrop func(ctx context.Context, d *sim)
}

// countingTransport counts the requests it carries.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(r)
}

const hbShards = 8

// newSwarm starts the swarm's workers and heartbeat schedulers. Stop it
// with close.
func newSwarm(ctx context.Context, log *slog.Logger, m *manager, token string, workers, sourceIPs int, httpReports bool, onResult func(id string)) *swarm {
	s := &swarm{url: m.url, account: m.account, token: token, log: log, onResult: onResult, httpReports: httpReports,
		offers: make(chan offer, 8192), shards: make([][]*sim, hbShards)}
	ctx, s.cancel = context.WithCancel(ctx)
	for i := 0; i < sourceIPs; i++ {
		c := sourceClient(i)
		c.Transport = countingTransport{next: c.Transport, n: &s.httpCalls}
		s.clients = append(s.clients, c)
	}
	for i := 0; i < workers; i++ {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.work(ctx) }()
	}
	for i := 0; i < hbShards; i++ {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.heartbeats(ctx, i) }()
	}
	return s
}

// sourceClient is an HTTP client whose connections leave from 127.0.0.(i+1),
// so a swarm spreads over several source addresses (ephemeral ports are
// per source and destination).
func sourceClient(i int) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if i > 0 {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(i+1))}
	}
	t := &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 100000,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: t}
}

// size is how many delegates are connected.
func (s *swarm) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// close stops every delegate and waits for the swarm's goroutines.
func (s *swarm) close() {
	s.cancel()
	s.mu.Lock()
	for _, sh := range s.shards {
		for _, d := range sh {
			d.cancel()
			d.mu.Lock()
			if d.ws != nil {
				_ = d.ws.CloseNow()
			}
			d.mu.Unlock()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	for _, c := range s.clients {
		c.CloseIdleConnections()
	}
}

// grow connects delegates of spec until the swarm has n of this spec's
// prefix, with at most parallel registrations at once. It returns when
// every new delegate's event channel is open.
func (s *swarm) grow(ctx context.Context, spec simSpec, from, to, parallel int) error {
	if to <= from {
		return nil
	}
	next := atomic.Int64{}
	next.Store(int64(from))
	var firstErr error
	var errMu sync.Mutex
	var wg sync.WaitGroup
	lastLog := time.Now()
	var done atomic.Int64
	for w := 0; w < min(parallel, to-from); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= to || ctx.Err() != nil {
					return
				}
				if err := s.connect(ctx, spec, i); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					return
				}
				if k := done.Add(1); k%1000 == 0 {
					errMu.Lock()
					if time.Since(lastLog) > 2*time.Second {
						s.log.Info("connecting simulated delegates", "connected", from+int(k), "of", to)
						lastLog = time.Now()
					}
					errMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// connect registers delegate i of spec and opens its event channel, which
// lives until ctx ends or the swarm closes.
func (s *swarm) connect(ctx context.Context, spec simSpec, i int) (err error) {
	hc := s.clients[i%len(s.clients)]
	c, err := client.New(s.url, hc)
	if err != nil {
		return err
	}
	d := &sim{spec: spec, hostname: fmt.Sprintf("%s-%05d", spec.name, i), c: c, hc: hc, busy: map[string]bool{},
		calls: map[int64]chan protocol.Event{}}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	reg, err := c.Register(rctx, protocol.RegisterRequest{AccountID: s.account, Token: s.token, Name: spec.name,
		Hostname: d.hostname, IP: "127.0.0.1", Tags: spec.tags, Version: "bench", Type: "SHELL", FreshStart: true})
	cancel()
	if err != nil {
		return fmt.Errorf("register simulated delegate %s: %w", d.hostname, err)
	}
	c.SetSecret(reg.Session)
	d.session = reg.Session
	ctx, d.cancel = context.WithCancel(ctx)
	defer func() {
		if err != nil {
			d.cancel()
		}
	}()
	d.interval = time.Duration(reg.HeartbeatIntervalMS) * time.Millisecond
	d.sessExp = reg.SessionExpiresAt
	switch spec.mode {
	case modeWebSocket:
		if err := s.dial(ctx, d, reg.Session); err != nil {
			return err
		}
	case modePolling:
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.longPoll(ctx, d) }()
		s.sendHeartbeat(ctx, d)
	case modePoll3s:
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.pollEvery(ctx, d) }()
		s.sendHeartbeat(ctx, d)
	default:
		return fmt.Errorf("unknown simulated delegate mode %q", spec.mode)
	}
	// The first scheduled heartbeat comes at a random phase of the
	// interval (after the one sent on connecting), so a swarm that
	// connected in a burst heartbeats evenly, as a fleet started over time
	// does, and any measurement window sees its share.
	d.mu.Lock()
	d.nextHB = time.Now().Add(time.Duration(rand.Int64N(int64(d.interval)) + 1))
	d.mu.Unlock()
	s.mu.Lock()
	s.shards[s.n%hbShards] = append(s.shards[s.n%hbShards], d)
	s.n++
	s.mu.Unlock()
	return nil
}

func wsURL(base string) string {
	if rest, ok := strings.CutPrefix(base, "https://"); ok {
		return "wss://" + rest + protocol.PathWebSocket
	}
	return "ws://" + strings.TrimPrefix(base, "http://") + protocol.PathWebSocket
}

// dial opens d's WebSocket, sends the first heartbeat on it (as the real
// delegate does) and starts its reader.
func (s *swarm) dial(ctx context.Context, d *sim, session string) error {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+session)
	h.Set(protocol.HeaderProtocolVersion, strconv.Itoa(protocol.Version))
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(dctx, wsURL(s.url), &websocket.DialOptions{HTTPClient: d.hc, HTTPHeader: h})
	if err != nil && resp != nil && resp.StatusCode >= 400 {
		// The manager's answer: its code and Retry-After matter.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		pe := protocol.DecodeError(resp.StatusCode, body)
		pe.RetryAfter = protocol.ParseRetryAfter(resp.Header.Get("Retry-After"))
		err = pe
	}
	if err != nil {
		return fmt.Errorf("open WebSocket of simulated delegate %s: %w", d.hostname, err)
	}
	c.SetReadLimit(1 << 20)
	v, _ := strconv.Atoi(resp.Header.Get(protocol.HeaderProtocolVersion))
	d.mu.Lock()
	d.ws = c
	d.reports = !s.httpReports && v >= protocol.WSReportsVersion
	d.mu.Unlock()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.read(ctx, d, c) }()
	s.sendHeartbeat(ctx, d)
	return nil
}

// read handles d's WebSocket events until it closes.
func (s *swarm) read(ctx context.Context, d *sim, c *websocket.Conn) {
	for {
		var ev protocol.Event
		if err := wsjson.Read(ctx, c, &ev); err != nil {
			if ctx.Err() == nil {
				s.drops.Add(1)
				if s.onDrop == nil { // the storm drops them all on purpose
					s.log.Warn("simulated delegate lost its WebSocket", "delegate", d.hostname, "err", err)
				}
			}
			d.mu.Lock()
			d.ws = nil
			for req, ch := range d.calls {
				close(ch) // the call fails
				delete(d.calls, req)
			}
			d.mu.Unlock()
			_ = c.CloseNow()
			if s.onDrop != nil && ctx.Err() == nil {
				s.onDrop(ctx, d)
			}
			return
		}
		s.handle(ctx, d, ev)
	}
}

func (s *swarm) handle(ctx context.Context, d *sim, ev protocol.Event) {
	switch ev.Kind {
	case protocol.EventTaskAvailable:
		if d.spec.overThreshold != "" || ev.TaskID == "" {
			return
		}
		s.offered.Add(1)
		d.mu.Lock()
		dup := d.busy[ev.TaskID]
		d.busy[ev.TaskID] = true
		o := offer{d: d, taskID: ev.TaskID}
		send := !dup
		if !dup && d.reports {
			d.offerQ = append(d.offerQ, ev.TaskID)
			o.taskID = ""
			send = !d.acquiring
			d.acquiring = true
		}
		d.mu.Unlock()
		if dup {
			s.repeated.Add(1)
			return
		}
		if !send {
			return // joins the acquire frame after the one in flight
		}
		select {
		case s.offers <- o:
		case <-ctx.Done():
		}
	case protocol.EventHeartbeatAck:
		s.hbAcked.Add(1)
	case protocol.EventAck:
		d.mu.Lock()
		ch := d.calls[ev.Req]
		delete(d.calls, ev.Req)
		d.mu.Unlock()
		if ch != nil {
			ch <- ev
		}
	}
}

// longPoll holds a poll open at all times, as the real delegate does in
// polling mode.
func (s *swarm) longPoll(ctx context.Context, d *sim) {
	for ctx.Err() == nil {
		evs, err := d.c.Poll(ctx, 25*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.drops.Add(1)
			sleepCtx(ctx, 250*time.Millisecond)
			continue
		}
		for _, ev := range evs.Events {
			s.handle(ctx, d, ev)
		}
	}
}

// pollEvery polls without waiting, then sleeps for the period: the
// original's polling fallback, the baseline.
func (s *swarm) pollEvery(ctx context.Context, d *sim) {
	for ctx.Err() == nil {
		evs, err := d.c.Poll(ctx, 0)
		if err == nil {
			for _, ev := range evs.Events {
				s.handle(ctx, d, ev)
			}
		}
		sleepCtx(ctx, d.spec.period)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// heartbeats sends the heartbeats of one shard when they are due.
func (s *swarm) heartbeats(ctx context.Context, shard int) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		ds := s.shards[shard]
		s.mu.Unlock()
		now := time.Now()
		for _, d := range ds {
			d.mu.Lock()
			due := !d.nextHB.IsZero() && !now.Before(d.nextHB)
			if due {
				d.nextHB = d.nextHB.Add(d.interval)
				if d.nextHB.Before(now) {
					d.nextHB = now.Add(d.interval)
				}
			}
			refresh := time.Until(d.sessExp) < 10*time.Minute
			d.mu.Unlock()
			if due {
				s.sendHeartbeat(ctx, d)
			}
			if refresh {
				s.refresh(ctx, d)
			}
			if ctx.Err() != nil {
				return
			}
		}
	}
}

func (s *swarm) refresh(ctx context.Context, d *sim) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := d.c.RefreshSession(ctx)
	if err != nil {
		s.log.Warn("refresh session of simulated delegate", "delegate", d.hostname, "err", err)
		d.mu.Lock()
		d.sessExp = time.Now().Add(10*time.Minute + 30*time.Second) // try again in 30 s
		d.mu.Unlock()
		return
	}
	d.c.SetSecret(resp.Session)
	d.mu.Lock()
	d.sessExp = resp.SessionExpiresAt
	d.mu.Unlock()
}

// sendHeartbeat sends one heartbeat on d's WebSocket, or over HTTP when
// the delegate polls. Simulated delegates report their results at once, so
// they list no running task.
func (s *swarm) sendHeartbeat(ctx context.Context, d *sim) {
	d.mu.Lock()
	d.seq++
	hb := protocol.Heartbeat{Seq: d.seq, Running: []protocol.RunningTask{}, OverThreshold: d.spec.overThreshold}
	ws := d.ws
	d.mu.Unlock()
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	if d.spec.mode == modeWebSocket {
		if ws == nil {
			return // lost; counted as a drop
		}
		err = wsjson.Write(hctx, ws, protocol.Frame{Kind: protocol.FrameHeartbeat, Heartbeat: &hb})
	} else {
		_, err = d.c.Heartbeat(hctx, hb)
		if err == nil {
			s.hbAcked.Add(1)
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			s.hbFailed.Add(1)
		}
		return
	}
	s.hbSent.Add(1)
}

// work acquires offered tasks, reports them started at once (no process)
// and succeeded.
func (s *swarm) work(ctx context.Context) {
	for {
		var o offer
		select {
		case <-ctx.Done():
			return
		case o = <-s.offers:
		}
		if o.taskID == "" {
			s.claimQueued(ctx, o.d)
			continue
		}
		s.run(ctx, o)
	}
}

// claimQueued claims d's queued offers in acquire frames, one at a time,
// until none is left; each frame's tasks are reported by a goroutine of
// their own (the next frame does not wait for them).
func (s *swarm) claimQueued(ctx context.Context, d *sim) {
	for {
		d.mu.Lock()
		n := min(len(d.offerQ), protocol.MaxAcquireBatch)
		if n == 0 {
			d.acquiring = false
			d.mu.Unlock()
			return
		}
		ids := append([]string(nil), d.offerQ[:n]...)
		d.offerQ = d.offerQ[n:]
		d.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		acks, err := s.call(cctx, d, []protocol.Frame{{Kind: protocol.FrameAcquire, TaskIDs: ids}})
		cancel()
		var got []protocol.AcquireResponse
		for i, id := range ids {
			var an protocol.AcquireAnswer
			if err == nil && i < len(acks[0].Acquired) {
				an = acks[0].Acquired[i]
			}
			switch {
			case err != nil:
				s.fail(ctx, "acquire", offer{d: d, taskID: id}, err)
			case an.Error != nil && (an.Error.Code == protocol.CodeAlreadyClaimed || an.Error.Code == protocol.CodeTaskTerminal):
				s.lost.Add(1)
			case an.Error != nil || an.Acquired == nil:
				s.fail(ctx, "acquire", offer{d: d, taskID: id}, fmt.Errorf("answer %+v", an))
			default:
				s.acquired.Add(1)
				got = append(got, *an.Acquired)
				continue
			}
			s.unbusy(d, id)
		}
		if len(got) > 0 {
			s.wg.Go(func() { s.report(ctx, d, got) })
		}
	}
}

// report reports acquired tasks started, then succeeded, over the
// WebSocket, as the real delegate does: the result frames after the
// started frames were acknowledged. A frame the manager refuses with a
// recoverable error, or leaves unanswered, is made as the HTTP call.
func (s *swarm) report(ctx context.Context, d *sim, got []protocol.AcquireResponse) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	defer func() {
		for _, acq := range got {
			s.unbusy(d, acq.TaskID)
		}
	}()
	frames := make([]protocol.Frame, len(got))
	for i, acq := range got {
		frames[i] = protocol.Frame{Kind: protocol.FrameStarted, TaskID: acq.TaskID, Started: &protocol.StartedRequest{Epoch: acq.Epoch}}
	}
	acks, err := s.call(cctx, d, frames)
	ok := got[:0:0]
	for i, acq := range got {
		if err == nil && acks[i].Error == nil {
			ok = append(ok, acq)
			continue
		}
		if err == nil && !acks[i].Error.Code.Recoverable() {
			s.fail(ctx, "report started", offer{d: d, taskID: acq.TaskID}, acks[i].Error)
			continue
		}
		if err := d.c.Started(cctx, acq.TaskID, protocol.StartedRequest{Epoch: acq.Epoch}); err != nil {
			s.fail(ctx, "report started", offer{d: d, taskID: acq.TaskID}, err)
			continue
		}
		ok = append(ok, acq)
	}
	zero := 0
	frames = frames[:0]
	for _, acq := range ok {
		frames = append(frames, protocol.Frame{Kind: protocol.FrameResult, TaskID: acq.TaskID,
			Result: &protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero}})
	}
	if len(frames) == 0 {
		return
	}
	acks, err = s.call(cctx, d, frames)
	for i, acq := range ok {
		switch {
		case err == nil && acks[i].Error == nil:
		case err == nil && !acks[i].Error.Code.Recoverable():
			s.fail(ctx, "report result", offer{d: d, taskID: acq.TaskID}, acks[i].Error)
			continue
		default:
			if _, err := d.c.Result(cctx, acq.TaskID, *frames[i].Result); err != nil {
				s.fail(ctx, "report result", offer{d: d, taskID: acq.TaskID}, err)
				continue
			}
		}
		if s.onResult != nil {
			s.onResult(acq.TaskID)
		}
	}
}

// call sends numbered frames on d's WebSocket and waits for their acks.
func (s *swarm) call(ctx context.Context, d *sim, frames []protocol.Frame) ([]protocol.Event, error) {
	chans := make([]chan protocol.Event, len(frames))
	d.mu.Lock()
	ws := d.ws
	for i := range frames {
		d.nextReq++
		frames[i].Req = d.nextReq
		chans[i] = make(chan protocol.Event, 1)
		d.calls[d.nextReq] = chans[i]
	}
	d.mu.Unlock()
	forget := func() {
		d.mu.Lock()
		for _, f := range frames {
			delete(d.calls, f.Req)
		}
		d.mu.Unlock()
	}
	if ws == nil {
		forget()
		return nil, errors.New("WebSocket lost")
	}
	for _, f := range frames {
		if err := wsjson.Write(ctx, ws, f); err != nil {
			forget()
			return nil, err
		}
	}
	acks := make([]protocol.Event, len(frames))
	for i, ch := range chans {
		select {
		case ev, ok := <-ch:
			if !ok {
				return nil, errors.New("WebSocket lost")
			}
			acks[i] = ev
		case <-ctx.Done():
			forget()
			return nil, ctx.Err()
		}
	}
	return acks, nil
}

func (s *swarm) unbusy(d *sim, id string) {
	d.mu.Lock()
	delete(d.busy, id)
	d.mu.Unlock()
}

func (s *swarm) run(ctx context.Context, o offer) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	defer func() {
		o.d.mu.Lock()
		delete(o.d.busy, o.taskID)
		o.d.mu.Unlock()
	}()
	acq, err := o.d.c.Acquire(cctx, o.taskID)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && (pe.Code == protocol.CodeAlreadyClaimed || pe.Code == protocol.CodeTaskTerminal) {
			s.lost.Add(1)
			return
		}
		s.fail(ctx, "acquire", o, err)
		return
	}
	s.acquired.Add(1)
	if err := o.d.c.Started(cctx, o.taskID, protocol.StartedRequest{Epoch: acq.Epoch}); err != nil {
		s.fail(ctx, "report started", o, err)
		return
	}
	zero := 0
	if _, err := o.d.c.Result(cctx, o.taskID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero}); err != nil {
		s.fail(ctx, "report result", o, err)
		return
	}
	if s.onResult != nil {
		s.onResult(o.taskID)
	}
}

func (s *swarm) fail(ctx context.Context, what string, o offer, err error) {
	if ctx.Err() != nil {
		return
	}
	if s.failed.Add(1) <= 5 {
		s.log.Warn("simulated delegate: "+what+" failed", "delegate", o.d.hostname, "task", o.taskID, "err", err)
	}
}

// counters is a snapshot of the swarm's counters.
type counters struct {
	hbSent, hbAcked, hbFailed, offered, repeated, acquired, lost, failed, drops, httpCalls int64
}

func (s *swarm) counters() counters {
	return counters{s.hbSent.Load(), s.hbAcked.Load(), s.hbFailed.Load(), s.offered.Load(), s.repeated.Load(),
		s.acquired.Load(), s.lost.Load(), s.failed.Load(), s.drops.Load(), s.httpCalls.Load()}
}
