package unresponsive

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/metrics"
	"github.com/legate-dev/legate/internal/protocol"
)

// step is one thing the manager saw, at a time in heartbeat intervals
// from the start.
type step struct {
	at      float64
	offer   string   // a task offered
	start   string   // a task reported started
	hb      bool     // a heartbeat
	running []string // the heartbeat's running list
	cap     int      // its capacity (0: unlimited)
	full    bool     // it says it is over a threshold
	drain   bool     // it says it drains
	seq     int64    // its sequence number (0: the next one)
	taken   string   // a task claimed by another delegate (no longer queued)
}

// TestDecisions walks the rules: who is marked, for what, and when the
// mark lifts. An idle delegate (offered nothing), a full, busy or
// draining one, and one that lost the task to another delegate are never
// marked; one that heartbeats with room and leaves its offers unclaimed
// past the offer timeout is; a task claimed and never started loses its
// lease unless the delegate runs a task it started (waiting for it).
func TestDecisions(t *testing.T) {
	const iv = time.Second
	cases := []struct {
		name   string
		steps  []step
		marked bool   // marked at the end
		why    string // a word of the reason
		lose   []string
		lost   bool // the lose call ends them (the store says held, unstarted)
	}{
		{name: "idle: offered nothing", steps: []step{{at: 0, hb: true}, {at: 1, hb: true}, {at: 10, hb: true}, {at: 100, hb: true}}},
		{name: "ignores an offer with room", steps: []step{{at: 0, hb: true, cap: 2}, {at: 0.1, offer: "a"}, {at: 1, hb: true, cap: 2}, {at: 3.5, hb: true, cap: 2}},
			marked: true, why: "ignored 1 task offer"},
		{name: "no heartbeat since the offer timed out", steps: []step{{at: 0, hb: true}, {at: 0.1, offer: "a"}, {at: 3, hb: true}}},
		{name: "claims its offer", steps: []step{{at: 0, hb: true}, {at: 0.1, offer: "a"}, {at: 1, hb: true, running: []string{"a"}}, {at: 4, hb: true, running: []string{"a"}}}},
		{name: "claims another task", steps: []step{{at: 0, hb: true}, {at: 0.1, offer: "a"}, {at: 0.2, offer: "b"}, {at: 1, hb: true, running: []string{"b"}}, {at: 4, hb: true, running: []string{"b"}}}},
		{name: "another delegate took the task", steps: []step{{at: 0, hb: true}, {at: 0.1, offer: "a"}, {at: 0.5, taken: "a"}, {at: 4, hb: true}}},
		{name: "full", steps: []step{{at: 0, hb: true, cap: 1, running: []string{"x"}}, {at: 0.1, offer: "a"}, {at: 0.2, start: "x"}, {at: 4, hb: true, cap: 1, running: []string{"x"}}}},
		{name: "validates capabilities", steps: []step{{at: 0, hb: true}, {at: 0.1, offer: "caps:a"}, {at: 4, hb: true}}},
		{name: "over a threshold", steps: []step{{at: 0, hb: true}, {at: 0.1, offer: "a"}, {at: 4, hb: true, full: true}}},
		{name: "draining", steps: []step{{at: 0, hb: true}, {at: 0.1, offer: "a"}, {at: 4, hb: true, drain: true}}},
		{name: "a new process took the identity", steps: []step{{at: 0, hb: true, seq: 50}, {at: 0.1, offer: "a"}, {at: 4, hb: true, seq: 51}, {at: 5, hb: true, seq: 1}}},
		{name: "recovers by claiming", steps: []step{{at: 0, hb: true}, {at: 0.1, offer: "a"}, {at: 4, hb: true}, {at: 5, hb: true, running: []string{"a"}}}},
		{name: "recovers by starting", steps: []step{{at: 0, hb: true}, {at: 0.1, offer: "a"}, {at: 4, hb: true}, {at: 4.5, start: "z"}}},
		{name: "offered again on probation", steps: []step{{at: 0, hb: true}, {at: 0.1, offer: "a"}, {at: 4, hb: true}, {at: 4 + RetryAfterBeats, hb: true}}},
		{name: "claims and never starts", steps: []step{{at: 0, hb: true}, {at: 1, hb: true, running: []string{"a"}}, {at: 1 + StartTimeoutBeats, hb: true, running: []string{"a"}}},
			marked: true, why: "did not start it", lose: []string{"a"}, lost: true},
		{name: "claims and starts", steps: []step{{at: 0, hb: true}, {at: 1, hb: true, running: []string{"a"}}, {at: 2, start: "a"}, {at: 1 + StartTimeoutBeats, hb: true, running: []string{"a"}}}},
		{name: "started through another manager", steps: []step{{at: 0, hb: true}, {at: 1, hb: true, running: []string{"a"}}, {at: 1 + StartTimeoutBeats, hb: true, running: []string{"a"}}},
			lose: []string{"a"}},
		{name: "waits for a task it started", steps: []step{{at: 0, hb: true, running: []string{"x"}}, {at: 0.5, start: "x"}, {at: 1, hb: true, running: []string{"a", "x"}},
			{at: 1 + StartTimeoutBeats, hb: true, running: []string{"a", "x"}}, {at: 2 + StartTimeoutBeats, hb: true, running: []string{"a"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1_700_000_000, 0)
			var asked []string
			tr := New(nil, nil, iv, func(_ context.Context, inst string, ids []string, _ time.Time) ([]string, error) {
				asked = append(asked, ids...)
				if tc.lost {
					return ids, nil
				}
				return nil, nil
			})
			taken := map[string]bool{}
			queued := func(id string) bool { return !taken[id] }
			seq := int64(0)
			for _, s := range tc.steps {
				now := start.Add(time.Duration(s.at * float64(iv)))
				switch {
				case s.offer != "":
					tr.Offered("d1", offer(s.offer), now)
				case s.start != "":
					tr.Started("d1", s.start, now)
				case s.taken != "":
					taken[s.taken] = true
				case s.hb:
					seq++
					if s.seq != 0 {
						seq = s.seq
					}
					hb := protocol.Heartbeat{Seq: seq, Capacity: s.cap, Draining: s.drain}
					if s.full {
						hb.OverThreshold = "cpu 99% over 90%"
					}
					for _, id := range s.running {
						hb.Running = append(hb.Running, protocol.RunningTask{ID: id, Epoch: 1})
					}
					tr.Heartbeat(context.Background(), "d1", hb, now, queued)
				}
			}
			why := tr.Unresponsive("d1")
			if (why != "") != tc.marked || !strings.Contains(why, tc.why) {
				t.Errorf("marked %q, want marked %v (%q)", why, tc.marked, tc.why)
			}
			if !slices.Equal(asked, tc.lose) {
				t.Errorf("asked to end the leases of %v, want %v", asked, tc.lose)
			}
			v := protocol.Delegate{Status: protocol.DelegateConnected}
			tr.Show("d1", &v)
			if (v.Unresponsive != nil) != tc.marked {
				t.Errorf("shown %+v, want marked %v", v.Unresponsive, tc.marked)
			}
		})
	}
}

// TestShownAndCounted: the mark says what was ignored, only for a
// connected instance, and the metric counts marked instances.
func TestShownAndCounted(t *testing.T) {
	reg := metrics.NewRegistry()
	tr := New(nil, reg, time.Second, nil)
	at := time.Unix(1_700_000_000, 0)
	queued := func(string) bool { return true }
	tr.Heartbeat(context.Background(), "d1", protocol.Heartbeat{Seq: 1}, at, queued)
	tr.Heartbeat(context.Background(), "idle", protocol.Heartbeat{Seq: 1}, at, queued)
	for i, id := range []string{"a", "b", "c"} {
		tr.Offered("d1", offer(id), at.Add(time.Duration(i)*time.Millisecond))
	}
	tr.Heartbeat(context.Background(), "d1", protocol.Heartbeat{Seq: 2}, at.Add(4*time.Second), queued)
	tr.Heartbeat(context.Background(), "idle", protocol.Heartbeat{Seq: 2}, at.Add(4*time.Second), queued)
	v := protocol.Delegate{Status: protocol.DelegateConnected}
	tr.Show("d1", &v)
	u := v.Unresponsive
	if u == nil || u.IgnoredOffers != 3 || u.IgnoredSince == nil || !u.IgnoredSince.Equal(at) || !u.RetryAt.Equal(at.Add(4*time.Second+RetryAfterBeats*time.Second)) {
		t.Fatalf("shown %+v", u)
	}
	off := protocol.Delegate{Status: protocol.DelegateDisconnected}
	tr.Show("d1", &off)
	if off.Unresponsive != nil {
		t.Error("shown on a disconnected instance")
	}
	var b strings.Builder
	if err := reg.WriteText(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"legate_manager_delegates_unresponsive 1", `legate_manager_delegates_marked_unresponsive_total{why="ignored_offers"} 1`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}

// TestNilTracker: a manager without one finds nothing and fails nothing.
func TestNilTracker(t *testing.T) {
	var tr *Tracker
	tr.Offered("d", offer("a"), time.Now())
	tr.Started("d", "a", time.Now())
	tr.Heartbeat(context.Background(), "d", protocol.Heartbeat{}, time.Now(), nil)
	if tr.Unresponsive("d") != "" {
		t.Error("a nil tracker marks")
	}
}

// offer is the task_available event of task id; "caps:" makes it need a
// capability.
func offer(id string) protocol.Event {
	ev := protocol.Event{Kind: protocol.EventTaskAvailable, TaskID: id}
	if rest, ok := strings.CutPrefix(id, "caps:"); ok {
		ev.TaskID, ev.Capabilities = rest, []string{"binary:kubectl"}
	}
	return ev
}
