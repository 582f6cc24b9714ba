package delegate

import (
	"net/url"
	"slices"
	"strings"

	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/protocol"
)

// taskEnv returns the base environment of task processes from the
// delegate's environment env ("K=V", as the delegate was started, with the
// credentials it took out of its own process environment): without the
// delegate's credentials (config.SecretEnvNames), and with the proxy URLs
// (HTTPS_PROXY and friends) stripped of their user information. With
// proxyCredentials (PROXY_CREDENTIALS_TO_TASKS=true), PROXY_USER,
// PROXY_PASSWORD and the proxy URLs pass unchanged. The delegate token,
// the API key and the master key never pass.
func taskEnv(env []string, proxyCredentials bool) []string {
	secret := config.SecretEnvNames()
	if proxyCredentials {
		secret = slices.DeleteFunc(secret, func(n string) bool { return n == "PROXY_USER" || n == "PROXY_PASSWORD" })
	}
	proxyURLs := config.ProxyURLEnvNames()
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case slices.Contains(secret, k):
			continue
		case !proxyCredentials && slices.Contains(proxyURLs, k):
			if stripped, had := config.StripProxyCredentials(v); had {
				kv = k + "=" + stripped
			}
		}
		out = append(out, kv)
	}
	return out
}

// ownSecrets returns the delegate's own credentials, which are masked in
// the output of every task and delegate script besides the task's own
// secrets: its token, the passwords of its proxy, the credentials its
// environment env holds (config.CredentialValues: the token under every
// name, the API key and master key when set), and extra. Repeated and
// empty values are left out.
func ownSecrets(cfg config.Delegate, env []string, extra []string) []string {
	vals := []string{cfg.Token}
	for _, u := range []*url.URL{cfg.Proxy.HTTP, cfg.Proxy.HTTPS} {
		if u != nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				vals = append(vals, pw)
			}
		}
	}
	vals = append(vals, config.CredentialValues(func(name string) (string, bool) {
		for _, kv := range env {
			if k, v, ok := strings.Cut(kv, "="); ok && k == name {
				return v, true
			}
		}
		return "", false
	})...)
	vals = append(vals, extra...)
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// secretsToMask returns what a task's output is masked for: the values of
// its secret environment variables, of the stored secrets the manager
// resolved into it (acq.Mask), and the delegate's own credentials.
func (a *Agent) secretsToMask(acq protocol.AcquireResponse) []string {
	out := make([]string, 0, len(acq.Spec.SecretEnv)+len(acq.Mask)+len(a.ownSecrets))
	for _, v := range acq.Spec.SecretEnv {
		out = append(out, v)
	}
	out = append(out, acq.Mask...)
	return append(out, a.ownSecrets...)
}
