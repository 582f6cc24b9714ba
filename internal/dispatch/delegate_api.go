package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/store"
)

type delegateHandler func(w http.ResponseWriter, r *http.Request, d *live)

// delegateAuth checks the session credential and finds (or, after a
// manager restart, revives) the live state of the calling instance.
func (m *Service) delegateAuth(next delegateHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		c, err := verifySession(m.sessionKey, api.Bearer(r), m.cfg.Now())
		if errors.Is(err, errSessionExpired) {
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeSessionExpired, "session expired; register again")
			return
		}
		if err != nil {
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "invalid delegate session")
			return
		}
		revoked, err := m.tokenRevoked(ctx, c.TokenID)
		if err != nil {
			m.log.Error("check token", "err", err)
			api.WriteError(w, http.StatusServiceUnavailable, protocol.CodeUnavailable, "cannot check the delegate token now")
			return
		}
		if revoked {
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeTokenRevoked, "the delegate token was revoked; create a new token and restart the delegate with it")
			return
		}
		d := m.hub.get(c.InstanceID)
		if d == nil || d.isGone() {
			in, err := m.st.GetInstance(ctx, c.InstanceID)
			if err != nil {
				if errors.Is(err, store.ErrNotFound) {
					api.WriteError(w, http.StatusUnauthorized, protocol.CodeSessionExpired, "unknown delegate instance; register again")
					return
				}
				api.StoreError(w, err, "delegate instance")
				return
			}
			if in.DeregisteredAt != nil || in.Generation != c.Generation {
				api.WriteError(w, http.StatusUnauthorized, protocol.CodeSessionExpired, "this delegate session was superseded or deregistered; register again")
				return
			}
			d = newLive(in)
			d.touch(m.cfg.Now())
			m.hub.put(d)
		}
		if d.generation != c.Generation || d.accountID != c.AccountID {
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeSessionExpired, "this delegate session was superseded by a newer registration with the same identity; register again")
			return
		}
		if d.rejected() {
			m.hub.remove(d.id)
			refuseRejected(w, d.name)
			return
		}
		d.touch(m.cfg.Now())
		next(w, r, d)
	}
}

func (m *Service) issueSession(d *live) (string, time.Time) {
	// Whole seconds: the credential carries Unix seconds, and the announced
	// expiry must not be later than the one enforced.
	exp := m.cfg.Now().Add(m.cfg.SessionTTL).Truncate(time.Second)
	return signSession(m.sessionKey, sessionClaims{
		InstanceID: d.id, AccountID: d.accountID, TokenID: d.tokenID,
		Generation: d.generation, Expires: exp.Unix(),
	}), exp.UTC()
}

// identityKey is how the manager recognises the same instance across
// restarts: name + hostname (+ IP for VM-style delegates; Kubernetes-style
// delegates are identified by hostname alone so a rescheduled pod with a
// new IP stays the same instance). The name is part of the key so that two
// differently named delegates on one host stay distinct groups.
func identityKey(req protocol.RegisterRequest) string {
	name := protocol.NormalizeSelector(req.Name)
	host := protocol.NormalizeSelector(req.Hostname)
	key := name + "|" + host + "|" + strings.TrimSpace(req.IP)
	if req.IdentityByHostname {
		key = name + "|" + host
	}
	if req.Slot != "" {
		// A watcher's delegate: its old and new versions run side by
		// side during a switch, as two instances.
		key += "|slot=" + req.Slot
	}
	return key
}

// approvalRequest is what a registration with tok asks of the store's
// approval: pending when the token requires approval ("" otherwise).
func approvalRequest(tok store.Token) string {
	if tok.RequireApproval {
		return protocol.ApprovalPending
	}
	return ""
}

// delegateToken finds the valid (not revoked) delegate token of an
// account; when there is none it answers 401 and returns false.
func (m *Service) delegateToken(w http.ResponseWriter, r *http.Request, accountID, token string) (store.Token, bool) {
	ctx := r.Context()
	const refused = "the delegate token is not valid for account %q: check ACCOUNT_ID and DELEGATE_TOKEN (legate token list shows the account's tokens)"
	if _, err := m.st.GetAccount(ctx, accountID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, refused, accountID)
			return store.Token{}, false
		}
		api.StoreError(w, err, "account")
		return store.Token{}, false
	}
	tok, err := m.st.TokenByHash(ctx, accountID, api.HashSecret(token))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, refused, accountID)
			return store.Token{}, false
		}
		api.StoreError(w, err, "token")
		return store.Token{}, false
	}
	if tok.RevokedAt != nil {
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeTokenRevoked, "the delegate token %q was revoked; create a new token and restart the delegate with it", tok.Name)
		return store.Token{}, false
	}
	return tok, true
}

