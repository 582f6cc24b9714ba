package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// INIT_SCRIPT (script text, as in seed 004's task definition) runs in the
// delegate's working directory before it connects: a task sees what it
// made, its output is in the delegate's log, and it does not see the
// delegate token.
func TestE2EInitScript(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("init")
	env := c.seed004Env(tok, "init-ok", "linux")
	env = replaceEnv(env, "INIT_SCRIPT", "echo preparing the host; echo ready > init.txt; printf '%s' \"$DELEGATE_TOKEN\" > token-seen")
	p := c.delegate("init-ok", "init-host", env...)

	task, r := c.runJSON("--selector", "init-ok", "--script", "cat ../../init.txt; cat ../../token-seen")
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("task %+v\nstderr %s", task, r.stderr)
	}
	if out := c.mustCLI("task", "logs", task.ID); out != "ready\n" {
		t.Errorf("task output %q, want the file INIT_SCRIPT wrote (and no token)", out)
	}
	log := p.out.String()
	if !strings.Contains(log, `msg=INIT_SCRIPT line="preparing the host"`) {
		t.Errorf("INIT_SCRIPT output is not in the delegate's log:\n%s", log)
	}
	if fin, reg := strings.Index(log, "INIT_SCRIPT finished"), strings.Index(log, "registered with the manager"); fin < 0 || reg < 0 || fin > reg {
		t.Errorf("the delegate registered before INIT_SCRIPT finished:\n%s", log)
	}
}

// A failing INIT_SCRIPT stops the delegate with a non-zero status and a
// message that names INIT_SCRIPT and the exit code; it never registers.
func TestE2EInitScriptFailure(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("init")
	env := replaceEnv(c.seed004Env(tok, "init-bad", ""), "INIT_SCRIPT", "echo cannot install jq; exit 5")
	p := start(t, "delegate init-bad", append(env, "DELEGATE_HOSTNAME=init-bad-host"), "delegate")
	if code := p.wait(60 * time.Second); code == 0 {
		t.Fatalf("delegate exited 0 after INIT_SCRIPT failed:\n%s", p.out.String())
	}
	out := p.out.String()
	if !strings.Contains(out, "legate: INIT_SCRIPT failed with exit code 5") || !strings.Contains(out, `line="cannot install jq"`) {
		t.Errorf("output does not explain the failure:\n%s", out)
	}
	if _, ok := c.findDelegate("init-bad-host"); ok {
		t.Error("the delegate registered although INIT_SCRIPT failed")
	}
}

// INIT, seed 001's name for INIT_SCRIPT, runs the same way; both set to
// different scripts stop the delegate at start with a message naming both.
func TestE2EInitAlias(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("init")
	env := replaceEnv(c.seed004Env(tok, "init-alias", "linux"), "INIT", "echo installing; echo alias > init.txt")
	p := c.delegate("init-alias", "init-alias-host", env...)
	task, r := c.runJSON("--selector", "init-alias", "--script", "cat ../../init.txt")
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("task %+v\nstderr %s", task, r.stderr)
	}
	if out := c.mustCLI("task", "logs", task.ID); out != "alias\n" {
		t.Errorf("task output %q, want the file INIT wrote", out)
	}
	if log := p.out.String(); !strings.Contains(log, `msg=INIT_SCRIPT line=installing`) {
		t.Errorf("INIT's output is not in the delegate's log:\n%s", log)
	}

	both := replaceEnv(replaceEnv(c.seed004Env(tok, "init-both", ""), "INIT_SCRIPT", "echo a > a.txt"), "INIT", "echo b > b.txt")
	q := start(t, "delegate init-both", append(both, "DELEGATE_HOSTNAME=init-both-host"), "delegate")
	if code := q.wait(60 * time.Second); code == 0 {
		t.Fatalf("delegate exited 0 with INIT_SCRIPT and INIT set to different scripts:\n%s", q.out.String())
	}
	if out := q.out.String(); !strings.Contains(out, "INIT_SCRIPT and INIT are both set, to different scripts; set only one") {
		t.Errorf("output does not name both settings:\n%s", out)
	}
	if _, ok := c.findDelegate("init-both-host"); ok {
		t.Error("the delegate registered although INIT_SCRIPT and INIT conflict")
	}
}

func replaceEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// describeHost returns describe's entry for the instance on host.
func (c *cluster) describeHost(name, host string) (protocol.DelegateDetail, bool) {
	c.t.Helper()
	r := c.cli("delegates", "describe", name, "--json")
	if r.code != 0 {
		return protocol.DelegateDetail{}, false
	}
	var d protocol.DelegateDetails
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		c.t.Fatalf("decode describe: %v\n%s", err, r.stdout)
	}
	for _, in := range d.Instances {
		if in.Hostname == host {
			return in, true
		}
	}
	return protocol.DelegateDetail{}, false
}

// waitConfigured waits until describe shows a finished run of version v of
// the configuration on host, and returns it.
func (c *cluster) waitConfigured(name, host, conf string, v int64) protocol.DelegateDetail {
	c.t.Helper()
	var in protocol.DelegateDetail
	eventually(c.t, 30*time.Second, fmt.Sprintf("%s ran %s v%d", host, conf, v), func() bool {
		var ok bool
		in, ok = c.describeHost(name, host)
		r := in.ConfigurationResult
		return ok && r != nil && r.Name == conf && r.Version == v && in.Configuring == ""
	})
	return in
}

// A configuration runs on the delegates it matches when they start and
// again, on the connected delegate, when it is updated — over the
// WebSocket and with POLL_FOR_TASKS=true; describe shows version, exit
// code and output; a delegate it does not match never runs it.
func TestE2EConfiguration(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{protocol.ConnWebSocket, protocol.ConnPolling} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			c := startCluster(t)
			tok := c.token("conf")
			dir := t.TempDir()
			v1 := filepath.Join(dir, "v1.sh")
			if err := os.WriteFile(v1, []byte("echo installing tools $LEGATE_CONFIGURATION_VERSION\necho v1 > tools.txt\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out := c.mustCLI("configuration", "create", "tools", "--script", v1, "--selector", "linux")
			if !strings.Contains(out, `Created configuration "tools" (version 1)`) {
				t.Errorf("create said %q", out)
			}
			env := c.seed004Env(tok, "conf-"+mode, "linux,docker")
			other := c.seed004Env(tok, "plain-"+mode, "windows")
			if mode == protocol.ConnPolling {
				env = append(env, "POLL_FOR_TASKS=true")
			}
			c.delegate("conf-"+mode, "conf-host", env...)
			c.waitConnected("conf-host", mode)
			plain := c.delegate("plain-"+mode, "plain-host", other...)

			in := c.waitConfigured("conf-"+mode, "conf-host", "tools", 1)
			res := in.ConfigurationResult
			if res.ExitCode == nil || *res.ExitCode != 0 || res.Output != "installing tools 1\n" {
				t.Errorf("first run: %+v", res)
			}
			text := c.mustCLI("delegates", "describe", "conf-"+mode)
			for _, want := range []string{"Configuration:  tools v1 applies", "Last applied:   tools v1, exit 0", "    installing tools 1"} {
				if !strings.Contains(text, want) {
					t.Errorf("describe lacks %q:\n%s", want, text)
				}
			}
			task, _ := c.runJSON("--selector", "conf-"+mode, "--script", "cat ../../tools.txt")
			if task.Status != protocol.StatusSucceeded {
				t.Fatalf("task after the configuration: %+v", task)
			}

			// The update fails on purpose: its exit code shows.
			v2 := filepath.Join(dir, "v2.sh")
			if err := os.WriteFile(v2, []byte("echo v2 > tools.txt\necho no space left >&2\nexit 3\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			c.mustCLI("configuration", "update", "tools", "--script", v2)
			in = c.waitConfigured("conf-"+mode, "conf-host", "tools", 2)
			res = in.ConfigurationResult
			if res.ExitCode == nil || *res.ExitCode != 3 || res.Output != "no space left\n" {
				t.Errorf("run after the update: %+v", res)
			}
			if in.ConfigurationApplies == nil || in.ConfigurationApplies.Version != 2 {
				t.Errorf("applies %+v, want tools v2", in.ConfigurationApplies)
			}
			if d, _ := c.findDelegate("conf-host"); d.Configuration != "tools" || d.Connection != mode {
				t.Errorf("listing: configuration %q, connection %q", d.Configuration, d.Connection)
			}

			if in, ok := c.describeHost("plain-"+mode, "plain-host"); !ok || in.ConfigurationResult != nil || in.ConfigurationApplies != nil {
				t.Errorf("the non-matching delegate shows a configuration: %+v", in)
			}
			if strings.Contains(plain.out.String(), "running delegate configuration") {
				t.Errorf("the non-matching delegate ran the configuration:\n%s", plain.out.String())
			}
		})
	}
}

// Identity from the seeds: a Kubernetes-style delegate that comes back
// with a new IP (a rescheduled pod) is the same instance; a VM-style one
// with a new IP is a new instance. DELEGATE_DESCRIPTION shows in listings.
func TestE2EIdentityAcrossIPChange(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("ident")
	for _, tt := range []struct {
		name, typ string
		same      bool
	}{
		{"pod", "KUBERNETES", true},
		{"vm", "SHELL", false},
	} {
		host := tt.name + "-host"
		env := func(ip string) []string {
			return []string{"ACCOUNT_ID=" + c.account, "DELEGATE_TOKEN=" + tok, "MANAGER_HOST_AND_PORT=" + c.url,
				"DELEGATE_NAME=" + tt.name, "DELEGATE_TYPE=" + tt.typ, "DELEGATE_IP=" + ip,
				"DELEGATE_DESCRIPTION=" + tt.name + " in rack 4"}
		}
		p := c.delegate(tt.name, host, env("10.9.0.1")...)
		first, _ := c.findDelegate(host)
		if first.IP != "10.9.0.1" || first.Description != tt.name+" in rack 4" {
			t.Fatalf("%s: listed as %+v", tt.name, first)
		}
		if list := c.mustCLI("delegates", "list", "-o", "wide"); !strings.Contains(list, tt.name+" in rack 4") {
			t.Errorf("delegates list lacks the description:\n%s", list)
		}
		p.signal(syscall.SIGTERM)
		if code := p.wait(60 * time.Second); code != 0 {
			t.Fatalf("%s: exit %d on SIGTERM", tt.name, code)
		}
		start(t, "delegate "+tt.name+" again", append(env("10.9.0.2"), "DELEGATE_HOSTNAME="+host), "delegate")
		var instances []protocol.Delegate
		eventually(t, 30*time.Second, tt.name+" connected with the new IP", func() bool {
			instances = nil
			for _, d := range c.allDelegates() { // the first stopped and deregistered
				if d.Name == tt.name {
					instances = append(instances, d)
				}
			}
			for _, d := range instances {
				if d.IP == "10.9.0.2" && d.Status == protocol.DelegateConnected {
					return true
				}
			}
			return false
		})
		switch {
		case tt.same && (len(instances) != 1 || instances[0].InstanceID != first.InstanceID):
			t.Errorf("%s: a Kubernetes-style delegate with a new IP became %+v, want the same instance %s", tt.name, instances, first.InstanceID)
		case !tt.same && (len(instances) != 2 || instances[0].InstanceID == instances[1].InstanceID):
			t.Errorf("%s: a VM-style delegate with a new IP: %+v, want a second instance", tt.name, instances)
		}
	}
}

// With two managers on one PostgreSQL database, a configuration updated
// through manager A reaches a delegate connected to manager B.
func TestE2EConfigurationAcrossManagers(t *testing.T) {
	t.Parallel()
	p := startManagerPair(t)
	tok := p.a.token("conf")
	script := filepath.Join(t.TempDir(), "tools.sh")
	if err := os.WriteFile(script, []byte("echo one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.a.mustCLI("configuration", "create", "tools", "--script", script)
	p.b.delegate("on-b", "b-host", p.b.seed004Env(tok, "on-b", "")...)
	p.b.waitConfigured("on-b", "b-host", "tools", 1)

	if err := os.WriteFile(script, []byte("echo two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.a.mustCLI("configuration", "update", "tools", "--script", script)
	in := p.a.waitConfigured("on-b", "b-host", "tools", 2)
	if in.ConfigurationResult.Output != "two\n" {
		t.Errorf("run after the update through manager A: %+v", in.ConfigurationResult)
	}
}

// A project's delegate-admin (who may not run tasks) writes a
// configuration for its project: the project's delegate runs it, a
// shared account delegate never does, and its output, which shows a
// password, is withheld from a user who may not view the configuration.
func TestE2EProjectConfigurationStaysOnItsProject(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.mustCLI("org", "create", "eng")
	c.mustCLI("project", "create", "--org", "eng", "web")
	webTok := c.scopedToken("web-ci", "--org", "eng", "--project", "web")
	acctTok := c.token("shared-ci")
	c.mustCLI("user", "create", "dela")
	c.mustCLI("role", "bind", "delegate-admin", "--user", "dela", "--org", "eng", "--project", "web")
	dela := c.newAPIKeyFor("dela-key", "dela")
	c.mustCLI("user", "create", "nobody")
	nobody := c.newAPIKeyFor("nobody-key", "nobody")

	script := filepath.Join(t.TempDir(), "grab.sh")
	if err := os.WriteFile(script, []byte("echo docker login -p hunter2-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := c.as(dela, "task", "run", "--org", "eng", "--project", "web", "--script", "id"); r.code == 0 {
		t.Fatalf("the delegate-admin ran a task; this test's premise is that it may not:\n%s", r.stdout)
	}
	if r := c.as(dela, "configuration", "create", "grab", "--script", script, "--org", "eng", "--project", "web"); r.code != 0 {
		t.Fatalf("the project's delegate-admin creates a configuration: exit %d\n%s", r.code, r.stderr)
	}
	ps := c.startDelegates(deliveryModes[0],
		delegateSpec{name: "shared", host: "shared-h", token: acctTok},
		delegateSpec{name: "web-del", host: "web-h", token: webTok})
	c.waitConfigured("web-del", "web-h", "grab", 1)
	// A task it ran proves the shared delegate is past configuring.
	if tk, r := c.runJSON("--selector", "shared", "--script", "echo ok"); tk.Status != protocol.StatusSucceeded {
		t.Fatalf("task on the shared delegate: %+v\n%s", tk, r.stderr)
	}
	if in, ok := c.describeHost("shared", "shared-h"); !ok || in.ConfigurationApplies != nil || in.ConfigurationResult != nil {
		t.Errorf("the shared account delegate shows the project's configuration: %+v", in)
	}
	if out := ps["shared-h"].out.String(); strings.Contains(out, "running delegate configuration") {
		t.Errorf("the shared account delegate ran the project's configuration:\n%s", out)
	}

	if out := c.mustCLI("delegates", "describe", "web-del"); !strings.Contains(out, "hunter2-s3cret") {
		t.Errorf("the account admin does not see the output:\n%s", out)
	}
	r := c.as(nobody, "delegates", "describe", "web-del")
	if r.code != 0 || strings.Contains(r.stdout, "hunter2") || !strings.Contains(r.stdout, "Configuration output: withheld") ||
		!strings.Contains(r.stdout, "grab v1, exit 0") {
		t.Errorf("describe by a user without configuration:view: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
