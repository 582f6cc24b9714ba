package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/legate-dev/legate/internal/config"
)

// tunnel dials manager addresses through the proxy with HTTP CONNECT, so
// plain and TLS traffic, API calls and the WebSocket upgrade alike, reach
// the manager through the same tunnel (a forward proxy need not understand
// WebSocket upgrades in absolute-URI form).
type tunnel struct {
	proxy   config.Proxy
	schemes map[string]string // manager "host:port" -> URL scheme
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	tlsConf *tls.Config // for https:// proxies
}

// DialContext is a net/http Transport.DialContext.
func (d *tunnel) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	scheme := d.schemes[canonicalAddrString(addr)]
	if scheme == "" {
		scheme = "https"
	}
	p := d.proxy.For(&url.URL{Scheme: scheme, Host: addr})
	if p == nil {
		return d.dial(ctx, network, addr)
	}
	return Connect(ctx, d.dial, d.tlsConf, p, d.proxy.Source, addr)
}

func canonicalAddrString(addr string) string {
	u := &url.URL{Host: addr}
	if u.Port() == "" {
		return addr
	}
	return canonicalAddr(u)
}

// Connect opens a tunnel to addr through the HTTP(S) proxy p with CONNECT,
// authenticating with p's user information (Basic). source names the
// variables p came from, for error messages; errors never show p's
// credentials.
func Connect(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), tlsConf *tls.Config, p *url.URL, source, addr string) (net.Conn, error) {
	shown := config.RedactURL(p)
	conn, err := dial(ctx, "tcp", p.Host)
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", shown, err)
	}
	// Cancelling ctx interrupts the handshake below.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (net.Conn, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("proxy %s: %w", shown, ctx.Err())
		}
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if p.Scheme == "https" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if tlsConf != nil {
			cfg = tlsConf.Clone()
		}
		cfg.ServerName = p.Hostname()
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(fmt.Errorf("proxy %s: %w", shown, Explain(err, "proxy", Hints{AddCA: "add the proxy's CA to ca-bundle/ or SHARED_CA_CERTS_PATH"})))
		}
		conn = tc
	}
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: addr},
		Host:   addr,
		Header: http.Header{"User-Agent": {"legate"}},
	}
	if p.User != nil {
		pw, _ := p.User.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(p.User.Username()+":"+pw)))
	}
	if err := req.Write(conn); err != nil {
		return fail(fmt.Errorf("proxy %s: send CONNECT %s: %w", shown, addr, err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(fmt.Errorf("proxy %s: read answer to CONNECT %s: %w", shown, addr, err))
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode == http.StatusProxyAuthRequired {
			if p.User == nil {
				return fail(&ProxyAuthError{fmt.Sprintf("proxy %s requires credentials (%s): set PROXY_USER and PROXY_PASSWORD", shown, resp.Status)})
			}
			fix := "check PROXY_USER and PROXY_PASSWORD"
			if source != "PROXY_HOST" && source != "" {
				fix = "check the user and password in " + source
			}
			return fail(&ProxyAuthError{fmt.Sprintf("proxy %s refused the credentials (%s): %s", shown, resp.Status, fix)})
		}
		return fail(fmt.Errorf("proxy %s refused CONNECT %s: %s", shown, addr, resp.Status))
	}
	if !stop() {
		conn.Close()
		return nil, fmt.Errorf("proxy %s: %w", shown, ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn returns bytes the proxy sent after its answer first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// ProxyAuthError is a proxy's refusal of missing or wrong credentials.
type ProxyAuthError struct{ msg string }

func (e *ProxyAuthError) Error() string { return e.msg }

// NeedsOperator reports whether err is a failure that retrying cannot fix:
// a certificate problem or credentials the proxy refused.
func NeedsOperator(err error) bool {
	var ce *CertError
	var pe *ProxyAuthError
	return errors.As(err, &ce) || errors.As(err, &pe)
}
