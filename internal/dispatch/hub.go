package dispatch

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// mailboxCap bounds the events waiting for one delegate. When full, the
// oldest task_available events are dropped: the rebroadcast loop offers
// queued tasks again, so nothing is lost.
const mailboxCap = 1024

// trimEvents keeps at most mailboxCap events: it drops the oldest
// task_available first (the delegate hears of the task again), and only
// when none is left the newest events.
func trimEvents(ev []protocol.Event) []protocol.Event {
	for len(ev) > mailboxCap {
		i := slices.IndexFunc(ev, func(e protocol.Event) bool { return e.Kind == protocol.EventTaskAvailable })
		if i < 0 {
			return ev[:mailboxCap]
		}
		ev = slices.Delete(ev, i, i+1)
	}
	return ev
}

// live is the in-memory state of one registered delegate instance. Liveness
// is kept here, not in the database: heartbeats cost no write; a flusher
// records them in batches.
type live struct {
	id         string
	accountID  string
	name       string
	hostname   string
	tokenID    string
	tags       []string
	generation int64
	org        string
	project    string

	lastSeen atomic.Int64 // Unix nanoseconds of last contact
	// idx is the index of live delegates the hub put this one in.
	idx atomic.Pointer[liveIndex]

	mu       sync.Mutex
	capacity int
	// containerRuntime is the runtime it registered with ("": none).
	containerRuntime string
	containerReason  string // why it has none, as it said
	// taskTypes are the task types it registered that it runs (nil: an
	// older delegate; see protocol.RunsTaskType).
	taskTypes  []string
	connection string
	draining   bool
	// overThreshold says why the delegate is over a resource threshold.
	overThreshold string
	// perf is the performance figures of its last heartbeat (nil: none).
	perf *protocol.DelegatePerf
	// configuring names the configuration whose script the delegate runs
	// now (from its heartbeats; set at a fresh registration that hands
	// out a configuration, until the delegate reports).
	configuring string
	// cfgKey is the configuration this manager last told the delegate
	// applies ("" none), valid when cfgKnown.
	cfgKey   string
	cfgKnown bool
	// protocolVersion is the delegate's, 0 when unknown (revived state).
	protocolVersion int
	gone            bool             // deregistered, superseded or revoked
	running         map[string]int64 // task ID -> epoch
	// pending holds tasks offered to this delegate alone and not yet
	// acquired; they count as load so a burst spreads over delegates.
	pending map[string]struct{}
	// claimed is when this manager saw each running task claimed or
	// listed; a task the delegate stops listing loses its lease extension.
	claimed map[string]time.Time
	// wsOpen counts this delegate's open WebSockets (usually 0 or 1).
	wsOpen int
	// polls counts its long polls being answered.
	polls int
	// lostAt (Unix nanoseconds) is when its last event channel closed
	// under it (the connection closed or was reset: its process died, or
	// the network cut it); 0 when never. Until a contact after it, the
	// leases of its tasks end one heartbeat interval after lostAt instead
	// of three after its last contact (failover.go).
	lostAt    int64
	events    []protocol.Event
	notify    chan struct{} // cap 1: something is in events
	kick      chan struct{} // closed to end the event channel (revoked/superseded)
	flushedAt int64         // lastSeen value at the last flush

	// warnedRunning: a running list longer than the delegate may run was
	// logged (once per instance).
	warnedRunning bool
	// approval is the decision about the delegate (protocol.Approval*),
	// "" when its token requires none (approval.go).
	approval string
}

func newLive(in store.Instance) *live {
	l := &live{
		id:               in.ID,
		accountID:        in.AccountID,
		name:             in.Name,
		hostname:         in.Hostname,
		tokenID:          in.TokenID,
		tags:             in.Tags,
		generation:       in.Generation,
		org:              in.Org,
		project:          in.Project,
		capacity:         in.Capacity,
		containerRuntime: in.ContainerRuntime,
		containerReason:  in.ContainerReason,
		taskTypes:        in.TaskTypes,
		approval:         in.Approval,
		running:          map[string]int64{},
		pending:          map[string]struct{}{},
		claimed:          map[string]time.Time{},
		notify:           make(chan struct{}, 1),
		kick:             make(chan struct{}),
	}
	return l
}

