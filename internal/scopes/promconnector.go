package scopes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/store"
)

// MaxProviderUsernameLen bounds a verification provider's basic auth
// user name.
const MaxProviderUsernameLen = 256

// checkPromConnector checks what a connector request adds for a
// verification provider (Prometheus): optional CA (PEM certificates),
// and either the stored secret of a bearer token or basic auth (a user
// name and the stored secret of its password), never both. Other types
// carry neither a user name nor a password secret.
func checkPromConnector(req *protocol.CreateConnectorRequest) error {
	req.Username, req.PasswordSecret = strings.TrimSpace(req.Username), strings.TrimSpace(req.PasswordSecret)
	if req.Type != protocol.ProviderPrometheus {
		if req.Username != "" || req.PasswordSecret != "" {
			return fmt.Errorf("a connector of type %q carries no username and no password secret: only a connector of type %s does (its basic auth)",
				req.Type, protocol.ProviderPrometheus)
		}
		return nil
	}
	req.TokenSecret = strings.TrimSpace(req.TokenSecret)
	switch {
	case req.TokenSecret != "" && (req.Username != "" || req.PasswordSecret != ""):
		return errors.New("a prometheus connector authenticates with a bearer token (token_secret) or with basic auth (username and password_secret), not both: give one")
	case (req.Username == "") != (req.PasswordSecret == ""):
		return errors.New("a prometheus connector's basic auth needs both username and password_secret, the name of the stored secret that holds the password (legate secret create NAME; legate connector create --username USER --password-secret NAME)")
	}
	for _, s := range []struct{ what, name string }{{"token_secret", req.TokenSecret}, {"password_secret", req.PasswordSecret}} {
		if s.name == "" {
			continue
		}
		if err := secretref.ValidName(s.name); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	if err := protocol.CheckText("username", req.Username, MaxProviderUsernameLen); err != nil {
		return err
	}
	if strings.Contains(req.Username, ":") || secretref.Has(req.Username) {
		return fmt.Errorf("prometheus connector username %q: basic auth's user name cannot hold ':' or a secret reference; the password goes in a stored secret (password_secret)", req.Username)
	}
	if len(req.CAPEM) > protocol.MaxKubeCAPEMBytes {
		return fmt.Errorf("prometheus connector CA is %d bytes: at most %d", len(req.CAPEM), protocol.MaxKubeCAPEMBytes)
	}
	if err := checkCAPEM(req.CAPEM); err != nil {
		return fmt.Errorf("prometheus connector: %w", err)
	}
	if u, err := url.Parse(strings.TrimSpace(req.URL)); err == nil && u.User != nil {
		return errors.New("prometheus connector url carries a user: give the user name as username and the password as password_secret (a stored secret)")
	}
	return nil
}

// isPromConnector reports whether c is a verification provider whose
// URL and credentials its verify tasks get.
func isPromConnector(c store.Connector) bool { return c.Type == protocol.ProviderPrometheus }

// ConnectorProvider is the metrics provider a verify task that names
// the Prometheus connector c queries: its URL, its CA, and its
// credentials as references to the stored secrets, which the task's
// secret bindings check for the caller (secret:access) and resolve,
// masked, when a delegate claims the task.
func ConnectorProvider(c store.Connector) *protocol.MetricsProvider {
	p := &protocol.MetricsProvider{Type: protocol.ProviderPrometheus, URL: strings.TrimRight(c.URL, "/"), CAPEM: c.CAPEM}
	if c.TokenSecret != "" {
		p.BearerToken = secretRef(c.TokenSecret)
	}
	if c.PasswordSecret != "" {
		p.Username, p.Password = c.Username, secretRef(c.PasswordSecret)
	}
	return p
}

// applyPromConnector puts the provider of the Prometheus connector c
// into a verify task's spec. Any other task type is refused (the
// connector's credentials go to verify tasks only), as is a verify task
// that also sets its own provider (which one it would query would be a
// guess).
func applyPromConnector(s *protocol.TaskSpec, c store.Connector) error {
	if s.Type != protocol.TaskVerify || s.Verify == nil {
		return fmt.Errorf("connector %q is a verification provider's (its credentials go to verify tasks): a %s task cannot use it; use a verify task (or step), or name another connector or none",
			c.Name, s.Type)
	}
	p := ConnectorProvider(c)
	if s.Verify.Provider != nil && *s.Verify.Provider != *p {
		return fmt.Errorf("the verify task sets its own provider and names the prometheus connector %q: give one or the other", c.Name)
	}
	s.Verify.Provider = p
	return nil
}

// FillConnectorProvider puts into a verify task that names a prometheus
// connector the connector's provider before the task's payload is
// checked (which wants a provider), refusing a task that also sets its
// own. ResolveTask then finds the same provider and keeps it.
func (svc *Service) FillConnectorProvider(ctx context.Context, acct string, s *protocol.TaskSpec) error {
	if s.Connector == "" || s.Verify == nil || (s.Type != "" && s.Type != protocol.TaskVerify) {
		return nil
	}
	c, err := svc.st.GetConnector(ctx, acct, s.Connector)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("unknown connector %q (legate connector list)", s.Connector)
	}
	if err != nil || !isPromConnector(c) {
		return err
	}
	if s.Verify.Provider != nil {
		return fmt.Errorf("the verify task sets its own provider and names the prometheus connector %q: give one or the other", c.Name)
	}
	s.Verify.Provider = ConnectorProvider(c)
	return nil
}

// checkOwnProvider refuses a provider a verify task sets itself whose
// bearer token or password is not a stored secret's reference: a literal
// one would be stored with the task and shown in every answer about it,
// unmasked.
func checkOwnProvider(s *protocol.TaskSpec) error {
	if s.Verify == nil || s.Verify.Provider == nil {
		return nil
	}
	p := s.Verify.Provider
	for _, f := range []struct{ what, v string }{{"bearer token", p.BearerToken}, {"password", p.Password}} {
		v := strings.TrimSpace(f.v)
		if v == "" {
			continue
		}
		if names, err := secretref.Names(v); err != nil || len(names) != 1 || v != secretRef(names[0]) {
			return fmt.Errorf("a verify task's provider %s must be a stored secret's reference, ${secrets.NAME}: a literal one would be stored and shown with the task (or name a prometheus connector)", f.what)
		}
	}
	return nil
}

// promCapability is what a delegate must reach for a verification
// provider's tasks: its URL, or, when the connector has its own CA (which
// a delegate's https probe, trusting its system roots, would refuse), a
// TCP connection to its host.
func promCapability(c store.Connector) string {
	if c.CAPEM == "" {
		return c.URL
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return c.URL // refused by normalizeCapability
	}
	port := u.Port()
	if port == "" {
		port = map[bool]string{true: "443", false: "80"}[u.Scheme == "https"]
	}
	return "tcp://" + net.JoinHostPort(u.Hostname(), port)
}
