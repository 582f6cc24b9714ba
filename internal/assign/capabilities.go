package assign

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// AllowTTL is how long a successful capability validation is trusted. Each
// later success starts it again.
const AllowTTL = 6 * time.Hour

// DenyTTL is how long a failed capability validation keeps a delegate from
// tasks with that capability, even when it is the only delegate and even
// when the task picked it by selector.
const DenyTTL = 5 * time.Minute

// Entry is one live allowlist or deny-list entry of a delegate instance.
// Error is the validation error (deny-list entries only).
type Entry struct {
	Criteria  string
	ExpiresAt time.Time
	Error     string
}

// capState is the latest validation of one criteria by one instance. A
// success and a failure replace each other, so one state per key holds both
// lists: ok true is an allowlist entry, false a deny-list entry. It is kept
// small (the check time is derived from the expiry) because Rank reads
// thousands of them per task.
type capState struct {
	expiresAt time.Time
	err       string
	ok        bool
}

func (s capState) live(now time.Time) bool { return now.Before(s.expiresAt) }

func ttl(ok bool) time.Duration {
	if ok {
		return AllowTTL
	}
	return DenyTTL
}

// checkedAt is when the validation behind s ran.
func (s capState) checkedAt() time.Time { return s.expiresAt.Add(-ttl(s.ok)) }

// Capabilities is the allowlist and deny list of every delegate instance,
// keyed by criteria and then by instance ID. That order suits assignment:
// ranking a fleet for a task with two capabilities reads two maps, one
// lookup per delegate in each, instead of one scattered per-instance map
// per delegate, which misses the cache far more often (BENCHMARKS.md,
// assignment cost). Listing one
// instance's entries (Entries, Forget) walks every criteria instead; those
// are admin calls. The zero value is not usable; call NewCapabilities. It
// is safe for concurrent use. It never reads the clock: every method takes
// the time.
type Capabilities struct {
	mu sync.RWMutex
	m  map[string]map[string]capState // criteria -> instance ID -> state
}

// NewCapabilities returns empty lists.
func NewCapabilities() *Capabilities {
	return &Capabilities{m: make(map[string]map[string]capState)}
}

// Record stores the result of validating criteria on instanceID at
// checkedAt. A success allowlists the pair until checkedAt+AllowTTL (each
// success resets that TTL) and removes any deny-list entry; a failure
// deny-lists it until checkedAt+DenyTTL with errText and removes any
// allowlist entry. A result checked before the one already stored for the
// pair is stale and ignored, so results that arrive out of order (several
// delegates, several manager replicas) cannot undo a newer one.
func (c *Capabilities) Record(instanceID, criteria string, ok bool, errText string, checkedAt time.Time) {
	c.Load(instanceID, criteria, ok, errText, checkedAt.Add(ttl(ok)))
}

// Load restores a persisted entry that expires at expiresAt (for example
// when a manager starts). Its check time is taken to be expiresAt minus the
// TTL of its kind, and the same staleness rule as Record applies. Expired
// entries may be loaded; they are never reported and Prune drops them.
func (c *Capabilities) Load(instanceID, criteria string, ok bool, errText string, expiresAt time.Time) {
	if ok {
		errText = ""
	}
	s := capState{expiresAt: expiresAt, err: errText, ok: ok}
	c.mu.Lock()
	defer c.mu.Unlock()
	cm := c.m[criteria]
	if cm == nil {
		cm = make(map[string]capState)
		c.m[criteria] = cm
	}
	if old, ok := cm[instanceID]; ok && s.checkedAt().Before(old.checkedAt()) {
		return
	}
	cm[instanceID] = s
}

// Allowed reports whether instanceID is allowlisted for criteria at now.
func (c *Capabilities) Allowed(instanceID, criteria string, now time.Time) bool {
	if c == nil {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.m[criteria][instanceID]
	return ok && s.ok && s.live(now)
}

// Denied reports whether instanceID is deny-listed for criteria at now, and
// if so until when and with which validation error.
func (c *Capabilities) Denied(instanceID, criteria string, now time.Time) (until time.Time, errText string, denied bool) {
	if c == nil {
		return time.Time{}, "", false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.m[criteria][instanceID]
	if !ok || s.ok || !s.live(now) {
		return time.Time{}, "", false
	}
	return s.expiresAt, s.err, true
}

// Entries returns the live allowlist and deny-list entries of instanceID at
// now, each sorted by criteria. It walks every criteria.
func (c *Capabilities) Entries(instanceID string, now time.Time) (allow, deny []Entry) {
	if c == nil {
		return nil, nil
	}
	c.mu.RLock()
	for crit, cm := range c.m {
		s, ok := cm[instanceID]
		if !ok || !s.live(now) {
			continue
		}
		e := Entry{Criteria: crit, ExpiresAt: s.expiresAt, Error: s.err}
		if s.ok {
			allow = append(allow, e)
		} else {
			deny = append(deny, e)
		}
	}
	c.mu.RUnlock()
	byCriteria := func(a, b Entry) int { return strings.Compare(a.Criteria, b.Criteria) }
	slices.SortFunc(allow, byCriteria)
	slices.SortFunc(deny, byCriteria)
	return allow, deny
}

// Forget drops every entry of instanceID (for example when it is deleted).
func (c *Capabilities) Forget(instanceID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for crit, cm := range c.m {
		delete(cm, instanceID)
		if len(cm) == 0 {
			delete(c.m, crit)
		}
	}
}

// Prune drops the entries expired at now and returns how many it dropped.
func (c *Capabilities) Prune(now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for crit, cm := range c.m {
		for id, s := range cm {
			if !s.live(now) {
				delete(cm, id)
				n++
			}
		}
		if len(cm) == 0 {
			delete(c.m, crit)
		}
	}
	return n
}

// view is a read-locked Capabilities used for many lookups in one pass;
// release it with done. A nil *Capabilities gives an empty view.
type view struct{ c *Capabilities }

func (c *Capabilities) view() view {
	if c != nil {
		c.mu.RLock()
	}
	return view{c}
}

func (v view) done() {
	if v.c != nil {
		v.c.mu.RUnlock()
	}
}

// criteria returns the entries of one criteria by instance (nil when none).
func (v view) criteria(crit string) map[string]capState {
	if v.c == nil {
		return nil
	}
	return v.c.m[crit]
}
