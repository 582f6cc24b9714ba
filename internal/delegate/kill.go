package delegate

import (
	"context"
	"sync"
)

// killSwitch is the delegate's "cancel every task now": it cancels at
// once every context it handed out and not yet released, and a context
// asked for after the kill starts cancelled. Its zero value is ready.
type killSwitch struct {
	mu     sync.Mutex // a leaf lock
	cause  error      // nil until kill
	next   uint64
	cancel map[uint64]context.CancelCauseFunc
}

// context returns a child of parent that kill cancels. release, called
// once the work is done, cancels it and forgets it.
func (k *killSwitch) context(parent context.Context) (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancelCause(parent)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cause != nil {
		cancel(k.cause)
		return ctx, func() {}
	}
	if k.cancel == nil {
		k.cancel = map[uint64]context.CancelCauseFunc{}
	}
	id := k.next
	k.next++
	k.cancel[id] = cancel
	return ctx, func() {
		k.mu.Lock()
		delete(k.cancel, id)
		k.mu.Unlock()
		cancel(nil)
	}
}

// kill cancels, with cause, every context handed out and every one asked
// for from now on. Only the first call counts.
func (k *killSwitch) kill(cause error) {
	k.mu.Lock()
	if k.cause != nil {
		k.mu.Unlock()
		return
	}
	k.cause = cause
	live := k.cancel
	k.cancel = nil
	k.mu.Unlock()
	for _, cancel := range live {
		cancel(cause)
	}
}
