package webui

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// keepAliveEvery is how often an idle event stream sends a comment, so
// that proxies and the browser keep it open.
const keepAliveEvery = 20 * time.Second

// events writes server-sent events.
type events struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// startEvents answers with an event stream; false when the connection
// cannot stream.
func (u *UI) startEvents(w http.ResponseWriter) (*events, bool) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ev := &events{w: w, rc: rc, timeout: u.cfg.WriteTimeout}
	_ = rc.SetWriteDeadline(time.Now().Add(ev.timeout))
	if err := ev.flush(); err != nil {
		return nil, false
	}
	return ev, true
}

// flush sends what was written; each write gets its own deadline, so a
// stream lasts as long as it needs while a reader that stopped reading is
// dropped.
func (e *events) flush() error {
	return e.rc.Flush()
}

func (e *events) write(s string) error {
	_ = e.rc.SetWriteDeadline(time.Now().Add(e.timeout))
	if _, err := fmt.Fprint(e.w, s); err != nil {
		return err
	}
	return e.flush()
}

// send sends one event; data may span lines.
func (e *events) send(name, data string) error {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	for _, line := range strings.Split(strings.ReplaceAll(data, "\r", ""), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return e.write(b.String())
}

func (e *events) comment() error { return e.write(": keep-alive\n\n") }

// follow sends the stream's first state and then one after each change,
// keeping an idle stream open with comments, until send says the stream
// ends (false), the request is gone or the UI stops.
func (u *UI) follow(r *http.Request, ev *events, changes <-chan struct{}, send func() bool) {
	u.followEvery(r, ev, changes, send, 0)
}

// followEvery is follow with at most one send per gap: changes within it
// are sent together at its end (0: each change at once).
func (u *UI) followEvery(r *http.Request, ev *events, changes <-chan struct{}, send func() bool, gap time.Duration) {
	// The state may have changed between the page and this stream.
	if !send() {
		return
	}
	last := time.Now()
	// due fires at the end of the gap when a change waits for it.
	var due <-chan time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	keepAlive := time.NewTicker(keepAliveEvery)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-u.cfg.Stopping:
			return
		case <-keepAlive.C:
			if ev.comment() != nil {
				return
			}
		case <-changes:
			if due != nil {
				continue // sent at the end of the gap
			}
			if wait := gap - time.Since(last); wait > 0 {
				timer = time.NewTimer(wait)
				due = timer.C
				continue
			}
			if !send() {
				return
			}
			last = time.Now()
		case <-due:
			due = nil
			if !send() {
				return
			}
			last = time.Now()
		}
	}
}
