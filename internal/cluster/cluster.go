// Package cluster carries hints between the managers that share one
// PostgreSQL store. Each manager keeps the live state of the delegates
// connected to it; what one manager decides that concerns another's
// delegates or pages crosses over as a broadcast (LISTEN/NOTIFY): a task
// to offer, a task to abort, a token or an API key revoked, output
// stored. Each service of the manager registers the kinds it handles
// (Bus.Handle) and broadcasts what it decides (Bus.Broadcast). On SQLite
// (one manager) every call is a no-op.
//
// Broadcasts are hints that cut latency; the store stays the truth, and
// the rebroadcast, heartbeat reconciliation and cache TTLs catch anything
// a lost broadcast missed.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Event is one broadcast between managers (its JSON is the wire form).
type Event struct {
	Kind     string `json:"k"`
	Origin   string `json:"o"`
	Account  string `json:"a,omitempty"`
	Task     string `json:"t,omitempty"`
	Instance string `json:"i,omitempty"`
	Token    string `json:"tok,omitempty"`
	APIKey   string `json:"ak,omitempty"`
	// Output lists tasks with new output or ended (output.go).
	Output []OutputMark `json:"out,omitempty"`
}

// The kinds of Event.
const (
	Task   = "task"   // a task is queued: offer it to your delegates
	Abort  = "abort"  // tell Instance to stop Task
	Revoke = "revoke" // Token is revoked: disconnect its delegates
	Config = "config" // Account's configurations changed: tell your delegates
	// APIKeyRevoke: APIKey (an ID) is revoked: drop it from your cache.
	APIKeyRevoke = "apikey_revoke"
	// Access: Account's users, groups, roles or bindings changed: drop
	// your cached policies.
	Access = "access"
	// Output: Output's tasks have new output in the store, or ended: tell
	// your followers.
	Output = "output"
	// Approval: the delegates of Account named Instance were approved or
	// rejected: read the decision for yours.
	Approval = "approval"
	// Delegates: Account's delegates connected, stopped, went silent or
	// came back, or were approved, rejected or deleted: tell your web UI
	// pages.
	Delegates = "delegates"
	// Runs: a pipeline run of Account advanced: tell your web UI pages.
	Runs = "runs"
)

// Store is how broadcasts travel: the shared database.
type Store interface {
	// Shared reports whether other managers may share the store.
	Shared() bool
	Broadcast(ctx context.Context, payload string) error
	Listen(ctx context.Context, fn func(payload string), connected func()) error
}

// Handler applies another manager's event.
type Handler func(ctx context.Context, ev Event)

// Bus broadcasts this manager's events and applies the others'.
type Bus struct {
	id  string
	st  Store
	log *slog.Logger
	// handlers is filled by Handle before Run and only read after.
	mu       sync.RWMutex
	handlers map[string][]Handler
	// up is set once the listener is up.
	up      atomic.Bool
	outputs *outputNotes
}

// New returns the bus of one manager process over st.
func New(st Store, log *slog.Logger) *Bus {
	return &Bus{id: newID(), st: st, log: log, handlers: map[string][]Handler{}, outputs: newOutputNotes()}
}

func newID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "m_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// ID is this manager's, in its broadcasts.
func (b *Bus) ID() string { return b.id }

// Shared reports whether other managers may be listening.
func (b *Bus) Shared() bool { return b.st.Shared() }

// Handle registers h for the other managers' events of kind.
func (b *Bus) Handle(kind string, h Handler) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handlers[kind] = append(b.handlers[kind], h)
}

// Broadcast tells the other managers about ev (a no-op on SQLite). A
// failure is logged: the store stays the truth.
func (b *Bus) Broadcast(ctx context.Context, ev Event) {
	if !b.st.Shared() {
		return
	}
	ev.Origin = b.id
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := b.st.Broadcast(bctx, Encode(ev)); err != nil {
		b.log.Warn("broadcast to other managers", "kind", ev.Kind, "err", err)
	}
}

// Encode is ev's wire form (for a broadcast sent outside a running
// manager: legate admin reset).
func Encode(ev Event) string {
	p, _ := json.Marshal(ev)
	return string(p)
}

// Run applies the other managers' broadcasts, and sends the output notes,
// until ctx ends (at once on SQLite).
func (b *Bus) Run(ctx context.Context) error {
	if !b.st.Shared() {
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { b.outputLoop(ctx) })
	err := b.st.Listen(ctx, func(payload string) {
		var ev Event
		if err := json.Unmarshal([]byte(payload), &ev); err != nil || ev.Origin == b.id {
			return
		}
		b.apply(ctx, ev)
	}, func() {
		b.up.Store(true)
		b.log.Debug("listening to other managers")
	})
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (b *Bus) apply(ctx context.Context, ev Event) {
	b.mu.RLock()
	hs := b.handlers[ev.Kind]
	b.mu.RUnlock()
	for _, h := range hs {
		h(ctx, ev)
	}
}

// Listening reports whether this manager has been listening to the other
// managers' broadcasts (at least once: a broken listener reconnects).
func (b *Bus) Listening() bool { return b.up.Load() }
