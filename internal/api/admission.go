package api

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// admitted serves a request of a route marked Admit only while it holds
// one of the admission limit's slots: a registration for its whole
// handler, the opening of an event channel until the connection is
// taken over (the WebSocket's handshake is done) or answered. A request
// that finds no slot in time is answered 503 CodeOverloaded with the
// limiter's Retry-After, before its credentials or body are read.
func (s *Server) admitted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, after := s.cfg.Admission.Acquire(r.Context())
		if release == nil {
			if r.Context().Err() != nil {
				return
			}
			setRetryAfter(w, after)
			WriteError(w, http.StatusServiceUnavailable, protocol.CodeOverloaded,
				"the manager serves %d registrations and event channel openings at once already; retry after %s (Retry-After)",
				s.cfg.Admission.Slots(), after)
			return
		}
		defer release()
		next.ServeHTTP(&admittedWriter{ResponseWriter: w, release: release}, r)
	})
}

// hint is the Retry-After of an answer that turns a request away for
// load: the admission limit's spread when there is one, else a second.
func (s *Server) hint() time.Duration {
	if s.cfg.Admission == nil {
		return time.Second
	}
	return s.cfg.Admission.Hint()
}

func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(int(d/time.Second), 1)))
}

// admittedWriter gives the slot back when the handler takes the
// connection over: a WebSocket lasts as long as it likes, its opening
// is what the limit bounds.
type admittedWriter struct {
	http.ResponseWriter
	release func()
}

func (a *admittedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	a.release()
	return http.NewResponseController(a.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the connection.
func (a *admittedWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

func (a *admittedWriter) RecordAPIError(code protocol.Code) {
	if rec, ok := a.ResponseWriter.(ErrorRecorder); ok {
		rec.RecordAPIError(code)
	}
}

// Admitting is how many requests hold an admission slot (0 without a
// limit).
func (s *Server) Admitting() int {
	if s.cfg.Admission == nil {
		return 0
	}
	return s.cfg.Admission.InFlight()
}