// registrationHeaders checks the credentials a registration carries in
// its headers (protocol.HeaderAccountID and the token as a bearer), before
// its body is read; it answers and returns false when they are not valid.
// The body's own credentials are checked again by handleRegister: these
// only earn the larger body limit.
func (m *Service) registrationHeaders(w http.ResponseWriter, r *http.Request) bool {
	account := strings.TrimSpace(r.Header.Get(protocol.HeaderAccountID))
	if account == "" {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "a registration with an Authorization header needs the %s header too", protocol.HeaderAccountID)
		return false
	}
	_, ok := m.delegateToken(w, r, account, api.Bearer(r))
	return ok
}

// handleRegister registers a delegate instance: the request is checked,
// then its token, the instance is recorded (or found again by its
// identity), and its live state is set up here; the answer carries a
// session credential and the configuration that applies to it.
func (m *Service) handleRegister(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var req protocol.RegisterRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	// A delegate newer than this manager is served: the answer carries
	// this manager's version, and the delegate uses only what it has.
	if req.ProtocolVersion != 0 && !protocol.Supported(req.ProtocolVersion) {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeVersion,
			"delegate protocol version %d is older than this manager serves (%d or later; it speaks %d); upgrade the delegate",
			req.ProtocolVersion, protocol.MinVersion, protocol.Version)
		return
	}
	cut, err := checkRegisterRequest(&req)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	tok, ok := m.delegateToken(w, r, req.AccountID, req.Token)
	if !ok {
		return
	}
	if m.upgrades.RefuseExpired(w, r, req) {
		return
	}
	if cut > 0 {
		m.log.Warn("a registering delegate listed more running tasks than it may run; only the first ones are looked at",
			"listed", cut, "looked_at", len(req.Running), "capacity", req.Capacity,
			"account", req.AccountID, "token", tok.Name, "name", req.Name, "hostname", req.Hostname)
	}
	in, ok := m.recordInstance(w, r, req, tok)
	if !ok {
		return
	}
	if in.Approval == protocol.ApprovalRejected {
		m.log.Info("registration refused: the delegate was rejected", "account", in.AccountID, "instance", in.ID,
			"name", in.Name, "hostname", in.Hostname, "token", tok.Name)
		refuseRejected(w, in.Name)
		return
	}
	d, applied, err := m.connectInstance(ctx, in, req)
	if err != nil {
		m.log.Error("find the delegate's configuration", "err", err)
		api.StoreError(w, err, "delegate configurations")
		return
	}
	sess, exp := m.issueSession(d)
	if in.Approval == protocol.ApprovalPending {
		m.log.Info("delegate registered, pending approval (legate delegates approve NAME)", "account", in.AccountID, "instance", in.ID,
			"name", in.Name, "hostname", in.Hostname, "token", tok.Name)
	} else {
		m.log.Info("delegate registered", "account", in.AccountID, "instance", in.ID, "name", in.Name, "hostname", in.Hostname, "generation", in.Generation)
	}
	api.WriteJSON(w, http.StatusOK, protocol.RegisterResponse{
		ProtocolVersion:     protocol.Version,
		InstanceID:          in.ID,
		Session:             sess,
		SessionExpiresAt:    exp,
		HeartbeatIntervalMS: m.cfg.HeartbeatInterval.Milliseconds(),
		MissedHeartbeats:    m.cfg.MissedHeartbeats,
		Configuration:       applied,
		Logs: &protocol.LogLimits{HeadBytes: m.cfg.LogCap.Head, TailBytes: m.cfg.LogCap.Tail,
			MaxUploadBytes: protocol.MaxLogUpload},
	})
}

// checkRegisterRequest trims and checks a registration's fields. A list
// of running tasks longer than the delegate may run is not refused (an
// honest delegate never sends one, and must always be able to register):
// it is cut, like a heartbeat's, and cut says how long it was (0: not cut).
func checkRegisterRequest(req *protocol.RegisterRequest) (cut int, err error) {
	req.AccountID = strings.TrimSpace(req.AccountID)
	req.Name = strings.TrimSpace(req.Name)
	req.Hostname = strings.TrimSpace(req.Hostname)
	switch {
	case req.AccountID == "":
		return 0, errors.New("account_id is required")
	case req.Token == "":
		return 0, errors.New("token is required")
	case req.Name == "" || len(req.Name) > 63:
		return 0, errors.New("name is required (1-63 characters)")
	case req.Hostname == "" || len(req.Hostname) > 253:
		return 0, errors.New("hostname is required (1-253 characters)")
	case req.Capacity < 0:
		return 0, errors.New("capacity must not be negative")
	case len(req.Tags) > 100:
		return 0, errors.New("too many tags (at most 100)")
	case len(req.Description) > 1024:
		return 0, errors.New("description too long (at most 1024 bytes)")
	case len(req.Slot) > 64:
		return 0, errors.New("slot too long (at most 64 bytes)")
	case req.Upgrade != protocol.UpgradeManual && req.Upgrade != protocol.UpgradeAuto && req.Upgrade != protocol.UpgradeOff:
		return 0, fmt.Errorf("upgrade %q: want %q, %q or empty", req.Upgrade, protocol.UpgradeAuto, protocol.UpgradeOff)
	}
	if err := checkRegistration(req); err != nil {
		return 0, err
	}
	if limit := runningLimit(req.Capacity); len(req.Running) > limit {
		cut = len(req.Running)
		req.Running = req.Running[:limit]
	}
	return cut, checkRunning(req.Running)
}

