// Package webui is legate's web UI: server-rendered pages (html/template,
// auto-escaped) with a little plain JavaScript for live updates
// (server-sent events), embedded in the binary and served by the manager
// at "/" next to the API. It holds sign-in (a password or a one-time
// link), the Delegates pages (the live list, one delegate and its
// actions, a new delegate's install), Tasks (the live list, one task with
// its live timeline and output, cancel), Pipelines and their runs,
// Deployments, and Settings (tokens, API keys, users, roles, bindings,
// secrets, connectors, configurations, audit). It is a client of the API:
// every page and action calls the manager's API handler in-process (a
// client.Client over inproc) with the user's sign-in session, so the
// API's authentication, permission rules, audit and masking apply
// unchanged; the policy the Backend returns only decides which actions a
// page offers, and its watches tell live pages when to render again.
//
// Security: the session token lives in an HttpOnly, SameSite=Strict cookie
// (Secure over TLS, and when the manager's public URL is https); every form POST carries a CSRF token derived from the
// session and compared in constant time, and cross-site requests are
// refused by their Origin and Sec-Fetch-Site headers; every answer has a
// strict Content-Security-Policy (no inline scripts or styles).
package webui

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Session is a signed-in user as the Backend resolves it.
type Session struct {
	Account string
	Policy  *access.Policy
}

// Backend is what the UI needs from the manager besides its API.
type Backend interface {
	// Session resolves a sign-in session token as the API does;
	// ErrSignedOut when it is unknown, expired, revoked, or its user
	// disabled.
	Session(ctx context.Context, token string) (Session, error)
	// WatchDelegates returns a channel that receives after the delegates
	// of the account changed, and the function that ends the watch.
	WatchDelegates(account string) (<-chan struct{}, func())
	// WatchRuns returns a channel that receives after the manager
	// advanced a pipeline run of the account, and the function that ends
	// the watch.
	WatchRuns(account string) (<-chan struct{}, func())
	// WatchTasks returns a channel that receives after a task of the
	// account was created, acquired, started, re-queued or ended, and
	// the function that ends the watch.
	WatchTasks(account string) (<-chan struct{}, func())
}

// Config configures the UI.
type Config struct {
	// API is the manager's API handler, called in-process.
	API     http.Handler
	Backend Backend
	// Stopping is closed when the manager shuts down: live streams end.
	Stopping <-chan struct{}
	// WriteTimeout bounds each write of a live stream.
	WriteTimeout time.Duration
	// Liveness is how long a delegate stays connected without a
	// heartbeat (the Delegates page says a connected one's heartbeat is
	// within it).
	Liveness time.Duration
	// DelegateUpdateEvery is the least time between two renders of a
	// Delegates page's live stream (default a second): changes within it
	// are sent together.
	DelegateUpdateEvery time.Duration
	// NewDelegateHintAfter is how long the New delegate page waits for
	// the delegate to register before it says what to check (default two
	// minutes).
	NewDelegateHintAfter time.Duration
	// SecureCookies marks every cookie Secure, for a manager whose
	// public URL is https (behind a TLS-terminating proxy the requests
	// come in plain HTTP); a request that came over TLS gets Secure
	// cookies anyway.
	SecureCookies bool
	// PublicURL and DelegateImage are the manager's defaults of the New
	// delegate page's spec (its --public-url and --delegate-image).
	PublicURL, DelegateImage string
	Version                  string
	Logger                   *slog.Logger
	Now                      func() time.Time
}

// UI serves the web UI.
type UI struct {
	cfg   Config
	mux   *http.ServeMux
	pages map[string]*template.Template
	// fragments renders the parts of pages that live streams send.
	fragments *template.Template
}

// Cookie names.
const (
	sessionCookie = "legate_session"
	// preCookie holds the CSRF token of the sign-in form (there is no
	// session yet to derive it from): double submit.
	preCookie = "legate_signin"
)

