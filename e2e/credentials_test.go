package e2e

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// ancestorsScript prints, for every ancestor of the task's shell up to
// PID 1, the PID and its /proc environ and cmdline in hex, one line each:
// "PID environ|cmdline HEX". Hex is not a form the delegate masks, so what
// the test reads is what a task could read and send anywhere.
const ancestorsScript = `pid=$PPID
while [ "$pid" -gt 0 ]; do
  for f in environ cmdline; do
    printf '%s %s ' "$pid" "$f"
    od -An -v -tx1 "/proc/$pid/$f" 2>/dev/null | tr -d ' \n'
    echo
  done
  pid=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$pid/status")
done
`

// ancestorFiles decodes the output of ancestorsScript: PID → file → bytes.
func ancestorFiles(t *testing.T, out string) map[int]map[string]string {
	t.Helper()
	files := map[int]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("bad line %q in\n%s", line, out)
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		var data []byte
		if len(f) == 3 {
			if data, err = hex.DecodeString(f[2]); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
		}
		if files[pid] == nil {
			files[pid] = map[string]string{}
		}
		files[pid][f[1]] = string(data)
	}
	return files
}

// shellOutputOn runs a shell task on a delegate with the selector sel
// (such as its hostname) and returns its stored output.
func (c *cluster) shellOutputOn(sel, script string) string {
	c.t.Helper()
	task, r := c.runJSON("--selector", sel, "--script", script)
	if task.Status != protocol.StatusSucceeded {
		c.t.Fatalf("task %s: %s (%s)\nstderr: %s", task.ID, task.Status, task.Error, r.stderr)
	}
	return c.mustCLI("task", "logs", task.ID)
}

// credentialSetups are delegates started the ways users start them, each
// with the credentials it must hide.
func credentialSetups(c *cluster) []struct {
	name    string
	env     []string
	args    []string
	secrets []string
} {
	const proxyPass = "pr0xy-Pa55-e2e"
	tokA, tokB, tokC := c.token("cred-a"), c.token("cred-b"), c.token("cred-c")
	return []struct {
		name    string
		env     []string
		args    []string
		secrets []string
	}{
		{"seed 004 variables and the seeds' proxy variables",
			append(c.seed004Env(tokA, "cred-a", "cred-a"),
				"PROXY_HOST=192.0.2.1", "PROXY_PORT=3128", "PROXY_USER=bob", "PROXY_PASSWORD="+proxyPass, "DELEGATE_HOSTNAME=cred-a"),
			nil, []string{tokA, proxyPass}},
		{"seed 003 variables, HTTPS_PROXY with credentials and an exported API key",
			append(c.seed003Env(tokB, "cred-b"),
				"HTTPS_PROXY=http://bob:"+proxyPass+"@192.0.2.1:3128", "LEGATE_API_KEY="+c.apiKey, "DELEGATE_HOSTNAME=cred-b"),
			nil, []string{tokB, proxyPass, c.apiKey}},
		{"token on the command line",
			[]string{"ACCOUNT_ID=" + c.account, "MANAGER_HOST_AND_PORT=" + c.url, "DELEGATE_NAME=cred-c", "DELEGATE_HOSTNAME=cred-c",
				"http_proxy=http://bob:" + proxyPass + "@192.0.2.1:3128"},
			[]string{"--token", tokC}, []string{tokC, proxyPass}},
	}
}