// recordInstance records the registering instance in the store, a new
// generation of the instance with the same identity if there is one; when
// it cannot (the identity is bound to another token, or the store fails)
// it answers and returns false.
func (m *Service) recordInstance(w http.ResponseWriter, r *http.Request, req protocol.RegisterRequest, tok store.Token) (store.Instance, bool) {
	now := m.cfg.Now()
	in, err := m.st.UpsertInstance(r.Context(), store.Instance{
		ID:           api.NewID("d_"),
		AccountID:    req.AccountID,
		IdentityKey:  identityKey(req),
		Name:         req.Name,
		Hostname:     req.Hostname,
		IP:           strings.TrimSpace(req.IP),
		Tags:         protocol.NormalizeSelectors(req.Tags),
		Version:      req.Version,
		Type:         req.Type,
		TokenID:      tok.ID,
		Capacity:     req.Capacity,
		RegisteredAt: now,
		// A registration is contact: the other managers of the
		// database count the instance connected from now on, and a
		// deletion is refused, before its first heartbeat is recorded.
		LastHeartbeat:    &now,
		Org:              tok.Org,
		Project:          tok.Project,
		Description:      strings.TrimSpace(req.Description),
		ContainerRuntime: containerRuntimeName(req.ContainerRuntime),
		Approval:         approvalRequest(tok),
		UpgradeMode:      req.Upgrade,
	})
	var conflict *store.IdentityConflictError
	if errors.As(err, &conflict) {
		m.log.Warn("registration refused: the identity is bound to another delegate token", "account", req.AccountID,
			"instance", conflict.InstanceID, "bound_token", conflict.TokenName, "token", tok.Name,
			"name", req.Name, "hostname", req.Hostname, "ip", req.IP)
		identityConflict(w, req, conflict)
		return store.Instance{}, false
	}
	if err != nil {
		m.log.Error("register delegate", "err", err)
		api.StoreError(w, err, "delegate instance")
		return store.Instance{}, false
	}
	return in, true
}

// connectInstance sets up the live state of a registered instance: the
// configuration that applies to it, the tasks it still runs that the
// store agrees on, and (on a fresh start) the end of those it no longer
// runs. It fails only when the configuration cannot be read; the instance
// is not live here then.
func (m *Service) connectInstance(ctx context.Context, in store.Instance, req protocol.RegisterRequest) (*live, *protocol.AppliedConfiguration, error) {
	d := newLive(in)
	d.touch(m.cfg.Now())
	d.protocolVersion = req.ProtocolVersion
	var applied *protocol.AppliedConfiguration
	if !d.awaitingApproval() { // a pending delegate receives its configuration once approved
		var err error
		if applied, err = m.configurationFor(ctx, in.AccountID, targetOf(d)); err != nil {
			return nil, nil, err
		}
	}
	d.cfgKey, d.cfgKnown = configurationKey(applied), true
	if applied != nil && req.FreshStart && req.ProtocolVersion >= 3 {
		// The delegate runs it before it takes tasks; its heartbeat says
		// when it is done.
		d.configuring = configuringLabel(applied.Name, applied.Version)
	}
	// Tasks the delegate says it still runs: adopt those the store agrees
	// on (running on this instance at that epoch) and that are within
	// the scope of its token, in one query.
	if _, err := m.adoptRunning(ctx, d, callRegister, req.Running); err != nil {
		m.log.Warn("look up the tasks a registering delegate runs", "instance", d.id, "err", err)
	}
	m.hub.put(d)
	if req.FreshStart {
		m.reconcileRestart(ctx, d, req.Running)
	}
	return d, applied, nil
}

func (m *Service) handleSession(w http.ResponseWriter, r *http.Request, d *live) {
	sess, exp := m.issueSession(d)
	api.WriteJSON(w, http.StatusOK, protocol.SessionResponse{Session: sess, SessionExpiresAt: exp})
}

func (m *Service) handleDeregister(w http.ResponseWriter, r *http.Request, d *live) {
	if err := m.st.DeregisterInstance(r.Context(), d.id, m.cfg.Now()); err != nil {
		api.StoreError(w, err, "delegate instance")
		return
	}
	m.hub.remove(d.id)
	m.log.Info("delegate deregistered", "instance", d.id, "name", d.name, "hostname", d.hostname)
	w.WriteHeader(http.StatusNoContent)
}

