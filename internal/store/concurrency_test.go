package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/legate-dev/legate/internal/protocol"
)

// Several managers share one database: these tests open several Stores on
// one database (on SQLite, one file) and race them.

const managers = 4

// openManagers opens n stores on one new database of the backend.
func openManagers(t *testing.T, b backend, n int) []*Store {
	t.Helper()
	dsn := b.newDSN(t)
	stores := make([]*Store, n)
	for i := range stores {
		stores[i] = openAt(t, dsn)
	}
	return stores
}

// race runs f(i) for i in [0, n) in goroutines released at once.
func race(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// TestClaimTaskConcurrentMany races claimers of many tasks at once, each
// trying every task, through several managers: every task has exactly one
// winner, and the stored row names it.
func TestClaimTaskConcurrentMany(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		stores := openManagers(t, b, managers)
		const tasks, claimers = 20, 12
		for i := range tasks {
			mustCreate(t, stores[0], newTask(fmt.Sprintf("t%02d", i), "acc1", t0))
		}
		var mu sync.Mutex
		winners := map[string][]string{}
		var errs []error
		race(claimers, func(c int) {
			s := stores[c%len(stores)]
			inst := fmt.Sprintf("i%d", c)
			for k := range tasks {
				id := fmt.Sprintf("t%02d", (k+c*7)%tasks) // each claimer in its own order
				task, err := s.ClaimTask(context.Background(), claimFor(id, inst), at(time.Minute))
				mu.Lock()
				switch {
				case err == nil:
					winners[id] = append(winners[id], inst)
					if task.InstanceID != inst || task.Epoch != 1 {
						errs = append(errs, fmt.Errorf("%s: winner %s got %s epoch %d", id, inst, task.InstanceID, task.Epoch))
					}
				case !errors.Is(err, ErrAlreadyClaimed):
					errs = append(errs, fmt.Errorf("%s by %s: %w", id, inst, err))
				}
				mu.Unlock()
			}
		})
		for _, err := range errs {
			t.Error(err)
		}
		for i := range tasks {
			id := fmt.Sprintf("t%02d", i)
			if len(winners[id]) != 1 {
				t.Errorf("%s: winners %v, want exactly one", id, winners[id])
				continue
			}
			got := mustGet(t, stores[i%len(stores)], "acc1", id)
			if got.InstanceID != winners[id][0] || got.Epoch != 1 || got.Attempts != 1 || got.Status != protocol.StatusRunning {
				t.Errorf("%s: stored %s %s epoch %d attempts %d, winner %s", id, got.Status, got.InstanceID, got.Epoch, got.Attempts, winners[id][0])
			}
		}
	})
}

