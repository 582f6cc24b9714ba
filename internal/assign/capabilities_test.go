package assign

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestAllowlistTTL(t *testing.T) {
	c := NewCapabilities()
	c.Record("i-1", gitURL, true, "ignored for a success", t0)
	for _, tt := range []struct {
		at   time.Time
		want bool
	}{
		{t0, true},
		{t0.Add(AllowTTL - time.Nanosecond), true},
		{t0.Add(AllowTTL), false},
		{t0.Add(7 * time.Hour), false},
	} {
		if got := c.Allowed("i-1", gitURL, tt.at); got != tt.want {
			t.Errorf("Allowed at t0+%v = %v, want %v", tt.at.Sub(t0), got, tt.want)
		}
	}
	if c.Allowed("i-2", gitURL, t0) || c.Allowed("i-1", "https://other", t0) {
		t.Error("allowlist leaks to another instance or criteria")
	}
	if _, _, denied := c.Denied("i-1", gitURL, t0); denied {
		t.Error("a success deny-lists")
	}

	// Each success resets the TTL.
	c.Record("i-1", gitURL, true, "", t0.Add(5*time.Hour))
	if !c.Allowed("i-1", gitURL, t0.Add(10*time.Hour)) {
		t.Error("TTL not reset by a later success")
	}
	if c.Allowed("i-1", gitURL, t0.Add(11*time.Hour)) {
		t.Error("allowlisted past 6 h after the last success")
	}
	allow, deny := c.Entries("i-1", t0.Add(time.Hour))
	if diff := cmp.Diff([]Entry{{Criteria: gitURL, ExpiresAt: t0.Add(11 * time.Hour)}}, allow); diff != "" || deny != nil {
		t.Errorf("Entries: deny %v, allow (-want +got):\n%s", deny, diff)
	}
}

func TestDenyTTL(t *testing.T) {
	c := NewCapabilities()
	c.Record("i-1", gitURL, false, "timeout", t0)
	until, errText, denied := c.Denied("i-1", gitURL, t0.Add(DenyTTL-time.Nanosecond))
	if !denied || !until.Equal(t0.Add(5*time.Minute)) || errText != "timeout" {
		t.Errorf("Denied just before 5 min = %v %q %v, want %v timeout true", until, errText, denied, t0.Add(5*time.Minute))
	}
	if _, _, denied := c.Denied("i-1", gitURL, t0.Add(DenyTTL)); denied {
		t.Error("still denied after 5 min")
	}
	if c.Allowed("i-1", gitURL, t0) {
		t.Error("a failure allowlists")
	}
}

func TestSuccessAndFailureReplaceEachOther(t *testing.T) {
	c := NewCapabilities()
	c.Record("i-1", gitURL, false, "refused", t0)
	c.Record("i-1", gitURL, true, "", t0.Add(time.Minute))
	if _, _, denied := c.Denied("i-1", gitURL, t0.Add(2*time.Minute)); denied {
		t.Error("a success did not clear the deny entry")
	}
	if !c.Allowed("i-1", gitURL, t0.Add(2*time.Minute)) {
		t.Error("not allowlisted after a success")
	}
	c.Record("i-1", gitURL, false, "refused again", t0.Add(time.Hour))
	if c.Allowed("i-1", gitURL, t0.Add(time.Hour)) {
		t.Error("a failure did not clear the allowlist entry")
	}
	if _, errText, denied := c.Denied("i-1", gitURL, t0.Add(time.Hour)); !denied || errText != "refused again" {
		t.Errorf("Denied = %q %v, want refused again", errText, denied)
	}
	// After the deny entry expires the delegate is neither allowed nor denied:
	// the success before the failure does not come back.
	later := t0.Add(time.Hour + DenyTTL)
	if _, _, denied := c.Denied("i-1", gitURL, later); denied || c.Allowed("i-1", gitURL, later) {
		t.Error("state after the deny entry expired is not neutral")
	}
}

func TestStaleResultIgnored(t *testing.T) {
	c := NewCapabilities()
	c.Record("i-1", gitURL, false, "refused", t0.Add(2*time.Minute))
	c.Record("i-1", gitURL, true, "", t0.Add(time.Minute)) // checked earlier, arrived later
	if _, _, denied := c.Denied("i-1", gitURL, t0.Add(3*time.Minute)); !denied {
		t.Error("an older success undid a newer failure")
	}
	c.Record("i-1", gitURL, true, "", t0.Add(2*time.Minute)) // same check time: the last one wins
	if !c.Allowed("i-1", gitURL, t0.Add(3*time.Minute)) {
		t.Error("a result checked at the same time was ignored")
	}
}

