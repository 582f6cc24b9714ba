package store

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// attemptRow is the task_log_attempts row of an attempt, as text.
func attemptRow(t *testing.T, s *Store, id string, attempt int) string {
	t.Helper()
	var st attemptState
	err := s.reader.QueryRowContext(context.Background(), s.rebind(`SELECT received_bytes, stored_bytes, omitted_bytes,
	head_bytes, max_seq, first_dropped_seq, last_dropped_seq, first_dropped_ts
	FROM task_log_attempts WHERE task_id = ? AND attempt = ?`), id, attempt).
		Scan(&st.received, &st.stored, &st.omitted, &st.headBytes, &st.maxSeq, &st.firstDropped, &st.lastDropped, &st.firstDroppedTS)
	if err == sql.ErrNoRows {
		return "none"
	}
	if err != nil {
		t.Fatal(err)
	}
	null := func(n sql.NullInt64) string {
		if !n.Valid {
			return "-"
		}
		return fmt.Sprint(n.Int64)
	}
	if st.firstDroppedTS.Valid {
		st.firstDroppedTS.Int64 -= micros(t0)
	}
	return fmt.Sprintf("received=%d stored=%d omitted=%d head=%d max=%d dropped=%s..%s@%s",
		st.received, st.stored, st.omitted, st.headBytes, st.maxSeq, null(st.firstDropped), null(st.lastDropped), null(st.firstDroppedTS))
}

// logState is everything an append leaves of a task's output: what a
// reader sees, the task's counters, the attempt's row.
func logState(t *testing.T, s *Store, id string) string {
	t.Helper()
	var b strings.Builder
	for _, c := range readAll(t, s, id) {
		fmt.Fprintf(&b, "%d/%d@%d %q\n", c.Attempt, c.Chunk.Seq, c.Chunk.Time.UnixMicro(), c.Chunk.Data)
	}
	fmt.Fprintf(&b, "%s\n%s\n", logCounters(t, s, id), attemptRow(t, s, id, 1))
	return b.String()
}

// appendEachWay appends as the store did before appendFresh: every new
// chunk stored, then the cap deletes.
func appendEachWay(t *testing.T, s *Store, id string, chunks []protocol.LogChunk, cap LogCap) {
	t.Helper()
	err := s.write(context.Background(), func(tx *sql.Tx) error {
		return s.appendLogs(context.Background(), tx, id, 1, chunks, cap, false)
	})
	if err != nil {
		t.Fatalf("append (each) to %s: %v", id, err)
	}
}

