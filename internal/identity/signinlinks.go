package identity

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// One-time sign-in links: POST PathSignInLinks, as a user (with
// an API key of the user, or a session), returns the web UI's path that
// signs that user in once within signInLinkTTL: legate ui prints it, the
// way Jupyter prints its token link. The link's token ("lgl_" and 24
// random bytes) is stored hashed; the web UI trades it for an ordinary
// sign-in session (POST PathSessions with Link), paced and audited like a
// password sign-in.

// signInLinkTTL is how long a sign-in link may be used.
const signInLinkTTL = 5 * time.Minute

// signInLinkPrefix starts every sign-in link token.
const signInLinkPrefix = "lgl_"

func (s *Service) handleCreateSignInLink(w http.ResponseWriter, r *http.Request, acct string) {
	c := api.CallerOf(r.Context())
	if c.Policy.Principal.Kind != protocol.PrincipalUser {
		api.BadRequest(w, "sign-in links are for users; %s is not one: use an API key of a user (legate login)", c.Policy.Principal)
		return
	}
	now := s.cfg.Now()
	token := api.NewSecret(signInLinkPrefix, 24)
	l := store.SignInLink{ID: api.NewID("l_"), AccountID: acct, PrincipalID: c.Policy.Principal.ID, Hash: api.HashSecret(token),
		CreatedAt: now, ExpiresAt: now.Add(signInLinkTTL)}
	api.AuditNamed(r, l.ID)
	if err := s.st.CreateSignInLink(r.Context(), l); err != nil {
		api.StoreError(w, err, "sign-in link")
		return
	}
	s.log.Info("sign-in link created", "account", acct, "user", c.Policy.Principal.Name, "link", l.ID)
	api.WriteJSON(w, http.StatusCreated, protocol.SignInLink{
		Path: protocol.PathUISignIn + "?" + url.Values{"token": {token}}.Encode(),
		User: c.Policy.Principal.Name, ExpiresAt: l.ExpiresAt.UTC()})
}

// signInWithLink trades a sign-in link's token for a session.
func (s *Service) signInWithLink(w http.ResponseWriter, r *http.Request, token string) {
	ctx := r.Context()
	now := s.cfg.Now()
	keys := []string{"addr:" + api.ClientAddr(r)}
	if !s.paced(w, now, "from this address", keys...) {
		return
	}
	l, err := s.st.UseSignInLink(ctx, api.HashSecret(token), now)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrLinkUsed) {
			s.signIns.forgive(keys...)
			api.StoreError(w, err, "sign-in link")
			return
		}
		// The attempt stays counted.
		s.log.Info("sign-in with a link refused", "remote", r.RemoteAddr, "err", err)
		if errors.Is(err, store.ErrLinkUsed) && l.AccountID != "" {
			s.auditor.Record(ctx, r, store.AuditEvent{AccountID: l.AccountID, Action: "session.create", ResourceType: "session",
				PrincipalKind: protocol.PrincipalUser, PrincipalID: l.PrincipalID, Credential: "signin_link",
				Status: http.StatusUnauthorized, Detail: "sign-in link used already or expired"})
		}
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated,
			"this sign-in link is unknown, used already or expired: run legate ui again for a new one")
		return
	}
	s.signIns.forgive(keys...)
	p, err := s.st.PrincipalByID(ctx, l.PrincipalID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "the user of this sign-in link was deleted")
			return
		}
		api.StoreError(w, err, "user")
		return
	}
	signIn := store.AuditEvent{AccountID: p.AccountID, Action: "session.create", ResourceType: "session",
		PrincipalKind: p.Kind, PrincipalID: p.ID, Principal: p.Name, Credential: "signin_link", CredentialName: l.ID}
	if p.Disabled {
		signIn.Status, signIn.Detail = http.StatusUnauthorized, "user is disabled"
		s.auditor.Record(ctx, r, signIn)
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated, "user %s is disabled; an administrator can enable it (legate user enable %s)", p.Name, p.Name)
		return
	}
	token = api.NewSecret(SessionPrefix, 24)
	ws := store.WebSession{ID: api.NewID("s_"), AccountID: p.AccountID, PrincipalID: p.ID, Hash: api.HashSecret(token), CreatedAt: now, ExpiresAt: now.Add(sessionTTL)}
	if err := s.st.CreateWebSession(ctx, ws); err != nil {
		api.StoreError(w, err, "sign-in session")
		return
	}
	s.log.Info("signed in with a link", "account", p.AccountID, "user", p.Name, "link", l.ID, "remote", r.RemoteAddr)
	signIn.Status, signIn.Resource = http.StatusCreated, ws.ID
	s.auditor.Record(ctx, r, signIn)
	api.WriteJSON(w, http.StatusCreated, protocol.Session{Token: token, AccountID: p.AccountID, User: p.Name, ExpiresAt: ws.ExpiresAt.UTC()})
}