// csp is the Content-Security-Policy of every answer.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// New returns the UI. The templates are embedded; one that does not parse
// is a bug that every test of this package finds, hence the panic.
func New(cfg Config) *UI {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = time.Minute
	}
	if cfg.DelegateUpdateEvery <= 0 {
		cfg.DelegateUpdateEvery = time.Second
	}
	if cfg.NewDelegateHintAfter <= 0 {
		cfg.NewDelegateHintAfter = 2 * time.Minute
	}
	u := &UI{cfg: cfg, mux: http.NewServeMux(), pages: map[string]*template.Template{}}
	for _, p := range []string{"signin", "signinlink", "delegates", "newdelegate", "delegate", "tasks", "task", "error",
		"pipelines", "pipeline", "runs", "run", "deployments", "deployment", "settings"} {
		u.pages[p] = template.Must(template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/fragments.html", "templates/"+p+".html"))
	}
	u.fragments = template.Must(template.New("fragments").Funcs(funcs).ParseFS(templateFS, "templates/fragments.html"))
	static, _ := fs.Sub(staticFS, "static")
	files := http.FileServerFS(static)
	u.mux.Handle("GET /static/", http.StripPrefix("/static/", cacheStatic(files)))
	u.mux.HandleFunc("GET /{$}", u.handleHome)
	u.mux.HandleFunc("GET /signin", u.handleSignInPage)
	u.mux.HandleFunc("POST /signin", u.handleSignIn)
	u.mux.HandleFunc("GET "+protocol.PathUISignIn, u.handleSignInLinkPage)
	u.mux.HandleFunc("POST "+protocol.PathUISignIn, u.handleSignInLink)
	u.mux.HandleFunc("POST /signout", u.signedIn(u.handleSignOut))
	u.mux.HandleFunc("GET /delegates", u.signedIn(u.handleDelegates))
	u.mux.HandleFunc("GET /delegates/events", u.signedIn(u.handleDelegateEvents))
	u.mux.HandleFunc("GET /delegates/new", u.signedIn(u.handleNewDelegatePage))
	u.mux.HandleFunc("POST /delegates/new", u.signedIn(u.handleNewDelegate))
	u.mux.HandleFunc("GET /delegates/{name}", u.signedIn(u.handleDelegate))
	u.mux.HandleFunc("POST /delegates/{name}/{action}", u.signedIn(u.handleDelegateAction))
	u.mux.HandleFunc("GET /tasks", u.signedIn(u.handleTasks))
	u.mux.HandleFunc("GET /tasks/events", u.signedIn(u.handleTaskEvents))
	u.mux.HandleFunc("GET /tasks/{id}", u.signedIn(u.handleTask))
	u.mux.HandleFunc("GET /tasks/{id}/output", u.signedIn(u.handleTaskOutput))
	u.mux.HandleFunc("POST /tasks/{id}/cancel", u.signedIn(u.handleCancelTask))
	u.mux.HandleFunc("GET /pipelines", u.signedIn(u.handlePipelines))
	u.mux.HandleFunc("GET /pipelines/{name}", u.signedIn(u.handlePipeline))
	u.mux.HandleFunc("GET /runs", u.signedIn(u.handleRuns))
	u.mux.HandleFunc("GET /runs/{id}", u.signedIn(u.handleRun))
	u.mux.HandleFunc("GET /runs/{id}/events", u.signedIn(u.handleRunEvents))
	u.mux.HandleFunc("POST /runs/{id}/cancel", u.signedIn(u.handleCancelRun))
	u.mux.HandleFunc("GET /deployments", u.signedIn(u.handleDeployments))
	u.mux.HandleFunc("GET /deployments/{id}", u.signedIn(u.handleDeployment))
	u.mux.HandleFunc("GET /settings", u.signedIn(u.handleSettings))
	u.mux.HandleFunc("GET /settings/{section}", u.signedIn(u.handleSettingsSection))
	u.mux.HandleFunc("POST /settings/tokens", u.signedIn(u.handleCreateToken))
	u.mux.HandleFunc("POST /settings/tokens/{name}/revoke", u.signedIn(u.handleRevokeToken))
	u.mux.HandleFunc("POST /settings/apikeys/{name}/revoke", u.signedIn(u.handleRevokeAPIKey))
	u.delegatePageRoutes()
	u.settingsRoutes()
	u.runRoutes()
	u.mux.HandleFunc("/", u.handleNotFound)
	return u
}

// ServeHTTP serves a request of the UI with the security headers.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	u.mux.ServeHTTP(w, r)
}

// sameOrigin reports whether a state-changing request may come from a
// page of this site: browsers send Sec-Fetch-Site with every POST, and an
// Origin (but "null" under Referrer-Policy no-referrer, which tells
// nothing). The CSRF token is checked besides.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		ou, err := url.Parse(o)
		if err != nil || !strings.EqualFold(ou.Host, r.Host) {
			return false
		}
	}
	return true
}

func cacheStatic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}

// user is the signed-in user of a request.
type user struct {
	token   string
	account string
	policy  *access.Policy
	api     *client.Client
	csrf    string
}

// name is the user's name.
func (s *user) name() string { return s.policy.Principal.Name }

// may reports whether the user's policy allows perm on every resource.
func (s *user) may(perm access.Permission, rs ...access.Resource) bool {
	for _, r := range rs {
		if s.policy.Check(perm, r) != nil {
			return false
		}
	}
	return len(rs) > 0
}

// ErrSignedOut is what Backend.Session returns for a session that has
// ended (unknown, expired, revoked, its user disabled or deleted).
var ErrSignedOut = errors.New("signed out")

// apiClient returns a client of the in-process API acting with token.
func (u *UI) apiClient(token string) *client.Client {
	c, err := client.New("http://legate-ui.invalid", &http.Client{Transport: inproc{u.cfg.API}})
	if err != nil {
		panic(err) // a constant URL
	}
	c.SetSecret(token)
	return c
}

