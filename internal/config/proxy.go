package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Proxy is the delegate's HTTP proxy configuration.
//
// Precedence: the seeds' PROXY_HOST family (PROXY_HOST, PROXY_PORT,
// PROXY_SCHEME, PROXY_USER, PROXY_PASSWORD) wins when PROXY_HOST is set;
// otherwise the standard HTTPS_PROXY / HTTP_PROXY (or their lower-case
// forms) are used. NO_PROXY (or no_proxy) applies to both. Setting both
// families to different proxies, or the upper- and lower-case form of a
// variable to different values, is an error.
type Proxy struct {
	// HTTP is the proxy for http:// targets and HTTPS the proxy for
	// https:// targets; nil means direct. They may carry credentials: print
	// them only with RedactURL.
	HTTP, HTTPS *url.URL
	// NoProxy lists the hosts reached directly (NO_PROXY), lower-cased,
	// besides localhost and loopback addresses, which always are:
	// "*", a host name (also matching its subdomains), ".domain" (its
	// subdomains), an IP address or CIDR, each optionally with ":port".
	NoProxy []string
	// ManagerDirect is PROXY_MANAGER=false: connect to the manager
	// directly and use the proxy only for everything else (task HTTP calls,
	// capability checks). The default (PROXY_MANAGER=true) proxies both.
	ManagerDirect bool
	// Source names the variables the proxy came from, for logs.
	Source string
	// CredentialsToTasks is PROXY_CREDENTIALS_TO_TASKS=true: task
	// processes get PROXY_USER, PROXY_PASSWORD and the proxy URLs with
	// their credentials. By default they get the proxy variables without
	// credentials.
	CredentialsToTasks bool
}

// Enabled reports whether any proxy is configured.
func (p Proxy) Enabled() bool { return p.HTTP != nil || p.HTTPS != nil }

// For returns the proxy to use for target (scheme "http", "https", "ws" or
// "wss"), or nil to connect directly.
func (p Proxy) For(target *url.URL) *url.URL {
	var proxy *url.URL
	switch strings.ToLower(target.Scheme) {
	case "http", "ws":
		proxy = p.HTTP
	case "https", "wss":
		proxy = p.HTTPS
	}
	if proxy == nil || p.bypass(target) {
		return nil
	}
	return proxy
}

// bypass reports whether target is reached directly: "localhost" and
// loopback addresses always are (a proxy's loopback is not this
// machine's), and so are the hosts NO_PROXY names.
func (p Proxy) bypass(target *url.URL) bool {
	host := strings.ToLower(strings.TrimSuffix(target.Hostname(), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	port := target.Port()
	if port == "" {
		switch strings.ToLower(target.Scheme) {
		case "http", "ws":
			port = "80"
		case "https", "wss":
			port = "443"
		}
	}
	ip, ipErr := netip.ParseAddr(host)
	if ipErr == nil && ip.Unmap().IsLoopback() {
		return true
	}
	for _, e := range p.NoProxy {
		if e == "*" {
			return true
		}
		eh, ep := splitNoProxy(e)
		if ep != "" && ep != port {
			continue
		}
		if pfx, err := netip.ParsePrefix(eh); err == nil {
			if ipErr == nil && pfx.Contains(ip.Unmap()) {
				return true
			}
			continue
		}
		if eip, err := netip.ParseAddr(eh); err == nil {
			if ipErr == nil && eip.Unmap() == ip.Unmap() {
				return true
			}
			continue
		}
		if strings.HasPrefix(eh, "*.") {
			eh = eh[1:]
		}
		if strings.HasPrefix(eh, ".") {
			if strings.HasSuffix(host, eh) {
				return true
			}
			continue
		}
		if host == eh || strings.HasSuffix(host, "."+eh) {
			return true
		}
	}
	return false
}

// splitNoProxy splits a NO_PROXY entry into host and optional port.
func splitNoProxy(e string) (host, port string) {
	if strings.HasPrefix(e, "[") {
		if h, p, err := net.SplitHostPort(e); err == nil {
			return h, p
		}
		return strings.Trim(e, "[]"), ""
	}
	if strings.Count(e, ":") == 1 {
		h, p, _ := strings.Cut(e, ":")
		return h, p
	}
	return e, ""
}

// RedactURL prints u with its user information, if any, replaced by "***":
// proxy credentials never reach logs or error messages.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.User != nil {
		c.User = nil
		return c.Scheme + "://***@" + strings.TrimPrefix(c.String(), c.Scheme+"://")
	}
	return c.String()
}

