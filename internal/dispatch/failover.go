package dispatch

import (
	"context"
	"time"

	"github.com/legate-dev/legate/internal/store"
)

// Failover when a delegate's connection closes. A delegate that goes
// silent keeps its tasks for the lease, three heartbeat intervals from its
// last contact: it may be slow, or its network may be. A delegate whose
// event channel closes under it (its process died and the kernel closed
// its sockets, or the connection was reset) and that has no other channel
// open is most likely gone: the leases of its tasks are shortened to end
// one heartbeat interval after the close, so a task with retries left runs
// elsewhere that much sooner. Any contact in that interval (the delegate
// reconnects, or polls, or sends output) gives it its full lease again at
// the next flush, so a delegate that comes back promptly keeps its tasks.

// lostSince returns when the delegate's last event channel closed under
// it, if it did after its last contact seen and no channel is open now
// (l.mu held).
func (l *live) lostSince(seen int64) (time.Time, bool) {
	if l.lostAt == 0 || seen > l.lostAt || l.wsOpen > 0 || l.polls > 0 {
		return time.Time{}, false
	}
	return time.Unix(0, l.lostAt), true
}

// channelClosed is called when one of d's event channels (its WebSocket,
// or a long poll) ended because the connection closed or failed, not
// because this manager ended it. With no other channel open, the leases
// of d's tasks are cut to one heartbeat interval from now.
func (m *Service) channelClosed(ctx context.Context, d *live, how string) {
	select {
	case <-m.stopping:
		return // the manager closes its connections itself
	default:
	}
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	now := m.cfg.Now()
	d.mu.Lock()
	if d.gone || d.wsOpen > 0 || d.polls > 0 || len(d.running) == 0 {
		d.mu.Unlock()
		return
	}
	d.lostAt = now.UnixNano()
	end := now.Add(m.cfg.HeartbeatInterval)
	// A lease extended past what this manager's own contacts gave it was
	// extended by another manager the delegate reached since: it is kept.
	// (A quarter interval covers the time between a contact and the
	// lease its claim or flush wrote.)
	seen := time.Unix(0, d.lastSeen.Load())
	ext := make([]store.LeaseCut, 0, len(d.running))
	for id, ep := range d.running {
		last := seen
		if c := d.claimed[id]; c.After(last) {
			last = c
		}
		known := last.Add(m.leaseDuration() + m.cfg.HeartbeatInterval/4)
		ext = append(ext, store.LeaseCut{TaskID: id, Epoch: ep, To: end, Known: known})
	}
	d.mu.Unlock()
	m.log.Info("delegate's connection closed while it runs tasks: they fail over after one heartbeat interval unless it comes back",
		"instance", d.id, "name", d.name, "hostname", d.hostname, "connection", how, "tasks", len(ext), "interval", m.cfg.HeartbeatInterval)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := m.st.ShortenLeases(wctx, ext); err != nil {
		m.log.Warn("shorten the leases of a delegate whose connection closed", "instance", d.id, "err", err)
		return
	}
	select {
	case m.sweepWake <- struct{}{}:
	default:
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
