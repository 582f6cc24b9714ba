package duplicate

import (
	"strings"
	"testing"
	"time"
)

// A restart (a new process) takes over at once; a superseded process that
// comes back while the other is live gets the identity back and the other
// is refused while the first is live, then takes over once it is not.
func TestTrackerKeepsTheFirst(t *testing.T) {
	var tr Tracker
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	live := true
	isLive := func(string) bool { return live }
	admit := func(p Process) (string, bool) { return tr.Admit("k", "dup", p, t0, isLive) }
	a := Process{ID: "a", Hostname: "legate-delegate-0", IP: "10.1.0.7", At: t0}
	b := Process{ID: "b", Hostname: "legate-delegate-0", IP: "10.2.0.9", At: t0.Add(time.Second)}
	restart := Process{ID: "a2", Hostname: "legate-delegate-0", IP: "10.1.0.7", At: t0.Add(2 * time.Second)}

	if r, _ := admit(a); r != "" {
		t.Fatalf("first registration refused: %s", r)
	}
	if r, found := admit(a); r != "" || found {
		t.Fatalf("the same process again: %q %v", r, found)
	}
	if r, found := admit(b); r != "" || found {
		t.Fatalf("a new process (as a restart) refused: %q %v", r, found)
	}
	r, found := admit(a) // a was superseded and comes back: two live processes
	if r != "" || !found {
		t.Fatalf("the first coming back: %q %v; want admitted, duplicate found", r, found)
	}
	notice := tr.Duplicate("k", t0)
	for _, want := range []string{"10.1.0.7", "10.2.0.9", "DELEGATE_NAME", "legate-delegate-0"} {
		if !strings.Contains(notice, want) {
			t.Errorf("notice %q lacks %q", notice, want)
		}
	}
	if r, _ := admit(b); r != notice {
		t.Fatalf("the second again while the first is live: %q", r)
	}
	if got := tr.Duplicate("k", t0.Add(ShownFor+time.Second)); got != "" {
		t.Errorf("duplicate shown %s after the refused process last tried", ShownFor)
	}
	live = false
	if r, _ := admit(b); r != "" {
		t.Fatalf("the second once the first stopped: %q", r)
	}
	if r, _ := admit(restart); r != "" {
		t.Fatalf("a restart refused: %q", r)
	}
	if r, _ := tr.Admit("k", "dup", Process{}, t0, isLive); r != "" {
		t.Fatalf("an older delegate (no process ID) refused: %q", r)
	}
}
