// Package unresponsive finds the delegates that keep their heartbeat but
// do not work: they ignore the task offers they are sent, or claim a task
// and never start it. No peer tells such a wedged delegate from an idle
// one (both heartbeat, neither runs anything): only the manager that makes
// the offers can, because it knows what it offered. The decision is pure —
// given the offers made, the heartbeats, claims and starts seen, and the
// clock — and the one effect, ending the lease of a task claimed and never
// started, goes through a function the caller gives.
//
// An offer (of a task that needs no capabilities: validating them may take
// long, or fail) is ignored when, one offer timeout after it was made, the
// task is still queued (nobody claimed it), the delegate has claimed nothing
// since, and a heartbeat received after that timeout still reported free
// capacity (not full, not draining, not over a threshold, not running a
// configuration script). A delegate that is full, busy or lost the task to
// another delegate is therefore never marked for it, and an idle delegate,
// which is offered nothing, never is. A claim is seen as a task new in the
// delegate's heartbeat's running list: claims made through another
// manager count too. A task claimed and not started within the start
// timeout (counted while the delegate runs no task it did start: one
// waiting for another scope's task to end is not wedged) is lost: its
// lease is ended (only if the store shows it still held and not started),
// so the failover requeues it with the delegate denied.
//
// A marked delegate is offered no task (assign.Policy.Unresponsive). It
// is responsive again when it claims or starts something (it worked
// through offers it had), when a new process takes its identity (its
// heartbeat sequence starts again), or after the retry pause, when it is
// offered work on probation: if it ignores that too, it is marked again one
// offer timeout later.
//
// All of it is per manager: offers are made by the manager that holds the
// delegate's event channel, so that manager alone marks it, shows the
// mark, excludes it from its offers and counts it in its metric. The lease
// of an unstarted task is ended in the shared store, conditionally, so a
// start reported through another manager wins.
package unresponsive

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/metrics"
	"github.com/legate-dev/legate/internal/protocol"
)

// Thresholds, in heartbeat intervals (10 s by default), so they scale with
// how often the manager hears from its delegates.
const (
	// OfferTimeoutBeats: an offer unclaimed for this long (30 s by default,
	// the liveness window with the default three missed heartbeats) is
	// ignored. A healthy delegate claims within milliseconds; the manager
	// widens an unclaimed offer after 250 ms already.
	OfferTimeoutBeats = 3
	// StartTimeoutBeats: a task claimed and not started for this long (5
	// minutes by default, while the delegate runs no started task) is lost.
	// It covers pulling an image, the container sweep and the task
	// directory before the process starts.
	StartTimeoutBeats = 30
	// RetryAfterBeats: a mark lifts after this long (5 minutes by
	// default) and the delegate is offered work again on probation.
	RetryAfterBeats = 30
	// ForgetAfterBeats: what is known of an instance not heard from for
	// this long is dropped (it disconnected; the liveness window is 3).
	ForgetAfterBeats = 10
	// MaxOffers bounds the offers remembered per instance; later ones are
	// only counted.
	MaxOffers = 1024
)

// Lose ends, at to, the leases of those of taskIDs that instance holds and
// has not started, and returns them (store.Store.LoseUnstarted).
type Lose func(ctx context.Context, instanceID string, taskIDs []string, to time.Time) ([]string, error)

// Tracker is one manager's record of what its delegates were offered and
// did. Its methods are safe for concurrent use; those of a nil Tracker do
// nothing.
type Tracker struct {
	log      *slog.Logger
	lose     Lose
	interval time.Duration
	marked   *metrics.CounterVec

	// marks is the reason of every marked instance, read on the offer path
	// without a lock; replaced whole when a mark is set or lifted.
	marks atomic.Pointer[map[string]string]

	mu      sync.Mutex
	by      map[string]*instance
	scanned time.Time // the last look at every instance (forget)
}

