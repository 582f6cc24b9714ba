package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"modernc.org/sqlite"
)

// TestGroupCommitIsolatesFailures: many concurrent writers share
// transactions; a writer that fails leaves no trace and gets its own
// error, the others commit, and a writer whose context is already done is
// not run at all.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE gc (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	errOdd := errors.New("odd writers fail after writing")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	const writers = 400
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ctx
			if i%50 == 7 {
				c = cancelled
			}
			errs[i] = s.write(c, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(c, `INSERT INTO gc (k) VALUES (?)`, fmt.Sprint(i)); err != nil {
					return err
				}
				if i%2 == 1 {
					return errOdd
				}
				return nil
			})
		}()
	}
	wg.Wait()
	want := 0
	for i, err := range errs {
		switch {
		case i%50 == 7:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("writer %d with a done context: %v, want context.Canceled", i, err)
			}
		case i%2 == 1:
			if !errors.Is(err, errOdd) {
				t.Errorf("writer %d: %v, want its own error", i, err)
			}
		default:
			want++
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		}
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT k FROM gc`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		var i int
		fmt.Sscan(k, &i)
		if i%2 == 1 || i%50 == 7 {
			t.Errorf("row %s of a failed or cancelled writer was committed", k)
		}
		got++
	}
	if got != want {
		t.Errorf("%d rows committed, want %d", got, want)
	}
}

// TestGroupCommitRetriesAlone: when the shared transaction cannot commit,
// every writer that had not failed by itself runs again alone, so one bad
// writer (here one that breaks the transaction) does not fail the group.
func TestGroupCommitRetriesAlone(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE gc (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[int]int{}
	group := make([]*writeReq, 0, 5)
	for i := range 5 {
		group = append(group, &writeReq{ctx: ctx, done: make(chan struct{}), fn: func(tx *sql.Tx) error {
			mu.Lock()
			runs[i]++
			first := runs[i] == 1
			mu.Unlock()
			if i == 2 && first {
				// Rolls the shared transaction back under the group's feet
				// (as an I/O error would): the earlier writers' work is
				// gone and the savepoint release fails.
				if _, err := tx.ExecContext(ctx, `ROLLBACK`); err != nil {
					return err
				}
				return nil
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO gc (k) VALUES (?)`, fmt.Sprint(i))
			return err
		}})
	}
	s.runGroup(group)
	for i, r := range group {
		<-r.done
		err := r.err
		if r.alone { // handed back: its caller runs it alone (groupCommit.run)
			err = s.writeAlone(ctx, r.fn, r.mode)
		}
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM gc`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("%d rows, want 5 (every writer once)", n)
	}
}

// TestGroupCommitSQLite: in one SQLite group, clean writes share a
// savepoint; a write that fails on a statement (a unique violation) is
// rolled back with the writes since that savepoint, which run again alone
// once the group committed, and keeps its own error; a write that is not
// clean and fails by itself leaves no trace; a write whose caller gave up
// is not run. Every other write is applied once.
func TestGroupCommitSQLite(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.writer.ExecContext(ctx, `CREATE TABLE gc (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `INSERT INTO gc (k) VALUES ('dup')`); err != nil {
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
		// A statement fails: rolled back with 'a' (run since the
		// savepoint), and both run again alone.
		1: newReq(ctx, clean, counted(1, insert("dup"))),
		2: newReq(ctx, writeMode{}, counted(2, func(tx *sql.Tx) error {
			if err := insert("b")(tx); err != nil {
				return err
			}
			return errOwn
		})),
		3: newReq(ctx, clean, counted(3, insert("c"))),
		4: newReq(cancelled, clean, counted(4, insert("e"))),
		// Not clean, after a clean write: a savepoint of its own.
		5: newReq(ctx, writeMode{}, counted(5, insert("f"))),
		6: newReq(ctx, writeMode{single: true, clean: true}, counted(6, insert("g"))),
		// Fails on a statement: rolled back to the savepoint write 5
		// opened, with 5 and 6, which run again alone; 0 to 3 stay.
		7: newReq(ctx, clean, counted(7, insert("dup"))),
	}
	errs := runAsGroup(s, reqs)
	var sqlErr *sqlite.Error
	for i, err := range errs {
		switch i {
		case 1, 7:
			if !errors.As(err, &sqlErr) {
				t.Errorf("write %d: %v, want the unique violation", i, err)
			}
		case 2:
			if !errors.Is(err, errOwn) {
				t.Errorf("write 2: %v, want its own error", err)
			}
		case 4:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("write 4: %v, want context.Canceled", err)
			}
		default:
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		}
	}
	g.checkRuns(t, 2, 2, 1, 1, 0, 2, 2, 2)
	var got []string
	rows, err := s.reader.QueryContext(ctx, `SELECT k FROM gc ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		got = append(got, k)
	}
	if want := "[a c dup f g]"; fmt.Sprint(got) != want {
		t.Errorf("rows %v, want %s", got, want)
	}
}
