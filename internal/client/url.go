package client

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// defaultPort is the port a manager listens on unless told otherwise
// (legate manager --listen :7460); error messages suggest it.
const defaultPort = "7460"

// ParseManagerURL reads a manager URL as a person writes it (LEGATE_URL,
// --url) and returns it in the form New takes: "http://" or "https://",
// a host, an optional port and path prefix, no trailing slash. Besides
// full URLs it accepts HOST:PORT, assuming http:// as kubectl does for a
// server address, and :PORT for this machine (127.0.0.1:PORT). Anything
// else is refused with an error that says what to write instead.
func ParseManagerURL(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", errors.New("empty: write the manager's URL, e.g. http://127.0.0.1:" + defaultPort)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", fmt.Errorf("%q contains spaces or control characters: write the manager's URL, e.g. http://127.0.0.1:%s", raw, defaultPort)
	}
	if !strings.Contains(s, "://") {
		return withoutScheme(raw, s)
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("%q is not a valid URL (%v): write http://HOST:PORT or https://HOST[:PORT][/PATH]", raw, err)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", fmt.Errorf("%q: the scheme must be http:// or https://: write http://%s", raw, hostOr(u.Host, "127.0.0.1:"+defaultPort))
	case u.Hostname() == "":
		return "", fmt.Errorf("%q has no host: write %s://HOST:PORT, e.g. %s://127.0.0.1:%s", raw, scheme, scheme, defaultPort)
	case u.User != nil:
		return "", fmt.Errorf("%q must not contain credentials: write %s://%s and pass the API key with LEGATE_API_KEY or --api-key", raw, scheme, u.Host)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(s, "?#"):
		return "", fmt.Errorf("%q must not have a query or fragment: write %s://%s%s", raw, scheme, u.Host, strings.TrimRight(u.EscapedPath(), "/"))
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if err := checkPort(raw, scheme, u.Hostname(), p); err != nil {
			return "", err
		}
	}
	return scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// withoutScheme reads HOST:PORT[/PATH] or :PORT.
func withoutScheme(raw, s string) (string, error) {
	for _, scheme := range []string{"http", "https"} {
		if rest, ok := cutPrefixFold(s, scheme+":"); ok {
			// "http:/host", "https:host": a mistyped scheme.
			return "", fmt.Errorf("%q: write %s://%s", raw, scheme, strings.TrimLeft(rest, "/"))
		}
	}
	hostport, path, _ := strings.Cut(s, "/")
	if path != "" {
		path = "/" + strings.TrimRight(path, "/")
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || strings.ContainsAny(host, "[]") {
		// No port (or not HOST:PORT at all): the scheme and port are a
		// guess, so say what to write instead of guessing.
		h := strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
		if h == "" || strings.ContainsAny(h, ":@?#") && net.ParseIP(h) == nil {
			return "", fmt.Errorf("%q is not a manager URL: write http://HOST:PORT or https://HOST[:PORT], e.g. http://127.0.0.1:%s", raw, defaultPort)
		}
		if strings.Contains(h, ":") {
			h = "[" + h + "]" // an IPv6 address
		}
		return "", fmt.Errorf("%q has no scheme: write http://%s:%s (the manager's default port) or https://%s", raw, h, defaultPort, h)
	}
	if host == "" {
		host = "127.0.0.1" // ":7460", as a listen address is written
	}
	if err := checkPort(raw, "http", host, port); err != nil {
		return "", err
	}
	if strings.ContainsAny(host, "@?#/") {
		return "", fmt.Errorf("%q is not a manager URL: write http://HOST:PORT or https://HOST[:PORT], e.g. http://127.0.0.1:%s", raw, defaultPort)
	}
	return ParseManagerURL("http://" + net.JoinHostPort(host, port) + path)
}

// checkPort accepts a port number from 1 to 65535 (no leading zeros).
func checkPort(raw, scheme, host, p string) error {
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || p != strconv.Itoa(n) {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535: write %s://%s, for example",
			raw, p, scheme, net.JoinHostPort(host, defaultPort))
	}
	return nil
}

func hostOr(host, def string) string {
	if host == "" {
		return def
	}
	return host
}

// cutPrefixFold is strings.CutPrefix, ignoring ASCII case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}
