package e2e

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/certtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/proxytest"
)

// TestTLSManagerDelegateAndCLI runs `legate manager --tls-cert --tls-key`
// and a delegate process that trusts the manager's CA through its
// ca-bundle/ directory: it connects over WSS and runs a task; the CLI
// trusts the CA through LEGATE_CA_CERT and explains the failure without it;
// a delegate without the CA stops with an error that says where to add it.
func TestTLSManagerDelegateAndCLI(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "e2e CA")
	cert, key := ca.IssueFiles(t, dir, "manager", certtest.Leaf{CommonName: "manager"})
	caFile := filepath.Join(dir, "ca.pem")
	certtest.WriteFile(t, caFile, ca.PEM)

	c := &cluster{t: t, data: t.TempDir()}
	addr := freePort(t)
	c.startManager(addr, "--tls-cert", cert, "--tls-key", key)
	c.url = "https://" + addr
	env, err := readEnv(filepath.Join(c.data, "admin.env"))
	if err != nil {
		t.Fatal(err)
	}
	if env["LEGATE_URL"] != c.url {
		t.Fatalf("admin.env LEGATE_URL = %q, want %q", env["LEGATE_URL"], c.url)
	}

	// The CLI without the CA: a clear error.
	r := c.cli("delegates", "list")
	if r.code == 0 || !strings.Contains(r.stderr, "unknown authority") || !strings.Contains(r.stderr, "LEGATE_CA_CERT") {
		t.Fatalf("CLI without LEGATE_CA_CERT: exit %d, stderr %q", r.code, r.stderr)
	}
	c.cliExtra = []string{"LEGATE_CA_CERT=" + caFile}

	tok := c.token("tls")
	wd := t.TempDir()
	certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "e2e-ca.pem"), ca.PEM)
	start(t, "delegate tls-host", append(c.seed004Env(tok, "tls-delegate", "tls"), "DELEGATE_HOSTNAME=tls-host"),
		"delegate", "--grace", "5s", "--workdir", wd)
	c.waitConnected("tls-host", protocol.ConnWebSocket)
	task, res := c.runJSON("--selector", "tls-host", "--script", "echo hello over wss")
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("task %s: %s (%s)\nstderr: %s", task.ID, task.Status, task.Error, res.stderr)
	}

	// A delegate that does not trust the CA stops and says why.
	bad := start(t, "delegate untrusting", append(c.seed004Env(tok, "tls-delegate", "tls"), "DELEGATE_HOSTNAME=untrusting"),
		"delegate", "--workdir", t.TempDir())
	if code := bad.wait(30 * time.Second); code == 0 {
		t.Fatalf("a delegate without the CA exited 0")
	}
	for _, want := range []string{"manager certificate is signed by an unknown authority", "ca-bundle/", "SHARED_CA_CERTS_PATH"} {
		if !strings.Contains(bad.out.String(), want) {
			t.Errorf("delegate output does not contain %q:\n%s", want, bad.out)
		}
	}
}

// TestManagerTLSFlagErrors: unusable TLS files stop the manager at start
// with an error that names the flag.
func TestManagerTLSFlagErrors(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "e2e CA")
	cert, _ := ca.IssueFiles(t, dir, "manager", certtest.Leaf{})
	_, otherKey := ca.IssueFiles(t, dir, "other", certtest.Leaf{})
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", cert}, "--tls-key"},
		{[]string{"--tls-cert", cert, "--tls-key", otherKey}, "do not form a key pair"},
		{[]string{"--tls-cert", filepath.Join(dir, "nope.crt"), "--tls-key", otherKey}, "--tls-cert"},
	} {
		p := start(t, "manager", nil, append([]string{"manager", "--listen", freePort(t), "--data", t.TempDir()}, tt.args...)...)
		if code := p.wait(20 * time.Second); code == 0 || !strings.Contains(p.out.String(), tt.want) {
			t.Errorf("manager %v: exit %d, output %q; want an error naming %q", tt.args, code, p.out, tt.want)
		}
	}
}

// TestDelegateThroughProxy runs a delegate process configured with the
// seeds' PROXY_* variables against a recording proxy: manager traffic and
// the WebSocket are tunnelled with CONNECT, an http task's target is
// forwarded through the proxy, and the password shows nowhere.
func TestDelegateThroughProxy(t *testing.T) {
	const pass = "e2e-pr0xy-pa55"
	// 192.0.2.0/24 is a documentation range: the delegate proxies it
	// (loopback is never proxied) and the proxy reaches it on 127.0.0.1.
	const remoteManager, remoteAPI = "192.0.2.10", "192.0.2.11"
	c := startCluster(t)
	px := proxytest.Start(t, "bob", pass)
	px.Alias(remoteManager, "127.0.0.1")
	px.Alias(remoteAPI, "127.0.0.1")
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "pong") }))
	defer api.Close()
	_, mport, _ := net.SplitHostPort(strings.TrimPrefix(c.url, "http://"))
	_, aport, _ := net.SplitHostPort(strings.TrimPrefix(api.URL, "http://"))
	managerAddr := net.JoinHostPort(remoteManager, mport)

	tok := c.token("proxied")
	env := append(c.seed004Env(tok, "proxied", "proxied"),
		"MANAGER_HOST_AND_PORT=http://"+managerAddr, "DELEGATE_HOSTNAME=proxied-host",
		"PROXY_HOST="+px.Host(), "PROXY_PORT="+px.Port(), "PROXY_SCHEME=http", "PROXY_USER=bob", "PROXY_PASSWORD="+pass)
	d := start(t, "delegate proxied-host", env, "delegate", "--grace", "5s", "--workdir", t.TempDir())
	c.waitConnected("proxied-host", protocol.ConnWebSocket)
	if got := slices.Compact(px.Connects()); !slices.Equal(got, []string{managerAddr}) {
		t.Errorf("CONNECT targets %v, want only the manager %s", got, managerAddr)
	}
	r := c.cli("task", "run", "--selector", "proxied-host", "--script", `echo "password: ${PROXY_PASSWORD:-unset} user: ${PROXY_USER:-unset}"`)
	if r.code != 0 || !strings.Contains(r.stdout, "password: unset user: unset") {
		t.Errorf("shell task: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	target := "http://" + net.JoinHostPort(remoteAPI, aport) + "/ping"
	task, res := c.runJSON("--selector", "proxied-host", "--http-url", target)
	if task.Status != protocol.StatusSucceeded {
		t.Fatalf("http task: %s (%s)\nstderr: %s", task.Status, task.Error, res.stderr)
	}
	if f := px.Forwards(); !slices.Equal(f, []string{target}) {
		t.Errorf("forwarded %v, want %s", f, target)
	}
	d.signal(syscall.SIGTERM)
	d.wait(30 * time.Second)
	if strings.Contains(d.out.String(), pass) {
		t.Errorf("the delegate's output shows the proxy password")
	}
	if !strings.Contains(d.out.String(), "***@"+px.URL.Host) {
		t.Errorf("the delegate does not log the proxy (redacted):\n%s", d.out)
	}
}
