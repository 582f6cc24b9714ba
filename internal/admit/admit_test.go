package admit

import (
	"context"
	"testing"
	"time"
)

// TestHintSpreadsOverTheBacklog: with nobody waiting, a client turned
// away comes back in a second; the spread it is drawn from grows with the
// clients already told to come back, at the admission rate, and is capped.
func TestHintSpreadsOverTheBacklog(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var drawn []int64 // the n of each draw
	l := New(Config{Slots: 10, Now: func() time.Time { return now },
		Rand: func(n int64) int64 { drawn = append(drawn, n); return n - 1 }})
	if h := l.Hint(); h != time.Second {
		t.Fatalf("first hint %s, want 1s", h)
	}
	// 2,000 more turned away in the same second, at 10 a second (the
	// floor: nothing was admitted yet): the spread reaches the cap.
	var last time.Duration
	for range 2000 {
		last = l.Hint()
	}
	if last != MaxRetryAfter {
		t.Fatalf("hint after 2,000 waiting at 10/s: %s, want the cap %s", last, MaxRetryAfter)
	}
	if drawn[1] != 1 || drawn[10] <= drawn[1] || drawn[100] <= drawn[10] {
		t.Fatalf("the spread did not grow with the backlog: %d, %d, %d", drawn[1], drawn[10], drawn[100])
	}
	if l.TurnedAway() != 2001 {
		t.Fatalf("TurnedAway %d, want 2001", l.TurnedAway())
	}
	// Two minutes later every promised return is past: no backlog.
	now = now.Add(2*MaxRetryAfter + time.Second)
	if h := l.Hint(); h != time.Second {
		t.Fatalf("hint once the backlog is past: %s, want 1s", h)
	}
}

// TestHintFollowsTheAdmissionRate: the faster requests were admitted
// over the last seconds, the narrower the spread for the same backlog.
func TestHintFollowsTheAdmissionRate(t *testing.T) {
	spread := func(admittedPerSecond int) int64 {
		now := time.Unix(1_800_000_000, 0)
		var n int64
		l := New(Config{Slots: 1, Wait: time.Nanosecond, Now: func() time.Time { return now },
			Rand: func(m int64) int64 { n = m; return 0 }})
		for s := range rateSeconds {
			now = time.Unix(1_800_000_000+int64(s), 0)
			for range admittedPerSecond {
				release, _ := l.Acquire(context.Background())
				release()
			}
		}
		now = now.Add(time.Second)
		for range 1000 {
			l.Hint()
		}
		return n
	}
	slow, fast := spread(10), spread(100)
	if !(fast < slow) {
		t.Fatalf("spread at 100/s %d, at 10/s %d: want narrower when faster", fast, slow)
	}
}

// TestAcquireTurnsAwayPastTheSlots: a request that finds no slot within
// the wait gets no release and a hint; a slot given back is taken again.
func TestAcquireTurnsAwayPastTheSlots(t *testing.T) {
	l := New(Config{Slots: 1, Wait: time.Millisecond})
	release, _ := l.Acquire(context.Background())
	if release == nil || l.InFlight() != 1 {
		t.Fatal("first Acquire was refused")
	}
	if r, h := l.Acquire(context.Background()); r != nil || h < time.Second {
		t.Fatalf("second Acquire: release %v, hint %s; want refused with a hint", r != nil, h)
	}
	release()
	release() // once only
	if l.InFlight() != 0 {
		t.Fatalf("InFlight %d after release", l.InFlight())
	}
	if r, _ := l.Acquire(context.Background()); r == nil {
		t.Fatal("Acquire after release was refused")
	}
}

// TestHintFollowsTheHoldTime: requests that hold their slot briefly let
// many through a second, so the same backlog gets a narrower spread
// than with requests that hold it long, before any second of admissions
// was counted.
func TestHintFollowsTheHoldTime(t *testing.T) {
	spread := func(hold time.Duration) int64 {
		now := time.Unix(1_800_000_000, 0)
		var n int64
		l := New(Config{Slots: 10, Wait: time.Nanosecond, Now: func() time.Time { return now },
			Rand: func(m int64) int64 { n = m; return 0 }})
		release, _ := l.Acquire(context.Background())
		now = now.Add(hold)
		release()
		for range 1000 {
			l.Hint()
		}
		return n
	}
	if short, long := spread(10*time.Millisecond), spread(time.Second); !(short < long) {
		t.Fatalf("spread with 10ms holds %d, with 1s holds %d: want narrower when shorter", short, long)
	}
}
