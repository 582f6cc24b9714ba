// Package api holds what every part of the manager's HTTP API shares: the
// route type (method, pattern, body limit, who may call, the permission
// rule, the audit action), the server that applies a route's limits and
// credentials around its handler, the caller of an admin request, the
// audit record of a request, and the helpers that read bodies and write
// answers and errors. Each service of the manager declares its routes
// with it; internal/manager concatenates them. It imports no service.
package api

import (
	"net/http"

	"github.com/legate-dev/legate/internal/protocol"
)

// Route is one endpoint of the API. The services' Routes() are the only
// place endpoints are declared: the manager builds its router from them,
// and docs/security.md has one row per route with the same caller and
// body limit (a test compares the two).
type Route struct {
	Method  string
	Pattern string // the path as http.ServeMux matches it, with {wildcards}
	// Body is the largest request body the route reads, in bytes; a
	// larger one is refused with 413, before it is read when its length is
	// declared. 0 means the route reads no body: one sent anyway is
	// discarded after the answer (or the connection closed, past 256 KiB).
	Body int64
	// CredBody, when not 0, is the larger body limit of a request without
	// a session or API key whose delegate credentials come in its headers
	// (a registration: protocol.HeaderAccountID and the token as a
	// bearer), which CredCheck checks before the body is read.
	CredBody  int64
	CredCheck func(w http.ResponseWriter, r *http.Request) bool
	// Stream marks answers that last as long as the handler wants (the
	// WebSocket, the long poll, a followed log): they get WriteTimeout
	// for each write instead of for the whole answer.
	Stream bool
	// Admit puts the route behind the server's admission limit (a
	// registration, the opening of an event channel): past it, a request
	// is answered 503 CodeOverloaded with a Retry-After spread over the
	// clients already waiting (package admit).
	Admit bool
	// Exactly one handler is set, and which one says who may call:
	// Public (no credentials), Delegate (a delegate session, which the
	// handler's service checks itself) or Admin (an API key or sign-in
	// session of the account).
	Public   http.HandlerFunc
	Delegate http.HandlerFunc
	Admin    AdminHandler
	// Rule is what an admin route needs: every admin route has one, and
	// docs/security.md's permission column says it.
	Rule Rule
	// Audit is the action an admin route records in the audit log,
	// RESOURCE.VERB; every route that changes something has one (a test
	// checks), and only those.
	Audit string
}

// AdminHandler serves an admin request within the caller's account.
type AdminHandler func(w http.ResponseWriter, r *http.Request, accountID string)

// CallerKind says who may call a route.
type CallerKind string

const (
	AccessNone     CallerKind = "no credentials"
	AccessDelegate CallerKind = "delegate session"
	AccessAPIKey   CallerKind = "API key"
)

// Access is who may call the route.
func (rt Route) Access() CallerKind {
	switch {
	case rt.Delegate != nil:
		return AccessDelegate
	case rt.Admin != nil:
		return AccessAPIKey
	}
	return AccessNone
}

// Body limits. Each is the largest honest request of its routes with room
// to spare; what is larger is refused unread (413).
const (
	// BodyTiny: an epoch.
	BodyTiny = 1 << 10
	// BodySmall: names, scopes, one URL.
	BodySmall = 16 << 10
	// BodyRegister: the registration is read before the caller is known
	// (its token is in the body). Name (63), hostname (253), description
	// (1 KiB), 100 tags and the token take well under 16 KiB; the rest
	// carries the tasks a re-registering delegate still runs, about 40
	// bytes each: some 1,200 of them.
	BodyRegister = 64 << 10
	// BodyReport: a configuration result (a 4 KiB output excerpt), a
	// capability report (at most 20 capabilities per task, each a URL).
	BodyReport = 256 << 10
	// BodyDelegateState: a heartbeat lists every running task (some
	// 25,000 at 40 bytes); a result carries an error text and an HTTP
	// body excerpt (4 KiB).
	BodyDelegateState = 1 << 20
	// BodyConfiguration: a configuration script is at most 64 KiB, which
	// JSON escaping can make six times larger.
	BodyConfiguration = 512 << 10
	// BodyLarge: a task's script is at most 1 MiB (six times that once
	// escaped, in the worst case, plus its environment).
	BodyLarge = 8 << 20
	// BodyLogs: one upload of log frames carries at most
	// protocol.MaxLogUpload of output, with a frame header of a few bytes
	// per chunk (a delegate sends 256 KiB chunks); a JSON upload at most
	// 1 MiB (output kept on disk by a restarted delegate), escaped as a
	// script in BodyLarge.
	BodyLogs = protocol.MaxLogUpload + 1<<20
	// BodyPipeline: a pipeline's source is at most 256 KiB (JSON may
	// escape it to several times that); a run's inputs are bounded by it.
	BodyPipeline = 2 << 20
	// BodyMax is the largest of the limits above.
	BodyMax = BodyLogs
)
