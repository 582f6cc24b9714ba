package cluster

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestOutputPayloads packs many output marks into broadcasts that each fit
// a PostgreSQL notification and together carry every mark once.
func TestOutputPayloads(t *testing.T) {
	for _, n := range []int{0, 1, 150, 1000} {
		var marks []OutputMark
		for i := range n {
			marks = append(marks, OutputMark{Task: fmt.Sprintf("t_%016d", i), Ended: i%3 == 0})
		}
		var got []OutputMark
		for _, p := range outputPayloads("m_origin", marks, maxBroadcast) {
			if len(p) > maxBroadcast {
				t.Errorf("%d marks: a payload of %d bytes, more than %d", n, len(p), maxBroadcast)
			}
			var ev Event
			if err := json.Unmarshal([]byte(p), &ev); err != nil {
				t.Fatalf("%d marks: payload %q: %v", n, p, err)
			}
			if ev.Kind != Output || ev.Origin != "m_origin" {
				t.Errorf("%d marks: event %s from %s", n, ev.Kind, ev.Origin)
			}
			got = append(got, ev.Output...)
		}
		if diff := cmp.Diff(marks, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%d marks: carried (-want +got):\n%s", n, diff)
		}
	}
}
