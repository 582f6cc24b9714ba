package cli

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// signInManager serves what legate login and whoami use, on a real
// loopback socket: sign-in with a password, a key created through the
// session, sign-out, and whoami for a key. It records the credentials of
// every request.
type signInManager struct {
	srv *httptest.Server

	mu       sync.Mutex
	bearers  []string // of every request, in order
	sessions map[string]bool
	keys     map[string]string // key → user
}

func newSignInManager(t *testing.T) *signInManager {
	t.Helper()
	m := &signInManager{sessions: map[string]bool{}, keys: map[string]string{"lgk_ops": "ops"}}
	bearer := func(r *http.Request) string {
		b := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		m.mu.Lock()
		m.bearers = append(m.bearers, b)
		m.mu.Unlock()
		return b
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		bearer(r)
		var req protocol.CreateSessionRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.User != "alice" || req.Password != "alice's password" {
			writeError(w, 401, protocol.CodeUnauthenticated, "wrong user name or password")
			return
		}
		m.mu.Lock()
		m.sessions["lgs_1"] = true
		m.mu.Unlock()
		writeJSON(w, 201, protocol.Session{Token: "lgs_1", User: "alice"})
	})
	mux.HandleFunc("DELETE /api/v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		b := bearer(r)
		m.mu.Lock()
		delete(m.sessions, b)
		m.mu.Unlock()
		w.WriteHeader(204)
	})
	mux.HandleFunc("POST /api/v1/apikeys", func(w http.ResponseWriter, r *http.Request) {
		b := bearer(r)
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.sessions[b] {
			writeError(w, 401, protocol.CodeUnauthenticated, "invalid sign-in session")
			return
		}
		var req protocol.CreateAPIKeyRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		m.keys["lgk_alice"] = "alice"
		writeJSON(w, 201, protocol.APIKey{Name: req.Name, Value: "lgk_alice", OwnerKind: protocol.PrincipalUser, Owner: "alice"})
	})
	mux.HandleFunc("GET /api/v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		b := bearer(r)
		m.mu.Lock()
		user, ok := m.keys[b]
		m.mu.Unlock()
		if !ok {
			writeError(w, 401, protocol.CodeUnauthenticated, "invalid API key")
			return
		}
		writeJSON(w, 200, protocol.WhoAmI{AccountID: "acc", Principal: user, PrincipalKind: protocol.PrincipalUser, APIKey: "k-" + user})
	})
	m.srv = httptest.NewServer(mux)
	t.Cleanup(m.srv.Close)
	return m
}

// takeBearers returns the credentials of the requests since the last call.
func (m *signInManager) takeBearers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.bearers
	m.bearers = nil
	return b
}

func configFile(dir string) string { return filepath.Join(dir, "legate", "config") }

