package webui

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/legate-dev/legate/internal/protocol"
)

// The settings of what delegates and tasks use: delegate tokens, secrets
// (values go in, never out), connectors, delegate configurations and the
// deployment limits.

func resourceActions() map[string]settingsAction {
	secretPath := func(f url.Values) string {
		return protocol.PathSecrets + "/" + url.PathEscape(field(f, "name")) + scopeQuery(field(f, "org"), field(f, "project"))
	}
	return map[string]settingsAction{
		"tokens/create": {do: createToken},
		"tokens/revoke": {confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Revoke delegate token " + field(f, "name") + "?", Button: "Revoke " + field(f, "name"),
				Detail: "Delegates that use it are disconnected and refused from now on."}
		}, do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			_, err := s.api.RevokeToken(ctx, field(f, "name"))
			return actionResult{notice: "Token " + field(f, "name") + " revoked."}, err
		}},
		"secrets/create": {do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			req := protocol.CreateSecretRequest{Name: field(f, "name"), Org: field(f, "org"), Project: field(f, "project"), Value: f.Get("value")}
			if req.Name == "" {
				return actionResult{}, formError("give the secret a name (the field \"Name\")")
			}
			sec, err := s.api.CreateSecret(ctx, req)
			return actionResult{notice: "Secret " + sec.Name + " created at " + protocol.ScopeLabel(sec.Org, sec.Project) + "."}, err
		}},
		"secrets/update": {do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			var sec protocol.Secret
			err := s.api.Admin(ctx, "update secret", http.MethodPatch, secretPath(f), protocol.UpdateSecretRequest{Value: f.Get("value")}, &sec)
			return actionResult{notice: "Secret " + field(f, "name") + " updated to version " + strconv.FormatInt(sec.Version, 10) + "."}, err
		}},
		"secrets/delete": {confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Delete secret " + field(f, "name") + " (" + protocol.ScopeLabel(field(f, "org"), field(f, "project")) + ")?",
				Button: "Delete secret " + field(f, "name"), Detail: "Tasks, configurations and tokens that use it are refused from now on. Its value cannot be recovered."}
		}, do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			err := s.api.Admin(ctx, "delete secret", http.MethodDelete, secretPath(f), nil, nil)
			return actionResult{notice: "Secret " + field(f, "name") + " deleted."}, err
		}},
		"connectors/create": {do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			req := protocol.CreateConnectorRequest{Name: field(f, "name"), URL: field(f, "url"), Type: field(f, "type"), Selectors: words(f.Get("selectors")),
				CAPEM: f.Get("ca_pem"), TokenSecret: field(f, "token_secret"), Username: field(f, "username"), PasswordSecret: field(f, "password_secret")}
			if req.Name == "" || req.URL == "" {
				return actionResult{}, formError("a connector needs a name and a URL (the fields \"Name\" and \"URL\")")
			}
			c, err := s.api.CreateConnector(ctx, req)
			return actionResult{notice: "Connector " + c.Name + " created."}, err
		}},
		"connectors/delete": {confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Delete connector " + field(f, "name") + "?", Button: "Delete connector " + field(f, "name"),
				Detail: "Tasks that name it are refused from now on."}
		}, do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			err := s.api.DeleteConnector(ctx, field(f, "name"))
			return actionResult{notice: "Connector " + field(f, "name") + " deleted."}, err
		}},
		"configurations/create": {do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			req := protocol.CreateConfigurationRequest{Name: field(f, "name"), Script: f.Get("script"), Selectors: words(f.Get("selectors")), Org: field(f, "org"), Project: field(f, "project")}
			if req.Name == "" {
				return actionResult{}, formError("give the configuration a name (the field \"Name\")")
			}
			c, err := s.api.CreateConfiguration(ctx, req)
			return actionResult{notice: "Configuration " + c.Name + " created at " + protocol.ScopeLabel(c.Org, c.Project) + ": its delegates apply it."}, err
		}},
		"configurations/update": {do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			script, selectors := f.Get("script"), words(f.Get("selectors"))
			if len(selectors) == 0 {
				selectors = []string{}
			}
			c, err := s.api.UpdateConfiguration(ctx, field(f, "name"), protocol.UpdateConfigurationRequest{Script: &script, Selectors: &selectors})
			return actionResult{notice: "Configuration " + field(f, "name") + " updated to version " + strconv.FormatInt(c.Version, 10) + "."}, err
		}},
		"configurations/delete": {confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Delete configuration " + field(f, "name") + "?", Button: "Delete configuration " + field(f, "name"),
				Detail: "Delegates keep what it set up but no longer apply it."}
		}, do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			err := s.api.DeleteConfiguration(ctx, field(f, "name"))
			return actionResult{notice: "Configuration " + field(f, "name") + " deleted."}, err
		}},
		"limits/set": {do: setLimits},
		"limits/reset": {confirm: func(url.Values) confirmView {
			return confirmView{Question: "Return the deployment limits to the manager's defaults?", Button: "Use the defaults",
				Detail: "The account's own limits are forgotten."}
		}, do: func(ctx context.Context, s *user, _ url.Values) (actionResult, error) {
			_, err := s.api.SetDeploymentLimits(ctx, protocol.SetLimitsRequest{Reset: true})
			return actionResult{notice: "Deployment limits returned to the defaults."}, err
		}},
	}
}

