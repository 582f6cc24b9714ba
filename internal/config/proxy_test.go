package config

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// proxyView is Proxy with printable URLs, for diffs.
type proxyView struct {
	HTTP, HTTPS   string
	NoProxy       []string
	ManagerDirect bool
	Source        string
	ToTasks       bool
}

func view(p Proxy) proxyView {
	s := func(u *url.URL) string {
		if u == nil {
			return ""
		}
		return u.String()
	}
	return proxyView{HTTP: s(p.HTTP), HTTPS: s(p.HTTPS), NoProxy: p.NoProxy, ManagerDirect: p.ManagerDirect, Source: p.Source,
		ToTasks: p.CredentialsToTasks}
}

func TestReadProxy(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want proxyView
	}{
		{"none", nil, proxyView{}},
		{"PROXY_HOST alone", map[string]string{"PROXY_HOST": "proxy.corp"},
			proxyView{HTTP: "http://proxy.corp:80", HTTPS: "http://proxy.corp:80", Source: "PROXY_HOST"}},
		{"PROXY_HOST family", map[string]string{"PROXY_HOST": "proxy.corp", "PROXY_PORT": "3128", "PROXY_SCHEME": "HTTPS",
			"PROXY_USER": "bob", "PROXY_PASSWORD": "s3cr:t@", "NO_PROXY": "Internal.corp, .svc,10.0.0.0/8", "PROXY_MANAGER": "false"},
			proxyView{HTTP: "https://bob:s3cr%3At%40@proxy.corp:3128", HTTPS: "https://bob:s3cr%3At%40@proxy.corp:3128",
				NoProxy: []string{"internal.corp", ".svc", "10.0.0.0/8"}, ManagerDirect: true, Source: "PROXY_HOST"}},
		{"IPv6 PROXY_HOST", map[string]string{"PROXY_HOST": "::1", "PROXY_PORT": "8080"},
			proxyView{HTTP: "http://[::1]:8080", HTTPS: "http://[::1]:8080", Source: "PROXY_HOST"}},
		{"standard", map[string]string{"HTTPS_PROXY": "https://p1:8443", "http_proxy": "p2:3128", "no_proxy": "*"},
			proxyView{HTTP: "http://p2:3128", HTTPS: "https://p1:8443", NoProxy: []string{"*"}, Source: "HTTPS_PROXY, http_proxy"}},
		{"upper and lower case agree", map[string]string{"HTTPS_PROXY": "http://p:1", "https_proxy": "http://p:1"},
			proxyView{HTTPS: "http://p:1", Source: "HTTPS_PROXY"}},
		{"PROXY_HOST and the same HTTPS_PROXY", map[string]string{"PROXY_HOST": "p", "PROXY_PORT": "3128", "HTTPS_PROXY": "http://u:x@p:3128"},
			proxyView{HTTP: "http://p:3128", HTTPS: "http://p:3128", Source: "PROXY_HOST"}},
		{"PROXY_MANAGER true", map[string]string{"HTTP_PROXY": "http://p:1", "PROXY_MANAGER": "TRUE"},
			proxyView{HTTP: "http://p:1", Source: "HTTP_PROXY"}},
		{"credentials to tasks", map[string]string{"PROXY_HOST": "p", "PROXY_USER": "bob", "PROXY_PASSWORD": "pw", "PROXY_CREDENTIALS_TO_TASKS": "true"},
			proxyView{HTTP: "http://bob:pw@p:80", HTTPS: "http://bob:pw@p:80", Source: "PROXY_HOST", ToTasks: true}},
		{"credentials to tasks false", map[string]string{"HTTPS_PROXY": "http://p:1", "PROXY_CREDENTIALS_TO_TASKS": "False"},
			proxyView{HTTPS: "http://p:1", Source: "HTTPS_PROXY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := readProxy(env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, view(p)); d != "" {
				t.Errorf("proxy (-want +got):\n%s", d)
			}
		})
	}
}

