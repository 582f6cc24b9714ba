package config

import (
	"strings"
	"testing"
	"time"
)

func TestOnceSettings(t *testing.T) {
	t.Parallel()
	d, err := FromEnv(env(with(gen1, "DELEGATE_ONCE", "true")))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Once || d.OnceWait() != DefaultOnceTimeout {
		t.Errorf("DELEGATE_ONCE=true: once %v, wait %s; want true, %s", d.Once, d.OnceWait(), DefaultOnceTimeout)
	}
	d, err = FromEnv(env(with(gen1, "DELEGATE_ONCE", "TRUE", "DELEGATE_ONCE_TIMEOUT", "90s", "DELEGATE_TASK_CAPACITY", "1")))
	if err != nil {
		t.Fatal(err)
	}
	if d.OnceWait() != 90*time.Second {
		t.Errorf("DELEGATE_ONCE_TIMEOUT=90s: wait %s", d.OnceWait())
	}
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{with(gen1, "DELEGATE_ONCE", "yes"), "DELEGATE_ONCE"},
		{with(gen1, "DELEGATE_ONCE", "true", "DELEGATE_ONCE_TIMEOUT", "5"), "not a duration"},
		{with(gen1, "DELEGATE_ONCE", "true", "DELEGATE_ONCE_TIMEOUT", "-1m"), "must be positive"},
		{with(gen1, "DELEGATE_ONCE", "true", "DELEGATE_ONCE_TIMEOUT", "25h"), "at most 24h"},
		{with(gen1, "DELEGATE_ONCE_TIMEOUT", "1m"), "set DELEGATE_ONCE=true"},
		{with(gen1, "DELEGATE_ONCE", "true", "DELEGATE_TASK_CAPACITY", "2"), "exactly one task"},
	} {
		if _, err := FromEnv(env(tt.env)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want one that says %q", tt.env, err, tt.want)
		}
	}
}
