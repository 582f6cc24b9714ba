package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/admit"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Config configures a Server.
type Config struct {
	// ReadTimeout bounds how long a request body may take to arrive.
	ReadTimeout time.Duration
	// WriteTimeout bounds an answer, or each write of a streaming one.
	WriteTimeout time.Duration
	// UnauthenticatedBodies bounds how many request bodies without
	// credentials are read at once.
	UnauthenticatedBodies int
	// Admission is the limit of the routes marked Admit; nil = none.
	Admission *admit.Limiter
	// Authenticate resolves the caller of an admin request and its
	// account, or answers the request and returns false.
	Authenticate func(w http.ResponseWriter, r *http.Request) (Caller, string, bool)
	// Audit records the audited routes' requests.
	Audit *Auditor
	Log   *slog.Logger
}

// Server applies each route's limits and credentials around its handler.
type Server struct {
	cfg Config
	// bodySlots holds one entry per request body without credentials
	// being read.
	bodySlots chan struct{}
}

// NewServer returns a Server.
func NewServer(cfg Config) *Server {
	return &Server{cfg: cfg, bodySlots: make(chan struct{}, cfg.UnauthenticatedBodies)}
}

// BodiesReading is how many bodies without credentials are being read.
func (s *Server) BodiesReading() int { return len(s.bodySlots) }

// Handle registers every route on mux.
func (s *Server) Handle(mux *http.ServeMux, routes []Route) {
	for _, rt := range routes {
		mux.Handle(rt.Method+" "+rt.Pattern, s.Route(rt))
	}
}

// Route applies a route's limits around its handler: the body limit
// and read deadline, the credentials (checked before the body is read),
// and for streaming routes a write deadline per write.
func (s *Server) Route(rt Route) http.Handler {
	var h http.Handler
	switch rt.Access() {
	case AccessDelegate:
		h = rt.Delegate
	case AccessAPIKey:
		h = s.admin(rt)
	default:
		h = rt.Public
		if rt.Body > 0 {
			h = s.readUnauthenticated(h)
		}
	}
	if rt.Admit && s.cfg.Admission != nil {
		h = s.admitted(h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		next, limit := h, rt.Body
		if rt.CredBody > 0 && Bearer(r) != "" {
			// Credentials in the headers: checked first, and once they
			// hold the body is read as an authenticated one.
			if !rt.CredCheck(w, r) {
				w.Header().Set("Connection", "close")
				return
			}
			next, limit = rt.Public, rt.CredBody
		}
		if limit > 0 && r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			WriteError(w, http.StatusRequestEntityTooLarge, protocol.CodeBadRequest,
				"request body of %d bytes is larger than the %d bytes %s %s accepts", r.ContentLength, limit, rt.Method, rt.Pattern)
			return
		}
		// A shallow copy: the server keeps its own *http.Request, whose
		// body tells it after the answer whether the rest of the body is
		// worth reading (at most 256 KiB) or the connection is closed.
		r = r.WithContext(r.Context())
		if limit > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		} else {
			r.Body = http.NoBody
		}
		if r.ContentLength != 0 && limit > 0 {
			// The body must arrive within ReadTimeout; ReadBody lifts the
			// deadline once it has (a deadline left on the connection
			// would end the request's context while the handler works).
			// The answer gets WriteTimeout on top, so that a body that
			// comes late is still answered, and one that is cut hears why.
			now := time.Now()
			_ = rc.SetReadDeadline(now.Add(s.cfg.ReadTimeout))
			_ = rc.SetWriteDeadline(now.Add(s.cfg.ReadTimeout + s.cfg.WriteTimeout))
		}
		if rt.Stream {
			_ = rc.SetWriteDeadline(time.Time{})
			w = &streamWriter{ResponseWriter: w, rc: rc, timeout: s.cfg.WriteTimeout}
		}
		next.ServeHTTP(w, r)
	})
}

// Deadlines wraps every request the manager serves, API, web UI and
// unknown paths alike: the answer gets WriteTimeout from the end of the
// request's headers, and a request with a body gets ReadTimeout for it
// (and the answer WriteTimeout on top). The read deadline is set here,
// before any route, credential or version check, because a handler that
// answers without reading the body leaves the server to read the rest of
// it (up to 256 KiB) for the next request on the connection: without a
// deadline, a body trickled a byte at a time would keep the connection
// for as long as its sender likes. It is lifted once the body has been
// read to its end (deadlineBody; ReadBody does the same), so that it
// cannot end the request's context while the handler works. Route sets
// the same deadlines again for the routes' own limits, and lifts the
// write deadline for streaming routes.
func (s *Server) Deadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			_ = rc.SetWriteDeadline(now.Add(s.cfg.WriteTimeout))
			next.ServeHTTP(w, r)
			return
		}
		_ = rc.SetReadDeadline(now.Add(s.cfg.ReadTimeout))
		_ = rc.SetWriteDeadline(now.Add(s.cfg.ReadTimeout + s.cfg.WriteTimeout))
		r = r.WithContext(r.Context())
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the connection's read deadline once the body has
// been read to its end: the deadline bounds the body, not the handler.
type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// HSTSMaxAge is how long a browser that has seen the manager over HTTPS
// keeps to HTTPS for it (Strict-Transport-Security): a year, the usual
// value, without includeSubDomains (the manager speaks for its own host
// only).
const HSTSMaxAge = 365 * 24 * time.Hour

