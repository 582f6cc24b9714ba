package store

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// maxGroup bounds how many write functions share one transaction on
// SQLite.
const maxGroup = 128

// maxGroupPostgres bounds a group on PostgreSQL: each write of a group is a
// subtransaction, and a transaction with more than 64 of them overflows
// the server's per-backend cache of subtransaction IDs, after which every
// other session's snapshot checks pg_subtrans while it runs.
const maxGroupPostgres = 48

// groupLockTimeout is the longest a write inside a PostgreSQL group waits
// for a lock (SET LOCAL lock_timeout): a write that would wait longer is
// rolled back to its savepoint and run again alone once the group has
// committed. So a group never waits long behind another transaction, and
// two groups (of two managers, or two lanes of one) that lock the same
// rows in opposite orders do not deadlock for the server's deadlock_timeout
// (1 s): one of them gives up its write after this long.
const groupLockTimeout = "10ms"

// groupCommit lets concurrent writers share transactions: each caller
// queues its write function; one of them becomes the leader and runs
// everything queued (up to max) in one transaction, each function inside a
// savepoint of its own, and commits once. A function that fails is rolled
// back to its savepoint and gets its own error; the others commit. One
// commit per group instead of one per write is what lets a single SQLite
// writer keep up with many delegates (the commit, WAL append and lock
// traffic, is the larger part of a small write's cost), and what saves
// PostgreSQL one WAL flush (fsync) and two round trips (BEGIN, COMMIT) per
// write.
//
// A store has one groupCommit (a lane) on SQLite, whose single writer
// connection runs one transaction at a time, and one per connection of
// the pool on PostgreSQL, whose groups run side by side: a group runs its
// writes' statements one after another on one connection, so on a loaded
// machine, where each round trip waits for the scheduler, many short
// groups side by side kept task latency lower than a few long ones
// (BENCHMARKS.md).
//
// A lone writer runs in its own transaction as before, so latency without
// contention is unchanged.
type groupCommit struct {
	mu    sync.Mutex
	queue []*writeReq
	// leader is held (a value sent) by the caller running groups.
	leader chan struct{}
	max    int
	// last is the size of the group the leader ran last (leader only).
	last int
	// yields is how often a leader yields before taking a group after a
	// group of several writes (see gather); 0 never.
	yields int
}

type writeReq struct {
	ctx  context.Context
	fn   func(*sql.Tx) error
	mode writeMode
	err  error
	// alone asks the caller to run fn again in a transaction of its own:
	// inside the group it waited too long for a lock, deadlocked or failed
	// to serialize (PostgreSQL), or the group's transaction failed.
	alone bool
	done  chan struct{}
}

func newGroupCommit(max, yields int) *groupCommit {
	return &groupCommit{leader: make(chan struct{}, 1), max: max, yields: yields}
}

// gatherYields is how often a SQLite leader yields the processor before
// taking the next group after a group of several writes: the writers its
// commit just woke run and queue their next writes (a task's next step,
// a delegate's next report), which then share the next commit instead of
// waiting behind a group of one or two. A leader after a lone write never
// yields, so a write without contention is as fast as before. With many
// tasks in flight it makes groups several times larger and the store's
// CPU per task smaller (BenchmarkTaskWrites; the figures are in
// BENCHMARKS.md).
// PostgreSQL's lanes do not yield: their groups run side by side, and a
// round trip, not a commit, is what a write waits for there.
const gatherYields = 4

// run queues fn and returns its outcome once a group that holds it has
// committed (or failed).
func (g *groupCommit) run(ctx context.Context, s *Store, fn func(*sql.Tx) error, mode writeMode) error {
	req := &writeReq{ctx: ctx, fn: fn, mode: mode, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, req)
	g.mu.Unlock()
	select {
	case <-req.done:
	case g.leader <- struct{}{}:
		for !closed(req.done) {
			g.gather()
			group := g.take()
			if len(group) == 0 {
				break // cannot happen: only the leader takes, and req is queued
			}
			g.last = len(group)
			s.runGroup(group)
		}
		<-g.leader
		<-req.done
	case <-ctx.Done():
		if g.remove(req) {
			return ctx.Err()
		}
		<-req.done // a leader is running it
	}
	if req.alone {
		return s.writeAlone(ctx, fn, mode)
	}
	return req.err
}

// gather lets the writers that the last group woke queue their next
// writes before the leader takes a group (see gatherYields): it yields
// while the queue is shorter than the last group was.
func (g *groupCommit) gather() {
	if g.last < 2 {
		return
	}
	for range g.yields {
		g.mu.Lock()
		n := len(g.queue)
		g.mu.Unlock()
		if n >= g.last || n >= g.max {
			return
		}
		runtime.Gosched()
	}
}

