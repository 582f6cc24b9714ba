package dispatch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/assign"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// policy is the assignment policy with this manager's liveness window and marks.
func (m *Service) policy() assign.Policy {
	return assign.Policy{Window: m.window(), Unresponsive: m.cfg.Wedged.Unresponsive}
}

// delegateView is what assignment needs to know about a live instance.
func delegateView(l *live) assign.Delegate {
	l.mu.Lock()
	defer l.mu.Unlock()
	return assign.Delegate{
		InstanceID: l.id, Name: l.name, Hostname: l.hostname, Tags: l.tags,
		Org: l.org, Project: l.project, LastSeen: time.Unix(0, l.lastSeen.Load()),
		Deregistered: l.gone, Draining: l.draining, Running: len(l.running) + len(l.pending), Capacity: l.capacity,
		OverThreshold: l.overThreshold, Configuring: l.configuring, Pending: l.approval != "" && l.approval != protocol.ApprovalApproved,
		ContainerRuntime: l.containerRuntime, ContainerReason: l.containerReason, TaskTypes: l.taskTypes,
	}
}

// instanceView is the view of an instance this manager holds no live state
// for (disconnected, or connected to another manager).
func instanceView(in store.Instance) assign.Delegate {
	d := assign.Delegate{
		InstanceID: in.ID, Name: in.Name, Hostname: in.Hostname, Tags: in.Tags,
		Org: in.Org, Project: in.Project, Deregistered: in.DeregisteredAt != nil,
		Draining: in.Draining, Capacity: in.Capacity, Pending: in.Approval != "" && in.Approval != protocol.ApprovalApproved,
		ContainerRuntime: in.ContainerRuntime, ContainerReason: in.ContainerReason, TaskTypes: in.TaskTypes,
	}
	if in.LastHeartbeat != nil {
		d.LastSeen = *in.LastHeartbeat
	}
	return d
}

// taskView is what assignment needs to know about a task.
func (m *Service) assignTask(ctx context.Context, t store.Task) assign.Task {
	at := assign.Task{
		ID: t.ID, Org: t.Spec.Org, Project: t.Spec.Project, Selectors: t.Spec.Selectors,
		Capabilities: t.Spec.Capabilities, DeniedInstances: t.DeniedInstances,
		Container: t.Spec.Type == protocol.TaskContainer, Type: t.Spec.Type,
	}
	if t.Spec.Connector != "" {
		if c, err := m.st.GetConnector(ctx, t.AccountID, t.Spec.Connector); err == nil {
			at.PreferInstance = c.LastSuccessInstance
		}
	}
	return at
}

// liveViews returns the views of an account's live instances and, at the
// same index, the instances themselves.
func (m *Service) liveViews(accountID string) ([]assign.Delegate, []*live) {
	ls := m.hub.account(accountID)
	views := make([]assign.Delegate, len(ls))
	for i, l := range ls {
		views[i] = delegateView(l)
	}
	return views, ls
}

// offerWindow is how long the best delegate has a task to itself before
// the offer widens.
const offerWindow = 250 * time.Millisecond

// offerTask tells delegates that t is available. First it goes to the
// best-ranked eligible delegate alone (the delegate that last succeeded
// for its connector, then those allowlisted for all its capabilities, then
// the least loaded), so the ranking decides who runs it; if that delegate
// has not acquired it within offerWindow, or with widen, the best few of
// each tier are told at once and the fastest claimer wins.
func (m *Service) offerTask(ctx context.Context, t store.Task, widen bool) {
	m.queue.put(t, m.cfg.Now())
	k := 1
	if widen {
		k = m.cfg.OfferFanout
	}
	// The index looks at the best few delegates, not the whole fleet.
	targets, _ := m.hub.idx.offer(t.AccountID, m.policy(), m.assignTask(ctx, t), m.caps, m.cfg.Now(), k)
	if len(targets) == 0 {
		return
	}
	ev := protocol.Event{Kind: protocol.EventTaskAvailable, TaskID: t.ID, Capabilities: t.Spec.Capabilities, Rank: t.QueueRank()}
	if !widen {
		l := targets[0]
		l.mu.Lock()
		l.pending[t.ID] = struct{}{}
		l.mu.Unlock()
		l.loadChanged()
		l.push(ev)
		if !m.enter() {
			l.unpend(t.ID) // shutting down: the next start offers it again
			return
		}
		acct, id := t.AccountID, t.ID
		time.AfterFunc(offerWindow, func() {
			defer m.bg.Done()
			m.widenOffer(acct, id, l)
		})
		return
	}
	// At most k of the preferred group, then at most k of the others.
	for _, l := range targets {
		l.push(ev)
		m.cfg.Wedged.Offered(l.id, ev, m.cfg.Now())
	}
}

