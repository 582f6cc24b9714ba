package assign

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// ruleOrder lists the rules in the order Evaluate applies them.
func ruleOrder(rule string) int {
	switch rule {
	case protocol.RuleDisconnected:
		return 0
	case protocol.RuleDraining:
		return 1
	case protocol.RuleScope:
		return 2
	case protocol.RuleSelectors:
		return 3
	case protocol.RuleTaskDenied:
		return 4
	case protocol.RuleCapabilityDenied:
		return 5
	case protocol.RuleCapacity:
		return 6
	case protocol.RuleThreshold:
		return 7
	}
	return 8
}

// ruleLabel names a rule in a summary ("2 missing selectors").
func ruleLabel(rule string) string {
	switch rule {
	case protocol.RuleDisconnected:
		return "disconnected"
	case protocol.RuleDraining:
		return "draining"
	case protocol.RuleScope:
		return "out of scope"
	case protocol.RuleSelectors:
		return "missing selectors"
	case protocol.RuleTaskDenied:
		return "denied this task"
	case protocol.RuleCapabilityDenied:
		return "capability denied"
	case protocol.RuleCapacity:
		return "at capacity"
	case protocol.RuleThreshold:
		return "over threshold"
	case protocol.RuleConfiguring:
		return "being configured"
	case protocol.RulePendingApproval:
		return "waiting for approval"
	case protocol.RuleNoContainerRuntime:
		return "without a container runtime"
	case protocol.RuleTaskType:
		return "without that task type"
	case protocol.RuleUnresponsive:
		return "unresponsive"
	}
	return rule
}

// busyRule reports whether a rule only means "not now, soon": the delegate
// is otherwise eligible.
func busyRule(rule string) bool {
	return rule == protocol.RuleCapacity || rule == protocol.RuleThreshold
}

// Explain evaluates every delegate of ds for t at now. verdicts has one
// entry per delegate, sorted by name, then hostname, then instance ID;
// Reasons is empty (not nil) for eligible delegates; Allowlisted is set for
// any delegate allowlisted for every capability of the task. summary is one
// line, one of:
//
//	eligible: 2 (1 allowlisted); 3 excluded: 2 missing selectors, 1 disconnected
//	2 delegates eligible, busy: at capacity
//	no delegate can run this task: 3 delegates, 2 missing selectors, 1 disconnected
//	no delegate can run this task now: 2 delegates, 1 disconnected, 1 out of scope
//
// "(n allowlisted)" appears when the task has capabilities. "Busy" delegates
// are excluded only by capacity or threshold. "now" marks that at least one
// delegate is excluded only by dynamic rules (see ExcludedForGood), so the
// task may still be picked up; without it, every delegate is excluded for
// good. Counts per rule go by count, then rule order; a delegate excluded by
// several rules counts under each.
func (p Policy) Explain(ds []Delegate, t Task, caps *Capabilities, now time.Time) (summary string, verdicts []protocol.DelegateVerdict) {
	verdicts = make([]protocol.DelegateVerdict, 0, len(ds))
	v := caps.view()
	tv := prepare(&t, v)
	for i := range ds {
		d := &ds[i]
		rs := p.evaluate(d, &tv, now)
		if rs == nil {
			rs = []protocol.Reason{}
		}
		verdicts = append(verdicts, protocol.DelegateVerdict{
			InstanceID:  d.InstanceID,
			Name:        d.Name,
			Hostname:    d.Hostname,
			Eligible:    len(rs) == 0,
			Allowlisted: tv.allowlisted(d, now),
			Reasons:     rs,
		})
	}
	v.done()
	slices.SortFunc(verdicts, func(a, b protocol.DelegateVerdict) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Hostname, b.Hostname), cmp.Compare(a.InstanceID, b.InstanceID))
	})
	return summarize(verdicts, len(tv.caps) > 0), verdicts
}

func summarize(vs []protocol.DelegateVerdict, hasCaps bool) string {
	if len(vs) == 0 {
		return "no delegate can run this task: no delegates"
	}
	var eligible, allowlisted, waiting int
	var busy, rest []protocol.DelegateVerdict
	for _, v := range vs {
		switch {
		case v.Eligible:
			eligible++
			if v.Allowlisted {
				allowlisted++
			}
		case !slices.ContainsFunc(v.Reasons, func(r protocol.Reason) bool { return !busyRule(r.Rule) }):
			busy = append(busy, v)
		default:
			rest = append(rest, v)
		}
		if !v.Eligible && !ExcludedForGood(v.Reasons) {
			waiting++
		}
	}
	var b strings.Builder
	excluded := func() {
		if len(rest) > 0 {
			b.WriteString("; " + strconv.Itoa(len(rest)) + " excluded: " + countRules(rest, true))
		}
	}
	switch {
	case eligible > 0:
		rest = append(rest, busy...)
		b.WriteString("eligible: " + strconv.Itoa(eligible))
		if hasCaps {
			b.WriteString(" (" + strconv.Itoa(allowlisted) + " allowlisted)")
		}
		excluded()
	case len(busy) > 0:
		b.WriteString(plural(len(busy), "delegate") + " eligible, busy: " + countRules(busy, false))
		excluded()
	default:
		b.WriteString("no delegate can run this task")
		if waiting > 0 {
			b.WriteString(" now")
		}
		b.WriteString(": " + plural(len(vs), "delegate") + ", " + countRules(vs, true))
	}
	return b.String()
}

// countRules lists how many of vs each rule excludes: "2 missing
// selectors, 1 disconnected". Without counts when there is only one rule
// and withCounts is false ("at capacity").
func countRules(vs []protocol.DelegateVerdict, withCounts bool) string {
	type rc struct {
		rule string
		n    int
	}
	var counts []rc
	for _, v := range vs {
		for _, r := range v.Reasons {
			i := slices.IndexFunc(counts, func(c rc) bool { return c.rule == r.Rule })
			if i < 0 {
				counts = append(counts, rc{rule: r.Rule})
				i = len(counts) - 1
			}
			counts[i].n++
		}
	}
	slices.SortFunc(counts, func(a, b rc) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(ruleOrder(a.rule), ruleOrder(b.rule)), cmp.Compare(a.rule, b.rule))
	})
	if len(counts) == 1 && !withCounts {
		return ruleLabel(counts[0].rule)
	}
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = strconv.Itoa(c.n) + " " + ruleLabel(c.rule)
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