func TestLoadEntriesPruneForget(t *testing.T) {
	c := NewCapabilities()
	c.Load("i-1", "https://b", true, "dropped for a success", t0.Add(3*time.Hour))
	c.Load("i-1", "https://a", true, "", t0.Add(time.Hour))
	c.Load("i-1", "https://c", false, "refused", t0.Add(2*time.Minute))
	c.Load("i-1", "https://old", false, "refused", t0.Add(-time.Minute)) // already expired
	c.Load("i-2", "https://a", true, "", t0.Add(time.Hour))

	if !c.Allowed("i-1", "https://b", t0.Add(3*time.Hour-time.Nanosecond)) || c.Allowed("i-1", "https://b", t0.Add(3*time.Hour)) {
		t.Error("loaded allowlist entry does not expire at its time")
	}
	// A new success at t0 runs 6 h from t0 and replaces the loaded entry
	// (which was checked at t0-3h).
	c.Record("i-1", "https://b", true, "", t0)

	allow, deny := c.Entries("i-1", t0)
	wantAllow := []Entry{
		{Criteria: "https://a", ExpiresAt: t0.Add(time.Hour)},
		{Criteria: "https://b", ExpiresAt: t0.Add(AllowTTL)},
	}
	wantDeny := []Entry{{Criteria: "https://c", ExpiresAt: t0.Add(2 * time.Minute), Error: "refused"}}
	if diff := cmp.Diff(wantAllow, allow); diff != "" {
		t.Errorf("allow (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantDeny, deny); diff != "" {
		t.Errorf("deny (-want +got):\n%s", diff)
	}

	// A stale Load (checked before the stored result) is ignored.
	c.Load("i-1", "https://b", false, "refused", t0.Add(-time.Hour))
	if !c.Allowed("i-1", "https://b", t0) {
		t.Error("a stale Load replaced a newer success")
	}

	if n := c.Prune(t0); n != 1 {
		t.Errorf("Prune(t0) = %d, want 1 (the expired deny entry)", n)
	}
	if n := c.Prune(t0.Add(2 * time.Hour)); n != 3 {
		t.Errorf("Prune(t0+2h) = %d, want 3", n)
	}
	if n := c.Prune(t0.Add(2 * time.Hour)); n != 0 {
		t.Errorf("second Prune = %d, want 0", n)
	}
	if len(c.m) != 1 {
		t.Errorf("Prune kept empty criteria: %v", c.m)
	}
	c.Forget("i-1")
	if allow, deny := c.Entries("i-1", t0); allow != nil || deny != nil {
		t.Errorf("after Forget: %v %v", allow, deny)
	}
	if c.Allowed("i-1", "https://b", t0) {
		t.Error("Forget kept an entry")
	}
}

func TestNilCapabilitiesReads(t *testing.T) {
	var c *Capabilities
	if c.Allowed("i", "x", t0) {
		t.Error("nil Allowed")
	}
	if _, _, d := c.Denied("i", "x", t0); d {
		t.Error("nil Denied")
	}
	if a, d := c.Entries("i", t0); a != nil || d != nil {
		t.Error("nil Entries")
	}
}

// The deny list applies when the task picks the delegate by selector and
// when it is the only delegate (seeds: "This is true if there is only one
// Delegate and even if the Delegate is selected for that task with a
// Selector").
func TestDenyAppliesToOnlyAndSelectedDelegate(t *testing.T) {
	p := Policy{Window: 30 * time.Second}
	c := NewCapabilities()
	c.Record("i-1", gitURL, false, "connection refused", t0)
	d := healthy()
	for _, sel := range [][]string{nil, {"web-delegate"}, {"host-1"}, {"linux"}} {
		task := Task{ID: "t-1", Selectors: sel, Capabilities: []string{gitURL}, PreferInstance: "i-1"}
		now := t0.Add(time.Minute)
		d.LastSeen = now
		ranked, preferred := p.Rank([]Delegate{d}, task, c, now, 1)
		if len(ranked) != 0 || preferred != 0 {
			t.Errorf("selectors %v: Rank = %v, %d; want nothing", sel, ranked, preferred)
		}
		summary, vs := p.Explain([]Delegate{d}, task, c, now)
		if want := "no delegate can run this task: 1 delegate, 1 capability denied"; summary != want {
			t.Errorf("selectors %v: summary %q, want %q", sel, summary, want)
		}
		want := []protocol.DelegateVerdict{{
			InstanceID: "i-1", Name: "web-delegate", Hostname: "host-1",
			Reasons: []protocol.Reason{reason(protocol.RuleCapabilityDenied,
				`capability "https://git.example.com" failed here: connection refused (denied for 4m more)`)},
		}}
		if diff := cmp.Diff(want, vs); diff != "" {
			t.Errorf("selectors %v: verdicts (-want +got):\n%s", sel, diff)
		}
		// Five minutes after the failure it may be tried again.
		d2 := d
		d2.LastSeen = t0.Add(DenyTTL)
		if ranked, _ := p.Rank([]Delegate{d2}, task, c, t0.Add(DenyTTL), 1); len(ranked) != 1 {
			t.Errorf("selectors %v: not offered again after the deny TTL", sel)
		}
	}
}

// Capabilities is shared by the manager's goroutines: results are recorded
// and pruned while tasks are ranked and explained (run with -race).
func TestCapabilitiesConcurrentUse(t *testing.T) {
	c := NewCapabilities()
	p := Policy{Window: time.Hour}
	var ds []Delegate
	for i := range 20 {
		ds = append(ds, dl(fmt.Sprintf("i-%d", i), i%3, 4))
	}
	task := Task{Capabilities: []string{"https://a", "https://b"}}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 300 {
				now := t0.Add(time.Duration(i) * time.Second)
				id := fmt.Sprintf("i-%d", (i+w)%20)
				switch w {
				case 0:
					c.Record(id, "https://a", i%4 != 0, "refused", now)
					c.Record(id, "https://b", true, "", now)
				case 1:
					p.Rank(ds, task, c, now, uint64(i))
					c.Entries(id, now)
				case 2:
					p.Explain(ds, task, c, now)
					c.Allowed(id, "https://a", now)
					c.Denied(id, "https://a", now)
				case 3:
					c.Prune(now.Add(AllowTTL))
					if i%50 == 0 {
						c.Forget(id)
					}
				}
			}
		})
	}
	wg.Wait()
}
