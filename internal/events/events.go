// Package events is the manager's one stream of "something changed": a
// task queued, acquired, started, ended or with new output; an account's
// delegates changed; a pipeline run advanced. The part that makes the
// change publishes it once; every part that reacts subscribes: the offer
// of a queued task to delegates, the broadcast to the other managers, the
// web UI's live pages, log followers, the pipeline engine. Events learnt
// from another manager's broadcast are published again here with Remote
// set, so that local subscribers react to them too while those that tell
// the other managers do not echo them.
//
// Subscribers are called synchronously, in the order they subscribed, on
// the publisher's goroutine: each must return at once (a non-blocking
// send, a note for a loop of its own), since publishers sit on the task
// path whose latency legate measures.
package events

import (
	"context"
	"sync"

	"github.com/legate-dev/legate/internal/store"
)

// Kind is what changed.
type Kind uint8

const (
	// TaskQueued: a task was created or re-queued (Task is set, unless
	// Remote).
	TaskQueued Kind = iota + 1
	// TaskAcquired: a delegate claimed a task.
	TaskAcquired
	// TaskStarted: a delegate started a task's process.
	TaskStarted
	// TaskEnded: a task reached a terminal state.
	TaskEnded
	// TaskOutput: a task has new output in the store.
	TaskOutput
	// DelegatesChanged: an account's delegates connected, stopped, went
	// silent or came back, or were approved, rejected or deleted.
	DelegatesChanged
	// RunAdvanced: a pipeline run of an account was looked at again, and
	// moved when Broadcast is set.
	RunAdvanced
	kinds
)

var names = [kinds]string{"", "task_queued", "task_acquired", "task_started", "task_ended", "task_output", "delegates_changed", "run_advanced"}

func (k Kind) String() string {
	if k < kinds {
		return names[k]
	}
	return "unknown"
}

// Event is one change.
type Event struct {
	Kind    Kind
	Account string
	TaskID  string
	// Task is the queued task of a local TaskQueued (without its secret
	// values).
	Task *store.Task
	// Widen offers a queued task to several delegates at once (a
	// re-queued task whose first delegate failed it) instead of the best
	// one first.
	Widen bool
	// Broadcast tells the other managers (DelegatesChanged, RunAdvanced:
	// only when something they show moved; task events always are).
	Broadcast bool
	// Remote: learnt from another manager's broadcast.
	Remote bool
}

// Subscriber reacts to an event; it must not block.
type Subscriber func(ctx context.Context, e Event)

// Stream delivers each published event to the subscribers of its kind.
// Its zero value is ready to use.
type Stream struct {
	mu   sync.RWMutex
	subs [kinds][]Subscriber
}

// Subscribe calls fn with every later event of the kinds.
func (s *Stream) Subscribe(fn Subscriber, kinds ...Kind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range kinds {
		s.subs[k] = append(s.subs[k], fn)
	}
}

// Publish delivers e to the subscribers of its kind, in the order they
// subscribed.
func (s *Stream) Publish(ctx context.Context, e Event) {
	if e.Kind == 0 || e.Kind >= kinds {
		return
	}
	s.mu.RLock()
	subs := s.subs[e.Kind]
	s.mu.RUnlock()
	for _, fn := range subs {
		fn(ctx, e)
	}
}
