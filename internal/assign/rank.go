package assign

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"time"
)

// Offer tiers, best first.
const (
	tierPreferred   = 0
	tierAllowlisted = 1
	tierOther       = 2
)

// rankItem is one eligible delegate with its sort keys packed so that
// comparing two items is comparing two integers, almost always: key is the
// tier (top 2 bits) and the load as float64 bits (a load is in [0, 1) for
// an eligible delegate, and non-negative float64 bits order like the
// numbers; equal fractions divide to equal floats), sub is Running (top 32
// bits) and the seed's tie hash (low 32 bits). Equal keys fall back to the
// instance ID.
type rankItem struct {
	key, sub uint64
	idx      int
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
// preferred is the length of the leading group of ranked that is offered
// the task first for a reason, tiers 1 and 2: the preferred instance (if
// eligible) and the delegates allowlisted for every capability of t. It is
// 0 when there is no such group (no eligible preferred instance, and no
// capabilities or nobody allowlisted for all of them), so ranked[:preferred]
// is always the group to try before the others. ds should hold each
// instance once; it is not modified.
func (p Policy) Rank(ds []Delegate, t Task, caps *Capabilities, now time.Time, seed uint64) (ranked []Delegate, preferred int) {
	items, preferred := p.rank(ds, &t, caps, now, seed)
	if len(items) == 0 {
		return nil, 0
	}
	ranked = make([]Delegate, len(items))
	for i, it := range items {
		ranked[i] = ds[it.idx]
	}
	return ranked, preferred
}

// Order is Rank without copying delegates, for a scheduler's hot path: it
// returns the indices in ds of the eligible delegates in offer order
// (ranked[i] == ds[order[i]]), appended to buf[:0] so a caller may reuse
// one buffer. Copying the delegates (and collecting the copies) is a good
// part of the cost of ranking them (BENCHMARKS.md, assignment cost).
func (p Policy) Order(ds []Delegate, t Task, caps *Capabilities, now time.Time, seed uint64, buf []int) (order []int, preferred int) {
	items, preferred := p.rank(ds, &t, caps, now, seed)
	order = buf[:0]
	for _, it := range items {
		order = append(order, it.idx)
	}
	return order, preferred
}

// rank returns the eligible delegates of ds as sorted rank items, and how
// many of them are in the preferred or allowlisted tier.
func (p Policy) rank(ds []Delegate, t *Task, caps *Capabilities, now time.Time, seed uint64) (items []rankItem, preferred int) {
	items = make([]rankItem, 0, len(ds))
	v := caps.view()
	tv := prepare(t, v)
	for i := range ds {
		d := &ds[i]
		ok, allow := p.eligible(d, &tv, now)
		if !ok {
			continue
		}
		tier := uint64(tierOther)
		if allow {
			tier = tierAllowlisted
		}
		if t.PreferInstance != "" && d.InstanceID == t.PreferInstance {
			tier = tierPreferred
		}
		if tier != tierOther {
			preferred++
		}
		running := uint64(min(max(d.Running, 0), 1<<32-1))
		items = append(items, rankItem{
			key: tier<<62 | math.Float64bits(load(d.Running, d.Capacity)),
			sub: running<<32 | tieKey(seed, d.InstanceID)&(1<<32-1),
			idx: i,
		})
	}
	v.done()
	sortItems(items, ds, 2*bits.Len(uint(len(items))))
	return items, preferred
}

// less orders rank items: packed keys, then instance ID. Small enough to
// be inlined, which is why sortItems exists: slices.SortFunc calls its
// comparison through a function value, a large part of the cost of
// ranking a fleet (BENCHMARKS.md, assignment cost).
func less(a, b *rankItem, ds []Delegate) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	if a.sub != b.sub {
		return a.sub < b.sub
	}
	return ds[a.idx].InstanceID < ds[b.idx].InstanceID
}

// sortItems is an introsort: quicksort with a median-of-three pivot,
// insertion sort for short runs, and slices.SortFunc once depth runs out
// (never, in practice: the tie hashes make the keys look random).
func sortItems(items []rankItem, ds []Delegate, depth int) {
	for len(items) > 12 {
		if depth == 0 {
			slices.SortFunc(items, func(a, b rankItem) int {
				if less(&a, &b, ds) {
					return -1
				}
				if less(&b, &a, ds) {
					return 1
				}
				return 0
			})
			return
		}
		depth--
		// Median of three to items[0], then Hoare partition around it.
		m, h := len(items)/2, len(items)-1
		if less(&items[m], &items[0], ds) {
			items[m], items[0] = items[0], items[m]
		}
		if less(&items[h], &items[m], ds) {
			items[h], items[m] = items[m], items[h]
			if less(&items[m], &items[0], ds) {
				items[m], items[0] = items[0], items[m]
			}
		}
		items[0], items[m] = items[m], items[0]
		pivot := items[0]
		i, j := 0, len(items)
		for {
			for i++; i < len(items) && less(&items[i], &pivot, ds); i++ {
			}
			for j--; less(&pivot, &items[j], ds); j-- {
			}
			if i >= j {
				break
			}
			items[i], items[j] = items[j], items[i]
		}
		items[0], items[j] = items[j], items[0]
		// Recurse into the smaller side, loop on the larger.
		if j < len(items)-j {
			sortItems(items[:j], ds, depth)
			items = items[j+1:]
		} else {
			sortItems(items[j+1:], ds, depth)
			items = items[:j]
		}
	}
	for i := 1; i < len(items); i++ {
		for k := i; k > 0 && less(&items[k], &items[k-1], ds); k-- {
			items[k], items[k-1] = items[k-1], items[k]
		}
	}
}

// load is Running/Capacity in [0, 1] for a delegate that is not over
// capacity; 0 when capacity is unlimited (<= 0) or nothing runs.
func load(running, capacity int) float64 {
	if capacity <= 0 || running <= 0 {
		return 0
	}
	return min(float64(running)/float64(capacity), 1)
}

// compareLoad compares Running/Capacity fractions exactly (capacity <= 0 is
// unlimited: load 0). The tests hold Rank's packed keys to it.
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