// TestTasksCannotReadTheDelegatesCredentials: a task walks up its
// ancestors and reads their /proc environ and cmdline, as a task running
// as the delegate's user can; it finds neither the delegate token nor the
// proxy password nor an API key, however the delegate was given them.
func TestTasksCannotReadTheDelegatesCredentials(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	for _, s := range credentialSetups(c) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			c := &cluster{t: t, url: c.url, account: c.account, apiKey: c.apiKey, data: c.data, mgr: c.mgr}
			host := ""
			for _, e := range s.env {
				if v, ok := strings.CutPrefix(e, "DELEGATE_HOSTNAME="); ok {
					host = v
				}
			}
			d := start(t, "delegate "+host, s.env, append([]string{"delegate", "--grace", "5s"}, s.args...)...)
			c.waitConnected(host, "")
			files := ancestorFiles(t, c.shellOutputOn(host, ancestorsScript))
			if files[d.cmd.Process.Pid] == nil {
				t.Fatalf("the walk did not reach the delegate (PID %d): %v", d.cmd.Process.Pid, slices.Collect(maps.Keys(files)))
			}
			if env := files[d.cmd.Process.Pid]["environ"]; !strings.Contains(env, "DELEGATE_HOSTNAME="+host) {
				t.Fatalf("could not read the delegate's environ: %q", env)
			}
			for pid, fs := range files {
				for name, content := range fs {
					for _, secret := range s.secrets {
						if strings.Contains(content, secret) {
							t.Errorf("/proc/%d/%s of an ancestor (delegate: %d) shows a credential %q", pid, name, d.cmd.Process.Pid, secret)
						}
					}
				}
			}
			if strings.Contains(d.out.String(), "could not hide") {
				t.Errorf("the delegate warns that it could not hide its credentials:\n%s", d.out)
			}
		})
	}
}

// TestTaskOutputMasksTheDelegatesCredentials: a task that knows the
// delegate token and proxy password and prints them, plain and encoded,
// gets them masked in the stored output.
func TestTaskOutputMasksTheDelegatesCredentials(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	const proxyPass = "pr0xy-Pa55-e2e"
	tok := c.token("echo")
	c.delegate("echo", "echo-host", append(c.seed004Env(tok, "echo", ""),
		"PROXY_HOST=192.0.2.1", "PROXY_PORT=3128", "PROXY_USER=bob", "PROXY_PASSWORD="+proxyPass)...)
	out := c.shellOutputOn("echo-host", fmt.Sprintf(`echo "token=%s"
printf '%%s' 'bob:%s' | base64
echo '{"password":"%s"}'
`, tok, proxyPass, proxyPass))
	basic := base64.StdEncoding.EncodeToString([]byte("bob:" + proxyPass))
	for _, leak := range []string{tok, proxyPass, basic[6:]} {
		if strings.Contains(out, leak) {
			t.Errorf("stored output shows %q:\n%s", leak, out)
		}
	}
	if n := strings.Count(out, "**************"); n != 3 {
		t.Errorf("stored output has %d masked values, want 3:\n%s", n, out)
	}
}

// TestTaskProxyVariables: tasks get the proxy variables without the
// password, or with it when PROXY_CREDENTIALS_TO_TASKS=true.
func TestTaskProxyVariables(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	const proxyPass = "pr0xy-Pa55-e2e"
	for i, tt := range []struct {
		name string
		env  []string
		// want: variables the task must see, with these values; absent:
		// variables it must not see; password: whether the proxy password
		// may appear at all.
		want     map[string]string
		absent   []string
		password bool
	}{
		{"seed variables", []string{"PROXY_HOST=192.0.2.1", "PROXY_PORT=3128", "PROXY_USER=bob", "PROXY_PASSWORD=" + proxyPass},
			map[string]string{"PROXY_HOST": "192.0.2.1", "PROXY_PORT": "3128"}, []string{"PROXY_USER", "PROXY_PASSWORD"}, false},
		{"standard variables", []string{"HTTPS_PROXY=http://bob:" + proxyPass + "@192.0.2.1:3128", "http_proxy=http://bob:" + proxyPass + "@192.0.2.1:3128", "NO_PROXY=.corp"},
			map[string]string{"HTTPS_PROXY": "http://192.0.2.1:3128", "http_proxy": "http://192.0.2.1:3128", "NO_PROXY": ".corp"}, nil, false},
		{"seed variables, credentials to tasks", []string{"PROXY_HOST=192.0.2.1", "PROXY_PORT=3128", "PROXY_USER=bob", "PROXY_PASSWORD=" + proxyPass,
			"PROXY_CREDENTIALS_TO_TASKS=true"},
			map[string]string{"PROXY_HOST": "192.0.2.1", "PROXY_USER": "bob", "PROXY_PASSWORD": proxyPass}, nil, true},
		{"standard variables, credentials to tasks", []string{"HTTPS_PROXY=http://bob:" + proxyPass + "@192.0.2.1:3128", "PROXY_CREDENTIALS_TO_TASKS=true"},
			map[string]string{"HTTPS_PROXY": "http://bob:" + proxyPass + "@192.0.2.1:3128"}, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &cluster{t: t, url: c.url, account: c.account, apiKey: c.apiKey, data: c.data, mgr: c.mgr}
			host := "proxyvars-" + strconv.Itoa(i)
			tok := c.token(host)
			c.delegate(host, host, append(c.seed004Env(tok, host, ""), tt.env...)...)
			// In hex: the delegate masks its proxy password in task output.
			raw, err := hex.DecodeString(strings.TrimSpace(c.shellOutputOn(host, `env | od -An -v -tx1 | tr -d ' \n'`)))
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]string{}
			for _, kv := range strings.Split(string(raw), "\n") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					seen[k] = v
				}
			}
			for k, v := range tt.want {
				if seen[k] != v {
					t.Errorf("the task sees %s=%q, want %q", k, seen[k], v)
				}
			}
			for _, k := range tt.absent {
				if v, ok := seen[k]; ok {
					t.Errorf("the task sees %s=%q", k, v)
				}
			}
			if !tt.password && strings.Contains(string(raw), proxyPass) {
				t.Errorf("the task's environment holds the proxy password:\n%s", raw)
			}
		})
	}
}

