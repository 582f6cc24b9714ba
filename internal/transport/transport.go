// Package transport builds the HTTP clients of the delegate and the CLI from
// their configuration: which proxy each connection goes through (the
// manager's through an HTTP CONNECT tunnel, so its API calls and its
// WebSocket travel the same way), which certificate authorities are trusted
// (the system's plus extra PEM files), which client certificate is shown,
// and it turns certificate failures into errors that say how to fix them.
// It also builds the manager's server TLS configuration.
package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/config"
)

// CABundleDir is the directory under the delegate's working directory
// whose PEM files the delegate trusts in addition to the system roots.
const CABundleDir = "ca-bundle"

// Options configures the delegate's clients.
type Options struct {
	Proxy config.Proxy
	TLS   config.TLS
	// WorkDir is the delegate's working directory; every PEM file in its
	// ca-bundle/ is trusted.
	WorkDir string
	// ManagerURLs are the manager's base URLs (their schemes decide which
	// proxy variable applies to each manager address).
	ManagerURLs []string
	// Dial opens connections (to proxies and to direct targets); nil = a
	// net.Dialer with 30 s connect timeout and keep-alive. Tests route
	// addresses with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger receives the start-up lines (proxy in use, the
	// TRUST_ALL_CERTIFICATES warning); nil = slog.Default().
	Logger *slog.Logger
}

// Clients are the delegate's HTTP clients.
type Clients struct {
	// Manager reaches the manager: API calls and the WebSocket. It trusts
	// the extra CAs, shows the client certificate, tunnels through the
	// proxy unless PROXY_MANAGER=false, and explains certificate failures.
	Manager *http.Client
	// Tasks reaches everything else (http tasks, capability checks): the
	// proxy (NO_PROXY honored) and the extra CAs, no client certificate,
	// and always verifies certificates.
	Tasks *http.Client
}

// ForDelegate builds the delegate's clients. Unreadable or malformed files
// are errors that name the file and the setting it came from.
func ForDelegate(opts Options) (Clients, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := opts.TLS.Validate(); err != nil {
		return Clients{}, err
	}
	roots, err := delegateRoots(opts.WorkDir, opts.TLS.SharedCAPath)
	if err != nil {
		return Clients{}, err
	}
	var certs []tls.Certificate
	if opts.TLS.ClientCertPath != "" {
		c, err := tls.LoadX509KeyPair(opts.TLS.ClientCertPath, opts.TLS.ClientKeyPath)
		if err != nil {
			return Clients{}, fmt.Errorf("client certificate %s=%s, %s=%s: %w",
				config.EnvClientCert, opts.TLS.ClientCertPath, config.EnvClientKey, opts.TLS.ClientKeyPath, err)
		}
		certs = []tls.Certificate{c}
	}

	// The manager.
	dial := opts.Dial
	if dial == nil {
		dial = dialer().DialContext
	}
	mt := baseTransport()
	mt.DialContext = dial
	mt.ForceAttemptHTTP2 = false // the WebSocket needs HTTP/1.1
	mt.MaxIdleConnsPerHost = 16
	mt.ResponseHeaderTimeout = 0 // long polls answer late by design
	mt.TLSClientConfig = &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}
	if opts.TLS.TrustAll {
		mt.TLSClientConfig.InsecureSkipVerify = true
		log.Warn("INSECURE: TRUST_ALL_CERTIFICATES=true: the manager's certificate is NOT verified; anyone on the network path can impersonate the manager and read the delegate token. Trust the manager's CA instead (ca-bundle/ or SHARED_CA_CERTS_PATH) and unset TRUST_ALL_CERTIFICATES")
	}
	mt.Proxy = nil
	if opts.Proxy.Enabled() && !opts.Proxy.ManagerDirect {
		mt.DialContext = (&tunnel{
			proxy:   opts.Proxy,
			schemes: schemesByAddr(opts.ManagerURLs),
			dial:    dial,
			tlsConf: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		}).DialContext
	}
	hints := Hints{
		AddCA:      fmt.Sprintf("add the CA's PEM file to %s or set %s to it", filepath.Join(opts.WorkDir, CABundleDir)+string(filepath.Separator), config.EnvSharedCA),
		ClientCert: fmt.Sprintf("set %s and %s to a certificate signed by the CA of the manager's --tls-client-ca and its key", config.EnvClientCert, config.EnvClientKey),
	}

	// Everything else.
	tt := baseTransport()
	tt.DialContext = dial
	tt.ResponseHeaderTimeout = 5 * time.Minute
	tt.DisableKeepAlives = true // no connection reuse across task runs
	tt.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	tt.Proxy = nil
	if opts.Proxy.Enabled() {
		p := opts.Proxy
		tt.Proxy = func(r *http.Request) (*url.URL, error) { return p.For(r.URL), nil }
	}

	if opts.Proxy.Enabled() {
		use := "the manager and everything else"
		if opts.Proxy.ManagerDirect {
			use = "everything but the manager (PROXY_MANAGER=false)"
		}
		log.Info("using an HTTP proxy", "https_proxy", config.RedactURL(opts.Proxy.HTTPS), "http_proxy", config.RedactURL(opts.Proxy.HTTP),
			"no_proxy", strings.Join(opts.Proxy.NoProxy, ","), "for", use, "from", opts.Proxy.Source)
	}
	return Clients{
		Manager: &http.Client{Transport: &explainer{rt: mt, hints: hints}},
		Tasks:   &http.Client{Transport: tt},
	}, nil
}

