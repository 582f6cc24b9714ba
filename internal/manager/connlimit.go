package manager

import (
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// maxHeaderBytes bounds a request's headers (a session or API key and a
// few short headers need well under 1 KiB); net/http's default is 1 MiB.
const maxHeaderBytes = 64 << 10

// nofileLimit is the process's descriptor limit (Go raises the soft limit
// to the hard one at start); 0 when it cannot be read.
func nofileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

// defaultMaxConnections leaves a quarter of the descriptor limit, at most
// 1,024 descriptors, to the database, log files and outgoing connections.
func defaultMaxConnections(nofile uint64) int {
	if nofile == 0 {
		return 1024 // the usual soft limit, when it cannot be read
	}
	n := nofile - min(nofile/4, 1024)
	return int(min(n, math.MaxInt32))
}

// connLimit is a listener that serves at most limit connections at once.
// A connection accepted past the limit waits, unserved, for a place, and
// the keep-alive connection idle the longest is closed to make room for it
// (or, when none is idle, the next one to become idle): idle connections
// cannot starve new clients, and connections with a request in flight,
// WebSockets and long polls are never closed for it. While one connection
// waits, Accept is not called, so later ones wait in the kernel's listen
// backlog and cost no descriptor: the limit is exceeded by one at most.
type connLimit struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	log       *slog.Logger

	mu sync.Mutex
	// idle holds the keep-alive connections between two requests, with
	// the time they became idle (fed by http.Server.ConnState).
	idle map[net.Conn]time.Time
	// want is set while a new connection waits and no connection was
	// idle: the next one to become idle is closed.
	want    bool
	waiting bool
	warned  time.Time
}

func newConnLimit(ln net.Listener, limit int, log *slog.Logger) *connLimit {
	return &connLimit{
		Listener: ln,
		slots:    make(chan struct{}, limit),
		done:     make(chan struct{}),
		log:      log,
		idle:     map[net.Conn]time.Time{},
	}
}

func (l *connLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if !l.acquire() {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *connLimit) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func (l *connLimit) acquire() bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	l.makeRoom()
	defer func() {
		l.mu.Lock()
		l.want, l.waiting = false, false
		l.mu.Unlock()
	}()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-l.done:
		return false
	}
}

// makeRoom closes the connection idle the longest, or, when none is idle,
// asks connState to close the next one that becomes idle.
func (l *connLimit) makeRoom() {
	now := time.Now()
	l.mu.Lock()
	var oldest net.Conn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	if oldest != nil {
		delete(l.idle, oldest)
	} else {
		l.want = true
	}
	l.waiting = true
	warn := now.Sub(l.warned) >= time.Minute
	if warn {
		l.warned = now
	}
	l.mu.Unlock()
	if warn {
		l.log.Warn("connection limit reached: new connections wait, and idle keep-alive connections are closed to make room; if this is the normal load, raise --max-connections (and the descriptor limit, ulimit -n)",
			"max_connections", cap(l.slots))
	}
	if oldest != nil {
		_ = oldest.Close()
	}
}

// connState is the http.Server.ConnState hook: it tracks which connections
// are idle between requests.
func (l *connLimit) connState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	closeIt := false
	switch s {
	case http.StateIdle:
		if l.want {
			l.want, closeIt = false, true
		} else {
			l.idle[c] = time.Now()
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		delete(l.idle, c)
	}
	l.mu.Unlock()
	if closeIt {
		_ = c.Close()
	}
}

// idleCount is how many connections are idle (for tests).
func (l *connLimit) idleCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.idle)
}

// isWaiting reports whether a new connection waits for a place (for tests).
func (l *connLimit) isWaiting() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// limitedConn gives its slot back when it closes (once, however often it
// is closed).
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