// instance is what is known of one delegate instance.
type instance struct {
	heard  time.Time // last heartbeat, offer or start
	seq    int64     // of its last heartbeat
	seenAt time.Time // its last heartbeat
	room   bool      // the last heartbeat reported free capacity
	listed []string  // the tasks the last heartbeat listed, sorted
	// offers are the tasks offered since its last claim or start, by first
	// offer; extra counts those past MaxOffers.
	offers map[string]time.Time
	extra  int
	// claimed are listed tasks not seen started, by first listing;
	// started are tasks seen started, by start.
	claimed map[string]time.Time
	started map[string]time.Time
	// busyAt is the last heartbeat listing a task seen started.
	busyAt time.Time
	mark   *protocol.DelegateUnresponsive
}

// New returns a tracker for delegates that heartbeat every interval; it
// ends leases with lose and registers its metrics in reg (when not nil).
func New(log *slog.Logger, reg *metrics.Registry, interval time.Duration, lose Lose) *Tracker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Tracker{log: log, lose: lose, interval: max(interval, time.Millisecond), by: map[string]*instance{}}
	empty := map[string]string{}
	t.marks.Store(&empty)
	if reg != nil {
		reg.NewGaugeFunc(metrics.Opts{
			Name: "legate_manager_delegates_unresponsive",
			Help: "Delegate instances connected to this manager that it marked unresponsive (they heartbeat but ignored offers, or claimed a task and never started it) and offers no task.",
		}, func() float64 { return float64(len(*t.marks.Load())) })
		t.marked = reg.NewCounterVec(metrics.Opts{
			Name: "legate_manager_delegates_marked_unresponsive_total",
			Help: "Times this manager marked a delegate instance unresponsive, by why: ignored_offers, unstarted_claim.",
		}, "why")
		t.marked.With(whyIgnored)
		t.marked.With(whyUnstarted)
	}
	return t
}

const (
	whyIgnored   = "ignored_offers"
	whyUnstarted = "unstarted_claim"
)

// Unresponsive returns why instanceID is marked, "" when it is not
// (assign.Policy.Unresponsive).
func (t *Tracker) Unresponsive(instanceID string) string {
	if t == nil {
		return ""
	}
	return (*t.marks.Load())[instanceID]
}

// Show sets v.Unresponsive when v's instance is connected and marked.
func (t *Tracker) Show(instanceID string, v *protocol.Delegate) {
	if t == nil || v.Status != protocol.DelegateConnected || t.Unresponsive(instanceID) == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if in := t.by[instanceID]; in != nil && in.mark != nil {
		m := *in.mark
		v.Unresponsive = &m
	}
}

// get returns the record of id, made if needed (t.mu held).
func (t *Tracker) get(id string, now time.Time) *instance {
	in := t.by[id]
	if in == nil {
		in = &instance{offers: map[string]time.Time{}, claimed: map[string]time.Time{}, started: map[string]time.Time{}}
		t.by[id] = in
	}
	in.heard = now
	return in
}

// Offered records that the task of ev (a task_available event) was
// offered to instanceID. An offer of a task that needs capabilities does
// not count: the delegate validates them first, which may take long or
// fail (it reports that, and is denied the task), and neither is ignoring.
func (t *Tracker) Offered(instanceID string, ev protocol.Event, now time.Time) {
	if t == nil || len(ev.Capabilities) > 0 {
		return
	}
	task := ev.TaskID
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.get(instanceID, now)
	if _, ok := in.offers[task]; ok || in.mark != nil {
		return
	}
	if len(in.offers) >= MaxOffers {
		in.extra++
		return
	}
	in.offers[task] = now
}

// Heartbeat records a heartbeat of instanceID and decides on it: the
// decision needs the delegate's word that it has room after its offers
// timed out, and a wedged delegate heartbeats. queued reports whether a
// task is still queued. Tasks it claimed and did not start for too long
// lose their lease (through Lose) for the lease expiry to requeue them.
func (t *Tracker) Heartbeat(ctx context.Context, instanceID string, hb protocol.Heartbeat, now time.Time, queued func(taskID string) bool) {
	if t == nil {
		return
	}
	c, ok := t.heartbeat(instanceID, hb, now, queued)
	if !ok {
		return
	}
	lost, err := t.lose(ctx, c.id, c.tasks, now.Add(-time.Millisecond))
	if err != nil {
		t.log.Warn("end the leases of tasks a delegate claimed and never started", "instance", c.id, "tasks", len(c.tasks), "err", err)
		return
	}
	t.lost(c, lost, now)
}

