package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/legate-dev/legate/internal/protocol"
)

// runAsGroup runs reqs as one group, as a lane's leader does, and then
// what the group handed back as each caller would (run): it returns each
// request's outcome.
func runAsGroup(s *Store, reqs []*writeReq) []error {
	s.runGroup(reqs)
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		<-r.done
		errs[i] = r.err
		if r.alone {
			errs[i] = s.writeAlone(r.ctx, r.fn, r.mode)
		}
	}
	return errs
}

func newReq(ctx context.Context, mode writeMode, fn func(*sql.Tx) error) *writeReq {
	return &writeReq{ctx: ctx, fn: fn, mode: mode, done: make(chan struct{})}
}

// groupWrites makes the writes of a group test: each inserts a key into
// table gc, and counts by its index how often it ran.
type groupWrites struct {
	ctx  context.Context
	s    *Store
	runs []atomic.Int32
}

func newGroupWrites(ctx context.Context, s *Store, n int) *groupWrites {
	return &groupWrites{ctx: ctx, s: s, runs: make([]atomic.Int32, n)}
}

func (g *groupWrites) insert(k string) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := g.s.w(tx).exec(g.ctx, `INSERT INTO gc (k) VALUES (?)`, k)
		return err
	}
}

// counted is fn, counted as write i.
func (g *groupWrites) counted(i int, fn func(*sql.Tx) error) func(*sql.Tx) error {
	return func(tx *sql.Tx) error { g.runs[i].Add(1); return fn(tx) }
}

// checkRuns fails t unless write i ran want[i] times.
func (g *groupWrites) checkRuns(t *testing.T, want ...int32) {
	t.Helper()
	for i := range g.runs {
		if got := g.runs[i].Load(); got != want[i] {
			t.Errorf("write %d ran %d times, want %d", i, got, want[i])
		}
	}
}