// ReadProxy reads only the proxy variables (ReadEnv reads them too), for
// a delegate configured otherwise, such as the one of `legate dev`.
func ReadProxy(lookup func(string) (string, bool)) (Proxy, error) { return readProxy(lookup) }

// readProxy reads the proxy variables. Errors name the variable and never
// contain PROXY_USER, PROXY_PASSWORD or credentials inside a proxy URL.
func readProxy(lookup func(string) (string, bool)) (Proxy, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	var p Proxy
	toTasks, err := parseBool(ProxyCredentialsToTasksEnv, get(ProxyCredentialsToTasksEnv))
	if err != nil {
		return Proxy{}, err
	}
	p.CredentialsToTasks = toTasks
	if v := get("PROXY_MANAGER"); v != "" {
		viaProxy, err := parseBool("PROXY_MANAGER", v)
		if err != nil {
			return Proxy{}, err
		}
		p.ManagerDirect = !viaProxy
	}
	_, noProxy, err := pick(lookup, false, "NO_PROXY", "no_proxy")
	if err != nil {
		return Proxy{}, err
	}
	if p.NoProxy, err = parseNoProxy(noProxy); err != nil {
		return Proxy{}, err
	}
	httpsName, httpsRaw, err := pick(lookup, true, "HTTPS_PROXY", "https_proxy")
	if err != nil {
		return Proxy{}, err
	}
	httpName, httpRaw, err := pick(lookup, true, "HTTP_PROXY", "http_proxy")
	if err != nil {
		return Proxy{}, err
	}
	var std Proxy
	if httpsRaw != "" {
		if std.HTTPS, err = parseProxyURL(httpsName, httpsRaw); err != nil {
			return Proxy{}, err
		}
	}
	if httpRaw != "" {
		if std.HTTP, err = parseProxyURL(httpName, httpRaw); err != nil {
			return Proxy{}, err
		}
	}

	host := get("PROXY_HOST")
	if host == "" {
		for _, n := range []string{"PROXY_PORT", "PROXY_SCHEME", "PROXY_USER", "PROXY_PASSWORD"} {
			if get(n) != "" {
				return Proxy{}, fmt.Errorf("%s is set but PROXY_HOST is not: set PROXY_HOST to the proxy's host name", n)
			}
		}
		p.HTTP, p.HTTPS = std.HTTP, std.HTTPS
		switch {
		case httpsRaw != "" && httpRaw != "":
			p.Source = httpsName + ", " + httpName
		case httpsRaw != "":
			p.Source = httpsName
		case httpRaw != "":
			p.Source = httpName
		}
		return p, nil
	}
	u, err := proxyFromParts(host, get("PROXY_PORT"), get("PROXY_SCHEME"), get("PROXY_USER"), get("PROXY_PASSWORD"))
	if err != nil {
		return Proxy{}, err
	}
	for _, s := range []struct {
		name string
		u    *url.URL
	}{{httpsName, std.HTTPS}, {httpName, std.HTTP}} {
		if s.u != nil && !sameProxy(s.u, u) {
			return Proxy{}, fmt.Errorf("PROXY_HOST names %s and %s names %s: two different proxies; set only one of them",
				RedactURL(u), s.name, RedactURL(s.u))
		}
	}
	p.HTTP, p.HTTPS, p.Source = u, u, "PROXY_HOST"
	return p, nil
}

