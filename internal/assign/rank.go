package assign

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Offer tiers, best first.
const (
	tierPreferred   = 0
	tierAllowlisted = 1
	tierOther       = 2
)

type rankItem struct {
	idx      int
	tier     int
	running  int
	capacity int // 0 = unlimited
	tie      uint64
}

// Rank returns the delegates of ds that are eligible for t at now (Evaluate
// gives no reason), in the order they should be offered the task:
//
//  1. t.PreferInstance, if eligible;
//  2. when t has capabilities, the delegates allowlisted for all of them;
//  3. the others.
//
// Within a tier the least loaded comes first. Load is Running/Capacity; an
// unlimited delegate's load is Running/∞, that is 0, so it sorts with idle
// capped delegates, and equal loads are ordered by Running (fewer running
// tasks first, which is how unlimited delegates compare among themselves).
// Remaining ties are broken by a hash of seed and instance ID: the order is
// deterministic for one seed, and manager replicas (or successive offers)
// that use different seeds spread equal delegates' work.
//
// allowlisted counts the ranked delegates allowlisted for every capability
// of t (0 when t has none), including the preferred one if it is. ds should
// hold each instance once; it is not modified.
func (p Policy) Rank(ds []Delegate, t Task, caps *Capabilities, now time.Time, seed uint64) (ranked []Delegate, allowlisted int) {
	tv := prepare(&t)
	items := make([]rankItem, 0, len(ds))
	v := caps.view()
	for i := range ds {
		d := &ds[i]
		im := v.instance(d.InstanceID)
		if !p.eligible(d, &tv, im, now) {
			continue
		}
		it := rankItem{idx: i, tier: tierOther, running: d.Running, capacity: max(d.Capacity, 0)}
		if tv.allowlisted(im, now) {
			allowlisted++
			it.tier = tierAllowlisted
		}
		if t.PreferInstance != "" && d.InstanceID == t.PreferInstance {
			it.tier = tierPreferred
		}
		items = append(items, it)
	}
	v.done()
	if len(items) == 0 {
		return nil, 0
	}
	// Hash once per delegate, not once per comparison.
	for i := range items {
		items[i].tie = tieKey(seed, ds[items[i].idx].InstanceID)
	}
	slices.SortFunc(items, func(a, b rankItem) int {
		if c := cmp.Compare(a.tier, b.tier); c != 0 {
			return c
		}
		if c := compareLoad(a.running, a.capacity, b.running, b.capacity); c != 0 {
			return c
		}
		if c := cmp.Compare(a.running, b.running); c != 0 {
			return c
		}
		if c := cmp.Compare(a.tie, b.tie); c != 0 {
			return c
		}
		return strings.Compare(ds[a.idx].InstanceID, ds[b.idx].InstanceID)
	})
	ranked = make([]Delegate, len(items))
	for i, it := range items {
		ranked[i] = ds[it.idx]
	}
	return ranked, allowlisted
}

// compareLoad compares Running/Capacity fractions exactly (capacity <= 0 is
// unlimited: load 0).
func compareLoad(ar, ac, br, bc int) int {
	if ac <= 0 {
		ar, ac = 0, 1
	}
	if bc <= 0 {
		br, bc = 0, 1
	}
	return cmp.Compare(int64(ar)*int64(bc), int64(br)*int64(ac))
}

// tieKey mixes seed with an FNV-1a hash of id (splitmix64 finaliser), so
// each seed orders equal delegates differently.
func tieKey(seed uint64, id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	z := h ^ (seed + 0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