// csrfFor derives the CSRF token of a session: only who holds the session
// token (the browser, in an HttpOnly cookie) can compute it.
func csrfFor(token string) string {
	h := sha256.Sum256([]byte("legate web UI CSRF\x00" + token))
	return hex.EncodeToString(h[:])
}

func validCSRF(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// current returns the signed-in user of r, or ErrSignedOut.
func (u *UI) current(r *http.Request) (*user, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil, ErrSignedOut
	}
	s, err := u.cfg.Backend.Session(r.Context(), c.Value)
	if err != nil {
		return nil, err
	}
	return &user{token: c.Value, account: s.Account, policy: s.Policy, api: u.apiClient(c.Value), csrf: csrfFor(c.Value)}, nil
}

// signedIn wraps a handler of signed-in users: others are sent to the
// sign-in page (or refused, for what is not a page), and a POST without
// the session's CSRF token is refused.
func (u *UI) signedIn(h func(http.ResponseWriter, *http.Request, *user)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(withOrigin(r.Context(), r))
		s, err := u.current(r)
		if err != nil && !errors.Is(err, ErrSignedOut) {
			// The session could not be checked (the database): it may
			// well be valid, so the cookie stays.
			u.cfg.Logger.Warn("web UI: check a session", "err", err)
			u.errorPage(w, r, nil, http.StatusServiceUnavailable, "The manager could not check your session just now: try again in a moment.")
			return
		}
		if err != nil {
			u.clearCookie(w, r, sessionCookie)
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if !validCSRF(r.PostFormValue("csrf"), s.csrf) {
				u.errorPage(w, r, s, http.StatusForbidden, "This form has expired or did not come from this page: reload the page and try again.")
				return
			}
		}
		h(w, r, s)
	}
}

func (u *UI) setCookie(w http.ResponseWriter, r *http.Request, name, value string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", Expires: expires, HttpOnly: true,
		Secure: u.secure(r), SameSite: http.SameSiteStrictMode})
}

func (u *UI) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: u.secure(r), SameSite: http.SameSiteStrictMode})
}

// secure reports whether cookies are Secure: the public URL is https, or
// the request came over TLS.
func (u *UI) secure(r *http.Request) bool { return u.cfg.SecureCookies || r.TLS != nil }

// page is what every page template gets.
type page struct {
	Title   string
	Nav     string
	User    string
	CSRF    string
	Version string
	Notice  string
	Error   string
	Data    any
	// MayAddDelegates: the user may create delegate tokens somewhere.
	MayAddDelegates bool
	// MayViewPipelines: the user may view pipelines (and runs and
	// deployments) somewhere.
	MayViewPipelines bool
}

func (u *UI) render(w http.ResponseWriter, r *http.Request, s *user, status int, name string, p page) {
	p.Version = u.cfg.Version
	if s != nil {
		p.User, p.CSRF = s.name(), s.csrf
		p.MayAddDelegates = s.policy.AllowsBelow(access.DelegateEdit, access.Account)
		p.MayViewPipelines = s.policy.AllowsBelow(access.PipelineView, access.Account)
	}
	if p.Notice == "" {
		p.Notice = r.URL.Query().Get("notice")
	}
	var b strings.Builder
	if err := u.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		u.cfg.Logger.Error("web UI: render a page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

func (u *UI) errorPage(w http.ResponseWriter, r *http.Request, s *user, status int, msg string) {
	u.render(w, r, s, status, "error", page{Title: http.StatusText(status), Error: msg, Data: errorView{Next: r.URL.RequestURI()}})
}

// errorView is what the error page gets besides the message: the address
// to come back to after signing in.
type errorView struct{ Next string }

// handleNotFound answers a path that is no page, inside the layout: with
// the navigation for a signed-in user, a sign-in link for others.
func (u *UI) handleNotFound(w http.ResponseWriter, r *http.Request) {
	s, err := u.current(r)
	if err != nil {
		s = nil // signed out, or the session could not be checked: no navigation
	}
	u.errorPage(w, r, s, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
}

// apiError shows an error of the API: its message says what to do.
func (u *UI) apiError(w http.ResponseWriter, r *http.Request, s *user, err error) {
	status := http.StatusBadGateway
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Status != 0 {
		status = pe.Status
	}
	if status == http.StatusUnauthorized {
		u.clearCookie(w, r, sessionCookie)
		http.Redirect(w, r, "/signin?notice="+url.QueryEscape("Your session has ended: sign in again."), http.StatusSeeOther)
		return
	}
	u.errorPage(w, r, s, status, apiMessage(err))
}

// apiMessage is the API's message of err without the client's prefix.
func apiMessage(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Message != "" {
		return pe.Message
	}
	return err.Error()
}

func (u *UI) handleHome(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/delegates", http.StatusSeeOther)
}

// signInFormTTL is how long a sign-in form may be submitted.
const signInFormTTL = 30 * time.Minute

// statusOf is the HTTP status of an API error, 502 for another error.
func statusOf(err error) int {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Status != 0 {
		return pe.Status
	}
	return http.StatusBadGateway
}