// heartbeat records a heartbeat and decides (the pure part of Heartbeat).
func (t *Tracker) heartbeat(instanceID string, hb protocol.Heartbeat, now time.Time, queued func(string) bool) (candidate, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.get(instanceID, now)
	t.scan(now)
	if hb.Seq > 0 && hb.Seq < in.seq {
		// Another process took the identity: what the last one did is moot.
		t.recover(instanceID, in, "a new delegate process registered")
		*in = instance{heard: now, offers: map[string]time.Time{}, claimed: map[string]time.Time{}, started: map[string]time.Time{}}
	}
	in.seq, in.seenAt = hb.Seq, now
	in.room = !hb.Draining && hb.OverThreshold == "" && hb.Configuring == "" && (hb.Capacity <= 0 || len(hb.Running) < hb.Capacity)
	listed := make([]string, 0, len(hb.Running))
	for _, rt := range hb.Running {
		listed = append(listed, rt.ID)
	}
	slices.Sort(listed)
	listed = slices.Compact(listed)
	claimed := false
	for _, id := range listed {
		if _, ok := in.started[id]; ok {
			in.busyAt = now
			continue
		}
		if _, found := slices.BinarySearch(in.listed, id); !found {
			claimed = true
			in.claimed[id] = now
		}
	}
	for id := range in.claimed {
		if _, found := slices.BinarySearch(listed, id); !found {
			delete(in.claimed, id) // ended, or lost
		}
	}
	in.listed = listed
	if claimed {
		t.active(instanceID, in, "it claimed a task")
	}
	return t.decide(instanceID, in, now, queued)
}

// Started records that instanceID reported task started.
func (t *Tracker) Started(instanceID, task string, now time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.get(instanceID, now)
	delete(in.claimed, task)
	in.started[task] = now
	t.active(instanceID, in, "it started a task")
}

// active records a claim or a start: the offers before it were answered,
// and a mark lifts (t.mu held).
func (t *Tracker) active(id string, in *instance, how string) {
	clear(in.offers)
	in.extra = 0
	t.recover(id, in, how)
}

// recover lifts the mark of id, if it has one (t.mu held).
func (t *Tracker) recover(id string, in *instance, how string) {
	if in.mark == nil {
		return
	}
	in.mark = nil
	t.publish()
	t.log.Info("delegate responsive again: it is offered tasks", "instance", id, "why", how)
}

// publish replaces the marks read on the offer path (t.mu held).
func (t *Tracker) publish() {
	m := map[string]string{}
	for id, in := range t.by {
		if in.mark != nil {
			m[id] = in.mark.Reason
		}
	}
	t.marks.Store(&m)
}

// candidate is a delegate with tasks claimed and not started for too long.
type candidate struct {
	id    string
	tasks []string
	since map[string]time.Time
}

// scan forgets the instances not heard from for ForgetAfterBeats (they
// disconnected), at most once per interval (t.mu held).
func (t *Tracker) scan(now time.Time) {
	if now.Sub(t.scanned) < t.interval {
		return
	}
	t.scanned = now
	changed := false
	for id, in := range t.by {
		if now.Sub(in.heard) > ForgetAfterBeats*t.interval {
			delete(t.by, id)
			changed = changed || in.mark != nil
		}
	}
	if changed {
		t.publish()
	}
}

