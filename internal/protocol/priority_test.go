package protocol

import (
	"strings"
	"testing"
	"time"
)

func TestParsePriority(t *testing.T) {
	for in, want := range map[string]int{"low": PriorityLow, "Normal": PriorityNormal, " high ": PriorityHigh, "urgent": PriorityUrgent, "1": 1, "10": 10, "7": 7} {
		if got, err := ParsePriority(in); err != nil || got != want {
			t.Errorf("ParsePriority(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "11", "-1", "soon", "5.5"} {
		if _, err := ParsePriority(in); err == nil || !strings.Contains(err.Error(), "1") {
			t.Errorf("ParsePriority(%q) = %v; want an error that gives the range", in, err)
		}
	}
	if p, err := ResolvePriority(0); err != nil || p != PriorityNormal {
		t.Errorf("ResolvePriority(0) = %d, %v; want normal", p, err)
	}
	if PriorityName(0) != "normal" || PriorityName(PriorityHigh) != "high" || PriorityName(3) != "3" {
		t.Errorf("PriorityName: %q %q %q", PriorityName(0), PriorityName(PriorityHigh), PriorityName(3))
	}
}

// TestQueueRankIsAging: ordering by QueueRank is ordering by effective
// priority (priority + waited / PriorityAgingStep) at any later instant.
func TestQueueRankIsAging(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	eff := func(created time.Time, p int, now time.Time) float64 {
		return float64(p) + float64(now.Sub(created))/float64(PriorityAgingStep)
	}
	for _, c := range []struct {
		da, db time.Duration
		pa, pb int
	}{{0, time.Second, PriorityLow, PriorityHigh}, {0, 7 * time.Minute, PriorityLow, PriorityHigh}, {time.Minute, 0, PriorityMax, PriorityMin}, {0, StarvationBound + time.Second, PriorityMin, PriorityMax}} {
		a, b := t0.Add(c.da), t0.Add(c.db)
		for _, now := range []time.Time{t0.Add(time.Hour), t0.Add(24 * time.Hour)} {
			rankFirst := QueueRank(a, c.pa) < QueueRank(b, c.pb)
			effFirst := eff(a, c.pa, now) > eff(b, c.pb, now)
			if rankFirst != effFirst {
				t.Errorf("%+v at %v: rank says a first %v, effective priority says %v", c, now, rankFirst, effFirst)
			}
		}
	}
}
