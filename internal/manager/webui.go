package manager

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/webui"
)

// The web UI (package webui) is served at "/" next to the API. It calls
// the API in-process with the user's sign-in session, so every page and
// action passes the same authentication, rules and audit as the API; what
// it needs besides is here: the policy of a session (to show only the
// actions it allows) and a notice when an account's delegates change (to
// update the Delegates page live).

// uiBackend is the manager as the web UI sees it.
type uiBackend struct{ m *Manager }

var _ webui.Backend = uiBackend{}

// Session resolves the holder of a sign-in session token as the API
// does (API keys are not accepted: the UI signs in with sessions only).
func (b uiBackend) Session(ctx context.Context, token string) (webui.Session, error) {
	if !strings.HasPrefix(token, identity.SessionPrefix) {
		return webui.Session{}, webui.ErrSignedOut
	}
	r, err := http.NewRequestWithContext(ctx, "GET", "/", nil)
	if err != nil {
		return webui.Session{}, err
	}
	r.Header.Set("Authorization", "Bearer "+token)
	w := &discardResponse{header: http.Header{}}
	c, acct, ok := b.m.identity.Authenticate(w, r)
	if !ok {
		if w.status >= 500 {
			return webui.Session{}, errors.New("the manager could not check the session")
		}
		return webui.Session{}, webui.ErrSignedOut
	}
	return webui.Session{Account: acct, Policy: c.Policy}, nil
}

// WatchDelegates returns a channel that receives after the delegates of
// acct changed, and the function that stops the watch.
func (b uiBackend) WatchDelegates(acct string) (<-chan struct{}, func()) {
	return b.m.watch.subscribe(acct)
}

// WatchRuns returns a channel that receives after the manager advanced
// a pipeline run of acct (started it, ended or started steps, cancelled
// it), and the function that stops the watch. With several managers, a
// run another manager advanced arrives as its broadcast (cluster.Runs).
func (b uiBackend) WatchRuns(acct string) (<-chan struct{}, func()) {
	return b.m.runWatch.subscribe(acct)
}

// WatchTasks returns a channel that receives after a task of acct was
// created, acquired, started, re-queued or ended (cancelled, timed out,
// not assigned, any result), and the function that stops the watch. With
// several managers, tasks created, re-queued or ended through another
// manager wake it too (its broadcasts); a task another manager's
// delegate acquired or started shows at the next change here.
func (b uiBackend) WatchTasks(acct string) (<-chan struct{}, func()) {
	return b.m.taskWatch.subscribe(acct)
}

// discardResponse keeps the status of an answer and drops its body.
type discardResponse struct {
	header http.Header
	status int
}

func (d *discardResponse) Header() http.Header         { return d.header }
func (d *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardResponse) WriteHeader(code int)        { d.status = code }

// delegateWatch tells subscribers when an account's delegates (or, as
// Manager.runWatch, its pipeline runs; as Manager.taskWatch, its tasks)
// changed. Its zero value is ready to use. notify costs one atomic load
// while nobody watches any account: it is called on every task change.
type delegateWatch struct {
	// n counts the subscribers of all accounts.
	n    atomic.Int64
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{} // by account
}

func (w *delegateWatch) subscribe(acct string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[string]map[chan struct{}]struct{}{}
	}
	if w.subs[acct] == nil {
		w.subs[acct] = map[chan struct{}]struct{}{}
	}
	w.subs[acct][ch] = struct{}{}
	w.n.Add(1)
	w.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() { w.unsubscribe(acct, ch) })
	}
}

func (w *delegateWatch) unsubscribe(acct string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.subs[acct], ch)
	w.n.Add(-1)
	if len(w.subs[acct]) == 0 {
		delete(w.subs, acct)
	}
}

// Watched reports whether anyone watches acct (dispatch.Watchers: the
// sweep looks at the accounts whose Delegates page is open).
func (w *delegateWatch) Watched(acct string) bool { return w.watched(acct) }

// watched reports whether anyone watches acct.
func (w *delegateWatch) watched(acct string) bool {
	if w.n.Load() == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.subs[acct]) > 0
}

// notify wakes the watchers of acct (a wake-up not yet taken stands for
// this one too).
func (w *delegateWatch) notify(acct string) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs[acct] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
