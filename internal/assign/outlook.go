package assign

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// A queued task that no delegate can run now either waits or fails fast.
// The fast answer is for a task that nothing will ever run (a typo'd
// selector): no KNOWN delegate of the account — one the store keeps a
// record of, connected or not, deregistered ones included, until it is
// deleted or pruned — matches its static requirements (scope, selectors,
// task denials, capability denials). A task that a known but disconnected
// delegate could run (a StatefulSet scaled to zero, one-shot machines
// that come and go, a delegate restarting) waits up to its queue timeout,
// since that delegate is expected back.

// KnownRunner returns the known delegate that could run t once the
// dynamic rules that exclude it now clear (disconnected, draining, busy…),
// preferring the one seen last; ok is false when no known delegate
// matches t's static requirements. known is every delegate instance of the
// account the store has a record of, connected or not.
func (p Policy) KnownRunner(known []Delegate, t Task, caps *Capabilities, now time.Time) (d Delegate, reasons []protocol.Reason, ok bool) {
	v := caps.view()
	defer v.done()
	tv := prepare(&t, v)
	for i := range known {
		rs := p.evaluate(&known[i], &tv, now)
		if ExcludedForGood(rs) {
			continue
		}
		if !ok || known[i].LastSeen.After(d.LastSeen) {
			d, reasons, ok = known[i], rs, true
		}
	}
	return d, reasons, ok
}

// Outlook says what becomes of a queued task whose explanation is
// verdicts, in one line, or "" when a delegate can run it now or is
// only busy (it runs once one frees up):
//
//	no known delegate can run this: it ends not_assigned within one liveness window (30s)
//	waiting up to the queue timeout (1h) for delegate web (web-0), which is not connected
//
// queueTimeout is the task's; known as for KnownRunner.
func (p Policy) Outlook(verdicts []protocol.DelegateVerdict, known []Delegate, t Task, caps *Capabilities, now time.Time, queueTimeout time.Duration) string {
	for _, v := range verdicts {
		if v.Eligible || !slices.ContainsFunc(v.Reasons, func(r protocol.Reason) bool { return !busyRule(r.Rule) }) {
			return ""
		}
	}
	d, reasons, ok := p.KnownRunner(known, t, caps, now)
	if !ok {
		return "no known delegate can run this: it ends not_assigned within one liveness window (" + fmtDuration(p.window()) + ")"
	}
	if len(reasons) == 0 {
		// Its record excludes it for nothing: what holds it is live state
		// its verdict shows (a configuration script running), which
		// clears by itself, as being busy does.
		return ""
	}
	who := "delegate " + d.Name
	if d.Hostname != "" {
		who += " (" + d.Hostname + ")"
	}
	why := "which is not connected"
	if !slices.ContainsFunc(reasons, func(r protocol.Reason) bool { return r.Rule == protocol.RuleDisconnected }) {
		labels := make([]string, 0, len(reasons))
		for _, r := range slices.SortedFunc(slices.Values(reasons), func(a, b protocol.Reason) int {
			return cmp.Compare(ruleOrder(a.Rule), ruleOrder(b.Rule))
		}) {
			labels = append(labels, ruleLabel(r.Rule))
		}
		why = "which is " + strings.Join(labels, ", ") + " now"
	}
	wait := "waiting"
	if queueTimeout > 0 {
		wait += " up to the queue timeout (" + fmtDuration(queueTimeout) + ")"
	}
	return wait + " for " + who + ", " + why
}
