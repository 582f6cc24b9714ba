// Package duplicate tells a restart of a delegate from two live delegate
// processes that share one identity, and decides which one keeps it.
package duplicate

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Two live processes with one identity (name and hostname: two clusters
// installed from one spec, each with a pod legate-delegate-0) would
// supersede each other at every re-registration. A restart looks the
// same at first (a new process registers while the old one's last
// heartbeat is recent), and must take over at once, so a new process is
// always let in. What only two live processes do is come back: a process
// that was superseded registers again, with its own process ID, while the
// one that superseded it is live. Then the manager knows there are two;
// it gives the identity back to the first one (the superseded one, which
// registered earlier) and refuses the other at every registration while
// the first is live, with a message that names both. The refused one
// waits and takes over when the first one stops (its heartbeat lapses).
// What is known of processes is this manager's: delegates that share an
// identity across managers of one database are told apart as before.

// MaxSuperseded bounds the superseded processes remembered per
// identity: a duplicate comes back within seconds, so the last few do.
const MaxSuperseded = 4

// ShownFor is how long after the refused process last tried the
// duplicate is shown with the instance.
const ShownFor = 5 * time.Minute

// Process is one delegate process that registered with an identity.
type Process struct {
	// ID is the process ID it registers with ("" from an older delegate).
	ID, Hostname, IP string
	At               time.Time // its first registration
}

func (p Process) String() string {
	return fmt.Sprintf("hostname %s, IP %s, registered at %s", p.Hostname, p.IP, p.At.UTC().Format(time.RFC3339))
}

// identityProcs is what is known of the processes of one identity.
type identityProcs struct {
	instance   string // the instance the current process registered as
	current    Process
	superseded []Process
	refused    *Process
	notice     string    // the duplicate, as shown and answered
	triedAt    time.Time // when the refused process last tried
}

// Tracker holds identityProcs by account and identity key.
type Tracker struct {
	mu sync.Mutex
	by map[string]*identityProcs
}

// Admit decides on the registration of process p with identity key (of
// an instance named name); live reports whether the instance's current
// process is live. It returns the refusal ("" to admit), and whether this
// registration found the duplicate.
func (ps *Tracker) Admit(key, name string, p Process, now time.Time, live func(instance string) bool) (refusal string, found bool) {
	if p.ID == "" {
		return "", false // an older delegate sends no process ID
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.by == nil {
		ps.by = map[string]*identityProcs{}
	}
	t := ps.by[key]
	if t == nil {
		t = &identityProcs{}
		ps.by[key] = t
	}
	switch i := slices.IndexFunc(t.superseded, func(s Process) bool { return s.ID == p.ID }); {
	case t.refused != nil && t.refused.ID == p.ID:
		if live(t.instance) {
			t.triedAt = now
			return t.notice, false
		}
		t.refused, t.notice = nil, "" // the first one stopped: take over
		t.supersede(p)
	case t.current.ID == "" || t.current.ID == p.ID:
		if t.current.ID == "" {
			t.current = p
		}
	case i >= 0 && live(t.instance):
		// Two live processes: the one coming back was first.
		first, second := t.superseded[i], t.current
		t.superseded = slices.Delete(t.superseded, i, i+1)
		t.current, t.refused, t.triedAt = first, &second, now
		t.notice = fmt.Sprintf("two delegate processes use one identity (name %s, hostname %s): the first (%s) keeps it; "+
			"the second (%s) is refused while the first runs. Two delegates in different clusters or hosts need different names: "+
			"set another DELEGATE_NAME for one of them (a refused process retries and takes over if the first one stops)",
			name, p.Hostname, first, second)
		return "", true
	default:
		// A new process (a restart), or one coming back after the other
		// stopped: it takes over, as a restart does.
		t.supersede(p)
	}
	return "", false
}

// supersede makes p the current process and remembers the one before.
func (t *identityProcs) supersede(p Process) {
	if len(t.superseded) == MaxSuperseded {
		t.superseded = t.superseded[1:]
	}
	t.superseded = append(t.superseded, t.current)
	t.current = p
}

// Registered records the instance the admitted registration of key made.
func (ps *Tracker) Registered(key, instance string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if t := ps.by[key]; t != nil {
		t.instance = instance
	}
}

// Duplicate returns the duplicate of key to show, "" when none is.
func (ps *Tracker) Duplicate(key string, now time.Time) string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	t := ps.by[key]
	if t == nil || t.refused == nil || now.Sub(t.triedAt) > ShownFor {
		return ""
	}
	return t.notice
}
