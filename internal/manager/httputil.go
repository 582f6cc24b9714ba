package manager

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code protocol.Code, format string, args ...any) {
	if rec, ok := w.(errorRecorder); ok {
		rec.recordAPIError(code)
	}
	writeJSON(w, status, protocol.ErrorBody{Error: protocol.Error{Code: code, Message: fmt.Sprintf(format, args...)}})
}

// readBody reads the whole request body, which serveRoute bounded by the
// route's limit and by the read timeout; on failure it writes the answer
// (413, 408 or 400) and returns false.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	var body []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= bodyMax {
		// Read into one array of the declared size (the route's limit
		// holds the body to it), not one grown by doubling.
		b := bytes.NewBuffer(make([]byte, 0, n+bytes.MinRead))
		_, err = b.ReadFrom(r.Body)
		body = b.Bytes()
	} else {
		body, err = io.ReadAll(r.Body)
	}
	if err == nil {
		// Lift the read deadline: left on the connection, it would end
		// the request's context while the handler works.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		return body, true
	}
	// Not read to its end: the connection is closed after the answer
	// (rather than the rest of the body read first).
	w.Header().Set("Connection", "close")
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, protocol.CodeBadRequest, "request body larger than %d bytes", mbe.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, http.StatusRequestTimeout, protocol.CodeUnavailable, "the request body did not arrive in time; retry")
	default:
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, "read body: %v", err)
	}
	return nil, false
}

// decodeBody reads a JSON body into v; on failure it writes a bad_request
// answer and returns false. An empty body decodes as the zero value.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := readBody(w, r)
	if !ok {
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, "invalid JSON body: %v", err)
		return false
	}
	return true
}

// storeError maps a store error to an HTTP answer.
func storeError(w http.ResponseWriter, err error, what string) {
	writeAPIError(w, storeAPIError(err, what))
}

// apiError is an answer's error before it is written: over HTTP
// (writeAPIError) or in a WebSocket acknowledgement (its wire form).
type apiError struct {
	status int
	code   protocol.Code
	msg    string
}

func newAPIError(status int, code protocol.Code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	writeError(w, e.status, e.code, "%s", e.msg)
}

// wire is the error as an acknowledgement carries it.
func (e *apiError) wire() *protocol.Error {
	if e == nil {
		return nil
	}
	return &protocol.Error{Code: e.code, Message: e.msg}
}

// storeAPIError is the answer to a store error about what.
func storeAPIError(err error, what string) *apiError {
	var limit *LimitError
	switch {
	case errors.As(err, &limit):
		return newAPIError(http.StatusTooManyRequests, protocol.CodeDeploymentLimit, "%s", limit.msg)
	case errors.Is(err, store.ErrNotFound):
		return newAPIError(http.StatusNotFound, protocol.CodeNotFound, "%s not found", what)
	case errors.Is(err, store.ErrConflict):
		return newAPIError(http.StatusConflict, protocol.CodeConflict, "%s already exists", what)
	case errors.Is(err, store.ErrAlreadyClaimed):
		return newAPIError(http.StatusConflict, protocol.CodeAlreadyClaimed, "%s was claimed by another delegate", what)
	case errors.Is(err, store.ErrNoCapacity):
		return newAPIError(http.StatusConflict, protocol.CodeNoCapacity, "delegate is at capacity")
	case errors.Is(err, store.ErrStaleLease):
		return newAPIError(http.StatusConflict, protocol.CodeStaleLease, "%s: lease is stale (the task was reassigned or finished)", what)
	case errors.Is(err, store.ErrTaskTerminal):
		return newAPIError(http.StatusConflict, protocol.CodeTaskTerminal, "%s already finished", what)
	default:
		return newAPIError(http.StatusInternalServerError, protocol.CodeInternal, "%s: internal error", what)
	}
}

// newID returns a random identifier with a prefix, e.g. "t_k3j...".
func newID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// newSecret returns a random secret of n bytes, hex-encoded, with a prefix.
func newSecret(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// hashSecret is how tokens and API keys are stored.
func hashSecret(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}
