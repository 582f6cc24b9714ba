package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/legate-dev/legate/internal/certtest"
	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/proxytest"
)

// Addresses of the documentation range (RFC 5737) that tests use as
// "remote" hosts: clients proxy them (they are not loopback) and the test
// proxy, or the test dialer, reaches them on 127.0.0.1.
const (
	remoteA = "192.0.2.10"
	remoteB = "192.0.2.11"
)

// syncBuf is a log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testLogger() (*slog.Logger, *syncBuf) {
	b := &syncBuf{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// routeDialer dials remoteA and remoteB on 127.0.0.1 and records every
// address it dialed directly.
type routeDialer struct {
	mu     sync.Mutex
	dialed []string
}

func (r *routeDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	r.dialed = append(r.dialed, addr)
	r.mu.Unlock()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == remoteA || host == remoteB {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, errors.New("test dialer: only loopback")
	}
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort(host, port))
}

func (r *routeDialer) addrs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.dialed)
}

// as returns srv's URL with its host replaced by host.
func as(t *testing.T, srv *httptest.Server, host string) string {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = net.JoinHostPort(host, u.Port())
	return u.String()
}

func hostPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// echoServer answers "ok" and accepts WebSockets at /ws.
func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			typ, b, err := c.Read(r.Context())
			if err == nil {
				_ = c.Write(r.Context(), typ, b)
			}
			_ = c.Close(websocket.StatusNormalClosure, "")
			return
		}
		io.WriteString(w, "ok")
	})
}

func get(ctx context.Context, c *http.Client, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), errors.New(resp.Status)
	}
	return string(b), err
}

func wsEcho(ctx context.Context, c *http.Client, u string) error {
	u = strings.Replace(strings.Replace(u, "https://", "wss://", 1), "http://", "ws://", 1)
	conn, _, err := websocket.Dial(ctx, u+"/ws", &websocket.DialOptions{HTTPClient: c})
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	if err := conn.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		return err
	}
	_, b, err := conn.Read(ctx)
	if err != nil {
		return err
	}
	if string(b) != "hi" {
		return errors.New("echo: " + string(b))
	}
	return nil
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func withUser(u *url.URL, user, pass string) *url.URL {
	c := *u
	c.User = url.UserPassword(user, pass)
	return &c
}

func proxyConfig(u *url.URL) config.Proxy {
	return config.Proxy{HTTP: u, HTTPS: u, Source: "PROXY_HOST"}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func TestManagerTrafficAndWebSocketTunnelThroughProxy(t *testing.T) {
	const pass = "pr0xy-pa55word"
	ca := certtest.NewCA(t, "test CA")
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(echoHandler())
			workDir := t.TempDir()
			if scheme == "https" {
				certPEM, keyPEM := ca.Issue(t, certtest.Leaf{CommonName: "manager", IPs: []net.IP{net.ParseIP(remoteA)}})
				cert, err := tls.X509KeyPair(certPEM, keyPEM)
				if err != nil {
					t.Fatal(err)
				}
				srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
				srv.StartTLS()
				certtest.WriteFile(t, filepath.Join(workDir, "ca-bundle", "corp.pem"), ca.PEM)
			} else {
				srv.Start()
			}
			defer srv.Close()
			px := proxytest.Start(t, "bob", pass)
			px.Alias(remoteA, "127.0.0.1")
			managerURL := as(t, srv, remoteA)
			log, logs := testLogger()
			rd := &routeDialer{}
			cl, err := ForDelegate(Options{Proxy: proxyConfig(withUser(px.URL, "bob", pass)), WorkDir: workDir,
				ManagerURLs: []string{managerURL}, Logger: log, Dial: rd.dial})
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			if body, err := get(ctx, cl.Manager, managerURL+"/api"); err != nil || body != "ok" {
				t.Fatalf("GET through the proxy: %q, %v", body, err)
			}
			if err := wsEcho(ctx, cl.Manager, managerURL); err != nil {
				t.Fatalf("WebSocket through the proxy: %v", err)
			}
			if got, want := sorted(px.Connects()), []string{hostPort(t, managerURL)}; !slices.Equal(got, want) {
				t.Errorf("CONNECT targets = %v, want %v", got, want)
			}
			if f := px.Forwards(); len(f) != 0 {
				t.Errorf("manager traffic forwarded as absolute-URI requests, not tunnelled: %v", f)
			}
			if got, want := sorted(rd.addrs()), []string{px.URL.Host}; !slices.Equal(got, want) {
				t.Errorf("dialed directly %v, want only the proxy %v", got, want)
			}
			if strings.Contains(logs.String(), pass) {
				t.Errorf("the log shows the proxy password:\n%s", logs)
			}
			if !strings.Contains(logs.String(), "***@"+px.URL.Host) {
				t.Errorf("the log does not name the proxy (redacted):\n%s", logs)
			}
		})
	}
}