// sameProxy compares scheme, host and port, not credentials.
func sameProxy(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// proxyFromParts builds the proxy URL of the PROXY_HOST family.
func proxyFromParts(host, port, scheme, user, password string) (*url.URL, error) {
	if strings.Contains(host, "://") || strings.ContainsAny(host, "/@?#") {
		return nil, fmt.Errorf("PROXY_HOST=%q: must be a host name or IP address only; put the scheme in PROXY_SCHEME and the port in PROXY_PORT", hostShown(host))
	}
	if placeholder(host) {
		return nil, placeholderErr("PROXY_HOST", host, "the proxy's host name")
	}
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if h == "" || hasSpaceOrControl(h) || (strings.Contains(h, ":") && net.ParseIP(h) == nil) {
		return nil, fmt.Errorf("PROXY_HOST=%q: not a host name or IP address (put the port in PROXY_PORT)", host)
	}
	scheme = strings.ToLower(scheme)
	switch scheme {
	case "":
		scheme = "http"
	case "http", "https":
	default:
		return nil, fmt.Errorf("PROXY_SCHEME=%q: must be http or https", scheme)
	}
	if port != "" {
		// Digits only: strconv.Atoi would take "+80", which no URL does.
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strings.Trim(port, "0123456789") != "" {
			return nil, fmt.Errorf("PROXY_PORT=%q: must be a port number from 1 to 65535", port)
		}
	} else if scheme == "https" {
		port = "443"
	} else {
		port = "80"
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(h, port)}
	switch {
	case user != "":
		if hasControl(user) || hasControl(password) {
			return nil, errors.New("PROXY_USER or PROXY_PASSWORD contains control characters")
		}
		u.User = url.UserPassword(user, password)
	case password != "":
		return nil, errors.New("PROXY_PASSWORD is set but PROXY_USER is not: set both or neither")
	}
	return u, nil
}

// hostShown is host cut before any '@', so credentials written into
// PROXY_HOST by mistake are not echoed.
func hostShown(host string) string {
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		scheme, _, ok := strings.Cut(host, "://")
		if ok && !strings.ContainsAny(scheme, "@/") {
			return scheme + "://***@" + host[i+1:]
		}
		return "***@" + host[i+1:]
	}
	return host
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}

// parseProxyURL parses HTTPS_PROXY or HTTP_PROXY like net/http does: a
// value without a scheme means http://. Only http and https proxies are
// supported. The value is not echoed when it holds credentials.
func parseProxyURL(name, raw string) (*url.URL, error) {
	shown := hostShown(raw)
	if placeholder(raw) {
		return nil, placeholderErr(name, shown, "the proxy URL, such as http://proxy.example.com:3128")
	}
	s := raw
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Hostname() == "" || hasSpaceOrControl(s) {
		return nil, fmt.Errorf("%s=%q: not a proxy URL such as http://proxy.example.com:3128", name, shown)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch u.Scheme {
	case "http", "https":
	case "socks5", "socks5h":
		return nil, fmt.Errorf("%s=%q: SOCKS proxies are not supported; use an HTTP proxy (http:// or https://)", name, shown)
	default:
		return nil, fmt.Errorf("%s=%q: the proxy scheme must be http or https", name, shown)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s=%q: port %q out of range", name, shown, p)
		}
	} else if u.Scheme == "https" {
		u.Host = net.JoinHostPort(u.Hostname(), "443")
	} else {
		u.Host = net.JoinHostPort(u.Hostname(), "80")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s=%q: a proxy URL has no path, query or fragment", name, shown)
	}
	u.Path, u.RawPath = "", ""
	return u, nil
}

// parseNoProxy splits NO_PROXY into lower-cased entries and checks them.
func parseNoProxy(v string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(v, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		if hasSpaceOrControl(e) || strings.ContainsAny(e, "/@?#") && !isCIDR(e) {
			return nil, fmt.Errorf("NO_PROXY: entry %q is not a host name, domain, IP address or CIDR", e)
		}
		out = append(out, e)
	}
	return out, nil
}

func isCIDR(e string) bool {
	_, err := netip.ParsePrefix(e)
	return err == nil
}