// CLIFiles are the CLI's TLS files; "" = none.
type CLIFiles struct {
	// CA is trusted in addition to the system roots (LEGATE_CA_CERT).
	CA string
	// Cert and Key are the client certificate for a manager that
	// requires one (LEGATE_CLIENT_CERT, LEGATE_CLIENT_KEY).
	Cert, Key string
}

// ForCLI builds the CLI's client: the proxy from the environment as usual,
// f.CA trusted in addition to the system roots, f.Cert shown when the
// manager asks. hints say how to fix certificate failures.
func ForCLI(f CLIFiles, hints Hints) (*http.Client, error) {
	var roots *x509.CertPool
	if f.CA != "" {
		var err error
		if roots, err = systemRoots(); err != nil {
			return nil, err
		}
		if err := addPEMFile(roots, f.CA); err != nil {
			return nil, err
		}
	}
	var certs []tls.Certificate
	switch {
	case f.Cert != "" && f.Key != "":
		c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w", f.Cert, f.Key, err)
		}
		certs = []tls.Certificate{c}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("a client certificate needs both the certificate and its key")
	}
	t := baseTransport()
	t.ForceAttemptHTTP2 = false
	t.ResponseHeaderTimeout = 0
	t.MaxIdleConnsPerHost = 16
	t.TLSClientConfig = &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: &explainer{rt: t, hints: hints}}, nil
}

func dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
}

// baseTransport is the standard transport with bounded dial and handshake.
func baseTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = dialer().DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	return t
}

// schemesByAddr maps each manager "host:port" to its URL scheme.
func schemesByAddr(urls []string) map[string]string {
	m := map[string]string{}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		m[canonicalAddr(u)] = strings.ToLower(u.Scheme)
	}
	return m
}

// canonicalAddr is u's "host:port" with the scheme's default port.
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if s := strings.ToLower(u.Scheme); s == "https" || s == "wss" {
			port = "443"
		}
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

func systemRoots() (*x509.CertPool, error) {
	p, err := x509.SystemCertPool()
	if err != nil || p == nil {
		return x509.NewCertPool(), nil //nolint:nilerr // no system roots: only the extra CAs are trusted
	}
	return p, nil
}

// delegateRoots is the system roots plus every PEM file of
// WORKDIR/ca-bundle/ and SHARED_CA_CERTS_PATH; nil (the system roots) when
// there are none.
func delegateRoots(workDir, shared string) (*x509.CertPool, error) {
	var files []string
	bundle := filepath.Join(workDir, CABundleDir)
	if fi, err := os.Stat(bundle); err == nil && fi.IsDir() {
		fs, err := pemFiles(bundle)
		if err != nil {
			return nil, fmt.Errorf("CA bundle %s: %w", bundle, err)
		}
		files = append(files, fs...)
	}
	if shared != "" {
		fi, err := os.Stat(shared)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", config.EnvSharedCA, shared, err)
		}
		if fi.IsDir() {
			fs, err := pemFiles(shared)
			if err != nil {
				return nil, fmt.Errorf("%s=%s: %w", config.EnvSharedCA, shared, err)
			}
			if len(fs) == 0 {
				return nil, fmt.Errorf("%s=%s: the directory holds no PEM file", config.EnvSharedCA, shared)
			}
			files = append(files, fs...)
		} else {
			files = append(files, shared)
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	roots, err := systemRoots()
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := addPEMFile(roots, f); err != nil {
			if strings.HasPrefix(f, bundle+string(filepath.Separator)) {
				return nil, err
			}
			return nil, fmt.Errorf("%s: %w", config.EnvSharedCA, err)
		}
	}
	return roots, nil
}

// pemFiles lists the regular files of dir (symbolic links followed), in
// name order, skipping hidden names (such as Kubernetes' "..data").
func pemFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// addPEMFile adds the certificates of a PEM file to pool. A file with no
// certificate, or with one that does not parse, is an error naming it.
func addPEMFile(pool *x509.CertPool, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read CA file: %w", err)
	}
	certs, err := ParsePEMCertificates(b)
	if err != nil {
		return fmt.Errorf("CA file %s: %w", path, err)
	}
	for _, c := range certs {
		pool.AddCert(c)
	}
	return nil
}

// ParsePEMCertificates returns the certificates of PEM data: at least one,
// and every CERTIFICATE block must parse. Other blocks are skipped.
func ParsePEMCertificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := b
	for {
		blk, r := pem.Decode(rest)
		if blk == nil {
			break
		}
		rest = r
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate in it (want one or more -----BEGIN CERTIFICATE----- blocks)")
	}
	return out, nil
}
