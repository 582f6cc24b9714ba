package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/duplicate"
	"github.com/legate-dev/legate/internal/protocol"
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
	if m.upgrades.RefuseExpired(w, r, req, tok.Org, tok.Project) {
		return
	}
	if cut > 0 {
		m.log.Warn("a registering delegate listed more running tasks than it may run; only the first ones are looked at",
			"listed", cut, "looked_at", len(req.Running), "capacity", req.Capacity,
			"account", req.AccountID, "token", tok.Name, "name", req.Name, "hostname", req.Hostname)
	}
	key := req.AccountID + "\x00" + identityKey(req)
	if !m.admitProcess(w, key, req) {
		return
	}
	in, ok := m.recordInstance(w, r, req, tok)
	if !ok {
		return
	}
	m.procs.Registered(key, in.ID)
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
		RefusedFrom: m.upgrades.RefusedFrom(req.Version),
	})
}

// admitProcess refuses (answers and returns false) a registration of a
// second live process with an identity another live process registered
// with first (package duplicate).
func (m *Service) admitProcess(w http.ResponseWriter, key string, req protocol.RegisterRequest) bool {
	now := m.cfg.Now()
	p := duplicate.Process{ID: req.ProcessID, Hostname: req.Hostname, IP: strings.TrimSpace(req.IP), At: now}
	refusal, found := m.procs.Admit(key, req.Name, p, now, func(instance string) bool {
		d := m.hub.get(instance)
		return d != nil && !d.isGone() && now.Sub(time.Unix(0, d.lastSeen.Load())) <= m.window()
	})
	if found {
		m.log.Error("two live delegate processes registered with one identity; the first keeps it", "account", req.AccountID,
			"name", req.Name, "hostname", req.Hostname, "duplicate", m.procs.Duplicate(key, now))
	}
	if refusal == "" {
		return true
	}
	m.log.Debug("registration refused: another live process holds the identity", "name", req.Name, "hostname", req.Hostname, "ip", req.IP)
	api.WriteError(w, http.StatusConflict, protocol.CodeDuplicateIdentity, "%s", refusal)
	return false
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
	case len(req.ProcessID) > protocol.MaxProcessID:
		return 0, fmt.Errorf("process_id too long (at most %d bytes)", protocol.MaxProcessID)
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
		ContainerRuntime: protocol.RegisteredContainerRuntime(req.ContainerRuntime),
		ContainerReason:  protocol.RegisteredContainerReason(req.ContainerRuntime, req.ContainerReason),
		TaskTypes:        protocol.RegisteredTaskTypes(req.TaskTypes),
		Approval:         approvalRequest(tok),
		UpgradeMode:      req.Upgrade,
		TaskIsolation:    protocol.BoundIsolation(req.TaskIsolation),
		ProcessID:        req.ProcessID,
	})
	var conflict *store.IdentityConflictError
	if errors.As(err, &conflict) {
		m.log.Warn("registration refused: the identity is bound to another delegate token", "account", req.AccountID,
			"instance", conflict.InstanceID, "bound_token", conflict.TokenName, "token", tok.Name,
			"name", req.Name, "hostname", req.Hostname, "ip", req.IP)
		identityConflict(w, req, conflict)
		return store.Instance{}, false
	}
	if errors.Is(err, store.ErrTokenUsedUp) {
		m.log.Warn("registration refused: the token has no use left", "account", req.AccountID, "token", tok.Name, "name", req.Name, "hostname", req.Hostname)
	} else if err != nil {
		m.log.Error("register delegate", "err", err)
	}
	if err != nil {
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