// StrictTransport adds Strict-Transport-Security to every answer, for a
// manager whose clients reach it over HTTPS (served itself, or by a
// TLS-terminating proxy in front).
func StrictTransport(next http.Handler) http.Handler {
	v := "max-age=" + strconv.Itoa(int(HSTSMaxAge/time.Second))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", v)
		next.ServeHTTP(w, r)
	})
}

// VersionCheck refuses clients older than this manager serves, and tells
// every client the manager's version (protocol.Supported: newer clients
// are served, and use only what this version has).
func VersionCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(protocol.HeaderProtocolVersion, strconv.Itoa(protocol.Version))
		if v := r.Header.Get(protocol.HeaderProtocolVersion); v != "" {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				WriteError(w, http.StatusBadRequest, protocol.CodeVersion,
					"%s %q is not a protocol version (a whole number)", protocol.HeaderProtocolVersion, v)
				return
			}
			if !protocol.Supported(n) {
				WriteError(w, http.StatusBadRequest, protocol.CodeVersion,
					"protocol version %d is older than this manager serves (%d or later; it speaks %d); upgrade the client", n, protocol.MinVersion, protocol.Version)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// streamWriter moves the write deadline forward before every write, so a
// stream lasts as long as its handler wants while a peer that stops
// reading is still dropped after WriteTimeout.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *streamWriter) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	return s.ResponseWriter.Write(p)
}

func (s *streamWriter) Flush() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	_ = s.rc.Flush()
}

// Unwrap lets the WebSocket upgrade reach the connection.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *streamWriter) RecordAPIError(code protocol.Code) {
	if rec, ok := s.ResponseWriter.(ErrorRecorder); ok {
		rec.RecordAPIError(code)
	}
}

// bodySlotWait is how long a request without credentials waits for a
// slot to read its body before it is answered 503.
const bodySlotWait = time.Second

// readUnauthenticated reads the body of a request that carries no
// credentials (a registration, whose token is in the body) before its
// handler runs, holding one of Config.UnauthenticatedBodies slots while
// it does: however many such requests arrive at once, at most that many
// bodies are in memory. A request that finds no slot within bodySlotWait
// is answered 503 with Retry-After.
func (s *Server) readUnauthenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if !s.takeBodySlot(r.Context()) {
			if r.Context().Err() != nil {
				return
			}
			setRetryAfter(w, s.hint())
			WriteError(w, http.StatusServiceUnavailable, protocol.CodeUnavailable,
				"the manager is reading %d requests without credentials already; retry in a second", cap(s.bodySlots))
			return
		}
		body, ok := ReadBody(w, r)
		<-s.bodySlots
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func (s *Server) takeBodySlot(ctx context.Context) bool {
	select {
	case s.bodySlots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(bodySlotWait)
	defer t.Stop()
	select {
	case s.bodySlots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// admin authenticates an admin request, checks its route's rule and
// records it in the audit log when the route is audited. Every admin
// handler works within the caller's account only.
func (s *Server) admin(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, acct, ok := s.cfg.Authenticate(w, r)
		if !ok {
			return
		}
		r = r.WithContext(WithCaller(r.Context(), c))
		serve := func(w http.ResponseWriter, r *http.Request) {
			if !s.authorize(w, r, rt.Rule, c, acct) {
				return
			}
			rt.Admin(w, r, acct)
		}
		if rt.Audit == "" {
			serve(w, r)
			return
		}
		s.cfg.Audit.request(w, r, rt.Audit, acct, serve)
	}
}

// authorize checks a route's rule for the caller, or answers the request.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, rl Rule, c Caller, acct string) bool {
	if rl.Self || rl.List {
		return true
	}
	if rl.Scope.Name == AtBody.Name || rl.Also != nil {
		// The body is read here, within the route's limit and deadline
		// (ReadBody answers a body too large or too slow), and handed on.
		body, ok := ReadBody(w, r)
		if !ok {
			return false
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	var needs []Need
	if rl.Scope.Resolve == nil { // Anywhere
		if c.Policy.AllowsBelow(rl.Perm, access.Account) {
			return true
		}
		needs = append(needs, Need{rl.Perm, access.Resource{Kind: ResourceKind(r), Name: r.PathValue("name"), Scope: access.Account}})
	} else {
		rs, err := rl.Scope.Resolve(r, acct)
		if errors.Is(err, store.ErrNotFound) {
			return true // the handler answers 404
		}
		if err != nil {
			StoreError(w, err, "the scope of the request")
			return false
		}
		for _, res := range rs {
			needs = append(needs, Need{rl.Perm, res})
		}
	}
	if rl.Also != nil {
		more, err := rl.Also(r, acct)
		if err != nil {
			StoreError(w, err, "the scope of the request")
			return false
		}
		needs = append(needs, more...)
	}
	if len(needs) > 0 {
		auditResource(r.Context(), needs[0].Res)
	}
	for _, n := range needs {
		if err := c.Policy.Check(n.Perm, n.Res); err != nil {
			s.cfg.Log.Info("request refused", "account", acct, "principal", c.Policy.Principal.Name,
				"permission", n.Perm, "resource", n.Res.String(), "route", r.Method+" "+r.URL.Path)
			WriteError(w, http.StatusForbidden, protocol.CodeForbidden, "%s", err.Error())
			return false
		}
	}
	return true
}