func TestProxyManagerFalseAndNoProxy(t *testing.T) {
	mgr := httptest.NewServer(echoHandler())
	defer mgr.Close()
	api := httptest.NewServer(echoHandler())
	defer api.Close()
	ca := certtest.NewCA(t, "api CA")
	tlsAPI := httptest.NewUnstartedServer(echoHandler())
	certPEM, keyPEM := ca.Issue(t, certtest.Leaf{IPs: []net.IP{net.ParseIP(remoteA)}})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tlsAPI.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	tlsAPI.StartTLS()
	defer tlsAPI.Close()

	px := proxytest.Start(t, "", "")
	px.Alias(remoteA, "127.0.0.1")
	px.Alias(remoteB, "127.0.0.1")
	shared := filepath.Join(t.TempDir(), "ca.pem")
	certtest.WriteFile(t, shared, ca.PEM)
	rd := &routeDialer{}
	p := proxyConfig(px.URL)
	p.ManagerDirect = true
	p.NoProxy = []string{remoteB}
	managerURL := as(t, mgr, remoteA)
	cl, err := ForDelegate(Options{Proxy: p, TLS: config.TLS{SharedCAPath: shared}, WorkDir: t.TempDir(),
		ManagerURLs: []string{managerURL}, Dial: rd.dial})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := get(ctx, cl.Manager, managerURL+"/x"); err != nil {
		t.Fatalf("manager: %v", err)
	}
	if err := wsEcho(ctx, cl.Manager, managerURL); err != nil {
		t.Fatalf("manager WebSocket: %v", err)
	}
	if c, f := px.Connects(), px.Forwards(); len(c)+len(f) != 0 {
		t.Fatalf("PROXY_MANAGER=false, yet manager traffic went through the proxy: CONNECT %v, forwarded %v", c, f)
	}
	// A task's http target goes through the proxy...
	taskURL := as(t, api, remoteA) + "/call"
	if _, err := get(ctx, cl.Tasks, taskURL); err != nil {
		t.Fatalf("task target: %v", err)
	}
	if f := px.Forwards(); !slices.Equal(f, []string{taskURL}) {
		t.Errorf("forwarded %v, want %v", f, []string{taskURL})
	}
	// ...and so does an https one, tunnelled, verified with SHARED_CA_CERTS_PATH.
	tlsURL := as(t, tlsAPI, remoteA)
	if _, err := get(ctx, cl.Tasks, tlsURL+"/secure"); err != nil {
		t.Fatalf("https task target: %v", err)
	}
	if c := px.Connects(); !slices.Equal(c, []string{hostPort(t, tlsURL)}) {
		t.Errorf("CONNECT %v, want %v", c, hostPort(t, tlsURL))
	}
	// NO_PROXY: reached directly.
	before := len(px.Forwards()) + len(px.Connects())
	direct := as(t, api, remoteB) + "/direct"
	if _, err := get(ctx, cl.Tasks, direct); err != nil {
		t.Fatalf("NO_PROXY target: %v", err)
	}
	if after := len(px.Forwards()) + len(px.Connects()); after != before {
		t.Errorf("NO_PROXY=%s went through the proxy: %v %v", remoteB, px.Forwards(), px.Connects())
	}
	if !slices.Contains(rd.addrs(), hostPort(t, direct)) {
		t.Errorf("NO_PROXY target not dialed directly: dialed %v", rd.addrs())
	}
	// Loopback targets are never proxied.
	before = len(px.Forwards()) + len(px.Connects())
	if _, err := get(ctx, cl.Tasks, api.URL+"/local"); err != nil {
		t.Fatal(err)
	}
	if after := len(px.Forwards()) + len(px.Connects()); after != before {
		t.Errorf("a loopback target went through the proxy")
	}
}