// TestClaimCapacityConcurrent races claims of one instance, through
// several managers, for more tasks than it has room for: exactly capacity
// of them win, round after round as tasks finish.
func TestClaimCapacityConcurrent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		stores := openManagers(t, b, managers)
		ctx := context.Background()
		const capacity, perRound, rounds = 3, 12, 3
		for r := range rounds {
			var ids []string
			for i := range perRound {
				id := fmt.Sprintf("r%d-t%02d", r, i)
				ids = append(ids, id)
				mustCreate(t, stores[0], newTask(id, "acc1", t0))
			}
			var won, full atomic.Int32
			var mu sync.Mutex
			var wonIDs []string
			race(perRound, func(i int) {
				c := claimFor(ids[i], "i1")
				c.Capacity = capacity
				_, err := stores[i%len(stores)].ClaimTask(ctx, c, at(time.Minute))
				switch {
				case err == nil:
					won.Add(1)
					mu.Lock()
					wonIDs = append(wonIDs, ids[i])
					mu.Unlock()
				case errors.Is(err, ErrNoCapacity):
					full.Add(1)
				default:
					t.Errorf("claim %s: %v", ids[i], err)
				}
			})
			if won.Load() != capacity || full.Load() != perRound-capacity {
				t.Fatalf("round %d: %d won, %d at capacity; want %d and %d", r, won.Load(), full.Load(), capacity, perRound-capacity)
			}
			running, err := stores[1].RunningTasksOf(ctx, "i1")
			if err != nil {
				t.Fatal(err)
			}
			if len(running) != capacity {
				t.Fatalf("round %d: %d running on i1, want %d", r, len(running), capacity)
			}
			for _, id := range wonIDs {
				if _, err := stores[2].CompleteTask(ctx, id, 1, Result{Status: protocol.StatusSucceeded}, at(time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// TestSweepsConcurrent runs each sweep on several managers at once: every
// task is handled, and reported, by exactly one of them.
func TestSweepsConcurrent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		stores := openManagers(t, b, managers)
		ctx := context.Background()
		const n = 24
		for i := range n {
			lost := newTask(fmt.Sprintf("lost%02d", i), "acc1", t0)
			lost.Retries = i % 2 // half requeue, half fail
			lost.TimeoutMS = 0   // only its lease is due
			slow := newTask(fmt.Sprintf("slow%02d", i), "acc1", t0)
			slow.TimeoutMS = 1000
			mustCreate(t, stores[0], lost, slow)
			mustClaim(t, stores[0], lost.ID, "i1", t0)
			mustClaim(t, stores[0], slow.ID, "i2", t0)
			// slow's lease lasts beyond the sweep; only its timeout is due.
			if err := stores[0].ExtendLeases(ctx, []LeaseExtension{{TaskID: slow.ID, Epoch: 1, ExpiresAt: at(24 * time.Hour)}}); err != nil {
				t.Fatal(err)
			}
		}
		now := at(time.Hour)
		var mu sync.Mutex
		var got []string
		report := func(what, id string) {
			mu.Lock()
			got = append(got, what+" "+id)
			mu.Unlock()
		}
		race(len(stores)*2, func(i int) {
			s := stores[i%len(stores)]
			switch i % 2 {
			case 0:
				out, err := s.ExpireLeases(ctx, now)
				if err != nil {
					t.Errorf("ExpireLeases: %v", err)
				}
				for _, o := range out {
					report(fmt.Sprintf("lease requeued=%v", o.Requeued), o.Task.ID)
				}
			case 1:
				out, err := s.TimeoutRunning(ctx, now, 0)
				if err != nil {
					t.Errorf("TimeoutRunning: %v", err)
				}
				for _, task := range out {
					report("timeout", task.ID)
				}
			}
		})
		var want []string
		for i := range n {
			want = append(want, fmt.Sprintf("lease requeued=%v lost%02d", i%2 == 1, i),
				fmt.Sprintf("timeout slow%02d", i))
		}
		sort.Strings(want)
		sort.Strings(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("reported (-want +got):\n%s", diff)
		}
		// A sweep with nothing to do is not an error.
		for _, s := range stores[:1] {
			if out, err := s.ExpireLeases(ctx, now); err != nil || len(out) != 0 {
				t.Errorf("second ExpireLeases: %v, %v", out, err)
			}
		}
	})
}

// TestUpsertInstanceConcurrent registers one identity from several managers
// at once (a delegate that reconnects to another replica): one row, one
// generation per registration.
func TestUpsertInstanceConcurrent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		stores := openManagers(t, b, managers)
		const n = 12
		var mu sync.Mutex
		gens := map[int64]bool{}
		race(n, func(i int) {
			in := Instance{ID: fmt.Sprintf("id%d", i), AccountID: "acc1", IdentityKey: "build|host-a",
				Name: "build", Hostname: "host-a", Capacity: i, RegisteredAt: t0}
			got, err := stores[i%len(stores)].UpsertInstance(context.Background(), in)
			if err != nil {
				t.Errorf("register %d: %v", i, err)
				return
			}
			mu.Lock()
			gens[got.Generation] = true
			mu.Unlock()
		})
		list, err := stores[0].ListInstances(context.Background(), "acc1")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Generation != n || len(gens) != n {
			t.Errorf("instances %+v, generations seen %v; want one row at generation %d", list, gens, n)
		}
	})
}

