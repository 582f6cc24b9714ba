package store

import (
	"context"
	"database/sql"
	"sync"
)

// maxGroup bounds how many write functions share one transaction.
const maxGroup = 128

// groupCommit lets concurrent writers on SQLite share transactions: each
// caller queues its write function; one of them becomes the leader and
// runs everything queued (up to maxGroup) in one transaction, each function
// inside a savepoint of its own, and commits once. A function that fails is
// rolled back to its savepoint and gets its own error; the others commit.
// One commit per group instead of one per write is what lets a single
// SQLite writer keep up with many delegates: the commit (WAL append and
// lock traffic) is the larger part of a small write's cost.
//
// A lone writer runs in its own transaction as before, so latency without
// contention is unchanged.
type groupCommit struct {
	mu    sync.Mutex
	queue []*writeReq
	// leader is held (a value sent) by the caller running groups.
	leader chan struct{}
}

type writeReq struct {
	ctx  context.Context
	fn   func(*sql.Tx) error
	err  error
	done chan struct{}
}

func newGroupCommit() *groupCommit { return &groupCommit{leader: make(chan struct{}, 1)} }

// run queues fn and returns its outcome once a group that holds it has
// committed (or failed).
func (g *groupCommit) run(ctx context.Context, s *Store, fn func(*sql.Tx) error) error {
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, req)
	g.mu.Unlock()
	select {
	case <-req.done:
		return req.err
	case g.leader <- struct{}{}:
		for !closed(req.done) {
			s.runGroup(g.take())
		}
		<-g.leader
		return req.err
	case <-ctx.Done():
		if g.remove(req) {
			return ctx.Err()
		}
		<-req.done // a leader is running it
		return req.err
	}
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (g *groupCommit) take() []*writeReq {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.queue), maxGroup)
	group := g.queue[:n:n]
	g.queue = g.queue[n:]
	if len(g.queue) == 0 {
		g.queue = nil
	}
	return group
}

func (g *groupCommit) remove(req *writeReq) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, r := range g.queue {
		if r == req {
			g.queue = append(g.queue[:i:i], g.queue[i+1:]...)
			return true
		}
	}
	return false
}

// runGroup runs a group in one transaction and completes every request.
// If the shared transaction itself fails (begin, a savepoint statement or
// the commit), the requests that had not failed on their own run again one
// by one in transactions of their own: write functions are written to be
// safe to repeat.
func (s *Store) runGroup(group []*writeReq) {
	if len(group) == 0 {
		return
	}
	finish := func(r *writeReq, err error) {
		r.err = err
		close(r.done)
	}
	if len(group) == 1 {
		r := group[0]
		finish(r, s.writeOnce(r.ctx, r.fn))
		return
	}
	// The group outlives any one caller's context: a caller that gives up
	// fails its own function, not the others'.
	bg := context.WithoutCancel(group[0].ctx)
	failed := make([]error, len(group))
	err := func() error {
		tx, err := s.writer.BeginTx(bg, nil)
		if err != nil {
			return err
		}
		for i, r := range group {
			if err := r.ctx.Err(); err != nil {
				failed[i] = err
				continue
			}
			if _, err := tx.ExecContext(bg, `SAVEPOINT g`); err != nil {
				tx.Rollback()
				return err
			}
			if err := r.fn(tx); err != nil {
				failed[i] = err
				if _, err := tx.ExecContext(bg, `ROLLBACK TO g`); err != nil {
					tx.Rollback()
					return err
				}
			}
			if _, err := tx.ExecContext(bg, `RELEASE g`); err != nil {
				tx.Rollback()
				return err
			}
		}
		return tx.Commit()
	}()
	if err == nil {
		s.wcache.fill(bg, s.writer)
		for i, r := range group {
			finish(r, failed[i])
		}
		return
	}
	for i, r := range group {
		if failed[i] != nil {
			finish(r, failed[i])
			continue
		}
		finish(r, s.writeOnce(r.ctx, r.fn))
	}
}
