package assign

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchFleet is 1,000 connected delegates with 10 allowlist entries each
// (10,000 in all) over 50 criteria, and a task with 2 selectors and 2
// capabilities. About 90% of the delegates have both selectors, about a
// third are allowlisted for both capabilities, a few are at capacity or
// deny-listed: most of the fleet is eligible, so Rank sorts ~900 delegates.
func benchFleet() ([]Delegate, *Capabilities, Task) { return benchFleetN(1000) }

// benchFleetN is benchFleet with n delegates.
func benchFleetN(n int) ([]Delegate, *Capabilities, Task) {
	r := rand.New(rand.NewPCG(7, 7))
	crit := make([]string, 50)
	for i := range crit {
		crit[i] = fmt.Sprintf("https://svc-%02d.internal.example.com", i)
	}
	task := Task{
		ID:           "t-bench",
		Selectors:    []string{"Linux", "docker"},
		Capabilities: []string{crit[0], crit[1]},
	}
	c := NewCapabilities()
	ds := make([]Delegate, n)
	for i := range ds {
		tags := []string{"linux", fmt.Sprintf("region-%d", i%4), fmt.Sprintf("team-%d", i%10)}
		if i%10 != 0 {
			tags = append(tags, "docker")
		}
		ds[i] = Delegate{
			InstanceID: fmt.Sprintf("inst-%05d", i),
			Name:       fmt.Sprintf("delegate-%d", i%20),
			Hostname:   fmt.Sprintf("host-%04d.example.com", i),
			Tags:       tags,
			LastSeen:   t0.Add(-time.Duration(r.IntN(20)) * time.Second),
			Running:    r.IntN(8),
			Capacity:   8,
		}
		if i%3 == 0 {
			c.Record(ds[i].InstanceID, crit[0], true, "", t0.Add(-time.Hour))
			c.Record(ds[i].InstanceID, crit[1], true, "", t0.Add(-time.Hour))
		} else {
			c.Record(ds[i].InstanceID, crit[2+i%48], true, "", t0.Add(-time.Hour))
			c.Record(ds[i].InstanceID, crit[2+(i+1)%48], true, "", t0.Add(-time.Hour))
		}
		for k := 0; k < 8; k++ {
			c.Record(ds[i].InstanceID, crit[2+(i+2+k*5)%48], true, "", t0.Add(-time.Hour))
		}
		if i%50 == 0 {
			c.Record(ds[i].InstanceID, crit[1], false, "refused", t0.Add(-time.Minute))
		}
	}
	return ds, c, task
}

func BenchmarkRank1000Delegates10000Allowlist(b *testing.B) {
	ds, c, task := benchFleet()
	p := Policy{Window: 30 * time.Second}
	ranked, preferred := p.Rank(ds, task, c, t0, 1)
	entries := 0
	for _, d := range ds {
		a, dn := c.Entries(d.InstanceID, t0)
		entries += len(a) + len(dn)
	}
	b.Logf("%d delegates, %d capability entries: %d eligible, %d in the allowlisted tier", len(ds), entries, len(ranked), preferred)
	b.ReportAllocs()
	seed := uint64(0)
	for b.Loop() {
		seed++
		p.Rank(ds, task, c, t0, seed)
	}
}

// BenchmarkRank10Delegates is the common case: a small fleet.
func BenchmarkRank10Delegates(b *testing.B) {
	ds, c, task := benchFleet()
	ds = ds[:10]
	p := Policy{Window: 30 * time.Second}
	b.ReportAllocs()
	seed := uint64(0)
	for b.Loop() {
		seed++
		p.Rank(ds, task, c, t0, seed)
	}
}

// BenchmarkOrder1000Delegates10000Allowlist is the same ranking without
// copying the delegates (indices into a reused buffer).
func BenchmarkOrder1000Delegates10000Allowlist(b *testing.B) {
	ds, c, task := benchFleet()
	p := Policy{Window: 30 * time.Second}
	b.ReportAllocs()
	var buf []int
	seed := uint64(0)
	for b.Loop() {
		seed++
		buf, _ = p.Order(ds, task, c, t0, seed, buf)
	}
}

func BenchmarkExplain1000Delegates(b *testing.B) {
	ds, c, task := benchFleet()
	p := Policy{Window: 30 * time.Second}
	b.ReportAllocs()
	for b.Loop() {
		p.Explain(ds, task, c, t0)
	}
}

func BenchmarkEvaluate(b *testing.B) {
	ds, c, task := benchFleet()
	p := Policy{Window: 30 * time.Second}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p.Evaluate(ds[i%len(ds)], task, c, t0)
		i++
	}
}

// BenchmarkOffer compares choosing whom to offer a task to (k = 1, the
// sole offer, and k = 3, a widened one) by ranking the whole fleet
// (Order) and through the Index, on benchFleetN fleets; "nocaps" is the
// same task without capabilities (the pickup bench's case).
func BenchmarkOffer(b *testing.B) {
	p := Policy{Window: 30 * time.Second}
	for _, n := range []int{10, 1000, 10000} {
		ds, c, task := benchFleetN(n)
		x := NewIndex[int](1)
		for i, d := range ds {
			x.Put(i, d)
		}
		view := func(i int) Delegate { return ds[i] }
		for _, caps := range []bool{true, false} {
			tk := task
			name := "caps"
			if !caps {
				tk.Capabilities, name = nil, "nocaps"
			}
			b.Run(fmt.Sprintf("order/%s/%d", name, n), func(b *testing.B) {
				var buf []int
				for b.Loop() {
					buf, _ = p.Order(ds, tk, c, t0, 1, buf)
				}
			})
			for _, k := range []int{1, 3} {
				b.Run(fmt.Sprintf("index-k%d/%s/%d", k, name, n), func(b *testing.B) {
					var buf []int
					for b.Loop() {
						buf, _ = x.Offer(p, tk, c, t0, k, view, buf)
					}
				})
			}
		}
	}
}