// loadChanged moves the delegate in the index's least-loaded order; call
// it, without holding l.mu, after changing running, pending or capacity.
func (l *live) loadChanged() {
	if x := l.idx.Load(); x != nil {
		x.setLoad(l)
	}
}

func (l *live) touch(now time.Time) { l.lastSeen.Store(now.UnixNano()) }

// push queues an event for the delegate.
func (l *live) push(ev protocol.Event) {
	l.mu.Lock()
	l.events = trimEvents(append(l.events, ev))
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

// take removes and returns all queued events.
func (l *live) take() []protocol.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.events
	l.events = nil
	return ev
}

// requeue puts events back at the front (a write failed); past
// mailboxCap it drops offers first, as push does, not the aborts and
// acknowledgements at the back.
func (l *live) requeue(ev []protocol.Event) {
	if len(ev) == 0 {
		return
	}
	l.mu.Lock()
	l.events = trimEvents(append(append([]protocol.Event{}, ev...), l.events...))
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

// end closes the event channel of this instance for good.
func (l *live) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.gone {
		l.gone = true
		close(l.kick)
	}
}

func (l *live) isGone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone
}

// load returns the number of running tasks and the capacity.
func (l *live) load() (running, capacity int, draining bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.running), l.capacity, l.draining
}

func (l *live) setRunning(id string, epoch int64, now time.Time) {
	l.mu.Lock()
	l.running[id] = epoch
	l.claimed[id] = now
	delete(l.pending, id)
	l.mu.Unlock()
	l.loadChanged()
}

// unpend forgets a sole offer (acquired elsewhere, refused, or widened).
func (l *live) unpend(id string) {
	l.mu.Lock()
	delete(l.pending, id)
	l.mu.Unlock()
	l.loadChanged()
}

// full reports whether the delegate has a capacity and its running tasks
// and sole offers fill it.
func (l *live) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.capacity > 0 && len(l.running)+len(l.pending) >= l.capacity
}

func (l *live) dropRunning(id string) {
	l.mu.Lock()
	delete(l.running, id)
	delete(l.claimed, id)
	l.mu.Unlock()
	l.loadChanged()
}

// hub indexes the live instances of every account.
type hub struct {
	mu        sync.RWMutex
	instances map[string]*live
	byAccount map[string]map[string]*live
	idx       *liveIndex
}

func newHub() *hub {
	return &hub{instances: map[string]*live{}, byAccount: map[string]map[string]*live{}, idx: newLiveIndex()}
}

func (h *hub) get(id string) *live {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.instances[id]
}

// put installs l, ending any older incarnation of the same instance.
func (h *hub) put(l *live) {
	h.mu.Lock()
	old := h.instances[l.id]
	h.instances[l.id] = l
	m := h.byAccount[l.accountID]
	if m == nil {
		m = map[string]*live{}
		h.byAccount[l.accountID] = m
	}
	m[l.id] = l
	l.idx.Store(h.idx)
	h.idx.put(l)
	h.mu.Unlock()
	if old != nil && old != l {
		old.end()
	}
}

func (h *hub) remove(id string) *live {
	h.mu.Lock()
	l := h.instances[id]
	if l != nil {
		delete(h.instances, id)
		if m := h.byAccount[l.accountID]; m != nil {
			delete(m, id)
			if len(m) == 0 {
				delete(h.byAccount, l.accountID)
			}
		}
		h.idx.remove(l)
	}
	h.mu.Unlock()
	if l != nil {
		l.end()
	}
	return l
}

func (h *hub) account(accountID string) []*live {
	h.mu.RLock()
	defer h.mu.RUnlock()
	m := h.byAccount[accountID]
	out := make([]*live, 0, len(m))
	for _, l := range m {
		out = append(out, l)
	}
	return out
}

func (h *hub) all() []*live {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*live, 0, len(h.instances))
	for _, l := range h.instances {
		out = append(out, l)
	}
	return out
}

func (h *hub) accounts() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]string, 0, len(h.byAccount))
	for a := range h.byAccount {
		out = append(out, a)
	}
	return out
}
