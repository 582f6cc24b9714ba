package delegate_test

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// cutProxy forwards TCP connections to a target until it is cut: then it
// closes every connection and closes new ones at once (the peer sees its
// connection reset or closed, never an answer), until it is joined again.
type cutProxy struct {
	url    string
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{url: "http://" + ln.Addr().String(), ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil || !p.track(up) {
			if up != nil {
				up.Close()
			}
			p.forget(c)
			continue
		}
		p.wg.Go(func() { p.pipe(c, up) })
		p.wg.Go(func() { p.pipe(up, c) })
	}
}

// pipe copies src to dst, then closes both.
func (p *cutProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	p.forget(dst)
	p.forget(src)
}

// track remembers an open connection; false when the proxy is cut.
func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *cutProxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
			delete(p.conns, c)
		}
	}
}

// TestConnectedIsLoggedOnlyOnceTheManagerAnswers: a delegate that lost its
// manager falls back to polling, but says it is connected only once a poll
// is answered, not when it starts polling in vain; a failed poll is logged
// and backed off (it was taken for the WebSocket coming back and retried at
// once: 100,000 connections in 45s through this test's proxy).
func TestConnectedIsLoggedOnlyOnceTheManagerAnswers(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	proxy := startCutProxy(t, tm.addr)
	ag := startAgent(t, tm, agentOpts{urls: []string{proxy.url}})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
	connected := func() []string { return ag.logs.lines("connected to the manager") }
	before := len(connected())

	proxy.setCut(true) // no answer from now on; no poll was in flight
	eventually(t, "the agent to poll in vain", func() (bool, string) {
		return len(ag.logs.lines("poll failed")) > 0, "no failed poll yet"
	})
	if got := connected(); len(got) != before {
		t.Fatalf("while the manager was out of reach the agent logged %q", got[before:])
	}

	proxy.setCut(false)
	eventually(t, "the agent to say it is connected again", func() (bool, string) {
		got := connected()
		return len(got) > before, fmt.Sprintf("%d lines", len(got))
	})
	if !ag.running() {
		t.Fatal("agent Run returned")
	}
}
