package delegate_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/certtest"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/manager"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/proxytest"
)

// remoteManager and remoteAPI are documentation addresses (RFC 5737) the
// test proxy reaches on 127.0.0.1: the delegate proxies them (loopback
// addresses are never proxied) and never dials them itself.
const (
	remoteManager = "192.0.2.10"
	remoteAPI     = "192.0.2.11"
)

func withHost(t *testing.T, raw, host string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = net.JoinHostPort(host, u.Port())
	return u.String()
}

func proxyWith(u *url.URL, user, pass string) config.Proxy {
	c := *u
	if user != "" {
		c.User = url.UserPassword(user, pass)
	}
	return config.Proxy{HTTP: &c, HTTPS: &c, Source: "PROXY_HOST"}
}

// apiServer is a loopback HTTP API that an http task calls.
func apiServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "pong")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDelegateThroughProxy(t *testing.T) {
	const pass = "pr0xy-s3cret-pw"
	tm := startManager(t, testConfig())
	px := proxytest.Start(t, "bob", pass)
	px.Alias(remoteManager, "127.0.0.1")
	px.Alias(remoteAPI, "127.0.0.1")
	managerURL := withHost(t, tm.url, remoteManager)
	ag := startAgent(t, tm, agentOpts{urls: []string{managerURL}, configure: func(c *config.Delegate, _ string) {
		c.Proxy = proxyWith(px.URL, "bob", pass)
	}})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
	if got, want := slices.Compact(px.Connects()), []string{remoteManager + ":" + portOf(t, tm.url)}; !slices.Equal(got, want) {
		t.Errorf("CONNECT targets %v, want only the manager %v", got, want)
	}
	if f := px.Forwards(); len(f) != 0 {
		t.Errorf("manager traffic forwarded, not tunnelled: %v", f)
	}
	// A shell task over the proxied WebSocket, and an http task whose
	// target goes through the proxy too.
	task := tm.submitScript(t, "echo via proxy")
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	api := apiServer(t)
	target := withHost(t, api.URL, remoteAPI) + "/ping"
	task = tm.submit(t, protocol.TaskSpec{Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{URL: target}})
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	if f := px.Forwards(); !slices.Equal(f, []string{target}) {
		t.Errorf("forwarded %v, want the task's target %s", f, target)
	}
	if strings.Contains(ag.logs.String(), pass) {
		t.Errorf("the delegate log shows the proxy password")
	}
	if len(ag.logs.lines("using an HTTP proxy", "***@"+px.URL.Host)) == 0 {
		t.Errorf("the delegate does not log the (redacted) proxy")
	}
}

func portOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

func TestDelegateProxyManagerFalse(t *testing.T) {
	tm := startManager(t, testConfig())
	px := proxytest.Start(t, "", "")
	px.Alias(remoteAPI, "127.0.0.1")
	ag := startAgent(t, tm, agentOpts{configure: func(c *config.Delegate, _ string) {
		c.Proxy = proxyWith(px.URL, "", "")
		c.Proxy.ManagerDirect = true
	}})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
	api := apiServer(t)
	target := withHost(t, api.URL, remoteAPI) + "/ping"
	task := tm.submit(t, protocol.TaskSpec{Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{URL: target}})
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	if c := px.Connects(); len(c) != 0 {
		t.Errorf("PROXY_MANAGER=false, yet CONNECT %v", c)
	}
	if f := px.Forwards(); !slices.Equal(f, []string{target}) {
		t.Errorf("forwarded %v, want the task's target %s", f, target)
	}
	if len(ag.logs.lines("using an HTTP proxy", "PROXY_MANAGER=false")) == 0 {
		t.Errorf("the delegate does not log that the manager is reached directly")
	}
}

func TestDelegateWrongProxyPassword(t *testing.T) {
	const wrong = "wr0ng-s3cret-pw"
	tm := startManager(t, testConfig())
	px := proxytest.Start(t, "bob", "the-right-one")
	px.Alias(remoteManager, "127.0.0.1")
	ag := startAgent(t, tm, agentOpts{urls: []string{withHost(t, tm.url, remoteManager)}, configure: func(c *config.Delegate, _ string) {
		c.Proxy = proxyWith(px.URL, "bob", wrong)
	}})
	err := ag.mustReturn(t)
	if err == nil {
		t.Fatal("Run returned nil with a wrong proxy password")
	}
	for _, want := range []string{"refused the credentials", "PROXY_USER and PROXY_PASSWORD"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(ag.logs.String(), wrong) {
		t.Errorf("the password shows in the error or the log: %v", err)
	}
}

// startTLSManager is startManager serving HTTPS and WSS with conf; api
// sends the admin calls.
func startTLSManager(t *testing.T, cfg manager.Config, conf *tls.Config, api *http.Client) *testManager {
	t.Helper()
	logger, buf := newLogger(t, "manager")
	cfg.Logger = logger
	tm := &testManager{t: t, cfg: cfg, dir: t.TempDir(), log: buf}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tm.addr = ln.Addr().String()
	tm.url = "https://" + tm.addr
	c, err := client.New(tm.url, api)
	if err != nil {
		t.Fatal(err)
	}
	tm.api = c
	tm.serve(tls.NewListener(ln, conf))
	tm.api.SetSecret(tm.admin.APIKey)
	t.Cleanup(tm.stop)
	return tm
}

// tlsSetup is a CA, a manager certificate for 127.0.0.1 and the
// manager's server configuration.
type tlsSetup struct {
	ca     *certtest.CA
	server *tls.Config
	api    *http.Client
}

func newTLSSetup(t *testing.T, clientCA *certtest.CA) tlsSetup {
	t.Helper()
	ca := certtest.NewCA(t, "corp CA")
	certPEM, keyPEM := ca.Issue(t, certtest.Leaf{CommonName: "manager"})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	s := tlsSetup{ca: ca, server: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}}
	clientTLS := &tls.Config{RootCAs: roots}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.Cert)
		s.server.ClientCAs, s.server.ClientAuth = pool, tls.RequireAndVerifyClientCert
		c, k := clientCA.Issue(t, certtest.Leaf{CommonName: "admin", Client: true})
		adminCert, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		clientTLS.Certificates = []tls.Certificate{adminCert}
	}
	s.api = &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}}
	return s
}