// TestAppendLogsConcurrent appends the chunks of one attempt through
// several managers at once (redeliveries included): every chunk is stored
// once and the counters add up.
func TestAppendLogsConcurrent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		stores := openManagers(t, b, managers)
		mustCreate(t, stores[0], newTask("t1", "acc1", t0))
		mustClaim(t, stores[0], "t1", "i1", t0)
		const n = 40
		race(n, func(i int) {
			// Chunk i and a redelivery of chunk i-1.
			batch := []protocol.LogChunk{chunk(int64(i+1), fmt.Sprintf("line %02d\n", i))}
			if i > 0 {
				batch = append(batch, chunk(int64(i), fmt.Sprintf("line %02d\n", i-1)))
			}
			if err := stores[i%len(stores)].AppendLogs(context.Background(), "t1", 1, batch, LogCap{}); err != nil {
				t.Errorf("append %d: %v", i, err)
			}
		})
		got := readAll(t, stores[0], "t1")
		if len(got) != n {
			t.Fatalf("%d chunks stored, want %d", len(got), n)
		}
		for i, c := range got {
			if want := fmt.Sprintf("line %02d\n", i); c.Chunk.Data != want || c.Chunk.Seq != int64(i+1) {
				t.Errorf("chunk %d = %d %q, want %d %q", i, c.Chunk.Seq, c.Chunk.Data, i+1, want)
			}
		}
		if got := logCounters(t, stores[0], "t1"); got != fmt.Sprintf("bytes=%d omitted=0", n*8) {
			t.Errorf("counters %s", got)
		}
	})
}