// widenOffer offers a task to more delegates if the one it was offered to
// alone has not acquired it.
func (m *Service) widenOffer(accountID, taskID string, first *live) {
	first.unpend(taskID)
	select {
	case <-m.stopping:
		return
	default:
	}
	if !m.queue.has(taskID) {
		return // acquired or ended here meanwhile (the usual case)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t, err := m.st.GetTask(ctx, accountID, taskID)
	if err != nil || t.Status != protocol.StatusQueued {
		return
	}
	m.metrics.widened.Inc()
	m.offerTask(ctx, t, true)
}

// offerQueued tells d about queued tasks it could run (when its event
// channel opens and when it frees capacity).
func (m *Service) offerQueued(ctx context.Context, d *live) {
	view := delegateView(d)
	if view.Draining || view.OverThreshold != "" || view.Configuring != "" {
		return
	}
	free := 64
	if view.Capacity > 0 {
		free = view.Capacity - view.Running
	}
	if free <= 0 {
		return
	}
	now := m.cfg.Now()
	pol := m.policy()
	var offers []protocol.Event
	// Tasks with the same static requirements pass or fail on d alike.
	verdict := map[string]bool{}
	m.queue.each(d.accountID, func(e *queued) bool {
		ok, seen := verdict[e.sig]
		if !seen {
			ok = len(pol.Evaluate(view, e.view, m.caps, now)) == 0
			verdict[e.sig] = ok
		}
		if ok {
			offers = append(offers, protocol.Event{Kind: protocol.EventTaskAvailable, TaskID: e.task.ID, Capabilities: e.task.Spec.Capabilities, Rank: e.task.QueueRank()})
		}
		return len(offers) < free
	})
	for _, ev := range offers {
		d.push(ev)
	}
}

// explain evaluates every delegate of the task's account against it: the
// live ones with their live state, the others as the store last saw them.
func (m *Service) explain(ctx context.Context, t store.Task) (string, []protocol.DelegateVerdict, error) {
	ins, err := m.st.ListInstances(ctx, t.AccountID)
	if err != nil {
		return "", nil, err
	}
	views := make([]assign.Delegate, 0, len(ins))
	for _, in := range ins {
		if l := m.hub.get(in.ID); l != nil && !l.isGone() {
			views = append(views, delegateView(l))
			continue
		}
		if in.DeregisteredAt != nil {
			continue // stopped cleanly: not a candidate, not news
		}
		// Not live here: only the flushed liveness is known.
		views = append(views, instanceView(in))
	}
	summary, verdicts := m.policy().Explain(views, m.assignTask(ctx, t), m.caps, m.cfg.Now())
	return summary, verdicts, nil
}

// explanationText renders an explanation for a task's error field.
func explanationText(head, summary string, verdicts []protocol.DelegateVerdict) string {
	var b strings.Builder
	b.WriteString(head)
	if summary != "" {
		b.WriteString(": ")
		b.WriteString(summary)
	}
	for _, v := range verdicts {
		if v.Eligible {
			fmt.Fprintf(&b, "\n  %s (%s): eligible", v.Name, v.Hostname)
			continue
		}
		parts := make([]string, len(v.Reasons))
		for i, r := range v.Reasons {
			parts[i] = r.Rule + ": " + r.Message
		}
		fmt.Fprintf(&b, "\n  %s (%s): %s", v.Name, v.Hostname, strings.Join(parts, "; "))
	}
	if len(verdicts) == 0 {
		b.WriteString("\n  no delegate of this account is registered now (those that stopped are not listed); start one with a token from `legate token create`")
	}
	return b.String()
}

// sweepQueue ends queued tasks that cannot run: those no known delegate
// (assign.KnownRunner) could ever take after one liveness window, and
// those past their queue timeout. Either way the error explains, per
// delegate, what excluded it. Expired tasks come from the store's deadline
// index; the "nothing can ever run it" check reads the queue index and
// evaluates each distinct set of static requirements once per account, so
// a deep queue of tasks that share selectors costs one evaluation. A
// delegate not live here counts as it was last recorded, and on a shared
// store only a task still queued in the store
// is ended (this manager's index may not know yet that another manager's
// delegate claimed it).
func (m *Service) sweepQueue(ctx context.Context, now time.Time) {
	expired, err := m.st.QueuedPastDeadline(ctx, now, 1000)
	if err != nil {
		m.log.Warn("list queued tasks past their deadline", "err", err)
		return
	}
	heads := map[string]string{}
	for _, t := range expired {
		heads[t.ID] = fmt.Sprintf("no delegate acquired the task within its queue timeout (%s)", time.Duration(t.QueueTimeoutMS)*time.Millisecond)
	}
	ends := expired
	seen := map[string]bool{}
	pol := m.policy()
	for acct, entries := range m.queue.snapshot() {
		views, _ := m.liveViews(acct)
		// others are the account's known delegates (every record, live
		// here or not), read once per account if needed.
		var others []assign.Delegate
		othersRead, othersUnknown := false, false
		possible := map[string]bool{}
		for _, e := range entries {
			id := e.task.ID
			seen[id] = true
			if _, ok := heads[id]; ok {
				continue
			}
			ok, known := possible[e.sig]
			if !known {
				ok = m.anyCouldRun(views, e, pol, now)
				if !ok {
					if !othersRead {
						othersRead = true
						others, err = m.knownDelegates(ctx, acct)
						if err != nil {
							// Cannot tell now: nothing is ended for it.
							m.log.Warn("list the known delegates", "account", acct, "err", err)
							othersUnknown = true
						}
					}
					ok = othersUnknown || m.anyCouldRun(others, e, pol, now)
				}
				possible[e.sig] = ok
			}
			if ok {
				delete(m.unrunnable, id)
				continue
			}
			since, ok := m.unrunnable[id]
			if !ok {
				m.unrunnable[id] = now
				continue
			}
			if now.Sub(since) < m.window() {
				continue
			}
			heads[id] = "no known delegate can run this task, and none appeared within one liveness window (" + m.window().String() + ")"
			ends = append(ends, e.task)
		}
	}
	for _, t := range ends {
		head := heads[t.ID]
		summary, verdicts, err := m.explain(ctx, t)
		if err != nil {
			m.log.Warn("explain task", "task", t.ID, "err", err)
			continue
		}
		// Only while it is queued: this manager's index may be behind a
		// claim made through another manager.
		ft, err := m.st.FinishQueuedTask(ctx, t.AccountID, t.ID, store.Result{Status: protocol.StatusNotAssigned, Error: explanationText(head, summary, verdicts)}, now)
		m.queue.drop(t.ID)
		delete(m.unrunnable, t.ID)
		if err != nil {
			continue // claimed or cancelled meanwhile
		}
		m.log.Info("task not assigned", "task", ft.ID, "why", head)
		m.events.Publish(ctx, events.Event{Kind: events.TaskEnded, Account: ft.AccountID, TaskID: ft.ID})
	}
	for id := range m.unrunnable {
		if !seen[id] {
			delete(m.unrunnable, id)
		}
	}
}

// anyCouldRun reports whether one of views is not excluded for good from
// the queued task e.
func (m *Service) anyCouldRun(views []assign.Delegate, e *queuedTask, pol assign.Policy, now time.Time) bool {
	for _, v := range views {
		if !assign.ExcludedForGood(pol.Evaluate(v, e.view, m.caps, now)) {
			return true
		}
	}
	return false
}

// knownDelegates returns the views of every instance of the account the
// store keeps a record of (connected to any manager or not, deregistered
// ones too: a one-shot delegate deregisters when it exits), but rejected
// ones: refused at every call, they never come back to run a task.
func (m *Service) knownDelegates(ctx context.Context, acct string) ([]assign.Delegate, error) {
	ins, err := m.st.ListInstances(ctx, acct)
	if err != nil {
		return nil, err
	}
	out := make([]assign.Delegate, 0, len(ins))
	for _, in := range ins {
		if in.Approval != protocol.ApprovalRejected {
			out = append(out, instanceView(in))
		}
	}
	return out, nil
}

// recordCapabilities keeps validation results in memory and in the store.
func (m *Service) recordCapabilities(ctx context.Context, instanceID string, rs []protocol.CapabilityResult) error {
	now := m.cfg.Now()
	rows := make([]store.CapabilityResult, 0, len(rs))
	for _, r := range rs {
		m.caps.Record(instanceID, r.Criteria, r.OK, r.Error, now)
		ttl := assign.DenyTTL
		if r.OK {
			ttl = assign.AllowTTL
		}
		rows = append(rows, store.CapabilityResult{
			InstanceID: instanceID, Criteria: r.Criteria, OK: r.OK, Error: r.Error,
			CheckedAt: now, ExpiresAt: now.Add(ttl),
		})
	}
	return m.st.RecordCapabilities(ctx, rows)
}

// loadCapabilities restores the allow and deny lists after a start.
func (m *Service) loadCapabilities(ctx context.Context) error {
	rs, err := m.st.LiveCapabilities(ctx, "", m.cfg.Now())
	if err != nil {
		return err
	}
	for _, r := range rs {
		m.caps.Load(r.InstanceID, r.Criteria, r.OK, r.Error, r.ExpiresAt)
	}
	return nil
}
