package engine

import (
	"strings"
	"testing"
)

// FuzzDeploymentCursor: a page parameter from the query is refused or
// read back into a cursor that formats to the same text.
func FuzzDeploymentCursor(f *testing.F) {
	f.Add("1795421400000000_dp_hx7meyphaa2r2doz")
	f.Add("_x")
	f.Add("-1_a_b")
	f.Add("99999999999999999999_x")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDeploymentCursor(s)
		if err != nil {
			return
		}
		if got := deploymentCursor(*d); got != s {
			us, _, _ := strings.Cut(s, "_")
			if strings.HasPrefix(us, "+") || strings.HasPrefix(us, "0") || strings.HasPrefix(us, "-0") {
				return // the same number written differently
			}
			t.Errorf("cursor %q reads back as %q", s, got)
		}
	})
}