// idle reports whether nobody leads or waits in the lane (a hint: it may
// change at once).
func (g *groupCommit) idle() bool {
	if len(g.leader) > 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue) == 0
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
	n := min(len(g.queue), g.max)
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

// lane returns the lane a write joins: an idle one if there is one,
// looking from the next in turn, else the next in turn.
func (s *Store) lane() *groupCommit {
	n := len(s.lanes)
	if n == 1 {
		return s.lanes[0]
	}
	start := int(s.nextLane.Add(1) % uint64(n))
	for i := range n {
		if l := s.lanes[(start+i)%n]; l.idle() {
			return l
		}
	}
	return s.lanes[start]
}

// finish completes the request with its outcome.
func (r *writeReq) finish(err error) {
	r.err = err
	close(r.done)
}

// runAlone completes the request: its caller runs it again alone.
func (r *writeReq) runAlone() {
	r.alone = true
	close(r.done)
}

// runGroup runs a group in one transaction and completes every request
// (or hands it back to its caller to run alone); a lone write runs in a
// transaction of its own.
func (s *Store) runGroup(group []*writeReq) {
	if len(group) == 0 {
		return
	}
	if s.dialect == dialectPostgres {
		s.runGroupPostgres(group)
		return
	}
	if len(group) == 1 {
		r := group[0]
		r.finish(s.writeOnce(r.ctx, r.fn))
		return
	}
	s.runGroupSQLite(group)
}

// runGroupSQLite is runGroup on SQLite's single writer, with savepoints
// shared as runGroupPostgres shares them: savepoint g is opened afresh
// (RELEASE g, SAVEPOINT g) only before a write that may fail after
// changing something, and a run of clean writes (writeMode) shares one,
// which saves each of them two statements (the store's writes of a task
// are clean but its claim). A write that failed on a statement's error
// (a *sqlite.Error; the writer's statements are never interrupted, see
// stmtCtx), or a write that is not clean, is rolled back to g with the
// writes since g, which run again alone once the group has committed (the
// failed one too, unless it was the only one since g: then its error is
// its outcome).
//
// If the shared transaction itself fails (begin, a savepoint statement or
// the commit), every write that had not failed on its own runs again
// alone: write functions are written to be safe to repeat.
func (s *Store) runGroupSQLite(group []*writeReq) {
	// The group outlives any one caller's context: a caller that gives up
	// fails its own function, not the others'.
	bg := context.WithoutCancel(group[0].ctx)
	failed := make([]error, len(group)) // outcomes, when not alone
	alone := make([]bool, len(group))
	err := func() error {
		tx, err := s.writer.BeginTx(bg, nil)
		if err != nil {
			return err
		}
		exec := func(q string) error {
			_, err := tx.ExecContext(bg, q)
			return err
		}
		if err := exec(`SAVEPOINT g`); err != nil {
			tx.Rollback()
			return err
		}
		var since []int // the writes run since g was opened
		for i, r := range group {
			if err := r.ctx.Err(); err != nil {
				failed[i] = err
				continue
			}
			if !r.mode.clean && len(since) > 0 {
				if err := exec(`RELEASE g; SAVEPOINT g`); err != nil {
					tx.Rollback()
					return err
				}
				since = nil
			}
			ferr := r.fn(tx)
			var sqlErr *sqlite.Error
			if ferr == nil || (r.mode.clean && !errors.As(ferr, &sqlErr)) {
				failed[i] = ferr
				since = append(since, i)
				continue
			}
			// A statement failed, or a write that may have changed
			// something did: roll it back with the writes since g (g
			// stays open).
			if len(since) > 0 {
				alone[i] = true
			} else {
				failed[i] = ferr
			}
			if err := exec(`ROLLBACK TO g`); err != nil {
				tx.Rollback()
				return err
			}
			for _, j := range since {
				alone[j], failed[j] = true, nil
			}
			since = nil
		}
		return tx.Commit()
	}()
	if err == nil {
		s.wcache.fill(bg, s.writer)
		finishGroup(group, alone, failed)
		return
	}
	for i, r := range group {
		if failed[i] != nil {
			r.finish(failed[i])
			continue
		}
		r.runAlone()
	}
}