// heartbeat records a heartbeat and returns the tasks the delegate must
// abort: those it lists that the manager does not consider running on it
// at that epoch, or that are outside the scope of its token. Only the
// first runningLimit entries are looked at (see boundRunning), and those
// this manager does not know cost one store query in all.
func (m *Service) heartbeat(ctx context.Context, d *live, hb protocol.Heartbeat) protocol.HeartbeatResponse {
	now := m.cfg.Now()
	d.touch(now)
	m.metrics.heartbeats.Inc()
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

func (m *Service) handleAcquire(w http.ResponseWriter, r *http.Request, d *live) {
	resp, aerr := m.acquire(r.Context(), d, r.PathValue("id"))
	if aerr != nil {
		api.WriteAPIError(w, aerr)
		return
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

// acquire claims task id for d: the work of POST .../acquire, also done
// for each task of a WebSocket FrameAcquire.
func (m *Service) acquire(ctx context.Context, d *live, id string) (protocol.AcquireResponse, *api.Error) {
	if !validTaskID(id) {
		return protocol.AcquireResponse{}, api.NewError(http.StatusNotFound, protocol.CodeNotFound, "task not found")
	}
	_, _, draining := d.load()
	if draining {
		return protocol.AcquireResponse{}, api.NewError(http.StatusConflict, protocol.CodeNotEligible, "delegate is draining")
	}
	defer d.unpend(id)
	_, capacity, _ := d.load()
	// The rules that depend on the task are checked on the row the claim
	// reads, inside its transaction: one read per acquire.
	t, err := m.st.ClaimTask(ctx, store.Claim{
		TaskID: id, InstanceID: d.id, DelegateName: d.name, DelegateHostname: d.hostname,
		Capacity: capacity, LeaseDuration: m.leaseDuration(),
		Check: func(t store.Task) error { return acquireCheck(t, d) },
	}, m.cfg.Now())
	var refused *acquireRefusal
	var missing *store.MissingSecretsError
	switch {
	case errors.As(err, &missing) && t.AccountID == d.accountID:
		return protocol.AcquireResponse{}, m.failMissingSecrets(ctx, t, missing)
	case errors.As(err, &refused) && refused.held:
		// The same delegate asks again: the answer to its claim was lost.
		// Acquire is idempotent for the holder until the task starts.
		resp, err := acquireAnswer(t)
		if err != nil {
			m.log.Error("cannot hand a task to a delegate: its secret references do not resolve", "task", id, "err", err)
			return protocol.AcquireResponse{}, api.NewError(http.StatusInternalServerError, protocol.CodeInternal, "task %s: internal error", id)
		}
		d.setRunning(t.ID, t.Epoch, m.cfg.Now())
		return resp, nil
	case errors.As(err, &refused) && t.AccountID != d.accountID:
		return protocol.AcquireResponse{}, api.StoreAPIError(store.ErrNotFound, "task "+id)
	case errors.As(err, &refused) && refused.outOfScope:
		// Answered exactly as a task of another account: nothing leaks.
		m.refuseScope(d, callAcquire, "task", id, t.Spec.Org, t.Spec.Project)
		return protocol.AcquireResponse{}, api.StoreAPIError(store.ErrNotFound, "task "+id)
	case errors.As(err, &refused):
		return protocol.AcquireResponse{}, api.NewError(http.StatusForbidden, protocol.CodeNotEligible, "%s", refused.msg)
	case err != nil:
		if errors.Is(err, store.ErrAlreadyClaimed) || errors.Is(err, store.ErrTaskTerminal) || errors.Is(err, store.ErrNotFound) {
			m.queue.drop(id)
		}
		if kerr := m.secrets.SealError(err); kerr != nil {
			m.log.Error("cannot hand a task to a delegate: its secret values do not open", "task", id, "err", kerr)
		}
		return protocol.AcquireResponse{}, api.StoreAPIError(err, "task "+id)
	}
	m.queue.drop(id)
	resp, err := acquireAnswer(t)
	if err != nil {
		// Cannot happen: the store read every value the spec references.
		m.log.Error("cannot hand a task to a delegate: its secret references do not resolve", "task", id, "err", err)
		return protocol.AcquireResponse{}, api.NewError(http.StatusInternalServerError, protocol.CodeInternal, "task %s: internal error", id)
	}
	d.setRunning(t.ID, t.Epoch, m.cfg.Now())
	m.log.Debug("task acquired", "task", t.ID, "instance", d.id, "epoch", t.Epoch)
	m.events.Publish(ctx, events.Event{Kind: events.TaskAcquired, Account: d.accountID, TaskID: t.ID})
	return resp, nil
}

// acquireAnswer is the answer to the delegate that holds t: its spec with
// the stored secrets resolved, and their values to mask.
func acquireAnswer(t store.Task) (protocol.AcquireResponse, error) {
	resp := protocol.AcquireResponse{TaskID: t.ID, Epoch: t.Epoch, Spec: t.Spec, TimeoutMS: t.TimeoutMS}
	if !secretref.Uses(t.Spec) {
		return resp, nil
	}
	spec, mask, err := secretref.ResolveSpec(t.Spec, t.StoredSecrets)
	if err != nil {
		return protocol.AcquireResponse{}, err
	}
	resp.Spec, resp.Mask = spec, mask
	return resp, nil
}

// failMissingSecrets ends a task whose secrets were deleted after it was
// submitted, and answers the delegate that tried to acquire it.
func (m *Service) failMissingSecrets(ctx context.Context, t store.Task, missing *store.MissingSecretsError) *api.Error {
	msg := missing.Error()
	ft, err := m.st.FinishTask(ctx, t.AccountID, t.ID, store.Result{Status: protocol.StatusFailed, Error: msg}, m.cfg.Now())
	switch {
	case err == nil:
		m.log.Warn("task failed: a secret it references was deleted", "account", t.AccountID, "task", t.ID,
			"secrets", strings.Join(missing.Names, ","), "scope", protocol.ScopeLabel(t.Spec.Org, t.Spec.Project))
		m.afterManagerFinish(ctx, ft)
	case !errors.Is(err, store.ErrTaskTerminal):
		return api.StoreAPIError(err, "task "+t.ID)
	}
	m.queue.drop(t.ID)
	return api.NewError(http.StatusConflict, protocol.CodeTaskTerminal, "task %s failed: %s", t.ID, msg)
}

// acquireRefusal ends a claim before the store decides: the delegate
// already holds the task (held), the task is outside the scope of its
// token (outOfScope), or the task is not for it.
type acquireRefusal struct {
	held       bool
	outOfScope bool
	msg        string
}

func (e *acquireRefusal) Error() string {
	if e.held {
		return "already held by this delegate"
	}
	return e.msg
}

// acquireCheck applies the acquire rules that depend on the stored task:
// its account, the scope of the delegate's token, a repeated acquire by
// its holder, selectors and the deny list. Status and capacity are the
// store's to decide.
func acquireCheck(t store.Task, d *live) error {
	if t.AccountID != d.accountID {
		return &acquireRefusal{msg: "task of another account"}
	}
	if !d.covers(t.Spec.Org, t.Spec.Project) {
		return &acquireRefusal{outOfScope: true, msg: "task outside the scope of the delegate's token"}
	}
	if t.Status == protocol.StatusQueued && d.approvalState() != "" && d.approvalState() != protocol.ApprovalApproved {
		return &acquireRefusal{msg: "delegate is pending approval (legate delegates approve " + d.name + ")"}
	}
	if t.Status == protocol.StatusRunning && t.InstanceID == d.id && t.StartedAt == nil {
		return &acquireRefusal{held: true}
	}
	if t.Status != protocol.StatusQueued {
		return nil
	}
	if v := d.protocolVersion; v > 0 && v < protocol.MaskVersion && secretref.Uses(t.Spec) {
		return &acquireRefusal{msg: fmt.Sprintf("the task uses stored secrets (${secrets.NAME}), which a delegate of protocol %d cannot mask in its output: upgrade the delegate (protocol %d or later)", v, protocol.MaskVersion)}
	}
	if missing := protocol.MissingSelectors(t.Spec.Selectors, d.tags, d.name, d.hostname); len(missing) > 0 {
		return &acquireRefusal{msg: "delegate lacks selectors " + strings.Join(missing, ", ")}
	}
	for _, den := range t.DeniedInstances {
		if den == d.id {
			return &acquireRefusal{msg: "delegate is denied this task (it was lost while running it before)"}
		}
	}
	return nil
}

func (m *Service) handleStarted(w http.ResponseWriter, r *http.Request, d *live) {
	var req protocol.StartedRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	if aerr := m.startTask(r.Context(), d, r.PathValue("id"), req); aerr != nil {
		api.WriteAPIError(w, aerr)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// startTask records that task id's process started: the work of POST
// .../started, also done for a WebSocket FrameStarted. The store records
// it only if this delegate holds the task; only a refusal reads who does
// (holds), to say why.
func (m *Service) startTask(ctx context.Context, d *live, id string, req protocol.StartedRequest) *api.Error {
	if !validTaskID(id) {
		return api.NewError(http.StatusNotFound, protocol.CodeNotFound, "task not found")
	}
	now := m.cfg.Now()
	queued, err := m.st.StartTask(ctx, id, req.Epoch, d.holder(), now)
	if err != nil {
		if aerr := m.holds(ctx, d, id, callStarted, staleStarted); aerr != nil {
			return aerr
		}
		if errors.Is(err, store.ErrStaleLease) {
			m.metrics.staleReport(staleStarted)
		}
		return api.StoreAPIError(err, "task "+id)
	}
	m.metrics.taskStarted(queued, now)
	m.events.Publish(ctx, events.Event{Kind: events.TaskStarted, Account: d.accountID, TaskID: id})
	return nil
}

// ownsTask is holds for an HTTP handler: it writes the refusal.
func (m *Service) ownsTask(w http.ResponseWriter, r *http.Request, d *live, id, call, kind string) bool {
	if aerr := m.holds(r.Context(), d, id, call, kind); aerr != nil {
		api.WriteAPIError(w, aerr)
		return false
	}
	return true
}

// holds checks that the task belongs to the delegate's account and is
// within the scope of its token (and refuses with 404 otherwise, so task
// IDs of other accounts and scopes leak nothing; an out-of-scope one is
// counted as a scope refusal of call), and that the delegate holds it (a
// refusal counts as a stale report of kind). It reads four columns, not
// the task.
func (m *Service) holds(ctx context.Context, d *live, id, call, kind string) *api.Error {
	if !validTaskID(id) {
		return api.NewError(http.StatusNotFound, protocol.CodeNotFound, "task not found")
	}
	h, err := m.st.TaskHolder(ctx, d.accountID, id)
	if err != nil {
		return api.StoreAPIError(err, "task "+id)
	}
	if !d.covers(h.Org, h.Project) {
		m.refuseScope(d, call, "task", id, h.Org, h.Project)
		return api.StoreAPIError(store.ErrNotFound, "task "+id)
	}
	if h.InstanceID != d.id {
		return m.refuseNotHolder(d, id, h.InstanceID, kind)
	}
	return nil
}

// staleLevel is the level at which to log a report refused from a stale
// lease of task id: info when the task has ended (a user cancelled it, or
// the manager ended it and said why), as its delegate's last output and
// result arrive after that by nature; a warning otherwise (the task was
// handed out again).
func (m *Service) staleLevel(ctx context.Context, d *live, id string) slog.Level {
	if t, err := m.st.GetTask(ctx, d.accountID, id); err == nil && protocol.Terminal(t.Status) {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

func (m *Service) refuseNotHolder(d *live, id, holder, kind string) *api.Error {
	m.log.Warn("refused report from a delegate that does not hold the task", "task", id, "instance", d.id, "holder", holder)
	m.metrics.staleReport(kind)
	return api.NewError(http.StatusConflict, protocol.CodeStaleLease, "task %s is not held by this delegate", id)
}

func (m *Service) handleLogs(w http.ResponseWriter, r *http.Request, d *live) {
	var req protocol.LogsRequest
	if !decodeLogs(w, r, &req) {
		return
	}
	id := r.PathValue("id")
	if !m.ownsTask(w, r, d, id, callLogs, staleLog) {
		return
	}
	if len(req.Chunks) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	for i := range req.Chunks {
		if req.Chunks[i].Seq <= 0 {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "log chunk seq must be positive")
			return
		}
		if req.Chunks[i].Time.IsZero() {
			req.Chunks[i].Time = m.cfg.Now()
		}
	}
	if err := m.st.AppendLogs(r.Context(), id, req.Epoch, req.Chunks, m.cfg.LogCap); err != nil {
		if errors.Is(err, store.ErrStaleLease) {
			m.log.Log(r.Context(), m.staleLevel(r.Context(), d, id), "refused logs from a stale lease", "task", id, "instance", d.id, "epoch", req.Epoch)
			m.metrics.staleReport(staleLog)
		}
		if errors.Is(err, store.ErrLogClosed) {
			m.log.Warn("refused log chunks numbered past the last one of the task's result", "task", id, "instance", d.id, "epoch", req.Epoch)
			api.WriteError(w, http.StatusConflict, protocol.CodeTaskTerminal,
				"task %s already finished, and its result named its last log chunk: chunks numbered past it are refused", id)
			return
		}
		api.StoreError(w, err, "task "+id)
		return
	}
	out := make([]store.StoredChunk, len(req.Chunks))
	for i, c := range req.Chunks {
		c.Attempt = int(req.Epoch)
		out[i] = store.StoredChunk{Attempt: int(req.Epoch), Chunk: c}
	}
	m.logs.publish(id, out)
	m.events.Publish(r.Context(), events.Event{Kind: events.TaskOutput, TaskID: id})
	w.WriteHeader(http.StatusNoContent)
}

// decodeLogs reads a log upload: JSON (protocol.LogsRequest), or log
// frames (protocol.ContentTypeLogFrames) with the epoch in a header, which
// carry output without escaping it.
func decodeLogs(w http.ResponseWriter, r *http.Request, req *protocol.LogsRequest) bool {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != protocol.ContentTypeLogFrames {
		return api.DecodeBody(w, r, req)
	}
	epoch, err := strconv.ParseInt(r.Header.Get(protocol.HeaderLogEpoch), 10, 64)
	if err != nil || epoch < 0 {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "log frames need the lease epoch in the %s header", protocol.HeaderLogEpoch)
		return false
	}
	body, ok := api.ReadBody(w, r)
	if !ok {
		return false
	}
	chunks, err := protocol.DecodeChunkFrames(body)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "invalid log frames: %v", err)
		return false
	}
	for i := range chunks {
		chunks[i].Attempt = 0 // the manager numbers attempts
	}
	req.Epoch, req.Chunks = epoch, chunks
	return true
}

// checkOutputs holds a result's outputs to the limits the delegate keeps
// (protocol.MaxOutputs, MaxOutputBytes).
func checkOutputs(outs map[string]string) error {
	if len(outs) > protocol.MaxOutputs {
		return fmt.Errorf("result has %d outputs: at most %d", len(outs), protocol.MaxOutputs)
	}
	n := 0
	for k, v := range outs {
		if k == "" {
			return errors.New("result has an output without a key")
		}
		n += len(k) + len(v) + 2
	}
	if n > protocol.MaxOutputBytes+2*protocol.MaxOutputs {
		return fmt.Errorf("result has %d bytes of outputs: at most %d", n, protocol.MaxOutputBytes)
	}
	return nil
}

func (m *Service) handleResult(w http.ResponseWriter, r *http.Request, d *live) {
	var req protocol.ResultRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	t, aerr := m.completeTask(r.Context(), d, r.PathValue("id"), req, false)
	if aerr != nil {
		api.WriteAPIError(w, aerr)
		return
	}
	api.WriteJSON(w, http.StatusOK, t)
}

// completeTask records task id's outcome: the work of POST .../result, also
// done for a WebSocket FrameResult. A repeated report of an applied result
// is answered with the stored task. With brief, the task it returns is
// store.Result.Brief's: for a caller that answers without it.
func (m *Service) completeTask(ctx context.Context, d *live, id string, req protocol.ResultRequest, brief bool) (protocol.Task, *api.Error) {
	switch req.Status {
	case protocol.StatusSucceeded, protocol.StatusFailed, protocol.StatusTimedOut, protocol.StatusCancelled:
	default:
		return protocol.Task{}, api.NewError(http.StatusBadRequest, protocol.CodeBadRequest, "result status %q is not a delegate outcome", req.Status)
	}
	if !validTaskID(id) {
		return protocol.Task{}, api.NewError(http.StatusNotFound, protocol.CodeNotFound, "task not found")
	}
	if len(req.Error) > 4096 {
		req.Error = req.Error[:4096]
	}
	if req.DelegateFault && req.Status == protocol.StatusFailed {
		if aerr := m.holds(ctx, d, id, callResult, staleResult); aerr != nil {
			return protocol.Task{}, aerr
		}
		// The delegate, not the task, failed: deny it the task and run the
		// task elsewhere if it has retries left.
		reason := fmt.Sprintf("delegate %q (host %s) could not run the task: %s", d.name, d.hostname, req.Error)
		t, requeued, err := m.st.RequeueTask(ctx, id, req.Epoch, d.id, reason, req.LastSeq, m.cfg.Now())
		if err != nil {
			if !errors.Is(err, store.ErrStaleLease) {
				return protocol.Task{}, api.StoreAPIError(err, "task "+id)
			}
			// Already applied (a repeated report) or stale: answer with the stored task.
			cur, gerr := m.st.GetTask(ctx, d.accountID, id)
			if gerr != nil || cur.Epoch != req.Epoch {
				m.metrics.staleReport(staleResult)
				return protocol.Task{}, api.StoreAPIError(err, "task "+id)
			}
			return m.taskView(cur), nil
		}
		d.dropRunning(id)
		if requeued {
			m.log.Info("task requeued after a delegate fault", "task", id, "instance", d.id, "err", req.Error)
			m.events.Publish(ctx, events.Event{Kind: events.TaskQueued, Account: t.AccountID, TaskID: t.ID, Task: &t, Widen: true})
		} else {
			m.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: d.accountID, TaskID: id})
			m.log.Info("task failed on a delegate fault, no retries left", "task", id, "instance", d.id)
		}
		m.offerQueued(ctx, d)
		return m.taskView(t), nil
	}
	if err := checkOutputs(req.Outputs); err != nil {
		return protocol.Task{}, api.NewError(http.StatusBadRequest, protocol.CodeBadRequest, "%v", err)
	}
	// The store applies the result only if this delegate holds the task;
	// only a refusal reads who does (holds), to say why.
	t, err := m.st.CompleteTask(ctx, id, req.Epoch, store.Result{
		Status: req.Status, ExitCode: req.ExitCode, Error: req.Error, HTTPResult: req.HTTPResult, LastSeq: req.LastSeq,
		Outputs: req.Outputs, Holder: d.holder(), Brief: brief,
	}, m.cfg.Now())
	if err != nil {
		if aerr := m.holds(ctx, d, id, callResult, staleResult); aerr != nil {
			return protocol.Task{}, aerr
		}
		if errors.Is(err, store.ErrStaleLease) {
			m.log.Log(ctx, m.staleLevel(ctx, d, id), "refused result from a stale lease", "task", id, "instance", d.id, "epoch", req.Epoch)
			m.metrics.staleReport(staleResult)
		}
		return protocol.Task{}, api.StoreAPIError(err, "task "+id)
	}
	wasFull := d.full()
	d.dropRunning(id)
	m.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: d.accountID, TaskID: id})
	m.log.Info("task finished", "task", id, "status", t.Status, "instance", d.id)
	// A task that succeeded for a connector made its delegate the
	// connector's last success in CompleteTask's transaction.
	if t.Status == protocol.StatusSucceeded && len(t.Spec.Capabilities) > 0 {
		// A task that succeeded proves its capabilities on this delegate:
		// each success resets the allowlist TTL, with no extra round trip.
		rs := make([]protocol.CapabilityResult, len(t.Spec.Capabilities))
		for i, c := range t.Spec.Capabilities {
			rs[i] = protocol.CapabilityResult{Criteria: c, OK: true}
		}
		if err := m.recordCapabilities(ctx, d.id, rs); err != nil {
			m.log.Warn("refresh allowlist", "instance", d.id, "err", err)
		}
	}
	// Capacity freed: offer what is waiting. A delegate that was not full
	// could already take every queued task it is eligible for (those were
	// offered when they were queued, and widened if not acquired), so only
	// a delegate whose capacity was the obstacle is offered the queue.
	if wasFull {
		m.offerQueued(ctx, d)
	}
	return m.taskView(t), nil
}