// decide applies the rules to in at now: it lifts a mark due for
// probation, marks in if it ignored its offers, and returns the tasks it
// claimed and did not start for too long (t.mu held).
func (t *Tracker) decide(id string, in *instance, now time.Time, queued func(string) bool) (candidate, bool) {
	if in.mark != nil && !now.Before(in.mark.RetryAt) {
		in.mark = nil
		clear(in.offers)
		in.extra = 0
		t.publish()
		t.log.Info("delegate marked unresponsive is offered tasks again, on probation", "instance", id)
	}
	for task, at := range in.started {
		if _, found := slices.BinarySearch(in.listed, task); !found && now.Sub(at) > 2*t.interval {
			delete(in.started, task)
		}
	}
	if in.mark == nil && t.ignored(id, in, now, queued) {
		t.publish()
	}
	return unstarted(id, in, now, t.interval)
}

// ignored marks in if it ignored offers, and reports whether it did
// (t.mu held).
func (t *Tracker) ignored(id string, in *instance, now time.Time, queued func(string) bool) bool {
	interval := t.interval
	timeout := OfferTimeoutBeats * interval
	n := 0
	var oldest time.Time
	for task, at := range in.offers {
		if !queued(task) {
			delete(in.offers, task) // claimed by someone, or ended
			continue
		}
		if now.Sub(at) < timeout {
			continue
		}
		n++
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	// The delegate said it had room after the offer timed out.
	if n == 0 || !in.room || in.seenAt.Before(oldest.Add(timeout)) {
		return false
	}
	n += in.extra
	in.mark = &protocol.DelegateUnresponsive{
		Since: now, RetryAt: now.Add(RetryAfterBeats * interval), IgnoredOffers: n, IgnoredSince: &oldest,
		Reason: fmt.Sprintf("ignored %d task %s since %s (none claimed within the offer timeout of %s while its heartbeats reported free capacity); offered work again at %s",
			n, plural(n, "offer", "offers"), oldest.UTC().Format(time.RFC3339), timeout, now.Add(RetryAfterBeats*interval).UTC().Format(time.RFC3339)),
	}
	t.log.Warn("delegate marked unresponsive: it heartbeats but ignores task offers; it is offered no task until it claims one",
		"instance", id, "ignored_offers", n, "since", oldest, "offer_timeout", timeout, "retry_at", in.mark.RetryAt)
	if t.marked != nil {
		t.marked.With(whyIgnored).Inc()
	}
	return true
}

// unstarted returns the tasks in claimed and not started for too long,
// counted while it ran no task it started.
func unstarted(id string, in *instance, now time.Time, interval time.Duration) (candidate, bool) {
	c := candidate{id: id, since: map[string]time.Time{}}
	for task, at := range in.claimed {
		if in.busyAt.After(at) {
			at = in.busyAt
		}
		if now.Sub(at) >= StartTimeoutBeats*interval {
			c.tasks = append(c.tasks, task)
			c.since[task] = in.claimed[task]
		}
	}
	slices.Sort(c.tasks)
	return c, len(c.tasks) > 0
}

// lost records which of c's tasks lost their lease: the others started
// (perhaps through another manager), ended or moved on, and are forgotten.
// One lost task marks the instance.
func (t *Tracker) lost(c candidate, lost []string, now time.Time) {
	interval := t.interval
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.by[c.id]
	if in == nil {
		return
	}
	for _, task := range c.tasks {
		if !slices.Contains(lost, task) {
			delete(in.claimed, task)
		}
	}
	if len(lost) == 0 {
		return
	}
	at := c.since[lost[0]]
	t.log.Warn("delegate claimed a task and never started it: the task is offered elsewhere, without this delegate",
		"instance", c.id, "tasks", lost, "claimed_at", at, "start_timeout", StartTimeoutBeats*interval)
	if in.mark != nil {
		return
	}
	in.mark = &protocol.DelegateUnresponsive{
		Since: now, RetryAt: now.Add(RetryAfterBeats * interval), UnstartedTask: lost[0], ClaimedAt: &at,
		Reason: fmt.Sprintf("claimed task %s at %s and did not start it within %s (offered elsewhere); offered work again at %s",
			lost[0], at.UTC().Format(time.RFC3339), StartTimeoutBeats*interval, now.Add(RetryAfterBeats*interval).UTC().Format(time.RFC3339)),
	}
	if t.marked != nil {
		t.marked.With(whyUnstarted).Inc()
	}
	t.publish()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