// TestCleanText covers what cannot go into a PostgreSQL TEXT value.
func TestCleanText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"plain ✓", "plain ✓"},
		{"a\x00b", "a\uFFFDb"},
		{"\x00\x00", "\uFFFD\uFFFD"},
		{"bad \xff\xfe utf-8", "bad \uFFFD utf-8"},
		{"\x00\xff", "\uFFFD\uFFFD"},
	} {
		if got := cleanText(tt.in); got != tt.want {
			t.Errorf("cleanText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestNULAndInvalidUTF8 stores text with NUL bytes and invalid UTF-8 in log
// data and in error messages: both backends store U+FFFD for them.
func TestNULAndInvalidUTF8(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("t1", "acc1", t0))
		mustClaim(t, s, "t1", "i1", t0)
		if err := s.AppendLogs(ctx, "t1", 1, chunks(1, "a\x00b", "\xffc\n", "\x00"), LogCap{}); err != nil {
			t.Fatal(err)
		}
		want := []StoredChunk{
			storedChunk(1, chunk(1, "a\uFFFDb")), storedChunk(1, chunk(2, "\uFFFDc\n")), storedChunk(1, chunk(3, "\uFFFD")),
		}
		if diff := cmp.Diff(want, readAll(t, s, "t1")); diff != "" {
			t.Errorf("ReadLogs (-want +got):\n%s", diff)
		}
		if got := logCounters(t, s, "t1"); got != "bytes=13 omitted=0" {
			t.Errorf("counters %s (sizes count the bytes stored)", got)
		}

		done, err := s.CompleteTask(ctx, "t1", 1, Result{Status: protocol.StatusFailed, Error: "boom\x00\xff"}, at(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if done.Error != "boom\uFFFD\uFFFD" || mustGet(t, s, "acc1", "t1").Error != done.Error {
			t.Errorf("Error returned %q, stored %q", done.Error, mustGet(t, s, "acc1", "t1").Error)
		}

		err = s.RecordCapabilities(ctx, []CapabilityResult{{InstanceID: "i1", Criteria: "https://x", Error: "no\x00route",
			CheckedAt: t0, ExpiresAt: at(time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
		caps, err := s.LiveCapabilities(ctx, "", t0)
		if err != nil || len(caps) != 1 || caps[0].Error != "no\uFFFDroute" {
			t.Errorf("LiveCapabilities = %+v, %v", caps, err)
		}
	})
}

// TestOpenPostgres checks the pool and session of a PostgreSQL store and
// both URL schemes.
func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	dsn := postgresBackend.newDSN(t)
	ctx := context.Background()
	s := openAt(t, dsn)
	if s.dialect != dialectPostgres || s.reader != s.writer {
		t.Errorf("dialect %v, one pool %v", s.dialect, s.reader == s.writer)
	}
	if got := s.writer.Stats().MaxOpenConnections; got != defaultPoolSize {
		t.Errorf("pool size %d, want %d", got, defaultPoolSize)
	}
	var app string
	if err := s.reader.QueryRowContext(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil || app != "legate" {
		t.Errorf("application_name = %q, %v", app, err)
	}

	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme = "postgresql"
	q := u.Query()
	q.Set("pool_max_conns", "3")
	q.Set("application_name", "other")
	u.RawQuery = q.Encode()
	s2 := openAt(t, u.String())
	if got := s2.writer.Stats().MaxOpenConnections; got != 3 {
		t.Errorf("pool_max_conns=3: pool size %d", got)
	}
	if err := s2.reader.QueryRowContext(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil || app != "other" {
		t.Errorf("application_name = %q, %v", app, err)
	}
	if err := s2.CreateAccount(ctx, Account{ID: "acc", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAccount(ctx, "acc"); err != nil {
		t.Errorf("the two handles see different databases: %v", err)
	}
}

// TestWriteRetriesDeadlock makes two write transactions deadlock on
// PostgreSQL: the one the server aborts runs again and both succeed.
//
// The test decides when the aborted transaction runs again: once the other
// one has committed. Left to the scheduler, its retry can take its first
// row back before the survivor (woken by the abort, on a busy machine not
// at once) gets to that row; the two then deadlock a second time and the
// count of attempts depends on the scheduling.
func TestWriteRetriesDeadlock(t *testing.T) {
	t.Parallel()
	s := postgresBackend.open(t)
	ctx := context.Background()
	for _, k := range []string{"a", "b"} {
		if _, err := s.SettingOrInit(ctx, k, "0"); err != nil {
			t.Fatal(err)
		}
	}
	var attempts atomic.Int32
	var locked sync.WaitGroup
	locked.Add(2)
	update := func(tx *sql.Tx, key string) error {
		_, err := s.w(tx).exec(ctx, `UPDATE settings SET value = value || '+' WHERE key = ?`, key)
		return err
	}
	errs := make([]error, 2)
	done := []chan struct{}{make(chan struct{}), make(chan struct{})}
	// Should the server abort both (it aborts one per deadlock), each retry
	// would wait for the other: give up instead of hanging.
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	race(2, func(i int) {
		defer close(done[i])
		first, second := "a", "b"
		if i == 1 {
			first, second = "b", "a"
		}
		tries := 0
		errs[i] = s.write(ctx, func(tx *sql.Tx) error {
			tries++
			attempts.Add(1)
			if tries > 1 {
				select {
				case <-done[1-i]:
				case <-waitCtx.Done():
					return fmt.Errorf("retry %d waits for the other transaction to end: %w", tries, waitCtx.Err())
				}
			}
			if err := update(tx, first); err != nil {
				return err
			}
			if tries == 1 {
				locked.Done()
				locked.Wait() // both hold their first row: a deadlock follows
			}
			return update(tx, second)
		})
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("transaction %d: %v", i, err)
		}
	}
	if n := attempts.Load(); n != 3 {
		t.Errorf("%d attempts, want 3 (one retry)", n)
	}
	for _, k := range []string{"a", "b"} {
		if v, err := s.SettingOrInit(ctx, k, ""); err != nil || v != "0++" {
			t.Errorf("%s = %q, %v; want 0++", k, v, err)
		}
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{fmt.Errorf("chunk 3: %w", &pgconn.PgError{Code: "40P01"}), true},
		{&pgconn.PgError{Code: "23505"}, false},
		{ErrConflict, false},
		{errors.New(strings.Repeat("40001", 2)), false},
	} {
		if got := retryable(tt.err); got != tt.want {
			t.Errorf("retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
