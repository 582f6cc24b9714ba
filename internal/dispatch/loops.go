package dispatch

import (
	"context"
	"time"

	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/store"
)

// flushLoop records liveness and extends leases in batches, once per
// heartbeat interval, so heartbeats cost no database write each (and API
// key uses, identity.Service.FlushAPIKeyUse).
func (m *Service) flushLoop(ctx context.Context) {
	every := m.cfg.HeartbeatInterval / 2
	if every < 100*time.Millisecond {
		every = 100 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.flush(ctx)
		}
	}
}

func (m *Service) flush(ctx context.Context) {
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	var touches []store.InstanceTouch
	var ext []store.LeaseExtension
	lease := m.leaseDuration()
	for _, d := range m.hub.all() {
		seen := d.lastSeen.Load()
		d.mu.Lock()
		changed := seen != d.flushedAt
		d.flushedAt = seen
		conn, draining := d.connection, d.draining
		at := time.Unix(0, seen)
		if changed {
			end := at.Add(lease)
			if lost, ok := d.lostSince(seen); ok {
				end = minTime(end, lost.Add(m.cfg.HeartbeatInterval))
			}
			for id, ep := range d.running {
				ext = append(ext, store.LeaseExtension{TaskID: id, Epoch: ep, ExpiresAt: end})
			}
		}
		d.mu.Unlock()
		if changed {
			touches = append(touches, store.InstanceTouch{ID: d.id, LastHeartbeat: at, Connection: conn, Draining: draining})
		}
	}
	if len(touches) > 0 {
		missing, err := m.st.TouchInstances(ctx, touches)
		if err != nil {
			m.log.Warn("record delegate liveness", "err", err, "delegates", len(touches))
		}
		// Deleted (legate delegates delete) or pruned while the delegate
		// was in contact: its session ends, and it registers again.
		for _, id := range missing {
			if d := m.hub.remove(id); d != nil {
				m.caps.Forget(id)
				m.log.Info("delegate instance deleted while connected: it must register again", "instance", id, "name", d.name, "hostname", d.hostname)
			}
		}
	}
	if len(ext) > 0 {
		if err := m.st.ExtendLeases(ctx, ext); err != nil {
			m.log.Warn("extend leases", "err", err, "tasks", len(ext))
		}
	}
	m.identity.FlushAPIKeyUse(ctx)
}

// sweepLoop enforces queue timeouts, execution timeouts and lease expiry,
// and re-offers tasks that still wait.
func (m *Service) sweepLoop(ctx context.Context) {
	t := time.NewTimer(m.cfg.SweepInterval)
	defer t.Stop()
	lastRebroadcast := time.Time{}
	lastResync := m.cfg.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.sweepWake:
			// A lease was shortened: wake when it ends.
			t.Reset(m.nextSweep(ctx, m.cfg.Now()))
			continue
		case <-t.C:
		}
		now := m.cfg.Now()
		m.sweep(ctx, now)
		if now.Sub(lastRebroadcast) >= time.Second {
			lastRebroadcast = now
			m.rebroadcast(ctx, now)
		}
		if now.Sub(lastResync) >= queueResync {
			lastResync = now
			if err := m.resyncQueue(ctx); err != nil {
				m.log.Warn("reload the queue index", "err", err)
			}
		}
		t.Reset(m.nextSweep(ctx, now))
	}
}

// nextSweep is how long the sweep loop waits: SweepInterval, or less so
// that it wakes just after the earliest lease ends — failover then waits
// for the lease (3 heartbeat intervals), not for the lease and a tick.
func (m *Service) nextSweep(ctx context.Context, now time.Time) time.Duration {
	wait := m.cfg.SweepInterval
	if now.Sub(m.started) < m.leaseDuration() {
		return wait // leases are not expired yet after a start
	}
	end, ok, err := m.st.NextLeaseExpiry(ctx)
	if err != nil || !ok {
		return wait
	}
	// A lease already past (held by a claim, or another manager's) is
	// looked at again after a short pause, not in a spin.
	return min(wait, max(end.Sub(m.cfg.Now())+time.Millisecond, minSweepPause))
}

// minSweepPause bounds how often the sweep loop runs.
const minSweepPause = 20 * time.Millisecond

func (m *Service) sweep(ctx context.Context, now time.Time) {
	m.sweepQueue(ctx, now)
	m.observeDelegates(ctx, now)
	m.caps.Prune(now)
	timedOut, err := m.st.TimeoutRunning(ctx, now, 2*m.cfg.HeartbeatInterval)
	if err != nil {
		m.log.Warn("enforce task timeouts", "err", err)
	}
	for _, t := range timedOut {
		m.log.Info("task timed out (manager)", "task", t.ID)
		m.afterManagerFinish(ctx, t)
	}
	// After a manager start, delegates get one lease period to come back
	// before their tasks are declared lost.
	if now.Sub(m.started) < m.leaseDuration() {
		return
	}
	// A lease can only be trusted as expired once its extensions were
	// flushed; flush first.
	m.flush(ctx)
	outcomes, err := m.st.ExpireLeases(ctx, now)
	if err != nil {
		m.log.Warn("expire leases", "err", err)
	}
	for _, o := range outcomes {
		if d := m.hub.get(o.LostInstanceID); d != nil {
			d.dropRunning(o.Task.ID)
		}
		if o.Requeued {
			m.log.Info("task requeued after its delegate was lost", "task", o.Task.ID, "lost_instance", o.LostInstanceID)
			m.events.Publish(ctx, events.Event{Kind: events.TaskQueued, Account: o.Task.AccountID, TaskID: o.Task.ID, Task: &o.Task})
		} else {
			m.log.Info("task failed: its delegate was lost", "task", o.Task.ID, "lost_instance", o.LostInstanceID)
			m.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: o.Task.AccountID, TaskID: o.Task.ID})
		}
	}
}

// rebroadcast offers tasks that wait to eligible delegates again (an event
// may have been lost with a dropped connection): each waiting task after
// 1 s, then after pauses that double up to 30 s, at most 256 per account
// per call, so a deep queue of tasks nobody here can run costs little.
func (m *Service) rebroadcast(ctx context.Context, now time.Time) {
	for _, acct := range m.hub.accounts() {
		for _, t := range m.queue.due(acct, now, 256) {
			m.offerTask(ctx, t, true)
		}
	}
}
