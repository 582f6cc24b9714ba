package api

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
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ErrorRecorder is implemented by the response writer of every API
// request: WriteError reports each error code it writes to it (the
// manager counts them in its metrics).
type ErrorRecorder interface{ RecordAPIError(protocol.Code) }

// WriteError answers with an error body of the code and message.
func WriteError(w http.ResponseWriter, status int, code protocol.Code, format string, args ...any) {
	if rec, ok := w.(ErrorRecorder); ok {
		rec.RecordAPIError(code)
	}
	WriteJSON(w, status, protocol.ErrorBody{Error: protocol.Error{Code: code, Message: fmt.Sprintf(format, args...)}})
}

// BadRequest answers 400 bad_request.
func BadRequest(w http.ResponseWriter, format string, args ...any) {
	WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, format, args...)
}

// ReadBody reads the whole request body, which the Server bounded by the
// route's limit and by the read timeout; on failure it writes the answer
// (413, 408 or 400) and returns false.
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	var body []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= BodyMax {
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
		WriteError(w, http.StatusRequestEntityTooLarge, protocol.CodeBadRequest, "request body larger than %d bytes", mbe.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		WriteError(w, http.StatusRequestTimeout, protocol.CodeUnavailable, "the request body did not arrive in time; retry")
	default:
		WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "read body: %v", err)
	}
	return nil, false
}

// DecodeBody reads a JSON body into v; on failure it writes a bad_request
// answer and returns false. An empty body decodes as the zero value.
func DecodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := ReadBody(w, r)
	if !ok {
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "invalid JSON body: %v", err)
		return false
	}
	return true
}

// PeekBody reads the body, which the Server or Authorize has read into
// memory already, and puts it back for the handler.
func PeekBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// StoreError maps a store error to an HTTP answer.
func StoreError(w http.ResponseWriter, err error, what string) {
	WriteAPIError(w, StoreAPIError(err, what))
}

// Error is an answer's error before it is written: over HTTP
// (WriteAPIError) or in a WebSocket acknowledgement (its wire form).
type Error struct {
	Status int
	Code   protocol.Code
	Msg    string
}

// NewError is an Error with a formatted message.
func NewError(status int, code protocol.Code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// WriteAPIError writes e as the answer.
func WriteAPIError(w http.ResponseWriter, e *Error) {
	WriteError(w, e.Status, e.Code, "%s", e.Msg)
}

// Wire is the error as an acknowledgement carries it.
func (e *Error) Wire() *protocol.Error {
	if e == nil {
		return nil
	}
	return &protocol.Error{Code: e.Code, Message: e.Msg}
}

// Coded is an error that knows its answer (a deployment over its
// account's limit: 429 deployment_limit).
type Coded interface {
	error
	APIError() *Error
}

// StoreAPIError is the answer to a store error about what.
func StoreAPIError(err error, what string) *Error {
	var coded Coded
	switch {
	case errors.As(err, &coded):
		return coded.APIError()
	case errors.Is(err, store.ErrNotFound):
		return NewError(http.StatusNotFound, protocol.CodeNotFound, "%s not found", what)
	case errors.Is(err, store.ErrConflict):
		return NewError(http.StatusConflict, protocol.CodeConflict, "%s already exists", what)
	case errors.Is(err, store.ErrAlreadyClaimed):
		return NewError(http.StatusConflict, protocol.CodeAlreadyClaimed, "%s was claimed by another delegate", what)
	case errors.Is(err, store.ErrNoCapacity):
		return NewError(http.StatusConflict, protocol.CodeNoCapacity, "delegate is at capacity")
	case errors.Is(err, store.ErrStaleLease):
		return NewError(http.StatusConflict, protocol.CodeStaleLease, "%s: lease is stale (the task was reassigned or finished)", what)
	case errors.Is(err, store.ErrTokenUsedUp):
		return NewError(http.StatusForbidden, protocol.CodeTokenUsedUp,
			"the delegate token was created with a number of uses and every one is taken: create another token (legate token create NAME --uses N) for this delegate")
	case errors.Is(err, store.ErrTaskTerminal):
		return NewError(http.StatusConflict, protocol.CodeTaskTerminal, "%s already finished", what)
	default:
		return NewError(http.StatusInternalServerError, protocol.CodeInternal, "%s: internal error", what)
	}
}

// NewID returns a random identifier with a prefix, e.g. "t_k3j...".
func NewID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// NewSecret returns a random secret of n bytes, hex-encoded, with a prefix.
func NewSecret(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// HashSecret is how tokens and API keys are stored.
func HashSecret(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Bearer is the credential of the request's Authorization header.
func Bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// ClientAddr is the address of the request's socket (the manager trusts
// no forwarding header).
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
