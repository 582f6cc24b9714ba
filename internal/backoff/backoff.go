// Package backoff computes the delays of exponential backoff with jitter,
// the one way legate paces retries of calls that failed (reconnects,
// polls, result and output delivery): each delay doubles from Min up to
// Max, and is drawn at random from its upper half, so that many clients
// that failed together do not retry together.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Defaults of a zero Backoff.
const (
	DefaultMin = 100 * time.Millisecond
	DefaultMax = 30 * time.Second
)

// maxDoublings bounds how often Min is doubled (a shift of a positive
// int64 by 63 or more would overflow); by then every delay is Max.
const maxDoublings = 62

// Backoff is the state of one retry loop. The zero value is ready to use
// with DefaultMin and DefaultMax; it is not safe for concurrent use.
type Backoff struct {
	// Min is the first delay (before jitter); 0 = DefaultMin.
	Min time.Duration
	// Max caps every delay; 0 = DefaultMax, and a Max below Min is Min.
	Max time.Duration
	// Full draws each delay from [0, d] instead of [d/2, d] ("full
	// jitter"): for the loops that a whole fleet runs at once after the
	// same failure (reconnecting to a manager that restarted), whose
	// retries it spreads twice as wide.
	Full bool

	n int // delays handed out since the last Reset
}

// Next returns the delay before the next attempt: Min doubled once per
// earlier call since Reset, capped at Max, then jittered to a value drawn
// uniformly from [d/2, d].
func (b *Backoff) Next() time.Duration {
	lo, hi := b.bounds()
	d := hi
	if lo <= hi>>b.n { // lo<<n <= hi, without overflow
		d = lo << b.n
	}
	if b.n < maxDoublings {
		b.n++
	}
	if b.Full {
		return rand.N(d + 1)
	}
	return d/2 + rand.N(d-d/2+1)
}

// After is the delay before the next attempt when the server said when
// to come back (a Retry-After of hint): the hint plus a draw from [0, a
// second) — the hint is whole seconds, and the clients given the same one
// must not return within the same instant. The server spreads the clients
// it turns away over the time it needs to take them, so its hint replaces
// the backoff (which does not grow for it); a hint of 0 is Next().
func (b *Backoff) After(hint time.Duration) time.Duration {
	if hint <= 0 {
		return b.Next()
	}
	return hint + rand.N(time.Second)
}

// Reset starts again from Min: call it after an attempt succeeded.
func (b *Backoff) Reset() { b.n = 0 }

// Wait sleeps for Next(), or until ctx ends; it reports whether the full
// delay passed (false: ctx ended first).
func (b *Backoff) Wait(ctx context.Context) bool {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (b *Backoff) bounds() (lo, hi time.Duration) {
	lo, hi = b.Min, b.Max
	if lo <= 0 {
		lo = DefaultMin
	}
	if hi <= 0 {
		hi = DefaultMax
	}
	return lo, max(lo, hi)
}
