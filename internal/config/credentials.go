package config

import (
	"net/url"
	"strings"
)

// SecretEnvNames lists the environment variables that hold credentials:
// the delegate's token (under each of its names), its proxy credentials,
// and the manager's and CLI's keys, which may be set where `legate dev`
// runs. The delegate takes them out of its own process environment at
// start (see package envguard), never passes them to task processes
// (PROXY_USER and PROXY_PASSWORD only with PROXY_CREDENTIALS_TO_TASKS=true)
// and masks their values, but PROXY_USER's, in task output. The caller
// gets its own copy.
func SecretEnvNames() []string {
	return []string{
		"DELEGATE_TOKEN",
		"HARNESS_TOKEN",
		"ACCOUNT_SECRET",
		"PROXY_PASSWORD",
		"PROXY_USER",
		"LEGATE_API_KEY",    // the CLI's API key, e.g. exported where `legate dev` runs
		"LEGATE_MASTER_KEY", // the manager's key for secrets at rest (`legate dev` runs a manager)
	}
}

// ProxyURLEnvNames lists the standard proxy variables, whose values are
// URLs that may carry credentials ("http://user:password@proxy:3128").
func ProxyURLEnvNames() []string {
	return []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"}
}

// ProxyCredentialsToTasksEnv names the variable that, set to true, passes
// the proxy credentials to task processes: PROXY_USER, PROXY_PASSWORD and
// proxy URLs with their user information. By default tasks get the proxy
// variables without them.
const ProxyCredentialsToTasksEnv = "PROXY_CREDENTIALS_TO_TASKS"

// Sensitive reports whether the environment variable name=value holds a
// credential that the delegate keeps out of its process environment: one
// of SecretEnvNames, or a proxy URL with user information.
func Sensitive(name, value string) bool {
	for _, n := range SecretEnvNames() {
		if name == n {
			return true
		}
	}
	for _, n := range ProxyURLEnvNames() {
		if name == n {
			_, had := StripProxyCredentials(value)
			return had
		}
	}
	return false
}

// StripProxyCredentials returns the proxy URL v (a value of HTTPS_PROXY and
// friends) without its user information, and whether it had any:
// "http://bob:pw@proxy:3128" becomes "http://proxy:3128". It works on the
// text, so that a value net/url cannot parse (such as a password with an
// unescaped '@', '/' or '#') loses its credentials too: everything after
// the scheme up to the last '@' goes (a proxy URL has no path).
func StripProxyCredentials(v string) (string, bool) {
	start := 0
	if i := strings.Index(v, "://"); i >= 0 {
		start = i + 3
	}
	at := strings.LastIndexByte(v[start:], '@')
	if at < 0 {
		return v, false
	}
	return v[:start] + v[start+at+1:], true
}

// CredentialValues returns the values of the credentials that lookup (the
// delegate's environment as it started) holds, to mask in task output:
// the delegate token under each of its names, PROXY_PASSWORD, the
// passwords in proxy URLs (raw and as written), LEGATE_API_KEY and
// LEGATE_MASTER_KEY. User names are not masked: they are not secret, and
// short ones would hide ordinary words. Empty values are left out; values
// may repeat.
func CredentialValues(lookup func(string) (string, bool)) []string {
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	for _, n := range SecretEnvNames() {
		if n == "PROXY_USER" {
			continue
		}
		v, _ := lookup(n)
		add(v)
	}
	for _, n := range ProxyURLEnvNames() {
		v, _ := lookup(n)
		add(proxyURLPassword(strings.TrimSpace(v)))
	}
	return out
}

// proxyURLPassword returns the password of a proxy URL, decoded when it
// is valid percent-encoding and as written otherwise ("" if none).
func proxyURLPassword(v string) string {
	start := 0
	if i := strings.Index(v, "://"); i >= 0 {
		start = i + 3
	}
	at := strings.LastIndexByte(v[start:], '@')
	if at < 0 {
		return ""
	}
	_, pw, ok := strings.Cut(v[start:start+at], ":")
	if !ok {
		return ""
	}
	if dec, err := url.PathUnescape(pw); err == nil {
		return dec // the encoded form is masked with it (package mask)
	}
	return pw
}