func TestReadProxyErrors(t *testing.T) {
	const pw = "hunter2-secret"
	tests := []struct {
		name string
		env  map[string]string
		want string // in the error
	}{
		{"user without host", map[string]string{"PROXY_USER": "bob", "PROXY_PASSWORD": pw}, "PROXY_USER is set but PROXY_HOST is not"},
		{"port without host", map[string]string{"PROXY_PORT": "3128"}, "PROXY_PORT is set but PROXY_HOST is not"},
		{"password without user", map[string]string{"PROXY_HOST": "p", "PROXY_PASSWORD": pw}, "PROXY_PASSWORD is set but PROXY_USER is not"},
		{"credentials to tasks not a bool", map[string]string{"PROXY_HOST": "p", "PROXY_CREDENTIALS_TO_TASKS": "yes"}, `PROXY_CREDENTIALS_TO_TASKS="yes": must be true or false`},
		{"bad port", map[string]string{"PROXY_HOST": "p", "PROXY_PORT": "99999"}, "PROXY_PORT"},
		{"bad scheme", map[string]string{"PROXY_HOST": "p", "PROXY_SCHEME": "socks5"}, "PROXY_SCHEME"},
		{"URL in PROXY_HOST", map[string]string{"PROXY_HOST": "http://bob:" + pw + "@p:3128"}, "PROXY_HOST"},
		{"host:port in PROXY_HOST", map[string]string{"PROXY_HOST": "p:3128"}, "PROXY_PORT"},
		{"two proxies", map[string]string{"PROXY_HOST": "p", "PROXY_USER": "bob", "PROXY_PASSWORD": pw, "HTTPS_PROXY": "http://bob:" + pw + "@q:3128"},
			"two different proxies"},
		{"cases differ", map[string]string{"HTTPS_PROXY": "http://a:1", "https_proxy": "http://b:1"}, "HTTPS_PROXY and https_proxy are both set"},
		{"socks", map[string]string{"HTTPS_PROXY": "socks5://bob:" + pw + "@p:1080"}, "SOCKS"},
		{"bad proxy URL", map[string]string{"HTTP_PROXY": "http://bob:" + pw + "@p:1/path"}, "HTTP_PROXY"},
		{"bad PROXY_MANAGER", map[string]string{"PROXY_MANAGER": "no"}, "PROXY_MANAGER"},
		{"bad NO_PROXY", map[string]string{"NO_PROXY": "http://x/"}, "NO_PROXY"},
		{"placeholder", map[string]string{"PROXY_HOST": "<PROXY_HOST>"}, "placeholder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readProxy(env(tt.env))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestProxyFor(t *testing.T) {
	p, err := readProxy(env(map[string]string{
		"HTTPS_PROXY": "http://ps:1", "HTTP_PROXY": "http://p:1",
		"NO_PROXY": "internal.corp,.svc,10.0.0.0/8,192.168.1.7,example.org:8443,[2001:db8::1]:9000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ target, want string }{
		{"http://example.com/x", "http://p:1"},
		{"ws://example.com/x", "http://p:1"},
		{"https://example.com/x", "http://ps:1"},
		{"wss://example.com/x", "http://ps:1"},
		{"https://internal.corp", ""},
		{"https://api.internal.corp", ""},
		{"https://notinternal.corp", "http://ps:1"},
		{"http://db.ns.svc:5432", ""},
		{"http://svc", "http://p:1"},
		{"http://10.1.2.3", ""},
		{"http://11.1.2.3", "http://p:1"},
		{"http://192.168.1.7:8080", ""},
		{"https://example.org:8443", ""},
		{"https://example.org", "http://ps:1"},
		{"http://[2001:db8::1]:9000", ""},
		{"http://[2001:db8::1]:9001", "http://p:1"},
		{"http://localhost:8080", ""},
		{"http://127.0.0.2", ""},
		{"https://[::1]:1", ""},
		{"ftp://example.com", ""},
	}
	for _, tt := range tests {
		got := ""
		if u := p.For(mustURL(t, tt.target)); u != nil {
			got = u.String()
		}
		if got != tt.want {
			t.Errorf("For(%s) = %q, want %q", tt.target, got, tt.want)
		}
	}
	star, _ := readProxy(env(map[string]string{"HTTP_PROXY": "http://p:1", "NO_PROXY": "*"}))
	if u := star.For(mustURL(t, "http://anything")); u != nil {
		t.Errorf("NO_PROXY=* still proxies: %v", u)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://bob:pw@p:3128":   "http://***@p:3128",
		"https://bob@p:443":      "https://***@p:443",
		"http://p:3128":          "http://p:3128",
		"http://b%40b:p%3Aw@p:1": "http://***@p:1",
	} {
		if got := RedactURL(mustURL(t, in)); got != want {
			t.Errorf("RedactURL(%s) = %q, want %q", in, got, want)
		}
	}
	if RedactURL(nil) != "" {
		t.Error("RedactURL(nil) is not empty")
	}
}

func TestReadEnvProxyAndTLS(t *testing.T) {
	d, err := ReadEnv(env(with(gen1, "PROXY_HOST", "p", "SHARED_CA_CERTS_PATH", "/certs", "TRUST_ALL_CERTIFICATES", "true",
		"DELEGATE_CLIENT_CERTIFICATE_PATH", "/c.crt", "DELEGATE_CLIENT_CERTIFICATE_KEY_PATH", "/c.key")))
	if err != nil {
		t.Fatal(err)
	}
	if d.Proxy.HTTPS == nil || d.Proxy.HTTPS.Host != "p:80" {
		t.Errorf("proxy = %+v", d.Proxy)
	}
	want := TLS{SharedCAPath: "/certs", ClientCertPath: "/c.crt", ClientKeyPath: "/c.key", TrustAll: true}
	if d := cmp.Diff(want, d.TLS); d != "" {
		t.Errorf("TLS (-want +got):\n%s", d)
	}
	for _, kv := range [][]string{
		{"DELEGATE_CLIENT_CERTIFICATE_PATH", "/c.crt"},
		{"DELEGATE_CLIENT_CERTIFICATE_KEY_PATH", "/c.key"},
		{"TRUST_ALL_CERTIFICATES", "yes"},
	} {
		_, err := ReadEnv(env(with(gen1, kv...)))
		if err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s alone: error %v, want one naming it", kv[0], kv[1], err)
		}
	}
}

// FuzzReadProxy checks that any proxy settings either fail with an error
// that does not show the password, or yield proxies with a host and an
// http(s) scheme that For can use.
func FuzzReadProxy(f *testing.F) {
	f.Add("proxy.corp", "3128", "http", "bob", "pw", "", "", ".svc,10.0.0.0/8", "example.com")
	f.Add("", "", "", "", "", "http://u:p@q:1", "r:2", "*", "10.1.2.3")
	f.Add("::1", "1", "HTTPS", "", "", "", "", "[::1]:9", "[::1]")
	f.Fuzz(func(t *testing.T, host, port, scheme, user, pass, httpsProxy, httpProxy, noProxy, target string) {
		m := map[string]string{"PROXY_HOST": host, "PROXY_PORT": port, "PROXY_SCHEME": scheme, "PROXY_USER": user,
			"PROXY_PASSWORD": pass, "HTTPS_PROXY": httpsProxy, "HTTP_PROXY": httpProxy, "NO_PROXY": noProxy}
		p, err := readProxy(env(m))
		if err != nil {
			if len(strings.TrimSpace(pass)) >= 4 && strings.Contains(err.Error(), strings.TrimSpace(pass)) &&
				!strings.Contains(host+port+scheme+user+noProxy+httpsProxy+httpProxy, strings.TrimSpace(pass)) {
				t.Fatalf("error %q shows PROXY_PASSWORD", err)
			}
			return
		}
		for _, u := range []*url.URL{p.HTTP, p.HTTPS} {
			if u == nil {
				continue
			}
			if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Port() == "" {
				t.Fatalf("proxy URL %q lacks scheme, host or port", u)
			}
			if strings.Contains(RedactURL(u), "@") && !strings.Contains(RedactURL(u), "***@") {
				t.Fatalf("RedactURL(%q) = %q", u, RedactURL(u))
			}
			if u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Contains(RedactURL(u), pw) && !strings.Contains(u.Host, pw) {
					t.Fatalf("RedactURL(%q) shows the password", u)
				}
			}
		}
		for _, s := range []string{"http", "https", "ws", "wss"} {
			p.For(&url.URL{Scheme: s, Host: target})
		}
	})
}
