package assign

import (
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
			if ok, _ := p.eligible(&ds[i], &tv, v.instance(ds[i].InstanceID), t0); ok {
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
