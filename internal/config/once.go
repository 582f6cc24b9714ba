package config

import (
	"fmt"
	"time"
)

// DefaultOnceTimeout is how long a one-shot delegate (DELEGATE_ONCE=true)
// waits, once registered, for its one task before it exits non-zero: long
// enough for a task queued when its machine was started to be offered to
// it, short enough that a machine started for a task another delegate took
// does not idle for hours.
const DefaultOnceTimeout = 5 * time.Minute

// MaxOnceTimeout bounds DELEGATE_ONCE_TIMEOUT.
const MaxOnceTimeout = 24 * time.Hour

const (
	envOnce        = "DELEGATE_ONCE"
	envOnceTimeout = "DELEGATE_ONCE_TIMEOUT"
)

// readOnce reads DELEGATE_ONCE and DELEGATE_ONCE_TIMEOUT.
func readOnce(get func(string) string, d *Delegate) error {
	var err error
	if d.Once, err = parseBool(envOnce, get(envOnce)); err != nil {
		return err
	}
	v := get(envOnceTimeout)
	if v == "" {
		return nil
	}
	if d.OnceTimeout, err = time.ParseDuration(v); err != nil {
		return fmt.Errorf("%s=%q: not a duration; use a value such as 90s or 10m", envOnceTimeout, v)
	}
	return nil
}

// validateOnce checks the one-shot settings: a one-shot delegate takes
// one task, so a capacity above 1 is a contradiction, and a timeout
// without DELEGATE_ONCE would do nothing.
func (d Delegate) validateOnce() error {
	if d.OnceTimeout != 0 && !d.Once {
		return fmt.Errorf("%s is set but %s is not true: the timeout applies to one-shot delegates only; set %s=true or unset %s",
			envOnceTimeout, envOnce, envOnce, envOnceTimeout)
	}
	if d.OnceTimeout < 0 || d.OnceTimeout > MaxOnceTimeout {
		return fmt.Errorf("%s=%s: must be positive and at most %s", envOnceTimeout, d.OnceTimeout, MaxOnceTimeout)
	}
	if d.Once && d.Capacity > 1 {
		return fmt.Errorf("%s=true takes exactly one task: %s=%d contradicts it; set it to 1 or unset it",
			envOnce, "DELEGATE_TASK_CAPACITY", d.Capacity)
	}
	return nil
}

// OnceWait is how long a one-shot delegate waits for its task:
// OnceTimeout, or DefaultOnceTimeout when it is not set.
func (d Delegate) OnceWait() time.Duration {
	if d.OnceTimeout > 0 {
		return d.OnceTimeout
	}
	return DefaultOnceTimeout
}

// Effective is the configuration a delegate runs with: a one-shot
// delegate has a capacity of 1, so that it claims one task at a time and
// a burst of offers waits while its claim is in flight.
func (d Delegate) Effective() Delegate {
	if d.Once {
		d.Capacity = 1
	}
	return d
}
