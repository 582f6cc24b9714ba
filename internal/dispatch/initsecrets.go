package dispatch

import (
	"net/http"
	"slices"
	"strings"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
)

// A delegate's INIT_SCRIPT runs before it registers, with no session and
// no configuration's scope: the scope is its token's, and the secrets it
// may use are those the token was created to give, by someone who holds
// secret:access on each (as who writes a task or a configuration that
// uses a secret must). Without that grant any holder of a delegate token
// could read every secret of its scope.

// checkInitSecrets checks the secrets a token to be created gives INIT_SCRIPT
// and returns their names; it answers and returns false when they are not
// valid, unknown at the token's scope, or not the caller's to give.
func (m *Service) checkInitSecrets(w http.ResponseWriter, r *http.Request, acct string, req protocol.CreateTokenRequest) ([]string, bool) {
	var names []string
	for _, n := range req.InitSecrets {
		if n = strings.TrimSpace(n); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) > protocol.MaxInitSecrets {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "a token gives INIT_SCRIPT at most %d secrets, not %d", protocol.MaxInitSecrets, len(names))
		return nil, false
	}
	refs := make([]string, 0, len(names))
	for _, n := range names {
		if err := secretref.ValidName(n); err != nil {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "init secret: %s", err.Error())
			return nil, false
		}
		refs = append(refs, "${secrets."+n+"}")
	}
	return names, m.checkScriptSecrets(w, r, acct, req.Org, req.Project, strings.Join(refs, " "), "delegate token")
}

// handleInitSecrets answers the values of the stored secrets a delegate's
// INIT_SCRIPT references: each must be one its token gives, and exist at
// the token's scope. Only the names are logged.
func (m *Service) handleInitSecrets(w http.ResponseWriter, r *http.Request) {
	var req protocol.InitSecretsRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.AccountID = strings.TrimSpace(req.AccountID)
	if len(req.Names) == 0 || len(req.Names) > protocol.MaxInitSecrets {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "ask for 1 to %d secrets", protocol.MaxInitSecrets)
		return
	}
	tok, ok := m.delegateToken(w, r, req.AccountID, req.Token)
	if !ok {
		return
	}
	for _, n := range req.Names {
		if !slices.Contains(tok.InitSecrets, n) {
			api.WriteError(w, http.StatusForbidden, protocol.CodeForbidden,
				"INIT_SCRIPT uses the stored secret %s, which the delegate token %q does not give: create a token with --init-secret %s (who creates it needs secret:access on it) and start the delegate with that token",
				n, tok.Name, n)
			return
		}
	}
	values, missing, err := m.st.SecretValues(r.Context(), req.AccountID, tok.Org, tok.Project, req.Names)
	if err != nil {
		if kerr := m.secrets.SealError(err); kerr != nil {
			m.log.Error("cannot give INIT_SCRIPT its stored secrets", "token", tok.Name, "err", kerr)
		}
		api.StoreError(w, err, "secrets")
		return
	}
	if len(missing) > 0 {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			"unknown secret %s: the delegate token %q gives it, but its %s has none of that name (deleted since?); create it with legate secret create %s",
			missing[0], tok.Name, protocol.ScopeLabel(tok.Org, tok.Project), missing[0])
		return
	}
	m.log.Info("stored secrets given to a delegate's INIT_SCRIPT", "account", req.AccountID, "token", tok.Name, "names", req.Names)
	api.WriteJSON(w, http.StatusOK, protocol.InitSecretsResponse{Secrets: values})
}