func TestDelegateTLS(t *testing.T) {
	s := newTLSSetup(t, nil)
	tm := startTLSManager(t, testConfig(), s.server, s.api)
	tests := []struct {
		name      string
		configure func(t *testing.T, c *config.Delegate, workDir string)
	}{
		{"ca-bundle", func(t *testing.T, c *config.Delegate, wd string) {
			certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "corp.pem"), s.ca.PEM)
		}},
		{"SHARED_CA_CERTS_PATH file", func(t *testing.T, c *config.Delegate, wd string) {
			p := filepath.Join(t.TempDir(), "corp.pem")
			certtest.WriteFile(t, p, s.ca.PEM)
			c.TLS.SharedCAPath = p
		}},
		{"SHARED_CA_CERTS_PATH directory", func(t *testing.T, c *config.Delegate, wd string) {
			d := t.TempDir()
			certtest.WriteFile(t, filepath.Join(d, "corp.crt"), s.ca.PEM)
			c.TLS.SharedCAPath = d
		}},
		{"TRUST_ALL_CERTIFICATES", func(t *testing.T, c *config.Delegate, wd string) {
			c.TLS.TrustAll = true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var trustAll bool
			ag := startAgent(t, tm, agentOpts{configure: func(c *config.Delegate, wd string) {
				tt.configure(t, c, wd)
				trustAll = c.TLS.TrustAll
			}})
			tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
			task := tm.submit(t, protocol.TaskSpec{Type: protocol.TaskShell, Selectors: []string{ag.hostname},
				Shell: &protocol.ShellSpec{Script: "echo over wss"}})
			tm.waitTask(t, task.ID, protocol.StatusSucceeded)
			warned := len(ag.logs.lines("level=WARN", "TRUST_ALL_CERTIFICATES=true")) > 0
			if warned != trustAll {
				t.Errorf("TRUST_ALL_CERTIFICATES warning logged = %v, want %v", warned, trustAll)
			}
		})
	}
	t.Run("no CA", func(t *testing.T) {
		ag := startAgent(t, tm, agentOpts{})
		err := ag.mustReturn(t)
		if err == nil {
			t.Fatal("Run returned nil without trusting the manager's CA")
		}
		for _, want := range []string{"manager certificate is signed by an unknown authority", "x509:",
			filepath.Join(ag.workDir, "ca-bundle") + "/", "SHARED_CA_CERTS_PATH"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
		}
	})
}

func TestDelegateClientCertificate(t *testing.T) {
	clientCA := certtest.NewCA(t, "client CA")
	s := newTLSSetup(t, clientCA)
	tm := startTLSManager(t, testConfig(), s.server, s.api)
	trust := func(c *config.Delegate, wd string) {
		certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "corp.pem"), s.ca.PEM)
	}
	ag := startAgent(t, tm, agentOpts{configure: func(c *config.Delegate, wd string) {
		trust(c, wd)
		c.TLS.ClientCertPath, c.TLS.ClientKeyPath = clientCA.IssueFiles(t, wd, "delegate", certtest.Leaf{CommonName: "delegate", Client: true})
	}})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
	task := tm.submit(t, protocol.TaskSpec{Type: protocol.TaskShell, Selectors: []string{ag.hostname},
		Shell: &protocol.ShellSpec{Script: "echo with a client certificate"}})
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)

	missing := startAgent(t, tm, agentOpts{configure: trust})
	err := missing.mustReturn(t)
	if err == nil {
		t.Fatal("Run returned nil without a client certificate")
	}
	for _, want := range []string{"manager requires a client certificate", "DELEGATE_CLIENT_CERTIFICATE_PATH", "DELEGATE_CLIENT_CERTIFICATE_KEY_PATH"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if _, ok := tm.delegateByHost(t, missing.hostname); ok {
		t.Errorf("a delegate without a client certificate registered")
	}
}
