package dispatch

import (
	"testing"
	"time"
)

func TestPruneEvery(t *testing.T) {
	for _, tc := range []struct{ after, want time.Duration }{
		{6 * time.Hour, 10 * time.Minute},
		{time.Hour, 5 * time.Minute},
		{time.Second, 100 * time.Millisecond},
	} {
		if got := pruneEvery(tc.after); got != tc.want {
			t.Errorf("pruneEvery(%s) = %s, want %s", tc.after, got, tc.want)
		}
	}
}
