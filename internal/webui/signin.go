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

// safeNext keeps a redirect target on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.HasPrefix(next, "/api/") {
		return "/delegates"
	}
	return next
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
	setCookie(w, r, preCookie, token, u.cfg.Now().Add(signInFormTTL))
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
	clearCookie(w, r, preCookie)
	setCookie(w, r, sessionCookie, s.Token, s.ExpiresAt)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// handleSignInLink trades a one-time sign-in link (legate ui) for a
// session. The answer is a page that moves on by itself (a meta refresh),
// not a redirect: a SameSite=Strict cookie set at the end of a redirect
// chain that began on another site (a terminal, a chat) would not be
// sent to the next page.
func (u *UI) handleSignInLink(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
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
	setCookie(w, r, sessionCookie, s.Token, s.ExpiresAt)
	u.render(w, r, nil, http.StatusOK, "signedin", page{Title: "Signed in", Data: s.User})
}

func (u *UI) handleSignOut(w http.ResponseWriter, r *http.Request, s *user) {
	if err := s.api.Admin(r.Context(), "sign out", http.MethodDelete, protocol.PathSessions, nil, nil); err != nil && statusOf(err) != http.StatusUnauthorized {
		u.apiError(w, r, s, err)
		return
	}
	clearCookie(w, r, sessionCookie)
	http.Redirect(w, r, "/signin?notice="+url.QueryEscape("Signed out."), http.StatusSeeOther)
}