func createToken(ctx context.Context, s *user, f url.Values) (actionResult, error) {
	req := protocol.CreateTokenRequest{Name: field(f, "name"), Org: field(f, "org"), Project: field(f, "project"), InitSecrets: words(f.Get("init_secrets"))}
	if req.Name == "" {
		return actionResult{}, formError("give the token a name (the field \"Name\")")
	}
	if req.Project != "" && req.Org == "" {
		return actionResult{}, formError("a project is in an organization: fill the field \"Organization\" too")
	}
	if u := field(f, "uses"); u != "" {
		n, err := strconv.Atoi(u)
		if err != nil || n < 1 {
			return actionResult{}, formError("the field \"Uses\" takes how many delegate processes may register with the token, 1 or more (not " + strconv.Quote(u) + "); leave it empty for no limit")
		}
		req.Uses = n
	}
	t, err := s.api.CreateScopedToken(ctx, req)
	return actionResult{token: &t, notice: "Token " + t.Name + " created: copy its value now, it is not shown again."}, err
}

func setLimits(ctx context.Context, s *user, f url.Values) (actionResult, error) {
	var req protocol.SetLimitsRequest
	for _, l := range []struct {
		name, label string
		to          **int
	}{{"per_hour", "Per hour", &req.PerHour}, {"per_day", "Per day", &req.PerDay}} {
		v := field(f, l.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return actionResult{}, formError("the field \"" + l.label + "\" takes a whole number of deployments, 0 for no limit (not " + strconv.Quote(v) + ")")
		}
		*l.to = &n
	}
	if req.PerHour == nil && req.PerDay == nil {
		return actionResult{}, formError("fill the field \"Per hour\", \"Per day\" or both")
	}
	_, err := s.api.SetDeploymentLimits(ctx, req)
	return actionResult{notice: "Deployment limits set."}, err
}

// The token form posts to /settings/tokens (its first address).
func (u *UI) handleCreateToken(w http.ResponseWriter, r *http.Request, s *user) {
	r.SetPathValue("section", "tokens")
	r.SetPathValue("action", "create")
	u.handleSettingsAction(w, r, s)
}

// Revoke buttons of pages made before the confirmation step post here:
// they get it too.
func (u *UI) handleRevokeToken(w http.ResponseWriter, r *http.Request, s *user) {
	r.PostForm.Set("name", r.PathValue("name"))
	r.SetPathValue("section", "tokens")
	r.SetPathValue("action", "revoke")
	u.handleSettingsAction(w, r, s)
}

func (u *UI) handleRevokeAPIKey(w http.ResponseWriter, r *http.Request, s *user) {
	r.PostForm.Set("name", r.PathValue("name"))
	r.SetPathValue("section", "apikeys")
	r.SetPathValue("action", "revoke")
	u.handleSettingsAction(w, r, s)
}
