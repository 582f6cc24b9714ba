package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
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
		if r.err != nil {
			t.Errorf("writer %d: %v", i, r.err)
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
