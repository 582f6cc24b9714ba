package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// bigCase joins several random cases into one fleet of up to ~150
// delegates, so groups hold many delegates and walks skip some.
func bigCase(r *rand.Rand) ([]Delegate, *Capabilities, Task) {
	ds, c, task := randomCase(r)
	for j := range r.IntN(12) {
		more, mc, _ := randomCase(r)
		for _, d := range more {
			old := d.InstanceID
			d.InstanceID = fmt.Sprintf("%s-%d", old, j)
			ds = append(ds, d)
			for crit, m := range mc.m {
				if st, ok := m[old]; ok {
					if c.m[crit] == nil {
						c.m[crit] = map[string]capState{}
					}
					c.m[crit][d.InstanceID] = st
				}
			}
		}
	}
	return ds, c, task
}

// TestIndexAgreesWithRank holds Index.Offer to the reference: for random
// fleets, capability lists and tasks, and every k, it returns Rank's
// ranked[:min(k, preferred)] then ranked[preferred:preferred+k] for the
// same seed, whatever order the delegates were put in and however their
// loads moved before.
func TestIndexAgreesWithRank(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p := Policy{Window: 30 * time.Second}
	var nonEmpty, withPreferred int
	for n := range propertyCases {
		var ds []Delegate
		var c *Capabilities
		var task Task
		if n%2 == 0 {
			ds, c, task = randomCase(r)
		} else {
			ds, c, task = bigCase(r)
		}
		seed := r.Uint64()
		x := NewIndex[int](seed)
		// Put in a random order with random loads, then move each to
		// its real load; remove and put back a few.
		perm := r.Perm(len(ds))
		for _, i := range perm {
			d := ds[i]
			d.Running, d.Capacity = r.IntN(5), r.IntN(5)
			x.Put(i, d)
		}
		for i, d := range ds {
			if r.IntN(8) == 0 {
				x.Remove(d.InstanceID)
				x.Put(i, d)
			}
			x.SetLoad(d.InstanceID, d.Running, d.Capacity)
		}
		if x.Len() != len(ds) {
			t.Fatalf("case %d: index holds %d delegates, want %d", n, x.Len(), len(ds))
		}
		ranked, pref := p.Rank(ds, task, c, t0, seed)
		view := func(i int) Delegate { return ds[i] }
		for _, k := range []int{0, 1, 2, 3, 5, len(ds) + 1} {
			got, gotPref := x.Offer(p, task, c, t0, k, view, nil)
			kk := max(k, 1)
			var want []string
			wantPref := min(kk, pref)
			for _, d := range ranked[:wantPref] {
				want = append(want, d.InstanceID)
			}
			for _, d := range ranked[pref:min(len(ranked), pref+kk)] {
				want = append(want, d.InstanceID)
			}
			var gotIDs []string
			for _, i := range got {
				gotIDs = append(gotIDs, ds[i].InstanceID)
			}
			if !slices.Equal(gotIDs, want) || gotPref != wantPref {
				t.Fatalf("case %d, k %d: index offers %v (preferred %d), Rank %v (preferred %d)\ntask %+v\ndelegates %+v",
					n, k, gotIDs, gotPref, want, wantPref, task, ds)
			}
		}
		if len(ranked) > 0 {
			nonEmpty++
		}
		if pref > 0 {
			withPreferred++
		}
	}
	// The cases must exercise both tiers, not agree on empty answers.
	if nonEmpty < propertyCases/4 || withPreferred < propertyCases/20 {
		t.Fatalf("too few interesting cases: %d with an eligible delegate, %d with a preferred group", nonEmpty, withPreferred)
	}
}

// TestIndexRemove: removed delegates are never offered; an emptied
// index offers nothing.
func TestIndexRemove(t *testing.T) {
	p := Policy{}
	ds := []Delegate{
		{InstanceID: "a", Name: "a", LastSeen: t0, Tags: []string{"linux"}},
		{InstanceID: "b", Name: "b", LastSeen: t0, Tags: []string{"linux"}, Running: 1},
	}
	x := NewIndex[int](1)
	for i, d := range ds {
		x.Put(i, d)
	}
	view := func(i int) Delegate { return ds[i] }
	task := Task{Selectors: []string{"Linux"}}
	if got, _ := x.Offer(p, task, nil, t0, 5, view, nil); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("offer = %v, want [0 1]", got)
	}
	x.Remove("a")
	x.Remove("a")
	if got, _ := x.Offer(p, task, nil, t0, 5, view, nil); !slices.Equal(got, []int{1}) {
		t.Fatalf("after removing a: offer = %v, want [1]", got)
	}
	x.Remove("b")
	if got, _ := x.Offer(p, task, nil, t0, 5, view, nil); len(got) != 0 || x.Len() != 0 || len(x.sels) != 0 || len(x.scopes) != 0 {
		t.Fatalf("empty index: offer = %v, len %d, %d selector groups, %d scope groups", got, x.Len(), len(x.sels), len(x.scopes))
	}
}
