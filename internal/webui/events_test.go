package webui

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// TestFollowEveryCoalesces: within the gap, changes wait (here the gap
// outlasts the test, so none is sent); without a gap each is sent. The
// changes channel is unbuffered, so a send on it returns only once the
// loop took the change: no sleep, no timing.
func TestFollowEveryCoalesces(t *testing.T) {
	for _, tt := range []struct {
		gap  time.Duration
		want int
	}{{time.Hour, 1}, {0, 5}} {
		u := New(Config{Stopping: make(chan struct{})})
		ctx, cancel := context.WithCancel(context.Background())
		r := httptest.NewRequestWithContext(ctx, "GET", "/delegates/events", nil)
		ev, ok := u.startEvents(httptest.NewRecorder())
		if !ok {
			t.Fatal("no event stream")
		}
		changes := make(chan struct{})
		sends := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			u.followEvery(r, ev, changes, func() bool { sends++; return true }, tt.gap)
		}()
		// Each change is handled (sent or left for the gap's end) before
		// the loop takes the next, and so before the request ends.
		for range 4 {
			changes <- struct{}{}
		}
		cancel()
		<-done
		// The first state, and with no gap each of the 4 changes.
		if sends != tt.want {
			t.Errorf("gap %s: %d sends, want %d", tt.gap, sends, tt.want)
		}
	}
}