// handleCapabilities records a delegate's capability validation results.
// When a validation prompted by a task failed, the task is offered to
// other delegates at once.
func (m *Service) handleCapabilities(w http.ResponseWriter, r *http.Request, d *live) {
	var rep protocol.CapabilityReport
	if !api.DecodeBody(w, r, &rep) {
		return
	}
	if len(rep.Results) > 1000 {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "at most 1000 results per report")
		return
	}
	failed := false
	for i, res := range rep.Results {
		if strings.TrimSpace(res.Criteria) == "" || len(res.Criteria) > 2048 {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "result %d: criteria must be 1-2048 characters", i)
			return
		}
		if len(res.Error) > 1024 {
			rep.Results[i].Error = res.Error[:1024]
		}
		failed = failed || !res.OK
	}
	if err := m.recordCapabilities(r.Context(), d.id, rep.Results); err != nil {
		m.log.Error("record capabilities", "instance", d.id, "err", err)
		api.StoreError(w, err, "capability results")
		return
	}
	if failed && validTaskID(rep.TaskID) {
		// A task of another account or outside the delegate's scope is
		// ignored, as an unknown one is.
		t, err := m.st.GetTask(r.Context(), d.accountID, rep.TaskID)
		switch {
		case err != nil:
		case !d.covers(t.Spec.Org, t.Spec.Project):
			m.refuseScope(d, callCapabilities, "task", t.ID, t.Spec.Org, t.Spec.Project)
		case t.Status == protocol.StatusQueued:
			m.offerTask(r.Context(), t, true)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// reconcileRestart handles the tasks a restarted delegate process no
// longer runs: the store says this instance runs them, the new process
// does not list them, so they died with the old process. Each is run
// elsewhere (this instance denied) if it has retries left, or fails with
// an error that says so — at once, not after its lease.
func (m *Service) reconcileRestart(ctx context.Context, d *live, running []protocol.RunningTask) {
	ts, err := m.st.RunningTasksOf(ctx, d.id)
	if err != nil {
		m.log.Warn("reconcile restarted delegate", "instance", d.id, "err", err)
		return
	}
	listed := make(map[string]bool, len(running))
	for _, rt := range running {
		listed[rt.ID] = true
	}
	for _, t := range ts {
		if listed[t.ID] {
			continue
		}
		reason := fmt.Sprintf("delegate %q (host %s) restarted while running the task", d.name, d.hostname)
		// The process that ran it is gone: its output ends with what
		// is stored (lastSeq 0 closes the log of a task that fails).
		nt, requeued, err := m.st.RequeueTask(ctx, t.ID, t.Epoch, d.id, reason, 0, m.cfg.Now())
		if err != nil {
			continue // finished or moved meanwhile
		}
		d.dropRunning(t.ID)
		if requeued {
			m.log.Info("task requeued: its delegate restarted", "task", t.ID, "instance", d.id)
			m.events.Publish(ctx, events.Event{Kind: events.TaskQueued, Account: nt.AccountID, TaskID: nt.ID, Task: &nt})
		} else {
			m.log.Info("task failed: its delegate restarted", "task", t.ID, "instance", d.id)
			m.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: d.accountID, TaskID: t.ID})
		}
	}
}

// containerRuntimeName keeps a registered container runtime's name short
// and printable: it is shown and stored, and only its presence matters.
func containerRuntimeName(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 32 || strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return "unknown"
	}
	return s
}