func TestWrongProxyPassword(t *testing.T) {
	const wrong = "wr0ng-pa55word"
	srv := httptest.NewServer(echoHandler())
	defer srv.Close()
	px := proxytest.Start(t, "bob", "right-password")
	px.Alias(remoteA, "127.0.0.1")
	managerURL := as(t, srv, remoteA)
	log, logs := testLogger()
	cl, err := ForDelegate(Options{Proxy: proxyConfig(withUser(px.URL, "bob", wrong)), WorkDir: t.TempDir(),
		ManagerURLs: []string{managerURL}, Logger: log, Dial: (&routeDialer{}).dial})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	_, err = get(ctx, cl.Manager, managerURL+"/x")
	if err == nil {
		t.Fatal("no error with a wrong proxy password")
	}
	if !NeedsOperator(err) {
		t.Errorf("NeedsOperator(%v) = false", err)
	}
	for _, want := range []string{"refused the credentials", "407", "PROXY_USER and PROXY_PASSWORD", "***@" + px.URL.Host} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	for _, s := range []string{err.Error(), logs.String()} {
		if strings.Contains(s, wrong) {
			t.Errorf("the password shows: %s", s)
		}
	}
	if err := wsEcho(ctx, cl.Manager, managerURL); err == nil || strings.Contains(err.Error(), wrong) {
		t.Errorf("WebSocket error = %v", err)
	}
	if px.Refused() == 0 || len(px.Connects()) != 0 {
		t.Errorf("proxy refused %d, let through %v", px.Refused(), px.Connects())
	}
	// Without credentials at all.
	cl, err = ForDelegate(Options{Proxy: proxyConfig(px.URL), WorkDir: t.TempDir(), ManagerURLs: []string{managerURL}, Dial: (&routeDialer{}).dial})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(ctx, cl.Manager, managerURL+"/x"); err == nil || !strings.Contains(err.Error(), "requires credentials") {
		t.Errorf("error without credentials = %v", err)
	}
}

