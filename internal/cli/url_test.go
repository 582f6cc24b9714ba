package cli

import (
	"strings"
	"testing"
)

// TestManagerURLForms: LEGATE_URL and --url take HOST:PORT as well as a
// URL, and anything else fails with what to write instead (it was a raw
// Go URL error).
func TestManagerURLForms(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	hostport := strings.TrimPrefix(m.srv.URL, "http://")
	_, port, _ := strings.Cut(hostport, ":")
	for _, u := range []string{m.srv.URL, hostport, ":" + port, m.srv.URL + "/"} {
		r := runCLI(t.Context(), map[string]string{EnvURL: u, EnvAPIKey: testKey}, "", "token", "list")
		if r.err != nil {
			t.Errorf("%s=%s: %v, stderr %q", EnvURL, u, r.err, r.stderr)
		}
		r = runCLI(t.Context(), map[string]string{EnvAPIKey: testKey}, "", "--url", u, "token", "list")
		if r.err != nil {
			t.Errorf("--url %s: %v, stderr %q", u, r.err, r.stderr)
		}
	}
	tests := []struct {
		env  string
		flag string
		want string
	}{
		{env: "myhost", want: "legate: LEGATE_URL: \"myhost\" has no scheme: write http://myhost:7460 (the manager's default port) or https://myhost\n"},
		{flag: "ftp://h", want: "legate: --url: \"ftp://h\": the scheme must be http:// or https://: write http://h\n"},
		{env: "127.0.0.1:port", want: "legate: LEGATE_URL: \"127.0.0.1:port\": port \"port\" is not a number from 1 to 65535: write http://127.0.0.1:7460, for example\n"},
	}
	for _, tt := range tests {
		env := map[string]string{EnvAPIKey: testKey}
		args := []string{"token", "list"}
		if tt.env != "" {
			env[EnvURL] = tt.env
		} else {
			args = append([]string{"--url", tt.flag}, args...)
		}
		r := runCLI(t.Context(), env, "", args...)
		if code := exitCodeOf(t, r.err); code != ExitUsage || r.stderr != tt.want {
			t.Errorf("%v %v: exit %d, stderr %q, want %q", env, args, code, r.stderr, tt.want)
		}
	}
}
