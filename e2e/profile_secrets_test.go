package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// A delegate configuration's script uses stored secrets as ${secrets.NAME}
// (seed 000's secrets in delegate profiles): the script sees the value, its
// output (describe, the delegate's log) shows it masked, and the value is
// in no log. Writing such a script takes secret:access on each secret, at
// the configuration's scope; an unknown secret, or one outside that
// scope, is refused with a message that names it.
func TestE2EConfigurationSecrets(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	const value = "conf-pw-e2e-4711"
	if r := c.cliStdin(value, nil, "secret", "create", "CONF_PW", "--from-stdin"); r.code != 0 {
		t.Fatalf("secret create: %+v", r)
	}
	c.mustCLI("org", "create", "o1")
	c.mustCLI("project", "create", "--org", "o1", "p1")
	if r := c.cliStdin("project-only", nil, "secret", "create", "PROJ_PW", "--from-stdin", "--org", "o1", "--project", "p1"); r.code != 0 {
		t.Fatalf("secret create: %+v", r)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Refusals: unknown, outside the scope, no secret:access.
	if r := c.cli("configuration", "create", "bad", "--script", write("unknown.sh", "echo ${secrets.NOPE}\n")); r.code == 0 ||
		!strings.Contains(r.stderr, "unknown secret NOPE") {
		t.Errorf("an unknown secret: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := c.cli("configuration", "create", "bad", "--script", write("outside.sh", "echo ${secrets.PROJ_PW}\n")); r.code == 0 ||
		!strings.Contains(r.stderr, "unknown secret PROJ_PW") {
		t.Errorf("a secret outside the configuration's scope: exit %d, stderr %q", r.code, r.stderr)
	}
	dan := c.newUser("dan", "correct horse battery")
	c.mustCLI("role", "bind", "delegate-admin", "--user", "dan")
	wantRefused(t, "dan writes a configuration with a secret",
		dan.cli("configuration", "create", "bad", "--script", write("dan.sh", "echo ${secrets.CONF_PW}\n")), "secret:access", "account")

	// The script compares a hash: the value itself is in no file.
	script := "test \"$(printf %s \"${secrets.CONF_PW}\" | sha256sum | cut -d' ' -f1)\" = " + sha256hex(value) +
		" && echo \"logging in with ${secrets.CONF_PW}\"\n"
	c.mustCLI("configuration", "create", "creds", "--script", write("creds.sh", script))
	p := c.delegate("creds", "creds-host", c.seed004Env(c.token("creds"), "creds", "")...)
	in := c.waitConfigured("creds", "creds-host", "creds", 1)
	res := in.ConfigurationResult
	if res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("the configuration did not see the secret's value: %+v\n%s", res, p.out.String())
	}
	if !strings.Contains(res.Output, "logging in with *") || strings.Contains(res.Output, value) {
		t.Errorf("output %q: want the value masked", res.Output)
	}
	if !strings.Contains(p.out.String(), "logging in with *") {
		t.Errorf("the configuration's output is not in the delegate's log:\n%s", p.out.String())
	}
	for name, log := range map[string]string{"delegate": p.out.String(), "manager": c.mgr.out.String()} {
		if strings.Contains(log, value) {
			t.Errorf("the secret's value is in the %s's log", name)
		}
	}
	noValueOnDisk(t, p.cmd.Dir, value)
	if task, _ := c.runJSON("--selector", "creds", "--script", "echo ok"); task.Status != protocol.StatusSucceeded {
		t.Errorf("task after the configuration: %+v", task)
	}
}

// noValueOnDisk fails when a file under dir holds value.
func noValueOnDisk(t *testing.T, dir, value string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), value) {
			t.Errorf("%s holds the secret's value in clear", path)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// INIT_SCRIPT uses stored secrets as ${secrets.NAME} too, resolved at the
// scope of the delegate's token, and only those its token was created to
// give (--init-secret, which takes secret:access on each): the script
// sees the value, the delegate's log shows it masked, no file holds it.
// A token that does not give the secret, an unknown secret and one
// outside the token's scope are refused with a message that names it,
// and the delegate does not start.
func TestE2EInitScriptSecrets(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	const value = "init-pw-e2e-0815"
	if r := c.cliStdin(value, nil, "secret", "create", "INIT_PW", "--from-stdin"); r.code != 0 {
		t.Fatalf("secret create: %+v", r)
	}
	c.mustCLI("org", "create", "o1")
	c.mustCLI("project", "create", "--org", "o1", "p1")
	if r := c.cliStdin("project-only", nil, "secret", "create", "PROJ_PW", "--from-stdin", "--org", "o1", "--project", "p1"); r.code != 0 {
		t.Fatalf("secret create: %+v", r)
	}
	if r := c.cli("token", "create", "bad", "--init-secret", "NOPE"); r.code == 0 || !strings.Contains(r.stderr, "unknown secret NOPE") {
		t.Errorf("a token giving an unknown secret: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := c.cli("token", "create", "bad", "--init-secret", "PROJ_PW"); r.code == 0 || !strings.Contains(r.stderr, "unknown secret PROJ_PW") {
		t.Errorf("a token giving a secret outside its scope: exit %d, stderr %q", r.code, r.stderr)
	}
	dan := c.newUser("dan", "correct horse battery")
	c.mustCLI("role", "bind", "delegate-admin", "--user", "dan")
	wantRefused(t, "dan creates a token giving a secret", dan.cli("token", "create", "bad", "--init-secret", "INIT_PW"), "secret:access", "account")

	tok := c.token("plain")
	granted := strings.TrimSpace(c.mustCLI("token", "create", "init-sec", "--init-secret", "INIT_PW"))
	granted = granted[strings.LastIndex(granted, "\n")+1:]

	script := "test \"$(printf %s \"${secrets.INIT_PW}\" | sha256sum | cut -d' ' -f1)\" = " + sha256hex(value) +
		" && echo \"init got ${secrets.INIT_PW}\""
	env := replaceEnv(c.seed004Env(granted, "init-sec", "init-sec"), "INIT_SCRIPT", script)
	p := c.delegate("init-sec", "init-sec-host", env...)
	log := p.out.String()
	if !strings.Contains(log, `msg=INIT_SCRIPT line="init got *`) || strings.Contains(log, value) {
		t.Errorf("the delegate's log does not show INIT_SCRIPT's output with the value masked:\n%s", log)
	}
	if strings.Contains(c.mgr.out.String(), value) {
		t.Error("the secret's value is in the manager's log")
	}
	noValueOnDisk(t, p.cmd.Dir, value)
	if task, _ := c.runJSON("--selector", "init-sec", "--script", "echo ok"); task.Status != protocol.StatusSucceeded {
		t.Errorf("task after INIT_SCRIPT: %+v", task)
	}

	// The plain token does not give INIT_PW.
	env = replaceEnv(c.seed004Env(tok, "init-plain", ""), "INIT_SCRIPT", "echo ${secrets.INIT_PW}")
	q := start(t, "delegate init-plain", append(env, "DELEGATE_HOSTNAME=init-plain-host"), "delegate")
	if code := q.wait(60 * time.Second); code == 0 {
		t.Fatalf("delegate exited 0 although its token does not give INIT_PW:\n%s", q.out.String())
	}
	if out := q.out.String(); !strings.Contains(out, "INIT_PW") || !strings.Contains(out, "--init-secret") {
		t.Errorf("the refusal does not name the secret and what to do:\n%s", out)
	}
	if _, ok := c.findDelegate("init-plain-host"); ok {
		t.Error("the delegate registered although INIT_SCRIPT's secret was refused")
	}

	// A secret the token gives but that was deleted since: unknown.
	c.mustCLI("secret", "delete", "INIT_PW")
	env = replaceEnv(c.seed004Env(granted, "init-gone", ""), "INIT_SCRIPT", "echo ${secrets.INIT_PW}")
	g := start(t, "delegate init-gone", append(env, "DELEGATE_HOSTNAME=init-gone-host"), "delegate")
	if code := g.wait(60 * time.Second); code == 0 {
		t.Fatalf("delegate exited 0 although INIT_PW was deleted:\n%s", g.out.String())
	}
	if out := g.out.String(); !strings.Contains(out, "unknown secret INIT_PW") {
		t.Errorf("the refusal does not name the unknown secret:\n%s", out)
	}
}
