// Package admit bounds how many registrations and event-channel openings
// a manager serves at once, and tells the ones it turns away when to come
// back: a time drawn at random over a spread that grows with the number
// of clients already told to come back, so that a fleet that reconnects
// all at once (after a manager restart or an outage) returns spread over
// the time the manager needs to take it, not in waves.
package admit

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Defaults of a zero Config.
const (
	// DefaultSlots is how many admitted requests are served at once.
	DefaultSlots = 64
	// DefaultWait is how long a request waits for a slot before it is
	// turned away: long enough to smooth a short burst, short enough
	// that a storm is answered at once rather than queued in goroutines.
	DefaultWait = 250 * time.Millisecond
	// MaxRetryAfter caps the hint.
	MaxRetryAfter = 120 * time.Second
)

// window is how many seconds the limiter remembers: the hints given
// (at most MaxRetryAfter ahead) and the admissions of the last seconds.
const window = 128

// rateSeconds is how many past whole seconds the admission rate is
// measured over.
const rateSeconds = 5

// Config configures a Limiter.
type Config struct {
	// Slots is how many admitted requests are served at once; 0 =
	// DefaultSlots.
	Slots int
	// Wait is how long a request waits for a slot; 0 = DefaultWait.
	Wait time.Duration
	// Now and Rand are for tests; nil = the clock and math/rand/v2.
	Now  func() time.Time
	Rand func(n int64) int64
}

// Limiter admits at most Slots requests at once. It is safe for
// concurrent use.
type Limiter struct {
	slots chan struct{}
	wait  time.Duration
	now   func() time.Time
	rand  func(n int64) int64

	mu sync.Mutex
	// back[s%window] counts the clients told to come back in second s;
	// done[s%window] the requests admitted in second s. stamp says which
	// second each entry holds (an older one reads as 0).
	back, done           [window]int64
	backStamp, doneStamp [window]int64
	turned               int64
	// born is the second the limiter was made: a manager that just
	// started measures its rate over the seconds it has run, not as if
	// it had admitted nothing before.
	born int64
	// hold is the mean time a slot is held (an exponentially weighted
	// average; 0: none given back yet): Slots ÷ hold is how many requests
	// the limit lets through a second when they keep coming, which the
	// admissions counted cannot show while few have arrived yet (just
	// after a restart, when the storm is largest).
	hold time.Duration
}

// New returns a Limiter.
func New(cfg Config) *Limiter {
	if cfg.Slots <= 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Int64N
	}
	return &Limiter{slots: make(chan struct{}, cfg.Slots), wait: cfg.Wait, now: cfg.Now, rand: cfg.Rand, born: cfg.Now().Unix()}
}

// Slots is how many requests are admitted at once.
func (l *Limiter) Slots() int { return cap(l.slots) }

// InFlight is how many admitted requests are being served.
func (l *Limiter) InFlight() int { return len(l.slots) }

// TurnedAway is how many requests were turned away since the start.
func (l *Limiter) TurnedAway() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.turned
}

// Acquire takes a slot, waiting at most the configured wait. It returns
// the function that gives the slot back (call it once), or, when no slot
// freed up in time, nil and the hint: how long the client should wait
// before it tries again. A ctx that ends first returns nil and 0.
func (l *Limiter) Acquire(ctx context.Context) (release func(), retryAfter time.Duration) {
	select {
	case l.slots <- struct{}{}:
		return l.releaser(), 0
	default:
	}
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return l.releaser(), 0
	case <-ctx.Done():
		return nil, 0
	case <-t.C:
	}
	return nil, l.Hint()
}

func (l *Limiter) releaser() func() {
	var once sync.Once
	taken := l.now()
	return func() {
		once.Do(func() {
			<-l.slots
			l.mu.Lock()
			now := l.now()
			if d := now.Sub(taken); l.hold == 0 {
				l.hold = d
			} else {
				l.hold += (d - l.hold) / 16
			}
			s := now.Unix()
			i := s % window
			if l.doneStamp[i] != s {
				l.doneStamp[i], l.done[i] = s, 0
			}
			l.done[i]++
			l.mu.Unlock()
		})
	}
}

// Hint counts one client turned away and says when it should come back:
// one second, plus a time drawn at random over the spread the clients
// already told to come back need at the rate requests are admitted: the
// larger of the admissions over the last seconds (at most 5, at most
// since the limiter was made) and Slots ÷ the mean time a slot is held,
// at least Slots a second; capped at
// MaxRetryAfter. The hint is in whole seconds, as Retry-After carries
// it.
func (l *Limiter) Hint() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turned++
	now := l.now().Unix()
	var backlog, admitted int64
	for s := now + 1; s <= now+int64(MaxRetryAfter/time.Second); s++ {
		if i := s % window; l.backStamp[i] == s {
			backlog += l.back[i]
		}
	}
	secs := min(max(now-l.born, 1), rateSeconds)
	for s := now - secs; s < now; s++ {
		if i := s % window; l.doneStamp[i] == s {
			admitted += l.done[i]
		}
	}
	rate := max(admitted/secs, int64(cap(l.slots)))
	if l.hold > 0 {
		rate = max(rate, int64(cap(l.slots))*int64(time.Second/l.hold))
	}
	spread := backlog / rate
	after := min(1+l.rand(spread+1), int64(MaxRetryAfter/time.Second))
	s := now + after
	i := s % window
	if l.backStamp[i] != s {
		l.backStamp[i], l.back[i] = s, 0
	}
	l.back[i]++
	return time.Duration(after) * time.Second
}
