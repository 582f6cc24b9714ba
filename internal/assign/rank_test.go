package assign

import (
	"cmp"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// dl returns a connected account-level delegate with the given load.
func dl(id string, running, capacity int) Delegate {
	return Delegate{InstanceID: id, Name: "d-" + id, Hostname: "h-" + id, LastSeen: t0, Running: running, Capacity: capacity}
}

func ids(ds []Delegate) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.InstanceID
	}
	return out
}

func TestRankOrder(t *testing.T) {
	p := Policy{Window: 30 * time.Second}
	c := NewCapabilities()
	for _, id := range []string{"allow-busy", "allow-idle", "pref"} {
		c.Record(id, gitURL, true, "", t0.Add(-time.Hour))
		c.Record(id, "tcp://db:5432", true, "", t0.Add(-time.Hour))
	}
	c.Record("half", gitURL, true, "", t0.Add(-time.Hour)) // only one of the two capabilities
	c.Record("gone", gitURL, true, "", t0.Add(-time.Hour))
	c.Record("gone", "tcp://db:5432", true, "", t0.Add(-time.Hour))

	gone := dl("gone", 0, 4)
	gone.LastSeen = t0.Add(-time.Hour)
	ds := []Delegate{
		dl("quarter", 1, 4),
		dl("half", 1, 2), // allowlisted for one capability only: not in the tier
		dl("allow-busy", 3, 4),
		dl("pref", 3, 4),
		dl("unlimited-busy", 7, 0), // Running/∞ = 0: as idle as it gets
		dl("idle", 0, 4),
		dl("allow-idle", 0, 4),
		dl("full", 4, 4),
		gone,
		dl("third", 2, 6),
		dl("two-sixths", 1, 3), // same load as third, fewer tasks
	}
	task := Task{Capabilities: []string{gitURL, "tcp://db:5432"}, PreferInstance: "pref"}
	ranked, preferred := p.Rank(ds, task, c, t0, 42)
	want := []string{"pref", "allow-idle", "allow-busy", "idle", "unlimited-busy", "quarter", "two-sixths", "third", "half"}
	if diff := gocmp.Diff(want, ids(ranked)); diff != "" {
		t.Errorf("Rank (-want +got):\n%s", diff)
	}
	if preferred != 3 {
		t.Errorf("preferred = %d, want 3 (pref, allow-idle, allow-busy)", preferred)
	}

	// Preferred but ineligible: not offered at all; pref falls back into
	// the allowlisted tier by load.
	task.PreferInstance = "gone"
	ranked, preferred = p.Rank(ds, task, c, t0, 42)
	want = []string{"allow-idle", "allow-busy", "pref", "idle", "unlimited-busy", "quarter", "two-sixths", "third", "half"}
	if got := ids(ranked); !sameSet(got[1:3], want[1:3]) || !gocmp.Equal(got[:1], want[:1]) || !gocmp.Equal(got[3:], want[3:]) {
		t.Errorf("Rank with ineligible preference = %v, want %v (allow-busy and pref tie)", got, want)
	}
	if preferred != 3 {
		t.Errorf("preferred = %d, want 3", preferred)
	}

	// Preferred but not allowlisted: first, and counted in the group
	// offered first.
	task.PreferInstance = "idle"
	ranked, preferred = p.Rank(ds, task, c, t0, 42)
	if got := ids(ranked); got[0] != "idle" || !sameSet(got[1:4], []string{"allow-idle", "allow-busy", "pref"}) || preferred != 4 {
		t.Errorf("Rank preferring a delegate that is not allowlisted = %v, %d; want idle, the 3 allowlisted, then the rest, 4", got, preferred)
	}

	// No capabilities, an eligible preferred instance: a group of one.
	ranked, preferred = p.Rank(ds, Task{PreferInstance: "half"}, c, t0, 42)
	if ranked[0].InstanceID != "half" || preferred != 1 {
		t.Errorf("Rank preferring half without capabilities = %v, %d; want half first, 1", ids(ranked), preferred)
	}

	// A task without capabilities has no allowlisted tier: load alone.
	ranked, preferred = p.Rank(ds, Task{}, c, t0, 42)
	want = []string{"allow-idle", "idle", "unlimited-busy", "quarter", "two-sixths", "third", "half", "allow-busy", "pref"}
	if got := ids(ranked); !sameSet(got[:2], want[:2]) || !gocmp.Equal(got[2:7], want[2:7]) || !sameSet(got[7:], want[7:]) {
		t.Errorf("Rank without capabilities = %v, want %v (ties within the first two and the last two)", got, want)
	}
	if preferred != 0 {
		t.Errorf("preferred = %d, want 0", preferred)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestRankTiesFollowSeed(t *testing.T) {
	p := Policy{}
	var ds []Delegate
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		ds = append(ds, dl(id, 1, 4))
	}
	first := map[string]int{}
	for seed := range uint64(200) {
		r1, _ := p.Rank(ds, Task{}, nil, t0, seed)
		r2, _ := p.Rank(ds, Task{}, nil, t0, seed)
		if !gocmp.Equal(ids(r1), ids(r2)) {
			t.Fatalf("seed %d: order not deterministic: %v vs %v", seed, ids(r1), ids(r2))
		}
		first[r1[0].InstanceID]++
	}
	// Replicas with different seeds share work: every delegate comes first
	// for some seed, none dominates.
	if len(first) != len(ds) {
		t.Errorf("first picks over 200 seeds: %v, want all %d delegates", first, len(ds))
	}
	for id, n := range first {
		if n > 60 {
			t.Errorf("delegate %s first for %d of 200 seeds", id, n)
		}
	}
}

func TestRankEmpty(t *testing.T) {
	ranked, preferred := Policy{}.Rank(nil, Task{}, nil, t0, 0)
	if ranked != nil || preferred != 0 {
		t.Errorf("Rank(nil) = %v, %d", ranked, preferred)
	}
}

func TestExplain(t *testing.T) {
	p := Policy{Window: 30 * time.Second}
	c := NewCapabilities()
	c.Record("i-a", gitURL, true, "", t0)

	linux := func(id, name, host string, running, capacity int) Delegate {
		d := dl(id, running, capacity)
		d.Name, d.Hostname, d.Tags = name, host, []string{"linux"}
		return d
	}
	gone := linux("i-gone", "alpha", "h3", 0, 2)
	gone.LastSeen = t0.Add(-47 * time.Second)
	win := dl("i-win", 0, 2)
	win.Name, win.Hostname, win.Tags = "windows", "w1", []string{"windows"}
	hot := linux("i-hot", "beta", "h1", 0, 2)
	hot.OverThreshold = "cpu 93% > 80%"
	draining := linux("i-drain", "beta", "h9", 0, 2)
	draining.Draining = true
	proj := linux("i-proj", "proj", "p1", 0, 2)
	proj.Org, proj.Project = "eng", "web"

	linuxTask := Task{Selectors: []string{"Linux"}, Capabilities: []string{gitURL}}
	tests := []struct {
		name string
		ds   []Delegate
		t    Task
		want string
	}{
		{"no delegates", nil, linuxTask, "no delegate can run this task: no delegates"},
		{"eligible with allowlisted", []Delegate{linux("i-a", "alpha", "h1", 0, 2), linux("i-b", "alpha", "h2", 0, 2)}, linuxTask,
			"eligible: 2 (1 allowlisted)"},
		{"eligible, no capabilities", []Delegate{linux("i-a", "alpha", "h1", 0, 2)}, Task{}, "eligible: 1"},
		{"eligible and excluded", []Delegate{linux("i-a", "alpha", "h1", 0, 2), win, gone, linux("i-full", "alpha", "h4", 2, 2)}, linuxTask,
			"eligible: 1 (1 allowlisted); 3 excluded: 1 disconnected, 1 missing selectors, 1 at capacity"},
		{"busy", []Delegate{linux("i-a", "alpha", "h1", 2, 2), linux("i-b", "alpha", "h2", 5, 2)}, linuxTask,
			"2 delegates eligible, busy: at capacity"},
		{"busy for several reasons, others excluded", []Delegate{linux("i-a", "alpha", "h1", 2, 2), hot, win, gone}, linuxTask,
			"2 delegates eligible, busy: 1 at capacity, 1 over threshold; 2 excluded: 1 disconnected, 1 missing selectors"},
		{"none, for good", []Delegate{win, proj, func() Delegate { d := win; d.InstanceID = "i-win2"; return d }()}, linuxTask,
			"no delegate can run this task: 3 delegates, 2 missing selectors, 1 out of scope"},
		{"none, some may come back", []Delegate{win, gone, draining}, linuxTask,
			"no delegate can run this task now: 3 delegates, 1 disconnected, 1 draining, 1 missing selectors"},
		{"seed example", []Delegate{win, func() Delegate { d := win; d.InstanceID = "i-win2"; return d }(), gone}, linuxTask,
			"no delegate can run this task now: 3 delegates, 2 missing selectors, 1 disconnected"},
		{"a static reason outweighs a dynamic one", []Delegate{func() Delegate { d := gone; d.Tags = nil; return d }()}, linuxTask,
			"no delegate can run this task: 1 delegate, 1 disconnected, 1 missing selectors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, vs := p.Explain(tt.ds, tt.t, c, t0)
			if got != tt.want {
				t.Errorf("summary\n got %q\nwant %q", got, tt.want)
			}
			if len(vs) != len(tt.ds) {
				t.Errorf("%d verdicts for %d delegates", len(vs), len(tt.ds))
			}
		})
	}

	// Verdicts: sorted by name, then hostname; reasons [] when eligible.
	_, vs := p.Explain([]Delegate{hot, gone, linux("i-a", "alpha", "h1", 0, 2), draining}, linuxTask, c, t0)
	want := []protocol.DelegateVerdict{
		{InstanceID: "i-a", Name: "alpha", Hostname: "h1", Eligible: true, Allowlisted: true, Reasons: []protocol.Reason{}},
		{InstanceID: "i-gone", Name: "alpha", Hostname: "h3", Reasons: []protocol.Reason{
			reason(protocol.RuleDisconnected, "last heartbeat 47s ago (window 30s)")}},
		{InstanceID: "i-hot", Name: "beta", Hostname: "h1", Reasons: []protocol.Reason{reason(protocol.RuleThreshold, "cpu 93% > 80%")}},
		{InstanceID: "i-drain", Name: "beta", Hostname: "h9", Reasons: []protocol.Reason{reason(protocol.RuleDraining, "draining (stopping)")}},
	}
	if diff := gocmp.Diff(want, vs); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
}