// TestDevHidesCredentials: `legate dev` runs tasks as children of the
// process that holds the manager's keys: they find no credential in its
// /proc files, and the admin API key is masked in their output.
func TestDevHidesCredentials(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	addr := freePort(t)
	const exported, proxyPass = "lgk_exported-api-key-e2e", "pr0xy-Pa55-dev"
	d := start(t, "dev", []string{"LEGATE_API_KEY=" + exported, "HTTPS_PROXY=http://bob:" + proxyPass + "@192.0.2.1:3128"},
		"dev", "--data", data, "--listen", addr, "--heartbeat-interval", "500ms")
	c := &cluster{t: t, url: "http://" + addr, data: data, mgr: d}
	eventually(t, 20*time.Second, "dev admin.env", func() bool {
		env, err := readEnv(filepath.Join(data, "admin.env"))
		if err != nil || env["LEGATE_API_KEY"] == "" {
			return false
		}
		c.account, c.apiKey = env["LEGATE_ACCOUNT_ID"], env["LEGATE_API_KEY"]
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	c.waitConnected(machineHostname(t), "")
	token, err := os.ReadFile(filepath.Join(data, "dev-delegate.token"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{exported, proxyPass, c.apiKey}
	files := ancestorFiles(t, c.shellOutputOn("dev", ancestorsScript))
	if files[d.cmd.Process.Pid] == nil {
		t.Fatalf("the walk did not reach legate dev (PID %d)", d.cmd.Process.Pid)
	}
	for pid, fs := range files {
		for name, content := range fs {
			for _, secret := range secrets {
				if strings.Contains(content, secret) {
					t.Errorf("/proc/%d/%s of an ancestor (legate dev: %d) shows a credential %q", pid, name, d.cmd.Process.Pid, secret)
				}
			}
		}
	}
	out := c.shellOutputOn("dev", fmt.Sprintf("echo key=%s; echo token=%s", c.apiKey, strings.TrimSpace(string(token))))
	if out != "key=**************\ntoken=**************\n" {
		t.Errorf("output %q: the API key and the dev delegate's token must be masked", out)
	}
}

func machineHostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestTasksDoNotInheritTheDelegatesDescriptors: a file descriptor the
// delegate inherited from whatever started it (a supervisor's socket or
// pipe, here an open file) does not reach its tasks.
func TestTasksDoNotInheritTheDelegatesDescriptors(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("fds")
	f, err := os.Create(filepath.Join(t.TempDir(), "supervisor-descriptor"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(binary, "delegate", "--grace", "5s")
	cmd.Env = append(baseEnv(), append(c.seed004Env(tok, "fds", ""), "DELEGATE_HOSTNAME=fds-host")...)
	cmd.Dir = t.TempDir()
	cmd.ExtraFiles = []*os.File{f}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("--- delegate output ---\n%s", out)
		}
	})
	c.waitConnected("fds-host", "")
	fds := c.shellOutputOn("fds-host", `ls -l /proc/$$/fd; true`)
	if strings.Contains(fds, f.Name()) {
		t.Errorf("the task inherited the delegate's descriptor of %s:\n%s", f.Name(), fds)
	}
}
