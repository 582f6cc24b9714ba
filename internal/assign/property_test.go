package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/legate-dev/legate/internal/protocol"
)

const propertyCases = 5000

var (
	propNames     = []string{"alpha", "Beta", "gamma"}
	propHosts     = []string{"h1", "H2", " h3 "}
	propTags      = []string{"linux", "gpu", "docker", "arm", " GPU "}
	propSelectors = []string{"Linux", "gpu", " docker", "alpha", "h1", "beta", "x", ""}
	propCriteria  = []string{"https://git", "tcp://db:5432", "binary:helm"}
	propScopes    = []scope{{}, {"eng", ""}, {"ops", ""}, {"eng", "web"}, {"eng", "api"}, {"ops", "web"}}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func some[T any](r *rand.Rand, xs []T, max int) []T {
	n := r.IntN(max + 1)
	out := make([]T, 0, n)
	for range n {
		out = append(out, pick(r, xs))
	}
	return out
}

// randomCase builds delegates, capability state and a task that hit every
// rule often.
func randomCase(r *rand.Rand) ([]Delegate, *Capabilities, Task) {
	n := r.IntN(13)
	ds := make([]Delegate, n)
	c := NewCapabilities()
	for i := range ds {
		s := scope{}
		if r.IntN(2) == 0 {
			s = pick(r, propScopes)
		}
		d := Delegate{
			InstanceID:   fmt.Sprintf("i-%d", i),
			Name:         pick(r, propNames),
			Hostname:     pick(r, propHosts),
			Tags:         some(r, propTags, 3),
			Org:          s.org,
			Project:      s.project,
			LastSeen:     t0.Add(-time.Duration(r.IntN(33_000)) * time.Millisecond),
			Deregistered: r.IntN(30) == 0,
			Draining:     r.IntN(15) == 0,
			Running:      r.IntN(4),
			Capacity:     r.IntN(6),
		}
		if r.IntN(15) == 0 {
			d.OverThreshold = "cpu 95% > 80%"
		}
		if r.IntN(40) == 0 {
			d.LastSeen = time.Time{}
		}
		ds[i] = d
		for _, crit := range propCriteria {
			switch r.IntN(6) {
			case 0, 1, 2:
				c.Record(d.InstanceID, crit, true, "", t0.Add(-time.Duration(r.IntN(7*60))*time.Minute))
			case 3:
				c.Record(d.InstanceID, crit, false, "refused", t0.Add(-time.Duration(r.IntN(7*60))*time.Second))
			}
		}
	}
	s := scope{}
	if r.IntN(2) == 0 {
		s = pick(r, propScopes)
	}
	t := Task{
		ID:           "t",
		Org:          s.org,
		Project:      s.project,
		Selectors:    some(r, propSelectors, r.IntN(3)),
		Capabilities: some(r, propCriteria, 2),
	}
	for i := range ds {
		if r.IntN(12) == 0 {
			t.DeniedInstances = append(t.DeniedInstances, ds[i].InstanceID)
		}
	}
	switch r.IntN(3) {
	case 0, 2:
		if n > 0 {
			t.PreferInstance = ds[r.IntN(n)].InstanceID
		}
	case 1:
		t.PreferInstance = "i-unknown"
	}
	return ds, c, t
}

func allowlistedAll(c *Capabilities, id string, t Task, now time.Time) bool {
	if len(t.Capabilities) == 0 {
		return false
	}
	for _, crit := range t.Capabilities {
		if !c.Allowed(id, crit, now) {
			return false
		}
	}
	return true
}

func TestRankAndExplainProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := Policy{Window: 30 * time.Second}
	var eligibleSeen, excludedSeen, preferredSeen, tieredSeen int
	for n := range propertyCases {
		ds, c, task := randomCase(r)
		seed := r.Uint64()
		ranked, preferred := p.Rank(ds, task, c, t0, seed)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("case %d: %s\ntask %+v\ndelegates %+v\nranked %v", n, fmt.Sprintf(format, args...), task, ds, ids(ranked))
		}

		eligible := map[string]bool{}
		reasons := map[string][]protocol.Reason{}
		for _, d := range ds {
			rs := p.Evaluate(d, task, c, t0)
			reasons[d.InstanceID] = rs
			if len(rs) == 0 {
				eligible[d.InstanceID] = true
				eligibleSeen++
			} else {
				excludedSeen++
			}
			// The fast selector check agrees with protocol.MissingSelectors.
			tv := prepare(&task, view{})
			if hasSelectors(tv.sel, &d) != (len(protocol.MissingSelectors(task.Selectors, d.Tags, d.Name, d.Hostname)) == 0) {
				fail("hasSelectors disagrees with MissingSelectors for %+v", d)
			}
			// Reasons come in rule order, one per rule.
			if !slices.IsSortedFunc(rs, func(a, b protocol.Reason) int { return ruleOrder(a.Rule) - ruleOrder(b.Rule) }) ||
				len(slices.CompactFunc(slices.Clone(rs), func(a, b protocol.Reason) bool { return a.Rule == b.Rule })) != len(rs) {
				fail("reasons out of order or repeated: %v", rs)
			}
		}

		// Rank returns exactly the eligible delegates, each once.
		seen := map[string]bool{}
		for _, d := range ranked {
			if !eligible[d.InstanceID] {
				fail("ranked %s, which Evaluate excludes: %v", d.InstanceID, reasons[d.InstanceID])
			}
			if seen[d.InstanceID] {
				fail("ranked %s twice", d.InstanceID)
			}
			seen[d.InstanceID] = true
		}
		if len(seen) != len(eligible) {
			fail("ranked %d delegates, %d eligible", len(seen), len(eligible))
		}

		// Preferred first when eligible.
		if eligible[task.PreferInstance] {
			preferredSeen++
			if ranked[0].InstanceID != task.PreferInstance {
				fail("preferred %s is eligible but not first", task.PreferInstance)
			}
		}

		// Tiers in order, allowlisted count right, load non-decreasing within a tier.
		tier := func(d Delegate) int {
			switch {
			case d.InstanceID == task.PreferInstance:
				return tierPreferred
			case allowlistedAll(c, d.InstanceID, task, t0):
				return tierAllowlisted
			}
			return tierOther
		}
		wantPreferred := 0
		for i, d := range ranked {
			if tier(d) != tierOther {
				wantPreferred++
			}
			if i == 0 {
				continue
			}
			prev := ranked[i-1]
			switch tp, td := tier(prev), tier(d); {
			case tp > td:
				fail("%s (tier %d) after %s (tier %d)", d.InstanceID, td, prev.InstanceID, tp)
			case tp == td:
				c := compareLoad(prev.Running, prev.Capacity, d.Running, d.Capacity)
				if c > 0 || (c == 0 && prev.Running > d.Running) {
					fail("%s (%d/%d) after %s (%d/%d) in one tier", d.InstanceID, d.Running, d.Capacity, prev.InstanceID, prev.Running, prev.Capacity)
				}
			default:
				tieredSeen++
			}
		}
		// ranked[:preferred] is exactly the preferred and allowlisted tiers.
		if preferred != wantPreferred {
			fail("preferred = %d, want %d", preferred, wantPreferred)
		}

		// Deterministic for one seed, and Order is Rank by index.
		again, _ := p.Rank(ds, task, c, t0, seed)
		if !cmp.Equal(ids(ranked), ids(again)) {
			fail("Rank not deterministic: %v then %v", ids(ranked), ids(again))
		}
		order, preferredOrder := p.Order(ds, task, c, t0, seed, make([]int, 3))
		if len(order) != len(ranked) || preferredOrder != preferred {
			fail("Order gave %v (%d preferred), Rank %v (%d)", order, preferredOrder, ids(ranked), preferred)
		}
		for i, idx := range order {
			if ds[idx].InstanceID != ranked[i].InstanceID {
				fail("Order %v disagrees with Rank %v", order, ids(ranked))
			}
		}

		// Explain agrees with Evaluate, delegate by delegate, and is sorted.
		_, vs := p.Explain(ds, task, c, t0)
		if len(vs) != len(ds) {
			fail("%d verdicts for %d delegates", len(vs), len(ds))
		}
		for i, v := range vs {
			if v.Eligible != eligible[v.InstanceID] {
				fail("verdict %s eligible=%v, Evaluate %v", v.InstanceID, v.Eligible, reasons[v.InstanceID])
			}
			if !slices.Equal(reasons[v.InstanceID], v.Reasons) {
				fail("verdict %s reasons (-Evaluate +Explain):\n%s", v.InstanceID,
					cmp.Diff(reasons[v.InstanceID], v.Reasons, cmpopts.EquateEmpty()))
			}
			if v.Allowlisted != allowlistedAll(c, v.InstanceID, task, t0) {
				fail("verdict %s allowlisted=%v", v.InstanceID, v.Allowlisted)
			}
			if i > 0 {
				a, b := vs[i-1], v
				if a.Name > b.Name || (a.Name == b.Name && a.Hostname > b.Hostname) {
					fail("verdicts not sorted: %s/%s before %s/%s", a.Name, a.Hostname, b.Name, b.Hostname)
				}
			}
		}
	}
	// The generator must exercise every branch, or the properties say little.
	t.Logf("%d cases: %d eligible, %d excluded, %d with an eligible preference, %d tier changes",
		propertyCases, eligibleSeen, excludedSeen, preferredSeen, tieredSeen)
	if eligibleSeen < 1000 || excludedSeen < 1000 || preferredSeen < 100 || tieredSeen < 100 {
		t.Errorf("generator too narrow: %d eligible, %d excluded, %d preferred, %d tier changes",
			eligibleSeen, excludedSeen, preferredSeen, tieredSeen)
	}
}