// tlsServer starts an HTTPS server with a certificate of leaf from ca.
func tlsServer(t *testing.T, ca *certtest.CA, leaf certtest.Leaf, clientCAs *x509.CertPool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(echoHandler())
	certPEM, keyPEM := ca.Issue(t, leaf)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCAs != nil {
		srv.TLS.ClientCAs = clientCAs
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	srv.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestTrust(t *testing.T) {
	ca := certtest.NewCA(t, "corp CA")
	other := certtest.NewCA(t, "other CA")
	srv := tlsServer(t, ca, certtest.Leaf{CommonName: "manager"}, nil)
	tests := []struct {
		name    string
		setup   func(t *testing.T, workDir string) config.TLS
		wantErr string // "" = connects
	}{
		{"ca-bundle", func(t *testing.T, wd string) config.TLS {
			certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "other.pem"), other.PEM)
			certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "corp.crt"), ca.PEM)
			certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "..data", "ignored"), []byte("not PEM"))
			return config.TLS{}
		}, ""},
		{"SHARED_CA_CERTS_PATH file", func(t *testing.T, wd string) config.TLS {
			p := filepath.Join(t.TempDir(), "bundle.pem")
			certtest.WriteFile(t, p, append(append([]byte{}, other.PEM...), ca.PEM...))
			return config.TLS{SharedCAPath: p}
		}, ""},
		{"SHARED_CA_CERTS_PATH directory", func(t *testing.T, wd string) config.TLS {
			d := t.TempDir()
			certtest.WriteFile(t, filepath.Join(d, "corp.pem"), ca.PEM)
			return config.TLS{SharedCAPath: d}
		}, ""},
		{"no CA", func(t *testing.T, wd string) config.TLS { return config.TLS{} },
			"manager certificate is signed by an unknown authority"},
		{"another CA", func(t *testing.T, wd string) config.TLS {
			certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "other.pem"), other.PEM)
			return config.TLS{}
		}, "manager certificate is signed by an unknown authority"},
		{"TRUST_ALL_CERTIFICATES", func(t *testing.T, wd string) config.TLS { return config.TLS{TrustAll: true} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wd := t.TempDir()
			c := tt.setup(t, wd)
			log, logs := testLogger()
			cl, err := ForDelegate(Options{TLS: c, WorkDir: wd, ManagerURLs: []string{srv.URL}, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			_, err = get(ctxT(t), cl.Manager, srv.URL+"/x")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("GET: %v", err)
				}
			} else {
				var ce *CertError
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is not a *CertError", err)
				}
				for _, want := range []string{tt.wantErr, filepath.Join(wd, "ca-bundle") + "/", "SHARED_CA_CERTS_PATH", "x509:"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				if !NeedsOperator(err) {
					t.Errorf("NeedsOperator = false")
				}
			}
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "TRUST_ALL_CERTIFICATES=true")
			if warned != c.TrustAll {
				t.Errorf("TRUST_ALL_CERTIFICATES warning logged = %v, want %v:\n%s", warned, c.TrustAll, logs)
			}
		})
	}
}

func TestTrustFileErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, wd string) config.TLS
		want  []string
	}{
		{"bad PEM in ca-bundle", func(t *testing.T, wd string) config.TLS {
			certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "broken.pem"), []byte("hello"))
			return config.TLS{}
		}, []string{"broken.pem", "no PEM certificate"}},
		{"corrupt certificate", func(t *testing.T, wd string) config.TLS {
			p := filepath.Join(wd, "bad.pem")
			certtest.WriteFile(t, p, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
			return config.TLS{SharedCAPath: p}
		}, []string{"SHARED_CA_CERTS_PATH", "bad.pem", "does not parse"}},
		{"missing SHARED_CA_CERTS_PATH", func(t *testing.T, wd string) config.TLS {
			return config.TLS{SharedCAPath: filepath.Join(wd, "nope")}
		}, []string{"SHARED_CA_CERTS_PATH", "nope"}},
		{"empty directory", func(t *testing.T, wd string) config.TLS {
			return config.TLS{SharedCAPath: t.TempDir()}
		}, []string{"SHARED_CA_CERTS_PATH", "no PEM file"}},
		{"client key missing", func(t *testing.T, wd string) config.TLS {
			return config.TLS{ClientCertPath: "/c.crt"}
		}, []string{"DELEGATE_CLIENT_CERTIFICATE_KEY_PATH"}},
		{"client cert unreadable", func(t *testing.T, wd string) config.TLS {
			return config.TLS{ClientCertPath: filepath.Join(wd, "c.crt"), ClientKeyPath: filepath.Join(wd, "c.key")}
		}, []string{"DELEGATE_CLIENT_CERTIFICATE_PATH", "c.crt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wd := t.TempDir()
			_, err := ForDelegate(Options{TLS: tt.setup(t, wd), WorkDir: wd})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCertificateHints(t *testing.T) {
	ca := certtest.NewCA(t, "corp CA")
	wd := t.TempDir()
	certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "ca.pem"), ca.PEM)
	tests := []struct {
		name string
		leaf certtest.Leaf
		want []string
	}{
		{"hostname", certtest.Leaf{DNS: []string{"legate.example.com"}},
			[]string{"manager certificate is not valid for 127.0.0.1", "legate.example.com", "subject alternative names"}},
		{"expired", certtest.Leaf{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)},
			[]string{"manager certificate has expired or is not valid yet", "renew", "clock"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := tlsServer(t, ca, tt.leaf, nil)
			cl, err := ForDelegate(Options{WorkDir: wd, ManagerURLs: []string{srv.URL}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = get(ctxT(t), cl.Manager, srv.URL)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestClientCertificates(t *testing.T) {
	ca := certtest.NewCA(t, "corp CA")
	clientCA := certtest.NewCA(t, "client CA")
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.Cert)
	srv := tlsServer(t, ca, certtest.Leaf{CommonName: "manager"}, pool)
	wd := t.TempDir()
	certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "ca.pem"), ca.PEM)
	good, goodKey := clientCA.IssueFiles(t, wd, "delegate", certtest.Leaf{CommonName: "delegate", Client: true})
	bad, badKey := certtest.NewCA(t, "rogue").IssueFiles(t, wd, "rogue", certtest.Leaf{CommonName: "rogue", Client: true})
	tests := []struct {
		name      string
		cert, key string
		want      []string // nil = connects
	}{
		{"presented", good, goodKey, nil},
		{"missing", "", "", []string{"manager requires a client certificate", "DELEGATE_CLIENT_CERTIFICATE_PATH", "DELEGATE_CLIENT_CERTIFICATE_KEY_PATH"}},
		// A client sends only a certificate of a CA the server asks for.
		{"signed by another CA", bad, badKey, []string{"manager requires a client certificate", "--tls-client-ca"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, err := ForDelegate(Options{TLS: config.TLS{ClientCertPath: tt.cert, ClientKeyPath: tt.key}, WorkDir: wd, ManagerURLs: []string{srv.URL}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = get(ctxT(t), cl.Manager, srv.URL)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("GET: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestForCLI(t *testing.T) {
	ca := certtest.NewCA(t, "corp CA")
	srv := tlsServer(t, ca, certtest.Leaf{CommonName: "manager"}, nil)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	certtest.WriteFile(t, caFile, ca.PEM)
	hints := Hints{AddCA: "set LEGATE_CA_CERT"}
	c, err := ForCLI(CLIFiles{CA: caFile}, hints)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(ctxT(t), c, srv.URL); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	c, err = ForCLI(CLIFiles{}, hints)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(ctxT(t), c, srv.URL); err == nil || !strings.Contains(err.Error(), "unknown authority") || !strings.Contains(err.Error(), "set LEGATE_CA_CERT") {
		t.Errorf("without the CA: %v", err)
	}
	if _, err := ForCLI(CLIFiles{CA: filepath.Join(t.TempDir(), "missing.pem")}, hints); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("missing CA file: %v", err)
	}
}

func TestServerTLS(t *testing.T) {
	ca := certtest.NewCA(t, "corp CA")
	dir := t.TempDir()
	cert, key := ca.IssueFiles(t, dir, "manager", certtest.Leaf{})
	_, otherKey := ca.IssueFiles(t, dir, "other", certtest.Leaf{})
	caFile := filepath.Join(dir, "ca.pem")
	certtest.WriteFile(t, caFile, ca.PEM)
	junk := filepath.Join(dir, "junk.pem")
	certtest.WriteFile(t, junk, []byte("junk"))
	cfg, err := ServerTLS(ServerFiles{Cert: cert, Key: key, ClientCA: caFile})
	if err != nil || cfg == nil || cfg.ClientAuth != tls.RequireAndVerifyClientCert || !slices.Equal(cfg.NextProtos, []string{"http/1.1"}) {
		t.Fatalf("ServerTLS = %+v, %v", cfg, err)
	}
	if cfg, err := ServerTLS(ServerFiles{}); cfg != nil || err != nil {
		t.Errorf("no files: %v, %v", cfg, err)
	}
	for _, tt := range []struct {
		f    ServerFiles
		want []string
	}{
		{ServerFiles{Cert: cert}, []string{"--tls-key"}},
		{ServerFiles{Key: key}, []string{"--tls-cert"}},
		{ServerFiles{ClientCA: caFile}, []string{"--tls-client-ca", "--tls-cert"}},
		{ServerFiles{Cert: filepath.Join(dir, "missing.crt"), Key: key}, []string{"--tls-cert", "missing.crt"}},
		{ServerFiles{Cert: junk, Key: key}, []string{"--tls-cert", "junk.pem"}},
		{ServerFiles{Cert: cert, Key: filepath.Join(dir, "missing.key")}, []string{"--tls-key", "missing.key"}},
		{ServerFiles{Cert: cert, Key: otherKey}, []string{"--tls-cert", "--tls-key", "do not form a key pair"}},
		{ServerFiles{Cert: cert, Key: key, ClientCA: junk}, []string{"--tls-client-ca", "junk.pem"}},
	} {
		_, err := ServerTLS(tt.f)
		if err == nil {
			t.Errorf("%+v: no error", tt.f)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not contain %q", tt.f, err, w)
			}
		}
	}
	_ = os.Remove(junk)
}

func TestHTTPSProxy(t *testing.T) {
	const pass = "tls-pr0xy-pw"
	ca := certtest.NewCA(t, "proxy CA")
	certPEM, keyPEM := ca.Issue(t, certtest.Leaf{CommonName: "proxy"})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	px := proxytest.StartTLS(t, "bob", pass, cert)
	px.Alias(remoteA, "127.0.0.1")
	srv := httptest.NewServer(echoHandler())
	defer srv.Close()
	managerURL := as(t, srv, remoteA)
	wd := t.TempDir()
	certtest.WriteFile(t, filepath.Join(wd, "ca-bundle", "proxy-ca.pem"), ca.PEM)
	opts := Options{Proxy: proxyConfig(withUser(px.URL, "bob", pass)), WorkDir: wd, ManagerURLs: []string{managerURL}, Dial: (&routeDialer{}).dial}
	cl, err := ForDelegate(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := wsEcho(ctx, cl.Manager, managerURL); err != nil {
		t.Fatalf("WebSocket through an https proxy: %v", err)
	}
	task := as(t, srv, remoteA) + "/task"
	if _, err := get(ctx, cl.Tasks, task); err != nil {
		t.Fatalf("task through an https proxy: %v", err)
	}
	if c, f := px.Connects(), px.Forwards(); !slices.Equal(c, []string{hostPort(t, managerURL)}) || !slices.Equal(f, []string{task}) {
		t.Errorf("CONNECT %v, forwarded %v", c, f)
	}
	// Without the proxy's CA: the error is about the proxy's certificate.
	opts.WorkDir = t.TempDir()
	cl, err = ForDelegate(opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = get(ctx, cl.Manager, managerURL)
	if err == nil || !strings.Contains(err.Error(), "proxy certificate is signed by an unknown authority") || strings.Contains(err.Error(), pass) {
		t.Errorf("error = %v", err)
	}
}

func TestPlainManagerWithHTTPSURL(t *testing.T) {
	srv := httptest.NewServer(echoHandler())
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "https://", 1)
	cl, err := ForDelegate(Options{WorkDir: t.TempDir(), ManagerURLs: []string{u}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = get(ctxT(t), cl.Manager, u)
	if err == nil || !strings.Contains(err.Error(), "manager does not speak TLS at this address") {
		t.Errorf("error = %v", err)
	}
}

// TestConnectCancelled: a proxy that never answers CONNECT does not hold
// the dial past its context.
func TestConnectCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c // read nothing, answer nothing
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	p := &url.URL{Scheme: "http", Host: ln.Addr().String(), User: url.UserPassword("bob", "secret-pw")}
	go func() {
		_, err := Connect(ctx, dialer().DialContext, nil, p, "PROXY_HOST", remoteA+":443")
		errc <- err
	}()
	c := <-accepted
	defer c.Close()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "secret-pw") {
			t.Errorf("error = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Connect did not return after its context was cancelled")
	}
}
