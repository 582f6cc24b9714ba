package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
)

// Users, roles and sign-in through the real CLI binary against real
// manager processes: people sign in with `legate login` (the key lands in
// their own config directory) and act with the roles an administrator
// bound to them.

// person is someone who signed in with legate login: the CLI runs with
// their config directory and without the administrator's key.
type person struct {
	c      *cluster
	name   string
	config string // XDG_CONFIG_HOME
}

// env is the environment of the person's CLI calls: no LEGATE_API_KEY
// (an empty value counts as unset), so the stored login is used.
func (p person) env() []string {
	return []string{"LEGATE_API_KEY=", "XDG_CONFIG_HOME=" + p.config}
}

func (p person) cli(args ...string) cliResult {
	p.c.t.Helper()
	return p.c.cliEnv(p.env(), args...)
}

func (p person) mustCLI(args ...string) string {
	p.c.t.Helper()
	r := p.cli(args...)
	if r.code != 0 {
		p.c.t.Fatalf("%s: legate %v: exit %d\nstdout: %s\nstderr: %s", p.name, args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// cliStdin runs the CLI with stdin and extra environment.
func (c *cluster) cliStdin(stdin string, env []string, args ...string) cliResult {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(append(append(baseEnv(), "LEGATE_URL="+c.url, "LEGATE_API_KEY="+c.apiKey), c.cliExtra...), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := cliResult{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		c.t.Fatalf("legate %v: %v", args, err)
	}
	return r
}

// newUser creates a user with a password through the CLI (from stdin, as
// the docs say) and signs them in with `legate login --user NAME`, whose
// prompts read the password from stdin when it is not a terminal.
func (c *cluster) newUser(name, password string) person {
	c.t.Helper()
	if r := c.cliStdin(password+"\n", nil, "user", "create", name, "--password-stdin"); r.code != 0 {
		c.t.Fatalf("user create %s: exit %d, stderr %q", name, r.code, r.stderr)
	}
	p := person{c: c, name: name, config: c.t.TempDir()}
	r := c.cliStdin(password+"\n", p.env(), "login", "--user", name)
	if r.code != 0 || !strings.Contains(r.stdout, "Logged in to "+c.url+" as user "+name) {
		c.t.Fatalf("login %s: exit %d\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
	}
	c.checkStoredLogin(p)
	return p
}

// loginWithToken stores key for a new person with `legate login
// --with-token`.
func (c *cluster) loginWithToken(name, key string) person {
	c.t.Helper()
	p := person{c: c, name: name, config: c.t.TempDir()}
	r := c.cliStdin(key+"\n", p.env(), "login", "--with-token")
	if r.code != 0 || !strings.Contains(r.stdout, " as ") {
		c.t.Fatalf("login --with-token for %s: exit %d\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
	}
	c.checkStoredLogin(p)
	return p
}

// checkStoredLogin checks that the login is stored in the person's config
// directory, readable by its owner only.
func (c *cluster) checkStoredLogin(p person) {
	c.t.Helper()
	fi, err := os.Stat(filepath.Join(p.config, "legate", "config"))
	if err != nil {
		c.t.Fatalf("login of %s stored nothing: %v", p.name, err)
	}
	if fi.Mode().Perm() != 0o600 {
		c.t.Errorf("config of %s has mode %v, want 0600", p.name, fi.Mode().Perm())
	}
}

// wantRefused checks that a CLI call was refused for lack of perm at the
// scope, with a message that says both.
func wantRefused(t *testing.T, what string, r cliResult, perm, scope string) {
	t.Helper()
	if r.code == 0 || !strings.Contains(r.stderr, "lacks the permission "+perm) || !strings.Contains(r.stderr, scope) {
		t.Errorf("%s: exit %d, stderr %q; want a refusal naming %s and %s", what, r.code, r.stderr, perm, scope)
	}
}

// A project admin bound at o1/p1 runs tasks in p1 on the project's
// delegate and is refused in project p2 and at the org, with a message
// naming the permission and the scope; their task listing holds their
// project's tasks only. A viewer sees the delegates and tokens but cannot
// revoke a token or run a task.
func TestAccessProjectMemberAndViewer(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.mustCLI("org", "create", "o1")
	c.mustCLI("project", "create", "--org", "o1", "p1")
	c.mustCLI("project", "create", "--org", "o1", "p2")
	tok := c.scopedToken("p1-ci", "--org", "o1", "--project", "p1")
	c.delegate("p1-del", "access-p1-host", c.seed004Env(tok, "p1-del", "")...)

	alice := c.newUser("alice", "correct horse battery")
	c.mustCLI("role", "bind", "project-admin", "--user", "alice", "--org", "o1", "--project", "p1")
	if out := alice.mustCLI("whoami"); !strings.Contains(out, "user alice") || !strings.Contains(out, "project-admin at o1/p1") {
		t.Errorf("whoami of alice: %q", out)
	}

	r := alice.cli("task", "run", "--org", "o1", "--project", "p1", "--script", "echo hello from p1")
	if r.code != 0 || !strings.Contains(r.stdout, "hello from p1") {
		t.Fatalf("alice in her project: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	wantRefused(t, "alice in project p2", alice.cli("task", "run", "--org", "o1", "--project", "p2", "--script", "echo no"),
		"task:run", "at project o1/p2")
	wantRefused(t, "alice at the org", alice.cli("task", "run", "--org", "o1", "--script", "echo no"),
		"task:run", "at org o1")
	// The administrator's task in p2 is not in her listing.
	other := c.submit("--org", "o1", "--project", "p2", "--script", "echo admin in p2")
	var list protocol.TaskList
	decodeJSON(t, alice.mustCLI("task", "list", "--json"), &list)
	if len(list.Tasks) != 1 || list.Tasks[0].Project != "p1" {
		t.Errorf("alice's task list: %+v, want her one task of p1", list.Tasks)
	}
	wantRefused(t, "alice reads the p2 task", alice.cli("task", "get", other), "task:view", "at project o1/p2")

	// She sees the account's connectors, which her tasks may use, but
	// cannot delete one.
	c.mustCLI("connector", "create", "github", "--url", "http://127.0.0.1:1")
	if out := alice.mustCLI("connector", "list"); !strings.Contains(out, "github") {
		t.Errorf("alice's connector list does not show the connector:\n%s", out)
	}
	wantRefused(t, "alice deletes the connector", alice.cli("connector", "delete", "github"), "connector:delete", "at account scope")

	// A viewer at the account, signed in with a key an administrator made
	// for her.
	c.mustCLI("user", "create", "vera")
	c.mustCLI("role", "bind", "viewer", "--user", "vera")
	key := c.newAPIKeyFor("vera-cli", "vera")
	vera := c.loginWithToken("vera", key)
	if out := vera.mustCLI("delegates", "list"); !strings.Contains(out, "p1-del") {
		t.Errorf("vera's delegates list does not show the delegate:\n%s", out)
	}
	if out := vera.mustCLI("token", "list"); !strings.Contains(out, "p1-ci") {
		t.Errorf("vera's token list does not show the token:\n%s", out)
	}
	wantRefused(t, "vera revokes a token", vera.cli("token", "revoke", "p1-ci"), "token:delete", "at project o1/p1")
	wantRefused(t, "vera runs a task", vera.cli("task", "run", "--org", "o1", "--project", "p1", "--script", "echo no"),
		"task:run", "at project o1/p1")
	// The token is still active and its delegate still works.
	if out := c.mustCLI("token", "list"); !strings.Contains(out, "p1-ci") || strings.Contains(out, "revoked") {
		t.Errorf("token list after vera's attempt:\n%s", out)
	}
	if r := alice.cli("task", "run", "--org", "o1", "--project", "p1", "--script", "echo still"); r.code != 0 || !strings.Contains(r.stdout, "still") {
		t.Errorf("after vera's attempt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// Logged out, the CLI has no key any more and says how to get one.
	alice.mustCLI("logout")
	if r := alice.cli("whoami"); r.code != 2 || !strings.Contains(r.stderr, "no API key") {
		t.Errorf("whoami after logout: exit %d, stderr %q", r.code, r.stderr)
	}
}

// newAPIKeyFor creates an API key owned by owner and returns it.
func (c *cluster) newAPIKeyFor(name, owner string) string {
	c.t.Helper()
	out := strings.TrimSpace(c.mustCLI("apikey", "create", name, "--owner", owner))
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "for user "+owner) && !strings.Contains(lines[0], "for service account "+owner) {
		c.t.Errorf("apikey create --owner %s says %q", owner, lines[0])
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, s)
	}
}

// Two managers on one PostgreSQL database, each caching keys and
// policies for an hour: a user disabled through one is refused by both at
// once, and so is a key revoked through the other. Only the broadcast
// between managers can do that.
func TestManagerPairDisabledUserAndRevokedKeyRefusedOnBoth(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	flags := []string{"--api-key-cache-ttl", "1h", "--log-level", "debug"}
	key := []string{seal.EnvMasterKey + "=" + seal.EncodeKey(seal.NewKey())}
	a := startSharedManager(t, "manager A", dsn, key, flags...)
	b := startSharedManager(t, "manager B", dsn, key, flags...)
	for _, m := range []*cluster{a, b} {
		eventually(t, 15*time.Second, m.mgr.name+" listening to the other managers", func() bool {
			return strings.Contains(m.mgr.out.String(), "listening to other managers")
		})
	}

	// dana signs in on A; her login key and a key made for her on B work
	// on both managers (and are cached there from now on).
	danaA := a.newUser("dana", "dana's long password")
	a.mustCLI("role", "bind", "viewer", "--user", "dana")
	ciKey := b.newAPIKeyFor("dana-ci", "dana")
	loginKey := storedKey(t, danaA)
	works := func(m *cluster, key string) cliResult { return m.as(key, "token", "list") }
	for _, m := range []*cluster{a, b} {
		for _, k := range []string{loginKey, ciKey} {
			if r := works(m, k); r.code != 0 {
				t.Fatalf("dana's key on %s: exit %d, stderr %q", m.mgr.name, r.code, r.stderr)
			}
		}
	}

	// Disabled through B: refused by B on the spot and by A as soon as the
	// broadcast arrives, with both of her keys.
	b.mustCLI("user", "disable", "dana")
	for _, k := range []string{loginKey, ciKey} {
		wantDisabled(t, "manager B", works(b, k))
	}
	eventually(t, 10*time.Second, "manager A refusing the user disabled through B", func() bool {
		return strings.Contains(works(a, loginKey).stderr, "disabled")
	})
	wantDisabled(t, "manager A", works(a, ciKey))
	wantDisabled(t, "manager A, her stored login", danaA.cli("token", "list"))

	// Enabled again, both keys work again on both.
	a.mustCLI("user", "enable", "dana")
	for _, m := range []*cluster{a, b} {
		eventually(t, 10*time.Second, m.mgr.name+" accepting the enabled user", func() bool {
			return works(m, loginKey).code == 0 && works(m, ciKey).code == 0
		})
	}

	// Her CI key revoked through A: refused on A on the spot and on B as
	// soon as the broadcast arrives; her other key keeps working.
	a.mustCLI("apikey", "revoke", "dana-ci")
	wantKeyRevoked(t, works(a, ciKey), "dana-ci")
	eventually(t, 10*time.Second, "manager B refusing the key revoked through A", func() bool {
		return strings.Contains(works(b, ciKey).stderr, "revoked")
	})
	wantKeyRevoked(t, works(b, ciKey), "dana-ci")
	for _, m := range []*cluster{a, b} {
		if r := works(m, loginKey); r.code != 0 {
			t.Errorf("dana's other key on %s after the revocation: exit %d, stderr %q", m.mgr.name, r.code, r.stderr)
		}
	}
}

func wantDisabled(t *testing.T, where string, r cliResult) {
	t.Helper()
	if r.code != 1 || !strings.Contains(r.stderr, "user dana is disabled") || !strings.Contains(r.stderr, "legate user enable dana") {
		t.Errorf("%s with a key of the disabled user: exit %d, stderr %q; want a refusal that says so and how to undo it", where, r.code, r.stderr)
	}
}

// storedKey reads the API key legate login stored for p.
func storedKey(t *testing.T, p person) string {
	t.Helper()
	env, err := readEnv(filepath.Join(p.config, "legate", "config"))
	if err != nil || env["api_key"] == "" {
		t.Fatalf("stored login of %s: %v %v", p.name, env, err)
	}
	return env["api_key"]
}

// An account admin disables the user admin: a manager restart keeps it
// disabled and warns that the key in admin.env is refused; legate manager
// reset-admin on the data directory gives the admin back (the key in
// admin.env works again; a revoked one is replaced).
func TestResetAdmin(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.mustCLI("user", "create", "root")
	c.mustCLI("role", "bind", "account-admin", "--user", "root")
	root := c.newAPIKeyFor("root-cli", "root")
	if r := c.as(root, "user", "disable", "admin"); r.code != 0 {
		t.Fatalf("root disables admin: exit %d, stderr %q", r.code, r.stderr)
	}
	oldKey := c.apiKey
	restart := func() {
		t.Helper()
		c.mgr.signal(syscall.SIGTERM)
		if code := c.mgr.wait(30 * time.Second); code != 0 {
			t.Fatalf("manager exit %d", code)
		}
		c.startManager(strings.TrimPrefix(c.url, "http://"))
	}
	restart()
	if r := c.cli("whoami"); r.code != 1 || !strings.Contains(r.stderr, "user admin is disabled") {
		t.Errorf("the admin.env key after a restart: exit %d, stderr %q; want it still refused", r.code, r.stderr)
	}
	if out := c.mgr.out.String(); !strings.Contains(out, "the user admin is disabled") || !strings.Contains(out, "legate manager reset-admin") {
		t.Errorf("the manager does not warn about the disabled admin:\n%s", out)
	}

	// While the manager runs (SQLite: seen within the key cache's 5 s).
	r := c.cliEnv(nil, "manager", "reset-admin", "--data", c.data)
	if r.code != 0 || !strings.Contains(r.stdout, "enabled the user admin") || !strings.Contains(r.stdout, `the key "admin" in`) {
		t.Fatalf("reset-admin: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	env, err := readEnv(filepath.Join(c.data, "admin.env"))
	if err != nil || env["LEGATE_API_KEY"] != oldKey || env["LEGATE_URL"] != c.url {
		t.Fatalf("admin.env after reset-admin: %v %v; want the same key and URL", env, err)
	}
	eventually(t, 15*time.Second, "the admin's key accepted again", func() bool { return c.cli("whoami").code == 0 })
	if out := c.mustCLI("whoami"); !strings.Contains(out, "user admin") || !strings.Contains(out, "account-admin at account") {
		t.Errorf("whoami after reset-admin: %q", out)
	}
	// admin's key revoked: reset-admin writes a new one.
	c.mustCLI("apikey", "revoke", "admin")
	r = c.cliEnv(nil, "manager", "reset-admin", "--data", c.data)
	if env, _ = readEnv(filepath.Join(c.data, "admin.env")); r.code != 0 || env["LEGATE_API_KEY"] == oldKey || !strings.Contains(r.stdout, `"admin-2"`) {
		t.Fatalf("reset-admin after revoking admin's key: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	c.apiKey = env["LEGATE_API_KEY"]
	c.mustCLI("whoami")
	// A mistyped data directory creates nothing.
	missing := filepath.Join(t.TempDir(), "nope")
	if r := c.cliEnv(nil, "manager", "reset-admin", "--data", missing); r.code == 0 || !strings.Contains(r.stderr, "no database at") {
		t.Errorf("reset-admin on a wrong --data: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("reset-admin created %s: %v", missing, err)
	}
}

// TestSecretAccessGatesTasks: a delegate admin who may also run tasks
// cannot run one that uses a stored secret until secret:access is bound
// to them; the refusal names the permission and the secret's scope. Once
// allowed, the task gets the value and its output shows it masked.
func TestSecretAccessGatesTasks(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.delegate("sec-del", "secret-access-host", c.seed004Env(c.token("sec-ci"), "sec-del", "")...)
	const value = "hunter2-e2e-value"
	if r := c.cliStdin(value, nil, "secret", "create", "DB_PW", "--from-stdin"); r.code != 0 {
		t.Fatalf("secret create: exit %d, stderr %q", r.code, r.stderr)
	}
	c.mustCLI("role", "create", "runner", "--permission", "task:run", "--permission", "task:view")
	dan := c.newUser("dan", "correct horse battery")
	c.mustCLI("role", "bind", "delegate-admin", "--user", "dan")
	c.mustCLI("role", "bind", "runner", "--user", "dan")

	script := `test "${secrets.DB_PW}" = "` + value + `" && echo "got ${secrets.DB_PW}"`
	wantRefused(t, "dan runs a task with a secret", dan.cli("task", "run", "--script", script), "secret:access", "account")
	if r := dan.cli("task", "run", "--script", "echo no secret here"); r.code != 0 || !strings.Contains(r.stdout, "no secret here") {
		t.Fatalf("dan runs a task without a secret: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	c.mustCLI("role", "create", "secret-user", "--permission", "secret:access")
	c.mustCLI("role", "bind", "secret-user", "--user", "dan")
	r := dan.cli("task", "run", "--script", script)
	if r.code != 0 || !strings.Contains(r.stdout, "got ") {
		t.Fatalf("dan with secret:access: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, value) {
		t.Errorf("the secret's value is in the task's output:\n%s", r.stdout)
	}
}
