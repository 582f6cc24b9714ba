package delegate

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Exit codes of a one-shot delegate (Config.Once) that did not run its
// task. A one-shot delegate that ran its task exits 0 whatever the task's
// result: the task's status is the manager's record, and a non-zero exit
// would make a Kubernetes Job or a runner controller retry the machine,
// which is not what a failed task asks for.
const (
	// ExitNoTask: no task came within the timeout (or the delegate was
	// stopped before one came).
	ExitNoTask = 3
	// ExitClaimLost: the task it was offered went to another delegate
	// (or the claim failed).
	ExitClaimLost = 4
	// ExitUndelivered: the task ran but its result could not be delivered
	// before the delegate stopped; it is kept in the spool.
	ExitUndelivered = 5
)

// OnceError ends a one-shot delegate without its task run; Code is the
// process's exit code.
type OnceError struct {
	Code int
	Msg  string
}

func (e *OnceError) Error() string { return e.Msg }

// ExitCode is the exit code of the process.
func (e *OnceError) ExitCode() int { return e.Code }

// onceState is the one-shot delegate's progress: from the first claim
// that succeeds (or fails) on, it takes no other offer.
type onceState struct {
	on bool
	// closed: a claim succeeded or failed; no other task is claimed.
	closed atomic.Bool
	// ran: a task was acquired.
	ran  atomic.Bool
	done chan *OnceError // one outcome: nil = the task ran and reported
	one  sync.Once
}

func newOnceState(on bool) *onceState {
	return &onceState{on: on, done: make(chan *OnceError, 1)}
}

// finish records the outcome, the first one only.
func (o *onceState) finish(err *OnceError) {
	if o.on {
		o.one.Do(func() { o.done <- err })
	}
}

// claimed is called when a claim succeeded: no other offer is taken.
func (o *onceState) claimed() {
	if !o.on {
		return
	}
	o.ran.Store(true)
	o.closed.Store(true)
}

// lost is called when a claim failed.
func (o *onceState) lost(a *Agent, id string) {
	if !o.on || o.closed.Swap(true) {
		return
	}
	a.log.Warn("one-shot: the claim of the offered task failed (another delegate took it); exiting without a task", "task", id)
	o.finish(&OnceError{Code: ExitClaimLost, Msg: "one-shot delegate: the claim of task " + id + " failed (another delegate took it); exiting without a task"})
}

// waitOnce waits for the one-shot delegate's outcome, or ctx, or a fatal
// error. The timeout ends the wait only while no task was acquired.
// stop reports a stop request (ctx), fatal a fatal error.
func (a *Agent) waitOnce(ctx context.Context) (outcome *OnceError, fatal error, stop bool) {
	var timeout <-chan time.Time
	if a.once.on {
		t := time.NewTimer(a.cfg.OnceWait())
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil, nil, true
		case err := <-a.fatal:
			return nil, err, false
		case o := <-a.once.done:
			return o, nil, false
		case <-timeout:
			timeout = nil
			if a.once.closed.Swap(true) {
				continue // its task was claimed: it reports when done
			}
			a.log.Warn("one-shot: no task came within the timeout; exiting", "timeout", a.cfg.OnceWait())
			return &OnceError{Code: ExitNoTask, Msg: "one-shot delegate: no task came within " + a.cfg.OnceWait().String() +
				" (DELEGATE_ONCE_TIMEOUT / --once-timeout)"}, nil, false
		}
	}
}

// onceResult is what a one-shot delegate returns once it drained: nil
// when its task ran and the manager has the result.
func (a *Agent) onceResult(outcome *OnceError) error {
	if !a.once.on {
		return nil
	}
	if !a.once.ran.Load() {
		if outcome != nil {
			return outcome
		}
		return &OnceError{Code: ExitNoTask, Msg: "one-shot delegate: stopped before a task came"}
	}
	// A claim in flight when the timeout fired may have won: the task ran.
	if left := a.spool.load(func(string, error) {}); len(left) > 0 {
		return &OnceError{Code: ExitUndelivered, Msg: "one-shot delegate: the task ran but its result was not delivered; it is kept in " + a.spool.dir}
	}
	return nil
}