// runGroupPostgres is runGroup on PostgreSQL, in fewer round trips than a
// savepoint around each write. The group's transaction bounds its lock
// waits (groupLockTimeout) and opens savepoint g. A failure rolls back to
// g, undoing every write since g was opened, and those writes run again
// alone, the one that failed too (their outcomes may rest on what was
// undone), unless it was the only one: then its error is its outcome. So
// g is opened afresh (released and opened in one round trip) only before
// a write that may fail after changing something; a clean write (see
// writeMode) fails without changing anything unless a statement fails, so
// runs of them share one savepoint, and only an error from the server
// rolls them back. Before the commit, the lock timeout is lifted.
//
// A write that failed for want of a lock, a deadlock or a serialization
// failure runs again alone too. Writes run again alone by their callers
// once the group has committed (retried there as any write is). When the
// transaction fails before its commit, or the server refuses the commit,
// every write of the group runs again alone; a commit that failed on the
// connection (its outcome unknown) is each write's error, as it would be
// alone.
func (s *Store) runGroupPostgres(group []*writeReq) {
	if len(group) == 1 {
		r := group[0]
		r.finish(s.writeAlone(r.ctx, r.fn, r.mode))
		return
	}
	// The group outlives any one caller's context: a caller that gives up
	// fails its own function, not the others'.
	bg := context.WithoutCancel(group[0].ctx)
	failed := make([]error, len(group)) // outcomes, when not alone
	alone := make([]bool, len(group))
	skipped := make([]bool, len(group)) // its caller gave up first
	tx, err := s.writer.BeginTx(bg, nil)
	if err != nil {
		abandonGroup(group, failed, skipped)
		return
	}
	if err := runGroupWritesPostgres(bg, tx, group, failed, alone, skipped); err != nil {
		tx.Rollback()
		abandonGroup(group, failed, skipped)
		return
	}
	if err := tx.Commit(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || errors.Is(err, pgx.ErrTxCommitRollback) {
			abandonGroup(group, failed, skipped) // refused by the server: nothing was committed
			return
		}
		for i := range group {
			if !alone[i] && failed[i] == nil {
				failed[i] = err
			}
		}
	} else {
		s.wcache.fill(bg, s.writer)
	}
	finishGroup(group, alone, failed)
}

// runGroupWritesPostgres runs a group's writes in tx, up to its commit:
// it bounds the lock waits, opens savepoint g, runs each write (each
// outcome in failed, or alone set when the write runs again alone,
// skipped set when its caller gave up first) and lifts the lock timeout.
// An error is the transaction's: it is to be rolled back and the group
// abandoned.
func runGroupWritesPostgres(bg context.Context, tx *sql.Tx, group []*writeReq, failed []error, alone, skipped []bool) error {
	exec := func(q string) error {
		_, err := tx.ExecContext(bg, q)
		return err
	}
	var since []int // the writes run since g was opened
	// rollback rolls back to g (then runs then, if not empty): the writes
	// since g run again alone.
	rollback := func(then string) error {
		q := `ROLLBACK TO g`
		if then != "" {
			q += "; " + then
		}
		if err := exec(q); err != nil {
			return err
		}
		for _, j := range since {
			alone[j], failed[j] = true, nil
		}
		since = nil
		return nil
	}
	// step runs q, which fails if the transaction is aborted (a write
	// swallowed a statement's error): then it rolls back to g first.
	step := func(q string) error {
		if err := exec(q); err == nil {
			return nil
		}
		return rollback(q)
	}
	if err := exec(`SET LOCAL lock_timeout = '` + groupLockTimeout + `'; SAVEPOINT g`); err != nil {
		return err
	}
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			failed[i], skipped[i] = err, true
			continue
		}
		if !r.mode.clean && len(since) > 0 {
			if err := step(`RELEASE g; SAVEPOINT g`); err != nil {
				return err
			}
			since = nil
		}
		ferr := r.fn(tx)
		var pgErr *pgconn.PgError
		if ferr == nil || (r.mode.clean && !errors.As(ferr, &pgErr)) {
			failed[i] = ferr
			since = append(since, i)
			continue
		}
		// A statement failed, or a write that changed something did: roll
		// it back with the writes since g.
		if len(since) > 0 || retryable(ferr) || lockTimedOut(ferr) {
			alone[i] = true
		} else {
			failed[i] = ferr
		}
		if err := rollback(""); err != nil {
			return err
		}
	}
	// The commit waits for locks too (a transaction that notifies takes
	// the server's notification lock): no lock timeout there.
	return step(`SET LOCAL lock_timeout = 0`)
}

// abandonGroup hands every write of a group back to its caller to run
// alone, the transaction being gone, but those whose callers gave up
// first (skipped), which get their outcome.
func abandonGroup(group []*writeReq, failed []error, skipped []bool) {
	for i, r := range group {
		if skipped[i] {
			r.finish(failed[i])
		} else {
			r.runAlone()
		}
	}
}

// finishGroup completes the requests of a committed group: those marked
// alone run again alone, the others get their outcome.
func finishGroup(group []*writeReq, alone []bool, failed []error) {
	for i, r := range group {
		if alone[i] {
			r.runAlone()
		} else {
			r.finish(failed[i])
		}
	}
}