func TestLoginStoresKeyAndLogoutRemovesIt(t *testing.T) {
	t.Parallel()
	m := newSignInManager(t)
	home := t.TempDir()
	env := map[string]string{"HOME": home} // no XDG_CONFIG_HOME: ~/.config

	r := runCLI(t.Context(), env, m.srv.URL+"\nalice\nalice's password\n", "login")
	if r.err != nil {
		t.Fatalf("login: %v, stderr %q", r.err, r.stderr)
	}
	path := configFile(filepath.Join(home, ".config"))
	if want := "Logged in to " + m.srv.URL + " as user alice; key stored in " + path + "\n"; r.stdout != want {
		t.Errorf("login stdout = %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "Manager URL: ") || !strings.Contains(r.stderr, "User: ") || !strings.Contains(r.stderr, "Password: ") {
		t.Errorf("login prompts = %q", r.stderr)
	}
	if strings.Contains(r.stderr+r.stdout, "alice's password") {
		t.Errorf("the password was echoed: stdout %q stderr %q", r.stdout, r.stderr)
	}
	// Signed in, made a key through the session, signed out, checked the key.
	if d := cmp.Diff([]string{"", "lgs_1", "lgs_1", "lgk_alice"}, m.takeBearers()); d != "" {
		t.Errorf("credentials of login's requests (-want +got):\n%s", d)
	}
	m.mu.Lock()
	open := len(m.sessions)
	m.mu.Unlock()
	if open != 0 {
		t.Errorf("login left %d sign-in sessions open", open)
	}
	checkMode(t, path, 0o600)
	checkMode(t, filepath.Dir(path), 0o700|os.ModeDir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := parseLoginConfig(b); err != nil || c != (loginConfig{URL: m.srv.URL, APIKey: "lgk_alice"}) {
		t.Errorf("stored config %q parses as %+v, %v", b, c, err)
	}

	// Commands use it when neither flags nor environment say otherwise.
	r = runCLI(t.Context(), env, "", "whoami")
	if r.err != nil || !strings.Contains(r.stdout, "user alice") {
		t.Errorf("whoami with the stored login: %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}
	if d := cmp.Diff([]string{"lgk_alice"}, m.takeBearers()); d != "" {
		t.Errorf("whoami's credentials (-want +got):\n%s", d)
	}

	// A second login replaces the file, with its mode, even one an editor
	// made readable by others.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t.Context(), env, "lgk_ops\n", "--url", m.srv.URL, "login", "--with-token")
	if r.err != nil || !strings.Contains(r.stdout, "as user ops") {
		t.Fatalf("login --with-token: %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}
	checkMode(t, path, 0o600)
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("config directory holds %d entries, want the config alone (no temporary file)", len(entries))
	}

	r = runCLI(t.Context(), env, "", "logout")
	if r.err != nil || r.stdout != "Removed "+path+"\n" {
		t.Errorf("logout: %v, stdout %q", r.err, r.stdout)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("config after logout: %v", err)
	}
	r = runCLI(t.Context(), env, "", "whoami")
	if code := exitCodeOf(t, r.err); code != ExitUsage || !strings.Contains(r.stderr, "no manager URL") || !strings.Contains(r.stderr, "legate login") {
		t.Errorf("whoami after logout: exit %d, stderr %q", code, r.stderr)
	}
	// Logging out twice is no error.
	if r = runCLI(t.Context(), env, "", "logout"); r.err != nil {
		t.Errorf("second logout: %v, stderr %q", r.err, r.stderr)
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (os.ModePerm | os.ModeDir); got != want {
		t.Errorf("%s has mode %v, want %v", path, got, want)
	}
}

// A failed login stores nothing and leaves a previous login as it was.
func TestLoginFailuresStoreNothing(t *testing.T) {
	t.Parallel()
	m := newSignInManager(t)
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string
		code  int
	}{
		{"wrong password", "alice\nwrong\n", []string{"login"}, "wrong user name or password", ExitFailure},
		{"unknown key", "lgk_nope\n", []string{"login", "--with-token"}, "invalid API key", ExitFailure},
		{"no key on stdin", "", []string{"login", "--with-token"}, "--with-token: put the API key on stdin", ExitUsage},
		{"bad URL", "", []string{"login", "--url", "ftp://x"}, "scheme must be http:// or https://", ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			env := map[string]string{"XDG_CONFIG_HOME": dir, EnvURL: m.srv.URL}
			if err := os.MkdirAll(filepath.Dir(configFile(dir)), 0o700); err != nil {
				t.Fatal(err)
			}
			before := formatLoginConfig(loginConfig{URL: "http://127.0.0.1:1", APIKey: "lgk_before"})
			if err := os.WriteFile(configFile(dir), before, 0o600); err != nil {
				t.Fatal(err)
			}
			r := runCLI(t.Context(), env, tt.stdin, tt.args...)
			if code := cliCode(t, r.err); code != tt.code || !strings.Contains(r.stderr+errText(r.err), tt.want) {
				t.Errorf("exit %d, stderr %q, err %v; want exit %d and %q", code, r.stderr, r.err, tt.code, tt.want)
			}
			if b, _ := os.ReadFile(configFile(dir)); string(b) != string(before) {
				t.Errorf("the stored login changed to %q", b)
			}
		})
	}
}

// cliCode is the exit status main gives err: 2 for a usage error.
func cliCode(t *testing.T, err error) int {
	t.Helper()
	var ue usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return exitCodeOf(t, err)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Flags win over the environment, which wins over the stored login; the
// stored key is sent only to the manager it was stored for.
func TestStoredLoginPrecedence(t *testing.T) {
	t.Parallel()
	stored, other := newSignInManager(t), newSignInManager(t)
	stored.keys["lgk_stored"], stored.keys["lgk_env"], stored.keys["lgk_flag"] = "stored", "env", "flag"
	other.keys["lgk_env"], other.keys["lgk_flag"] = "env", "flag"
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Dir(configFile(dir)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configFile(dir), formatLoginConfig(loginConfig{URL: stored.srv.URL, APIKey: "lgk_stored"}), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		env    map[string]string
		flags  []string
		server *signInManager // that answers, nil when none may be asked
		key    string         // it receives
		errs   string         // else the error
	}{
		{"stored login alone", nil, nil, stored, "lgk_stored", ""},
		{"env key, stored URL", map[string]string{EnvAPIKey: "lgk_env"}, nil, stored, "lgk_env", ""},
		{"flag key over env key", map[string]string{EnvAPIKey: "lgk_env"}, []string{"--api-key", "lgk_flag"}, stored, "lgk_flag", ""},
		{"env URL of the stored login", map[string]string{EnvURL: stored.srv.URL}, nil, stored, "lgk_stored", ""},
		{"env URL and key", map[string]string{EnvURL: other.srv.URL, EnvAPIKey: "lgk_env"}, nil, other, "lgk_env", ""},
		{"flag URL over env URL", map[string]string{EnvURL: stored.srv.URL, EnvAPIKey: "lgk_env"}, []string{"--url", other.srv.URL}, other, "lgk_env", ""},
		{"another manager: the stored key stays home", map[string]string{EnvURL: other.srv.URL}, nil, nil, "",
			"no API key for " + other.srv.URL + ": the key legate login stored is for " + stored.srv.URL},
		{"another manager by flag", nil, []string{"--url", other.srv.URL}, nil, "",
			"the key legate login stored is for " + stored.srv.URL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"XDG_CONFIG_HOME": dir}
			for k, v := range tt.env {
				env[k] = v
			}
			stored.takeBearers()
			other.takeBearers()
			r := runCLI(t.Context(), env, "", append(tt.flags, "whoami")...)
			if tt.errs != "" {
				if code := exitCodeOf(t, r.err); code != ExitUsage || !strings.Contains(r.stderr, tt.errs) {
					t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, r.stderr, tt.errs)
				}
			} else if r.err != nil {
				t.Fatalf("whoami: %v, stderr %q", r.err, r.stderr)
			}
			for _, s := range []*signInManager{stored, other} {
				var want []string
				if s == tt.server {
					want = []string{tt.key}
				}
				if d := cmp.Diff(want, s.takeBearers()); d != "" {
					t.Errorf("keys the %s manager received (-want +got):\n%s", map[bool]string{true: "stored", false: "other"}[s == stored], d)
				}
			}
		})
	}
}

// A damaged config file is reported with its path and the fix, not
// ignored; flags and environment that give both URL and key do not read it.
func TestDamagedStoredLogin(t *testing.T) {
	t.Parallel()
	m := newSignInManager(t)
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"no equals sign", "url=" + m.srv.URL + "\nlgk_alice\n", "line 2: want key=value"},
		{"binary", "\x00\x01\x02garbage", "line 1: control characters"},
		{"bad URL", "url=ftp://x\napi_key=lgk_ops\n", "line 1: url:"},
		{"key without URL", "api_key=lgk_ops\n", "a url without an api_key, or an api_key without a url"},
		{"twice", "url=" + m.srv.URL + "\nurl=" + m.srv.URL + "\napi_key=k\n", "line 2: url is given twice"},
		{"empty key", "url=" + m.srv.URL + "\napi_key=\n", "line 2: api_key is empty"},
		{"huge", "#" + strings.Repeat("x", maxLoginConfig+10) + "\n", "more than a login config ever holds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := configFile(dir)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"XDG_CONFIG_HOME": dir}
			r := runCLI(t.Context(), env, "", "whoami")
			code := exitCodeOf(t, r.err)
			if code != ExitUsage || !strings.Contains(r.stderr, path+", is damaged") || !strings.Contains(r.stderr, tt.want) ||
				!strings.Contains(r.stderr, "legate logout") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line naming %s, %q and the fix", code, r.stderr, path, tt.want)
			}
			// Flags and environment that say everything win without reading it.
			env[EnvURL], env[EnvAPIKey] = m.srv.URL, "lgk_ops"
			if r := runCLI(t.Context(), env, "", "whoami"); r.err != nil {
				t.Errorf("with URL and key in the environment: %v, stderr %q", r.err, r.stderr)
			}
			// logout removes it; login replaces it.
			if r := runCLI(t.Context(), env, "lgk_ops\n", "login", "--with-token"); r.err != nil {
				t.Errorf("login over a damaged config: %v, stderr %q", r.err, r.stderr)
			}
			delete(env, EnvURL)
			delete(env, EnvAPIKey)
			if r := runCLI(t.Context(), env, "", "whoami"); r.err != nil || !strings.Contains(r.stdout, "user ops") {
				t.Errorf("after login: %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
			}
		})
	}
	// An unreadable config (a directory where the file should be) says so.
	dir := t.TempDir()
	if err := os.MkdirAll(configFile(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t.Context(), map[string]string{"XDG_CONFIG_HOME": dir}, "", "whoami")
	if code := exitCodeOf(t, r.err); code != ExitUsage || !strings.Contains(r.stderr, "the config of legate login") {
		t.Errorf("config is a directory: exit %d, stderr %q", code, r.stderr)
	}
}

func TestParseLoginConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want loginConfig
	}{
		{"", loginConfig{}},
		{"# only a comment\n\n", loginConfig{}},
		{"url=http://127.0.0.1:7460\napi_key=lgk_x\n", loginConfig{URL: "http://127.0.0.1:7460", APIKey: "lgk_x"}},
		{"\r\n url = 127.0.0.1:7460 \r\napi_key= lgk_x\r\nfuture=whatever\n", loginConfig{URL: "http://127.0.0.1:7460", APIKey: "lgk_x"}},
	}
	for _, tt := range tests {
		got, err := parseLoginConfig([]byte(tt.in))
		if err != nil || got != tt.want {
			t.Errorf("parseLoginConfig(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParseLoginConfig: the parser never panics, and what it accepts is
// written back by formatLoginConfig into a file that reads the same.
func FuzzParseLoginConfig(f *testing.F) {
	f.Add([]byte("# written by legate login; remove with legate logout\nurl=http://127.0.0.1:7460\napi_key=lgk_abc\n"))
	f.Add([]byte("url=https://legate.example.com/base\r\napi_key=k\r\n"))
	f.Add([]byte("api_key=lgk\nurl=localhost:1\nx=y"))
	f.Add([]byte("url\n=\n==\n#\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseLoginConfig(b)
		if err != nil || c == (loginConfig{}) { // an empty config is never written
			return
		}
		again, err := parseLoginConfig(formatLoginConfig(c))
		if err != nil || again != c {
			t.Fatalf("%q parsed as %+v; written back it reads %+v, %v", b, c, again, err)
		}
	})
}