// TestGroupCommitPostgres: in one PostgreSQL group, a write that fails
// (by itself, or on a statement the server refuses) leaves no trace and
// gets its own error while the others commit; a write that fails to
// serialize, or waits too long for a lock another transaction holds, runs
// again alone once the group committed, and succeeds; a write whose caller
// gave up is not run.
func TestGroupCommitPostgres(t *testing.T) {
	t.Parallel()
	s := postgresBackend.open(t)
	ctx := context.Background()
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE gc (k TEXT PRIMARY KEY, v INT NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `INSERT INTO gc (k) VALUES ('dup'), ('locked')`); err != nil {
		t.Fatal(err)
	}
	// Another transaction holds the row 'locked' until the group is done.
	holder, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, `SELECT k FROM gc WHERE k = 'locked' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	g := newGroupWrites(ctx, s, 8)
	insert, counted := g.insert, g.counted
	errOwn := errors.New("fails after writing")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	clean := writeMode{clean: true}
	reqs := []*writeReq{
		0: newReq(ctx, clean, counted(0, insert("a"))),
		// The server refuses it: rolled back with 'a' (run since the
		// savepoint), and both run again alone.
		1: newReq(ctx, clean, counted(1, insert("dup"))),
		2: newReq(ctx, writeMode{}, counted(2, func(tx *sql.Tx) error {
			if err := insert("b")(tx); err != nil {
				return err
			}
			return errOwn
		})),
		3: newReq(ctx, clean, counted(3, func(tx *sql.Tx) error {
			if g.runs[3].Load() == 1 {
				_, err := s.w(tx).exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '40001'; END $$`)
				return err
			}
			return insert("c")(tx)
		})),
		4: newReq(ctx, clean, counted(4, func(tx *sql.Tx) error {
			_, err := s.w(tx).exec(ctx, `UPDATE gc SET v = v + 1 WHERE k = 'locked'`)
			return err
		})),
		5: newReq(cancelled, clean, counted(5, insert("e"))),
		6: newReq(ctx, writeMode{}, counted(6, insert("f"))),
		7: newReq(ctx, writeMode{single: true, clean: true}, counted(7, insert("g"))),
	}
	var errs []error
	released := make(chan struct{})
	go func() {
		// The row lock is released once the group has handed write 4
		// back: it then runs alone and gets the row.
		<-reqs[4].done
		holder.Rollback()
		close(released)
	}()
	errs = runAsGroup(s, reqs)
	<-released
	var pgErr *pgconn.PgError
	for i, err := range errs {
		switch i {
		case 1:
			if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				t.Errorf("write 1: %v, want a unique violation", err)
			}
		case 2:
			if !errors.Is(err, errOwn) {
				t.Errorf("write 2: %v, want its own error", err)
			}
		case 5:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("write 5: %v, want context.Canceled", err)
			}
		default:
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		}
	}
	g.checkRuns(t, 2, 2, 1, 2, 2, 0, 1, 1)
	rows, err := s.reader.QueryContext(ctx, `SELECT k, v FROM gc ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var k string
		var v int
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s=%d", k, v))
	}
	want := "[a=0 c=0 dup=0 f=0 g=0 locked=1]"
	if fmt.Sprint(got) != want {
		t.Errorf("rows %v, want %s", got, want)
	}
}

// holdLanes makes every lane of s busy (its leader runs a write that waits)
// until the returned function is called, so that the writes made meanwhile
// queue and then run in groups.
func holdLanes(t *testing.T, s *Store) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range s.lanes {
		started := make(chan struct{})
		wg.Go(func() {
			err := l.run(context.Background(), s, func(*sql.Tx) error {
				close(started)
				<-gate
				return nil
			}, writeMode{})
			if err != nil {
				t.Errorf("holding a lane: %v", err)
			}
		})
		<-started
	}
	return func() { close(gate); wg.Wait() }
}

// queued is the number of writes waiting in the lanes of s.
func queued(s *Store) int {
	n := 0
	for _, l := range s.lanes {
		l.mu.Lock()
		n += len(l.queue)
		l.mu.Unlock()
	}
	return n
}

// TestGroupsOfTwoManagers: two managers (Stores) on one PostgreSQL
// database each run a group of writes that lock the same two rows in
// opposite orders (a deadlock between the groups' transactions), while
// delegates of both claim the same tasks: every write is applied once, with
// no wait for the server's deadlock detection between groups (a write gives
// up its lock wait after groupLockTimeout and runs again alone), and every
// task has exactly one winner.
func TestGroupsOfTwoManagers(t *testing.T) {
	t.Parallel()
	dsn := postgresBackend.newDSN(t) + "&pool_max_conns=4" // 4 lanes each
	stores := []*Store{openAt(t, dsn), openAt(t, dsn)}
	ctx := context.Background()
	if _, err := stores[0].writer.ExecContext(ctx, `CREATE TABLE gc2 (k TEXT PRIMARY KEY, n INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[0].writer.ExecContext(ctx, `INSERT INTO gc2 VALUES ('a', 0), ('b', 0)`); err != nil {
		t.Fatal(err)
	}
	const writes, tasks, instances = 12, 20, 6
	for i := range tasks {
		mustCreate(t, stores[0], newTask(fmt.Sprintf("t%02d", i), "acc1", t0))
	}
	releases := []func(){holdLanes(t, stores[0]), holdLanes(t, stores[1])}
	var wg sync.WaitGroup
	for m, s := range stores {
		order := []string{"a", "b"}
		if m == 1 {
			order = []string{"b", "a"}
		}
		for range writes {
			wg.Go(func() {
				err := s.write(ctx, func(tx *sql.Tx) error {
					for _, k := range order {
						if _, err := s.w(tx).exec(ctx, `UPDATE gc2 SET n = n + 1 WHERE k = ?`, k); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Errorf("manager %d: %v", m, err)
				}
			})
		}
	}
	// Every write waits in a lane before any runs.
	deadline := time.Now().Add(time.Minute)
	for queued(stores[0])+queued(stores[1]) < 2*writes {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", queued(stores[0])+queued(stores[1]), 2*writes)
		}
		time.Sleep(time.Millisecond)
	}
	var mu sync.Mutex
	winners := map[string][]string{}
	for c := range instances {
		for k := range tasks {
			wg.Go(func() {
				inst := fmt.Sprintf("i%d", c)
				id := fmt.Sprintf("t%02d", (k+c*7)%tasks)
				_, err := stores[c%2].ClaimTask(ctx, claimFor(id, inst), at(time.Minute))
				switch {
				case err == nil:
					mu.Lock()
					winners[id] = append(winners[id], inst)
					mu.Unlock()
				case !errors.Is(err, ErrAlreadyClaimed):
					t.Errorf("claim %s by %s: %v", id, inst, err)
				}
			})
		}
	}
	start := time.Now()
	for _, release := range releases {
		release()
	}
	wg.Wait()
	t.Logf("writes and claims done %v after the lanes were released", time.Since(start))
	for _, k := range []string{"a", "b"} {
		var n int
		if err := stores[1].reader.QueryRowContext(ctx, `SELECT n FROM gc2 WHERE k = $1`, k).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2*writes {
			t.Errorf("%s = %d, want %d (every write once)", k, n, 2*writes)
		}
	}
	for i := range tasks {
		id := fmt.Sprintf("t%02d", i)
		if len(winners[id]) != 1 {
			t.Errorf("%s: winners %v, want exactly one", id, winners[id])
			continue
		}
		got := mustGet(t, stores[i%2], "acc1", id)
		if got.InstanceID != winners[id][0] || got.Epoch != 1 || got.Status != protocol.StatusRunning {
			t.Errorf("%s: stored %s %s epoch %d, winner %s", id, got.Status, got.InstanceID, got.Epoch, winners[id][0])
		}
	}
}
