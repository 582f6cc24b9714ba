package identity

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Sign-in sessions: POST PathSessions trades a user's name and password
// for a session token ("lgs_" and 24 random bytes; only its SHA-256 hash
// is stored) that Authenticate accepts like an API key until it expires
// (sessionTTL) or DELETE PathSessions revokes it. Sessions are read from
// the store on every request, so a revocation holds at once on every
// manager.

// sessionTTL is how long a sign-in session lasts.
const sessionTTL = time.Hour

// Sign-in pacing: at most signInFailures failed sign-ins per user and per
// client address within signInWindow; more are answered 429 until the
// window has passed. An attempt is counted when it arrives, before its
// password is hashed (or its link looked up), and taken back when it
// succeeds: so attempts made at once are counted as they come, and no
// more than signInFailures of them are ever checked. It is per manager: N
// managers allow N times as many.
const (
	signInFailures = 10
	signInWindow   = 15 * time.Minute
	// signInTracked bounds the memory of the limiter: past it, expired
	// entries are dropped.
	signInTracked = 10000
)

// signInLimiter counts sign-in attempts (those being checked and those
// that failed) by user and by address. Its zero value is ready to use.
type signInLimiter struct {
	mu       sync.Mutex
	attempts map[string]signInCount
}

type signInCount struct {
	n     int
	since time.Time
}

// attempt counts an attempt for every key, in one step: when one of them
// has signInFailures attempts within the window already, none is counted
// and it returns how long to wait; else 0.
func (l *signInLimiter) attempt(now time.Time, keys ...string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var wait time.Duration
	for _, k := range keys {
		c, ok := l.attempts[k]
		if ok && c.n >= signInFailures {
			if left := c.since.Add(signInWindow).Sub(now); left > wait {
				wait = left
			}
		}
	}
	if wait > 0 {
		return wait
	}
	if l.attempts == nil {
		l.attempts = map[string]signInCount{}
	}
	if len(l.attempts) >= signInTracked {
		for k, c := range l.attempts {
			if now.Sub(c.since) >= signInWindow {
				delete(l.attempts, k)
			}
		}
	}
	for _, k := range keys {
		c := l.attempts[k]
		if c.n == 0 || now.Sub(c.since) >= signInWindow {
			c = signInCount{since: now}
		}
		c.n++
		l.attempts[k] = c
	}
	return 0
}

// forgive takes back an attempt of every key: it succeeded, or it was not
// checked (no hashing slot, a store error).
func (l *signInLimiter) forgive(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if c, ok := l.attempts[k]; ok && c.n > 0 {
			c.n--
			l.attempts[k] = c
		}
	}
}

// paced counts a sign-in attempt of keys, or answers 429 and returns false
// when one of them has had too many (who names them: "for this user or
// from this address").
func (s *Service) paced(w http.ResponseWriter, now time.Time, who string, keys ...string) bool {
	wait := s.signIns.attempt(now, keys...)
	if wait <= 0 {
		return true
	}
	secs := int(wait.Round(time.Second) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	api.WriteError(w, http.StatusTooManyRequests, protocol.CodeRateLimited,
		"too many failed sign-ins %s; try again in %s", who, wait.Round(time.Second))
	return false
}

func (s *Service) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req protocol.CreateSessionRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	if req.Link != "" {
		s.signInWithLink(w, r, req.Link)
		return
	}
	ctx := r.Context()
	if req.AccountID == "" {
		acct, err := s.st.Setting(ctx, "bootstrap_account")
		if err != nil {
			api.StoreError(w, err, "account")
			return
		}
		req.AccountID = acct
	}
	req.User = strings.TrimSpace(req.User)
	now := s.cfg.Now()
	keys := []string{"user:" + req.AccountID + "/" + strings.ToLower(req.User), "addr:" + api.ClientAddr(r)}
	if !s.paced(w, now, "for this user or from this address", keys...) {
		return
	}
	if !s.takeHashSlot(w, r) {
		s.signIns.forgive(keys...)
		return
	}
	p, err := s.st.GetPrincipal(ctx, req.AccountID, req.User)
	// The hash is computed for unknown users too, so that the answer's
	// time does not tell which users exist.
	hash := p.PasswordHash
	if err != nil || hash == "" {
		hash = dummyPasswordHash
	}
	ok := s.verify(hash, req.Password) && err == nil && p.PasswordHash != "" && p.Kind == protocol.PrincipalUser
	s.releaseHashSlot()
	// A sign-in is recorded whatever its outcome (a refused one names the
	// user it tried; the limiter above bounds how many a client makes).
	signIn := store.AuditEvent{AccountID: req.AccountID, Action: "session.create", ResourceType: "session",
		PrincipalKind: protocol.PrincipalUser, Principal: req.User, Credential: "password", Status: http.StatusUnauthorized}
	if err == nil {
		signIn.PrincipalKind, signIn.PrincipalID, signIn.Principal = p.Kind, p.ID, p.Name
	}
	if !ok {
		// The attempt stays counted.
		s.log.Info("sign-in refused", "account", req.AccountID, "user", req.User, "remote", r.RemoteAddr)
		signIn.Detail = "wrong user name or password"
		// An unknown user is recorded too (someone tries names), if the
		// account exists.
		if _, aerr := s.st.GetAccount(ctx, req.AccountID); err == nil || aerr == nil {
			s.auditor.Record(ctx, r, signIn)
		}
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "wrong user name or password")
		return
	}
	s.signIns.forgive(keys...)
	if p.Disabled {
		signIn.Detail = "user is disabled"
		s.auditor.Record(ctx, r, signIn)
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "user %s is disabled; an administrator can enable it (legate user enable %s)", p.Name, p.Name)
		return
	}
	token := api.NewSecret(SessionPrefix, 24)
	ws := store.WebSession{ID: api.NewID("s_"), AccountID: p.AccountID, PrincipalID: p.ID, Hash: api.HashSecret(token), CreatedAt: now, ExpiresAt: now.Add(sessionTTL)}
	if err := s.st.CreateWebSession(ctx, ws); err != nil {
		api.StoreError(w, err, "sign-in session")
		return
	}
	s.log.Info("signed in", "account", p.AccountID, "user", p.Name, "remote", r.RemoteAddr)
	signIn.Status, signIn.Credential, signIn.CredentialName, signIn.Resource = http.StatusCreated, "session", ws.ID, ws.ID
	signIn.Detail = ""
	s.auditor.Record(ctx, r, signIn)
	api.WriteJSON(w, http.StatusCreated, protocol.Session{Token: token, AccountID: p.AccountID, User: p.Name, ExpiresAt: ws.ExpiresAt.UTC()})
}

// dummyPasswordHash is verified against when the user is unknown.
const dummyPasswordHash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$ZHVtbXlkdW1teWR1bW15ZHVtbXlkdW1teWR1bW15ZHU"

func (s *Service) handleDeleteSession(w http.ResponseWriter, r *http.Request, acct string) {
	c := api.CallerOf(r.Context())
	if c.Session.ID == "" {
		api.BadRequest(w, "this request uses an API key, not a sign-in session: revoke keys with legate apikey revoke")
		return
	}
	api.AuditNamed(r, c.Session.ID)
	if err := s.st.RevokeWebSession(r.Context(), c.Session.ID, s.cfg.Now()); err != nil {
		api.StoreError(w, err, "sign-in session")
		return
	}
	s.log.Info("signed out", "account", acct, "user", c.Policy.Principal.Name)
	w.WriteHeader(http.StatusNoContent)
}
