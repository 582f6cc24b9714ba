package assign

import (
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestOutlook: a queued task that no delegate can run now waits for a
// known delegate whose static properties match, connected or not
// (deregistered included), naming the one seen last; with none, it ends
// not_assigned after one window; a task an eligible or only busy delegate
// can run gets no outlook.
func TestOutlook(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	p := Policy{Window: 30 * time.Second}
	task := Task{ID: "t1", Selectors: []string{"batch"}}
	old := Delegate{InstanceID: "i1", Name: "batch", Hostname: "batch-1", Tags: []string{"batch"}, LastSeen: now.Add(-2 * time.Hour), Deregistered: true}
	newer := Delegate{InstanceID: "i2", Name: "batch", Hostname: "batch-2", Tags: []string{"batch"}, LastSeen: now.Add(-time.Hour), Deregistered: true}
	other := Delegate{InstanceID: "i3", Name: "web", Hostname: "web-1", Tags: []string{"web"}, LastSeen: now}
	draining := Delegate{InstanceID: "i4", Name: "batch", Hostname: "batch-3", Tags: []string{"batch"}, LastSeen: now, Draining: true}
	excluded := []protocol.DelegateVerdict{{Name: "web", Reasons: []protocol.Reason{{Rule: protocol.RuleSelectors}}}}
	for _, c := range []struct {
		name     string
		verdicts []protocol.DelegateVerdict
		known    []Delegate
		want     string
	}{
		{"a typo'd selector", excluded, []Delegate{other}, "no known delegate can run this: it ends not_assigned within one liveness window (30s)"},
		{"no delegate at all", nil, nil, "no known delegate can run this: it ends not_assigned within one liveness window (30s)"},
		{"one-shot delegates that exited", excluded, []Delegate{old, other, newer}, "waiting up to the queue timeout (1h) for delegate batch (batch-2), which is not connected"},
		{"a connected one that drains", excluded, []Delegate{draining, other}, "waiting up to the queue timeout (1h) for delegate batch (batch-3), which is draining now"},
		{"an eligible delegate", []protocol.DelegateVerdict{{Name: "batch", Eligible: true}}, []Delegate{other}, ""},
		{"a busy delegate", []protocol.DelegateVerdict{{Name: "batch", Reasons: []protocol.Reason{{Rule: protocol.RuleCapacity}}}}, []Delegate{other}, ""},
		// Held by live state only (its configuration script runs): the
		// stored record has no reason, so there is nothing to wait "for".
		{"a delegate being configured", []protocol.DelegateVerdict{{Name: "batch", Reasons: []protocol.Reason{{Rule: protocol.RuleConfiguring}}}},
			[]Delegate{{InstanceID: "i5", Name: "batch", Hostname: "batch-5", Tags: []string{"batch"}, LastSeen: now}}, ""},
	} {
		if got := p.Outlook(c.verdicts, c.known, task, nil, now, time.Hour); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