// sortItems must agree with slices.SortFunc over less, including with
// many equal keys (ties resolved by instance ID) and when the depth limit
// hands over to slices.SortFunc.
func TestSortItems(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 3000 {
		size := r.IntN(300)
		ds := make([]Delegate, size)
		items := make([]rankItem, size)
		for i := range items {
			ds[i].InstanceID = fmt.Sprintf("i-%03d", r.IntN(1000))
			items[i] = rankItem{key: uint64(r.IntN(4)), sub: uint64(r.IntN(1 + n%50)), idx: i}
		}
		want := slices.Clone(items)
		slices.SortStableFunc(want, func(a, b rankItem) int {
			return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.sub, b.sub), strings.Compare(ds[a.idx].InstanceID, ds[b.idx].InstanceID))
		})
		depth := 2 * bits.Len(uint(size))
		if n%5 == 0 {
			depth = n % 3 // exercise the fallback
		}
		sortItems(items, ds, depth)
		for i := range items {
			a, b := items[i], want[i]
			if a.key != b.key || a.sub != b.sub || ds[a.idx].InstanceID != ds[b.idx].InstanceID {
				t.Fatalf("case %d (size %d, depth %d): position %d got %+v (%s), want %+v (%s)",
					n, size, depth, i, a, ds[a.idx].InstanceID, b, ds[b.idx].InstanceID)
			}
		}
	}
}