// writes is how many rows the SQLite store's writer connection has
// inserted, updated or deleted so far.
func writes(t *testing.T, s *Store) int64 {
	t.Helper()
	var n int64
	if err := s.writer.QueryRowContext(context.Background(), `SELECT total_changes()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCleanLen(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "abc", "a\x00b", "\x00\x00", "\xff", "\xff\xfe", "a\xffb\xfec", "é€😀",
		"\xe2\x82", "\xe2\x82\x00\xff", "\uFFFD", "\xed\xa0\x80", "ab\xf0\x9f\x98"} {
		n, clean := cleanLen(s)
		if want := cleanText(s); n != len(want) || clean != (want == s) {
			t.Errorf("cleanLen(%q) = %d, %v; cleanText gives %d bytes (%q)", s, n, clean, len(want), want)
		}
	}
}

// FuzzCleanLen holds cleanLen to the length of cleanText.
func FuzzCleanLen(f *testing.F) {
	for _, s := range []string{"", "a\x00b", "\xff\xfe", "é€😀", "\xe2\x82\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, clean := cleanLen(s)
		if want := cleanText(s); n != len(want) || clean != (want == s) {
			t.Fatalf("cleanLen(%q) = %d, %v; cleanText gives %d bytes", s, n, clean, len(want))
		}
	})
}

// TestAppendLogsSkipsWhatTheCapDrops: an append carrying more than the
// tail stores only the chunks the cap keeps, with the same result as
// storing all and deleting.
func TestAppendLogsSkipsWhatTheCapDrops(t *testing.T) {
	t.Parallel()
	cap := LogCap{Head: 10, Tail: 10}
	bad := "\xff\x00\xfe" // 3 bytes received, 9 stored (U+FFFD, U+FFFD, U+FFFD... see cleanText)
	tests := []struct {
		name    string
		batches [][]protocol.LogChunk
		want    []StoredChunk
		counts  string
		row     string
		// rows written by the last append (SQLite): inserts, deletes and
		// the two counter updates.
		lastWrites int64
	}{{
		name: "one append over the tail",
		batches: [][]protocol.LogChunk{chunks(1,
			"0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010")},
		want: []StoredChunk{
			storedChunk(1, chunk(1, "0001")), storedChunk(1, chunk(2, "0002")), storedChunk(1, chunk(3, "0003")),
			marker(1, 4, 20), storedChunk(1, chunk(9, "0009")), storedChunk(1, chunk(10, "0010")),
		},
		counts:     "bytes=40 omitted=20",
		row:        "received=40 stored=20 omitted=20 head=12 max=10 dropped=4..8@4000000",
		lastWrites: 5 + 2, // 5 inserted; the attempt row inserted, the task updated
	}, {
		name: "stored tail dropped with the oldest new chunks",
		batches: [][]protocol.LogChunk{
			chunks(1, "0001", "0002", "0003", "0004", "0005"),
			chunks(6, "0006", "0007", "0008", "0009", "0010", "0011"),
		},
		want: []StoredChunk{
			storedChunk(1, chunk(1, "0001")), storedChunk(1, chunk(2, "0002")), storedChunk(1, chunk(3, "0003")),
			marker(1, 4, 24), storedChunk(1, chunk(10, "0010")), storedChunk(1, chunk(11, "0011")),
		},
		counts:     "bytes=44 omitted=24",
		row:        "received=44 stored=20 omitted=24 head=12 max=11 dropped=4..9@4000000",
		lastWrites: 2 + 2 + 2, // 4, 5 deleted; 10, 11 inserted; two updates
	}, {
		name: "dropped range grows from an earlier one",
		batches: [][]protocol.LogChunk{
			chunks(1, "0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010"),
			chunks(11, "0011", "0012", "0013", "0014"),
		},
		want: []StoredChunk{
			storedChunk(1, chunk(1, "0001")), storedChunk(1, chunk(2, "0002")), storedChunk(1, chunk(3, "0003")),
			marker(1, 4, 36), storedChunk(1, chunk(13, "0013")), storedChunk(1, chunk(14, "0014")),
		},
		counts:     "bytes=56 omitted=36",
		row:        "received=56 stored=20 omitted=36 head=12 max=14 dropped=4..12@4000000",
		lastWrites: 2 + 2 + 2,
	}, {
		name: "sizes of dropped chunks count as stored",
		batches: [][]protocol.LogChunk{
			chunks(1, "0001", "0002", "0003", bad, "0005", "0006", "0007"),
		},
		want: []StoredChunk{
			storedChunk(1, chunk(1, "0001")), storedChunk(1, chunk(2, "0002")), storedChunk(1, chunk(3, "0003")),
			marker(1, 4, 13), storedChunk(1, chunk(6, "0006")), storedChunk(1, chunk(7, "0007")),
		},
		counts:     "bytes=33 omitted=13",
		row:        "received=33 stored=20 omitted=13 head=12 max=7 dropped=4..5@4000000",
		lastWrites: 5 + 2,
	}, {
		name: "newest chunk stays, however large",
		batches: [][]protocol.LogChunk{
			chunks(1, "0001", "0002", "0003", "0004", strings.Repeat("z", 30)),
		},
		want: []StoredChunk{
			storedChunk(1, chunk(1, "0001")), storedChunk(1, chunk(2, "0002")), storedChunk(1, chunk(3, "0003")),
			marker(1, 4, 4), storedChunk(1, chunk(5, strings.Repeat("z", 30))),
		},
		counts:     "bytes=46 omitted=4",
		row:        "received=46 stored=42 omitted=4 head=12 max=5 dropped=4..4@4000000",
		lastWrites: 4 + 2,
	}, {
		name: "out of order and numbered twice within the append",
		batches: [][]protocol.LogChunk{
			{chunk(1, "0001"), chunk(2, "0002"), chunk(3, "0003"), chunk(7, "0007"), chunk(4, "0004"),
				chunk(6, "0006"), chunk(4, "XXXX"), chunk(5, "0005"), chunk(8, "0008")},
		},
		want: []StoredChunk{
			storedChunk(1, chunk(1, "0001")), storedChunk(1, chunk(2, "0002")), storedChunk(1, chunk(3, "0003")),
			marker(1, 4, 12), storedChunk(1, chunk(7, "0007")), storedChunk(1, chunk(8, "0008")),
		},
		counts:     "bytes=32 omitted=12",
		row:        "received=32 stored=20 omitted=12 head=12 max=8 dropped=4..6@4000000",
		lastWrites: 5 + 2,
	}}
	for _, b := range backends {
		for _, tt := range tests {
			t.Run(b.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				s := b.open(t)
				ctx := context.Background()
				mustCreate(t, s, newTask("skip", "acc1", t0), newTask("each", "acc1", t0))
				mustClaim(t, s, "skip", "i1", t0)
				mustClaim(t, s, "each", "i1", t0)
				var before int64
				for i, batch := range tt.batches {
					if i == len(tt.batches)-1 && b.name == "sqlite" {
						before = writes(t, s)
					}
					if err := s.AppendLogs(ctx, "skip", 1, batch, cap); err != nil {
						t.Fatal(err)
					}
					if i == len(tt.batches)-1 && b.name == "sqlite" {
						if got := writes(t, s) - before; got != tt.lastWrites {
							t.Errorf("the last append wrote %d rows, want %d", got, tt.lastWrites)
						}
					}
					appendEachWay(t, s, "each", batch, cap)
				}
				if diff := cmp.Diff(tt.want, readAll(t, s, "skip")); diff != "" {
					t.Errorf("ReadLogs (-want +got):\n%s", diff)
				}
				if got := logCounters(t, s, "skip"); got != tt.counts {
					t.Errorf("counters %s, want %s", got, tt.counts)
				}
				if got := attemptRow(t, s, "skip", 1); got != tt.row {
					t.Errorf("attempt %s\nwant    %s", got, tt.row)
				}
				if diff := cmp.Diff(logState(t, s, "each"), logState(t, s, "skip")); diff != "" {
					t.Errorf("skipping differs from storing each (-each +skip):\n%s", diff)
				}

				// Every chunk again: duplicates, the dropped ones too.
				for _, batch := range tt.batches {
					if err := s.AppendLogs(ctx, "skip", 1, batch, cap); err != nil {
						t.Fatal(err)
					}
				}
				if got := logCounters(t, s, "skip"); got != tt.counts {
					t.Errorf("after redelivery: counters %s, want %s", got, tt.counts)
				}
				if diff := cmp.Diff(tt.want, readAll(t, s, "skip")); diff != "" {
					t.Errorf("after redelivery: ReadLogs (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// logScenario is a random output of one attempt and the appends that
// deliver it.
type logScenario struct {
	cap     LogCap
	batches [][]protocol.LogChunk
	// ordered: every new chunk is numbered past every chunk before it, so
	// storing the chunks one at a time gives the same result as appending
	// the batches (out of order, an append that fills a gap may differ:
	// a chunk dropped by one append is no longer in the range of the next).
	ordered bool
}

func randomScenario(rng *rand.Rand) logScenario {
	caps := []int64{0, 3, 5, 10, 17, 40}
	sc := logScenario{cap: LogCap{Head: caps[rng.IntN(len(caps))], Tail: caps[rng.IntN(len(caps))]}}
	pieces := []string{"a", "bc", "def", "ghij", "klmno", "\x00", "\xff", "é", "€", "\xe2\x82", "0123456789"}
	sc.ordered = rng.IntN(3) > 0
	var all []protocol.LogChunk
	for seq := int64(1); seq <= int64(1+rng.IntN(40)); seq++ {
		var b strings.Builder
		// Empty chunks (a delegate sends none) only out of order: with
		// them, storing one chunk at a time may differ from appending
		// several (an append drops empty chunks while stored > limit).
		pieces0 := 0
		if sc.ordered {
			pieces0 = 1
		}
		for range pieces0 + rng.IntN(4) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		all = append(all, protocol.LogChunk{Seq: seq, Time: at(time.Duration(seq) * time.Millisecond), Data: b.String()})
	}
	var late [][]protocol.LogChunk
	for next := 0; next < len(all); {
		n := 1 + rng.IntN(12)
		batch := append([]protocol.LogChunk(nil), all[next:min(next+n, len(all))]...)
		switch {
		case rng.IntN(5) == 0 && next > 0:
			// A redelivery: chunks delivered before, and maybe new ones.
			from := rng.IntN(next)
			batch = append([]protocol.LogChunk(nil), all[from:min(from+n, len(all))]...)
			next = max(next, min(from+n, len(all)))
		case !sc.ordered && rng.IntN(3) == 0:
			rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
			if len(batch) > 1 && rng.IntN(2) == 0 {
				batch = append(batch, batch[rng.IntN(len(batch))]) // numbered twice
			}
			next += len(batch)
			next = min(next, len(all))
		default:
			next += len(batch)
		}
		if !sc.ordered && len(batch) > 2 && rng.IntN(4) == 0 {
			// Hold a chunk back: it fills the gap in a later append.
			i := rng.IntN(len(batch))
			held := batch[i]
			batch = append(batch[:i:i], batch[i+1:]...)
			late = append(late, []protocol.LogChunk{held})
		}
		sc.batches = append(sc.batches, batch)
	}
	sc.batches = append(sc.batches, late...)
	return sc
}

// TestAppendLogsSkipMatchesEach holds appends that skip what the cap
// drops to the appends that store every chunk and then delete (the store
// before them) on random outputs, caps and deliveries (redeliveries, out
// of order, numbered twice, gaps filled late), and, where the chunks come
// in order, to storing the chunks one at a time.
func TestAppendLogsSkipMatchesEach(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 18))
		scenarios := 150
		if testing.Short() {
			scenarios = 30
		}
		for n := range scenarios {
			sc := randomScenario(rng)
			ids := [3]string{fmt.Sprintf("s%d-skip", n), fmt.Sprintf("s%d-each", n), fmt.Sprintf("s%d-one", n)}
			for _, id := range ids {
				mustCreate(t, s, newTask(id, "acc1", t0))
				mustClaim(t, s, id, "i1", t0)
			}
			for _, batch := range sc.batches {
				if err := s.AppendLogs(ctx, ids[0], 1, batch, sc.cap); err != nil {
					t.Fatal(err)
				}
				appendEachWay(t, s, ids[1], batch, sc.cap)
				if sc.ordered {
					for _, c := range batch {
						if err := s.AppendLogs(ctx, ids[2], 1, []protocol.LogChunk{c}, sc.cap); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			skip, each := logState(t, s, ids[0]), logState(t, s, ids[1])
			if diff := cmp.Diff(each, skip); diff != "" {
				t.Fatalf("scenario %d (cap %+v, %d appends %v): skipping differs from storing each (-each +skip):\n%s",
					n, sc.cap, len(sc.batches), seqs(sc.batches), diff)
			}
			if sc.ordered {
				if diff := cmp.Diff(logState(t, s, ids[2]), skip); diff != "" {
					t.Fatalf("scenario %d (cap %+v, appends %v): appends differ from one chunk at a time (-one +appends):\n%s",
						n, sc.cap, seqs(sc.batches), diff)
				}
			}
		}
	})
}

func seqs(batches [][]protocol.LogChunk) [][]int64 {
	var out [][]int64
	for _, b := range batches {
		var s []int64
		for _, c := range b {
			s = append(s, c.Seq)
		}
		out = append(out, s)
	}
	return out
}

// TestMigrationCountsHeadBytes: migration 0020 fills head_bytes of the
// attempts stored before it.
func TestMigrationCountsHeadBytes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("t1", "acc1", t0))
		mustClaim(t, s, "t1", "i1", t0)
		if err := s.AppendLogs(ctx, "t1", 1, chunks(1, "0001", "0002", "0003", "0004", "0005", "0006"), LogCap{Head: 10, Tail: 4}); err != nil {
			t.Fatal(err)
		}
		want := attemptRow(t, s, "t1", 1)
		body, err := migrationFS.ReadFile("migrations/0020_log_skip.sql")
		if err != nil {
			t.Fatal(err)
		}
		start := strings.Index(string(body), "UPDATE task_log_attempts")
		end := strings.Index(string(body), "CREATE INDEX")
		if start < 0 || end < start {
			t.Fatal("migration 0020 has no UPDATE before its index")
		}
		if _, err := s.writer.ExecContext(ctx, `UPDATE task_log_attempts SET head_bytes = 0`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.writer.ExecContext(ctx, string(body[start:end])); err != nil {
			t.Fatal(err)
		}
		if got := attemptRow(t, s, "t1", 1); got != want || !strings.Contains(got, "head=12") {
			t.Errorf("after the migration: %s, want %s (head=12)", got, want)
		}
	})
}
