package assign

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestUnresponsiveRule: a delegate the policy says is unresponsive is
// excluded with its reason, offered nothing by the index, explained, and
// only for now (the mark lifts): the task is not ended as unrunnable.
func TestUnresponsiveRule(t *testing.T) {
	why := "ignored 3 task offers since 2026-11-22T11:59:00Z"
	p := Policy{Window: 30 * time.Second, Unresponsive: func(id string) string {
		if id == "i-1" {
			return why
		}
		return ""
	}}
	d := healthy()
	task := Task{ID: "t1"}
	rs := p.Evaluate(d, task, nil, t0)
	if diff := cmp.Diff([]protocol.Reason{reason(protocol.RuleUnresponsive, why)}, rs); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	if ExcludedForGood(rs) {
		t.Error("unresponsive counted as excluded for good")
	}
	other := healthy()
	other.InstanceID, other.Name = "i-2", "other"
	summary, verdicts := p.Explain([]Delegate{d, other}, task, nil, t0)
	if !strings.Contains(summary, "1 unresponsive") || len(verdicts) != 2 || verdicts[1].Eligible || !verdicts[0].Eligible {
		t.Errorf("explain: %q %+v", summary, verdicts)
	}
	ix := NewIndex[string](1)
	ix.Put("i-1", d)
	ix.Put("i-2", other)
	views := map[string]Delegate{"i-1": d, "i-2": other}
	order, _ := ix.Offer(p, task, nil, t0, 4, func(h string) Delegate { return views[h] }, nil)
	if diff := cmp.Diff([]string{"i-2"}, order); diff != "" {
		t.Errorf("offered to (-want +got):\n%s", diff)
	}
	if rs := (Policy{}).Evaluate(d, task, nil, t0.Add(-10*time.Second)); len(rs) != 0 {
		t.Errorf("without marks: %+v", rs)
	}
}
