// Package proxytest is a recording HTTP forward proxy for tests: it
// listens on loopback, tunnels CONNECT requests, forwards absolute-URI
// requests, requires Basic Proxy-Authorization when given credentials, and
// records every target it let through.
package proxytest

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy is a running forward proxy. Close it with Close (tests: it is
// closed at cleanup).
type Proxy struct {
	// URL is the proxy's address, "http://127.0.0.1:PORT", without
	// credentials.
	URL *url.URL

	user, pass string
	ln         net.Listener
	rt         *http.Transport

	mu       sync.Mutex
	connects []string          // host:port of CONNECT requests let through
	forwards []string          // absolute URLs forwarded
	refused  int               // requests refused for missing or wrong credentials
	aliases  map[string]string // host -> host it is dialed as
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// Start starts a proxy; user "" means no authentication is required.
func Start(t testing.TB, user, pass string) *Proxy {
	t.Helper()
	return start(t, user, pass, nil)
}

// StartTLS starts a proxy that clients reach over TLS (an https:// proxy)
// with the certificate cert.
func StartTLS(t testing.TB, user, pass string, cert tls.Certificate) *Proxy {
	t.Helper()
	return start(t, user, pass, &tls.Config{Certificates: []tls.Certificate{cert}})
}

func start(t testing.TB, user, pass string, conf *tls.Config) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if conf != nil {
		ln = tls.NewListener(ln, conf)
		scheme = "https"
	}
	p := &Proxy{
		URL:     &url.URL{Scheme: scheme, Host: ln.Addr().String()},
		user:    user,
		pass:    pass,
		ln:      ln,
		conns:   map[net.Conn]struct{}{},
		aliases: map[string]string{},
	}
	p.rt = &http.Transport{Proxy: nil, DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, p.resolve(addr))
	}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Alias makes the proxy reach host (a name or IP address) at to, like a
// proxy's own DNS: a test can use a non-loopback address such as
// 192.0.2.10 (which clients proxy) for a server on 127.0.0.1.
func (p *Proxy) Alias(host, to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.aliases[host] = to
}

func (p *Proxy) resolve(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if to, ok := p.aliases[host]; ok {
		return net.JoinHostPort(to, port)
	}
	return addr
}

// Host is the proxy's "127.0.0.1" and Port its port.
func (p *Proxy) Host() string { return p.URL.Hostname() }

// Port is the proxy's port.
func (p *Proxy) Port() string { return p.URL.Port() }

// Connects returns the targets of the CONNECT requests let through.
func (p *Proxy) Connects() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.connects...)
}

// Forwards returns the absolute URLs of the requests forwarded.
func (p *Proxy) Forwards() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.forwards...)
}

// Refused is how many requests were refused with 407.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
	p.rt.CloseIdleConnections()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

func (p *Proxy) authorized(r *http.Request) bool {
	if p.user == "" {
		return true
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(p.user+":"+p.pass))
	return r.Header.Get("Proxy-Authorization") == want
}

// handle serves the requests of one client connection.
func (p *Proxy) handle(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		if !p.authorized(r) {
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"proxytest\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			return
		}
		if r.Method == http.MethodConnect {
			p.tunnel(c, br, r.Host)
			return
		}
		if !r.URL.IsAbs() {
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			return
		}
		p.mu.Lock()
		p.forwards = append(p.forwards, r.URL.String())
		p.mu.Unlock()
		r.RequestURI = ""
		r.Header.Del("Proxy-Authorization")
		r.Header.Del("Proxy-Connection")
		resp, err := p.rt.RoundTrip(r)
		if err != nil {
			io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			return
		}
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil || r.Close || strings.EqualFold(r.Header.Get("Connection"), "close") {
			return
		}
	}
}

func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, target string) {
	up, err := net.DialTimeout("tcp", p.resolve(target), 10*time.Second)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	p.mu.Lock()
	p.connects = append(p.connects, target)
	p.mu.Unlock()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); up.Close(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); c.Close(); done <- struct{}{} }()
	<-done
	<-done
}
