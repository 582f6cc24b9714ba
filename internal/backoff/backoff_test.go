package backoff

import (
	"context"
	"testing"
	"time"
)

// ceiling is the un-jittered delay of step n (0-based since Reset).
func ceiling(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for range n {
		if d > hi/2 {
			return hi
		}
		d *= 2
	}
	return d
}

func TestNextStaysWithinBoundsAndCaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		min, max         time.Duration
		wantMin, wantMax time.Duration // effective bounds
	}{
		{"typical", 100 * time.Millisecond, 10 * time.Second, 100 * time.Millisecond, 10 * time.Second},
		{"min equals max", time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond},
		{"odd nanoseconds", 3, 1000, 3, 1000},
		{"one nanosecond", 1, 1, 1, 1},
		{"large", time.Hour, 2 * time.Hour, time.Hour, 2 * time.Hour},
		{"max below min is min", time.Second, time.Millisecond, time.Second, time.Second},
		{"zero value", 0, 0, DefaultMin, DefaultMax},
		{"negative is default", -time.Second, -time.Second, DefaultMin, DefaultMax},
		{"near the int64 limit", time.Second, time.Duration(1<<63 - 1), time.Second, time.Duration(1<<63 - 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := Backoff{Min: tc.min, Max: tc.max}
			for step := range 100 { // well past maxDoublings
				want := ceiling(tc.wantMin, tc.wantMax, step)
				if got := b.Next(); got < want/2 || got > want {
					t.Fatalf("step %d: Next() = %v, want within [%v, %v]", step, got, want/2, want)
				}
			}
		})
	}
}

func TestResetStartsAgainFromMin(t *testing.T) {
	t.Parallel()
	b := Backoff{Min: time.Second, Max: time.Hour}
	for range 10 {
		b.Next()
	}
	if got := b.Next(); got < 512*time.Second {
		t.Fatalf("the 11th delay is %v, want at least 512s (1s doubled ten times, halved by jitter)", got)
	}
	b.Reset()
	if got := b.Next(); got < time.Second/2 || got > time.Second {
		t.Fatalf("after Reset Next() = %v, want within [500ms, 1s]", got)
	}
}

// TestNextIsJittered: delays are spread over [d/2, d], both halves of
// it hit, not one fixed value.
func TestNextIsJittered(t *testing.T) {
	t.Parallel()
	const d = time.Second
	seen := map[time.Duration]bool{}
	var low, high int
	for range 1000 {
		b := Backoff{Min: d, Max: time.Minute}
		got := b.Next()
		seen[got] = true
		if got < 3*d/4 {
			low++
		} else {
			high++
		}
	}
	// With 1000 uniform draws, fewer than 300 in either half has a
	// probability far below 1e-30.
	if len(seen) < 900 || low < 300 || high < 300 {
		t.Fatalf("1000 first delays: %d distinct, %d in [0.5s, 0.75s), %d in [0.75s, 1s]: want spread over [0.5s, 1s]",
			len(seen), low, high)
	}
}

func TestWaitEndsWithTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := Backoff{Min: time.Hour, Max: time.Hour}
	if b.Wait(ctx) {
		t.Fatal("Wait reported a full delay on a cancelled context")
	}
	b = Backoff{Min: 1, Max: 1}
	if !b.Wait(context.Background()) {
		t.Fatal("Wait of 1ns reported a cancelled context")
	}
}

// TestFullJitter draws from [0, d]: below the upper half's floor too.
func TestFullJitter(t *testing.T) {
	b := Backoff{Min: time.Second, Max: time.Second, Full: true}
	low := false
	for range 1000 {
		d := b.Next()
		if d < 0 || d > time.Second {
			t.Fatalf("full jitter delay %s outside [0, 1s]", d)
		}
		low = low || d < time.Second/2
	}
	if !low {
		t.Fatal("1,000 full-jitter delays, none below half: not full jitter")
	}
}

// TestAfterHonoursTheHint: a hint replaces the backoff, with less than a
// second of jitter on top, shorter or longer than the backoff, and does
// not make it grow; without a hint it is Next.
func TestAfterHonoursTheHint(t *testing.T) {
	b := Backoff{Min: 10 * time.Second, Max: 20 * time.Second}
	for range 100 {
		if d := b.After(3 * time.Second); d < 3*time.Second || d >= 4*time.Second {
			t.Fatalf("After(3s) = %s, want [3s, 4s)", d)
		}
	}
	if d := b.After(0); d < 5*time.Second || d > 10*time.Second {
		t.Fatalf("After(0) after 100 hints = %s, want the backoff's first delay", d)
	}
}
