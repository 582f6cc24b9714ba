package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSensitive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value string
		want        bool
	}{
		{"DELEGATE_TOKEN", "tok", true},
		{"HARNESS_TOKEN", "tok", true},
		{"ACCOUNT_SECRET", "tok", true},
		{"PROXY_PASSWORD", "pw", true},
		{"PROXY_USER", "bob", true},
		{"LEGATE_API_KEY", "key", true},
		{"LEGATE_MASTER_KEY", "key", true},
		{"HTTPS_PROXY", "http://bob:pw@proxy:3128", true},
		{"http_proxy", "bob@proxy:3128", true},
		{"HTTPS_PROXY", "http://proxy:3128", false},
		{"PROXY_HOST", "proxy", false},
		{"delegate_token", "tok", false}, // variable names are case-sensitive
		{"PATH", "/bin", false},
	}
	for _, tt := range tests {
		if got := Sensitive(tt.name, tt.value); got != tt.want {
			t.Errorf("Sensitive(%q, %q) = %v, want %v", tt.name, tt.value, got, tt.want)
		}
	}
}

func TestStripProxyCredentials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		had      bool
	}{
		{"http://proxy:3128", "http://proxy:3128", false},
		{"http://bob:pw@proxy:3128", "http://proxy:3128", true},
		{"https://bob@proxy:443/", "https://proxy:443/", true},
		{"bob:pw@proxy:3128", "proxy:3128", true},
		{"http://bob:p@ss/w#rd@proxy:3128", "http://proxy:3128", true}, // unescaped '@', '/' and '#' in the password
		{"http://bob:p%40ss@proxy:3128", "http://proxy:3128", true},
		{"", "", false},
	}
	for _, tt := range tests {
		got, had := StripProxyCredentials(tt.in)
		if got != tt.want || had != tt.had {
			t.Errorf("StripProxyCredentials(%q) = %q, %v; want %q, %v", tt.in, got, had, tt.want, tt.had)
		}
	}
}

func TestCredentialValues(t *testing.T) {
	t.Parallel()
	got := CredentialValues(env(map[string]string{
		"DELEGATE_TOKEN":    " tok-1 ",
		"HARNESS_TOKEN":     "tok-1",
		"PROXY_USER":        "bob",
		"PROXY_PASSWORD":    "pw-1",
		"LEGATE_API_KEY":    "api-1",
		"LEGATE_MASTER_KEY": "master-1",
		"HTTPS_PROXY":       "http://bob:p%40ss@proxy:3128",
		"http_proxy":        "http://bob:p@ss/w#rd@proxy:3128",
		"HTTP_PROXY":        "http://alice@proxy:3128", // a user name only
		"https_proxy":       "",
		"PATH":              "/bin",
	}))
	want := []string{"tok-1", "tok-1", "pw-1", "api-1", "master-1", "p@ss", "p@ss/w#rd"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("CredentialValues (-want +got):\n%s", d)
	}
}

// FuzzStripProxyCredentials: whatever a proxy variable holds, what tasks
// get of it has no user information left, and nothing else is changed.
func FuzzStripProxyCredentials(f *testing.F) {
	for _, s := range []string{"http://bob:pw@proxy:3128", "bob:p@ss@proxy", "http://proxy:1", "://@", "@", "http://a:b@c/d@e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, had := StripProxyCredentials(v)
		scheme, rest, ok := strings.Cut(got, "://")
		if !ok {
			rest = scheme
		}
		if strings.Contains(rest, "@") {
			t.Fatalf("StripProxyCredentials(%q) = %q: user information left", v, got)
		}
		if had != (got != v) {
			t.Fatalf("StripProxyCredentials(%q) = %q, %v", v, got, had)
		}
		if pw := proxyURLPassword(v); pw != "" && !had {
			t.Fatalf("proxyURLPassword(%q) = %q for a value without user information", v, pw)
		}
	})
}
