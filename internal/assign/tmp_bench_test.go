package assign

import (
	"slices"
	"testing"
	"time"
)

func BenchmarkTmpLoop(b *testing.B) {
	ds, c, task := benchFleet()
	p := Policy{Window: 30 * time.Second}
	tv := prepare(&task)
	for b.Loop() {
		v := c.view()
		n := 0
		for i := range ds {
			if p.eligible(&ds[i], &tv, v.instance(ds[i].InstanceID), t0) {
				n++
			}
		}
		v.done()
	}
}
func BenchmarkTmpSel(b *testing.B) {
	ds, _, task := benchFleet()
	tv := prepare(&task)
	for b.Loop() {
		for i := range ds {
			hasSelectors(tv.sel, &ds[i])
		}
	}
}
func BenchmarkTmpMaps(b *testing.B) {
	ds, c, task := benchFleet()
	tv := prepare(&task)
	for b.Loop() {
		v := c.view()
		for i := range ds {
			tv.allowlisted(v.instance(ds[i].InstanceID), t0)
		}
		v.done()
	}
}
func BenchmarkTmpSort(b *testing.B) {
	items := make([]rankItem, 900)
	for i := range items {
		items[i] = rankItem{idx: i, tier: i % 3, running: i % 8, capacity: 8, tie: tieKey(1, "x"+string(rune(i)))}
	}
	w := make([]rankItem, 900)
	for b.Loop() {
		copy(w, items)
		slices.SortFunc(w, func(a, b rankItem) int {
			if a.tier != b.tier { return a.tier - b.tier }
			if c := compareLoad(a.running, a.capacity, b.running, b.capacity); c != 0 { return c }
			if a.tie < b.tie { return -1 }
			return 1
		})
	}
}
