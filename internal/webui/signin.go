package webui

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
)

// signInData is what the sign-in page shows.
type signInData struct {
	User string
	Next string
	// CSRF is the sign-in form's token (preCookie).
	CSRF string
}

// defaultNext is where a sign-in goes when it was given no usable next.
const defaultNext = "/delegates"

// safeNext is the one check of a redirect target that comes from a
// request (the sign-in page's and form's next): it returns next when it
// is a path of this site's pages, defaultNext otherwise. Browsers do not
// follow a Location as written: they drop tabs and line breaks anywhere,
// trim control characters and spaces, read a backslash as a slash, and a
// path that then starts with two slashes names another host ("/\t/x",
// "/\\x" and " //x" all go to x). So next is refused when it holds
// anything but printable ASCII (the UI's own next is escaped, so it never
// does), holds a backslash, or does not start with exactly one slash —
// also once percent-decoded, so no later decoding makes it another host —
// and it must parse as a bare path and query. The API's paths are refused
// too: they are not pages.
func safeNext(next string) string {
	if !localPath(next) {
		return defaultNext
	}
	dec, err := url.PathUnescape(next)
	if err != nil {
		return defaultNext
	}
	// Decoded, what a browser would drop dropped and backslashes read as
	// slashes, it must still start with exactly one slash.
	dec = strings.Map(func(r rune) rune {
		switch {
		case r <= ' ' || r == 0x7f:
			return -1
		case r == '\\':
			return '/'
		}
		return r
	}, dec)
	if !strings.HasPrefix(dec, "/") || strings.HasPrefix(dec, "//") || strings.HasPrefix(dec, "/api/") || dec == "/api" {
		return defaultNext
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
		return defaultNext
	}
	return next
}

// localPath reports whether s is printable ASCII without a backslash and
// starts with exactly one slash.
func localPath(s string) bool {
	if len(s) == 0 || s[0] != '/' || (len(s) > 1 && s[1] == '/') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

func (u *UI) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	if _, err := u.current(r); err == nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	u.signInForm(w, r, http.StatusOK, "", "")
}

func (u *UI) signInForm(w http.ResponseWriter, r *http.Request, status int, userName, msg string) {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	u.setCookie(w, r, preCookie, token, u.cfg.Now().Add(signInFormTTL))
	next := r.URL.Query().Get("next")
	if r.Method == http.MethodPost {
		next = r.PostFormValue("next")
	}
	u.render(w, r, nil, status, "signin", page{Title: "Sign in", Error: msg,
		Data: signInData{User: userName, Next: safeNext(next), CSRF: token}})
}

func (u *UI) handleSignIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	name, password := strings.TrimSpace(r.PostFormValue("user")), r.PostFormValue("password")
	pre, err := r.Cookie(preCookie)
	if err != nil || !validCSRF(r.PostFormValue("csrf"), pre.Value) {
		u.signInForm(w, r, http.StatusForbidden, name, "This sign-in form has expired: try again.")
		return
	}
	if name == "" || password == "" {
		u.signInForm(w, r, http.StatusBadRequest, name, "Enter your user name and password.")
		return
	}
	api := u.apiClient("")
	var s protocol.Session
	ctx := withOrigin(r.Context(), r)
	if err := api.Admin(ctx, "sign in", http.MethodPost, protocol.PathSessions, protocol.CreateSessionRequest{User: name, Password: password}, &s); err != nil {
		u.signInForm(w, r, statusOf(err), name, apiMessage(err))
		return
	}
	u.clearCookie(w, r, preCookie)
	u.setCookie(w, r, sessionCookie, s.Token, s.ExpiresAt)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// handleSignInLinkPage shows what a one-time sign-in link (legate ui)
// does and asks to go on; it does not use the link. Only the form's POST
// (handleSignInLink) trades it for a session, so that a link previewer or
// mail scanner that fetches every link it sees cannot use the link up,
// and nobody is signed in as another user by merely opening a link they
// were sent.
func (u *UI) handleSignInLinkPage(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	if token == "" {
		u.signInForm(w, r, http.StatusBadRequest, "", "This sign-in link has no token: run legate ui again.")
		return
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	csrf := hex.EncodeToString(b)
	u.setCookie(w, r, preCookie, csrf, u.cfg.Now().Add(signInFormTTL))
	u.render(w, r, nil, http.StatusOK, "signinlink", page{Title: "Sign in with a link",
		Data: signInLinkData{Token: token, CSRF: csrf}})
}

// signInLinkData is what the sign-in link's page holds.
type signInLinkData struct {
	Token string
	// CSRF is the form's token (preCookie).
	CSRF string
}

// handleSignInLink trades a one-time sign-in link's token, posted by the
// page of handleSignInLinkPage, for a session. The POST comes from this
// site's own page, so the SameSite=Strict session cookie it sets is sent
// with the redirect that follows.
func (u *UI) handleSignInLink(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	token := r.PostFormValue("token")
	pre, err := r.Cookie(preCookie)
	if err != nil || !validCSRF(r.PostFormValue("csrf"), pre.Value) {
		u.signInForm(w, r, http.StatusForbidden, "", "This sign-in page has expired: open the link again.")
		return
	}
	if token == "" {
		u.signInForm(w, r, http.StatusBadRequest, "", "This sign-in link has no token: run legate ui again.")
		return
	}
	api := u.apiClient("")
	var s protocol.Session
	ctx := withOrigin(r.Context(), r)
	if err := api.Admin(ctx, "sign in with a link", http.MethodPost, protocol.PathSessions, protocol.CreateSessionRequest{Link: token}, &s); err != nil {
		u.signInForm(w, r, statusOf(err), "", apiMessage(err))
		return
	}
	u.clearCookie(w, r, preCookie)
	u.setCookie(w, r, sessionCookie, s.Token, s.ExpiresAt)
	http.Redirect(w, r, "/delegates", http.StatusSeeOther)
}

func (u *UI) handleSignOut(w http.ResponseWriter, r *http.Request, s *user) {
	if err := s.api.Admin(r.Context(), "sign out", http.MethodDelete, protocol.PathSessions, nil, nil); err != nil && statusOf(err) != http.StatusUnauthorized {
		u.apiError(w, r, s, err)
		return
	}
	u.clearCookie(w, r, sessionCookie)
	http.Redirect(w, r, "/signin?notice="+url.QueryEscape("Signed out."), http.StatusSeeOther)
}
