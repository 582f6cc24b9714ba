package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func chunk(seq int64, data string) protocol.LogChunk {
	return protocol.LogChunk{Seq: seq, Time: at(time.Duration(seq) * time.Second), Data: data}
}

// chunks numbers each piece of data from first on.
func chunks(first int64, data ...string) []protocol.LogChunk {
	var out []protocol.LogChunk
	for i, d := range data {
		out = append(out, chunk(first+int64(i), d))
	}
	return out
}

func storedChunk(attempt int, c protocol.LogChunk) StoredChunk {
	c.Attempt = attempt
	return StoredChunk{Attempt: attempt, Chunk: c}
}

func marker(attempt int, seq, omitted int64) StoredChunk {
	return storedChunk(attempt, chunk(seq, fmt.Sprintf("\n[legate: %d bytes of output omitted here: a task's stored output keeps its first and last 4 MiB]\n", omitted)))
}

func readAll(t *testing.T, s *Store, id string) []StoredChunk {
	t.Helper()
	got, err := s.ReadLogs(context.Background(), id, LogCursor{}, 0)
	if err != nil {
		t.Fatalf("ReadLogs(%s): %v", id, err)
	}
	return got
}

func logCounters(t *testing.T, s *Store, id string) string {
	t.Helper()
	task := mustGet(t, s, "acc1", id)
	return fmt.Sprintf("bytes=%d omitted=%d", task.LogBytes, task.LogOmitted)
}

func TestAppendLogs(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("t1", "acc1", t0), newTask("queued", "acc1", t0))
		mustClaim(t, s, "t1", "i1", t0)
		noCap := LogCap{}

		if err := s.AppendLogs(ctx, "t1", 1, chunks(1, "a", "bb", "ccc"), noCap); err != nil {
			t.Fatal(err)
		}
		// Redelivery overlapping what is stored: only seq 4 is new.
		if err := s.AppendLogs(ctx, "t1", 1, chunks(2, "XX", "YYY", "dddd"), noCap); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendLogs(ctx, "t1", 1, nil, noCap); err != nil {
			t.Fatal(err)
		}
		want := []StoredChunk{
			storedChunk(1, chunk(1, "a")), storedChunk(1, chunk(2, "bb")),
			storedChunk(1, chunk(3, "ccc")), storedChunk(1, chunk(4, "dddd")),
		}
		if diff := cmp.Diff(want, readAll(t, s, "t1")); diff != "" {
			t.Errorf("ReadLogs (-want +got):\n%s", diff)
		}
		if got := logCounters(t, s, "t1"); got != "bytes=10 omitted=0" {
			t.Errorf("counters %s", got)
		}

		tests := []struct {
			name    string
			id      string
			epoch   int64
			wantErr error
		}{
			{"future epoch", "t1", 2, ErrStaleLease},
			{"epoch zero", "t1", 0, ErrStaleLease},
			{"queued task", "queued", 0, ErrStaleLease},
			{"unknown task", "nope", 1, ErrNotFound},
		}
		for _, tt := range tests {
			err := s.AppendLogs(ctx, tt.id, tt.epoch, chunks(10, "x"), noCap)
			wantErr(t, tt.name, err, tt.wantErr)
		}

		// Terminal within the same epoch: the tail of the output the result
		// counts still arrives (see TestLogClosedByResult for what it does not count).
		if _, err := s.CompleteTask(ctx, "t1", 1, Result{Status: protocol.StatusSucceeded, LastSeq: 5}, at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendLogs(ctx, "t1", 1, chunks(5, "e"), noCap); err != nil {
			t.Fatalf("append after the result: %v", err)
		}
		if got := logCounters(t, s, "t1"); got != "bytes=11 omitted=0" {
			t.Errorf("counters %s", got)
		}
	})
}

func TestAppendLogsLostDelegate(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		task := newTask("t1", "acc1", t0)
		task.Retries = 1
		mustCreate(t, s, task)
		mustClaim(t, s, "t1", "i1", t0)
		if _, err := s.ExpireLeases(ctx, at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "requeued task", s.AppendLogs(ctx, "t1", 1, chunks(1, "x"), LogCap{}), ErrStaleLease)
		if _, err := s.FinishTask(ctx, "acc1", "t1", Result{Status: protocol.StatusCancelled}, at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		// Cancelled while queued at epoch 1: the lost delegate still holds no lease.
		wantErr(t, "cancelled after requeue", s.AppendLogs(ctx, "t1", 1, chunks(1, "x"), LogCap{}), ErrStaleLease)
		_, err := s.CompleteTask(ctx, "t1", 1, Result{Status: protocol.StatusSucceeded}, at(time.Hour))
		wantErr(t, "result after requeue and cancel", err, ErrStaleLease)
	})
}

func TestLogCap(t *testing.T) {
	t.Parallel()
	// Head 10, Tail 10, ten 4-byte chunks: seq 1-3 start before byte 10
	// (seq 3 straddles the boundary and is kept whole); of seq 4-10 the
	// oldest are dropped until 20 bytes remain: 4-8 go, 9 and 10 stay.
	cap := LogCap{Head: 10, Tail: 10}
	data := []string{"0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010"}
	for _, b := range backends {
		for _, batch := range []int{1, 3, 10} {
			t.Run(fmt.Sprintf("%s/batch%d", b.name, batch), func(t *testing.T) {
				t.Parallel()
				s := b.open(t)
				ctx := context.Background()
				mustCreate(t, s, newTask("t1", "acc1", t0))
				mustClaim(t, s, "t1", "i1", t0)
				all := chunks(1, data...)
				for i := 0; i < len(all); i += batch {
					if err := s.AppendLogs(ctx, "t1", 1, all[i:min(i+batch, len(all))], cap); err != nil {
						t.Fatal(err)
					}
				}
				want := []StoredChunk{
					storedChunk(1, all[0]), storedChunk(1, all[1]), storedChunk(1, all[2]),
					marker(1, 4, 20),
					storedChunk(1, all[8]), storedChunk(1, all[9]),
				}
				if diff := cmp.Diff(want, readAll(t, s, "t1")); diff != "" {
					t.Errorf("ReadLogs (-want +got):\n%s", diff)
				}
				if got := logCounters(t, s, "t1"); got != "bytes=40 omitted=20" {
					t.Errorf("counters %s", got)
				}

				// Redelivered dropped (5) and stored (2) chunks are ignored; 11
				// pushes 9 out and the marker grows.
				if err := s.AppendLogs(ctx, "t1", 1, []protocol.LogChunk{chunk(5, "0005"), chunk(2, "0002"), chunk(11, "0011")}, cap); err != nil {
					t.Fatal(err)
				}
				want = []StoredChunk{
					storedChunk(1, all[0]), storedChunk(1, all[1]), storedChunk(1, all[2]),
					marker(1, 4, 24),
					storedChunk(1, all[9]), storedChunk(1, chunk(11, "0011")),
				}
				if diff := cmp.Diff(want, readAll(t, s, "t1")); diff != "" {
					t.Errorf("ReadLogs after 11 (-want +got):\n%s", diff)
				}
				if got := logCounters(t, s, "t1"); got != "bytes=44 omitted=24" {
					t.Errorf("counters %s", got)
				}

				// A chunk bigger than the tail: everything older that is not head
				// goes, the newest chunk stays whole.
				big := strings.Repeat("z", 30)
				if err := s.AppendLogs(ctx, "t1", 1, []protocol.LogChunk{chunk(12, big)}, cap); err != nil {
					t.Fatal(err)
				}
				want = []StoredChunk{
					storedChunk(1, all[0]), storedChunk(1, all[1]), storedChunk(1, all[2]),
					marker(1, 4, 32),
					storedChunk(1, chunk(12, big)),
				}
				if diff := cmp.Diff(want, readAll(t, s, "t1")); diff != "" {
					t.Errorf("ReadLogs after a big chunk (-want +got):\n%s", diff)
				}
				if got := logCounters(t, s, "t1"); got != "bytes=74 omitted=32" {
					t.Errorf("counters %s", got)
				}
			})
		}
	}
}

func TestLogCapUnlimitedAndTailOnly(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		mustCreate(t, s, newTask("unlimited", "acc1", t0), newTask("tail", "acc1", t0))
		mustClaim(t, s, "unlimited", "i1", t0)
		mustClaim(t, s, "tail", "i1", t0)
		var many []string
		for i := range 300 {
			many = append(many, fmt.Sprintf("line %03d\n", i)) // 9 bytes each
		}
		if err := s.AppendLogs(ctx, "unlimited", 1, chunks(1, many...), LogCap{}); err != nil {
			t.Fatal(err)
		}
		if got := len(readAll(t, s, "unlimited")); got != 300 {
			t.Errorf("unlimited: %d chunks stored, want 300", got)
		}
		// Tail only, more dropped chunks than one page of the eviction query.
		if err := s.AppendLogs(ctx, "tail", 1, chunks(1, many...), LogCap{Tail: 18}); err != nil {
			t.Fatal(err)
		}
		want := []StoredChunk{
			marker(1, 1, 298*9),
			storedChunk(1, chunk(299, many[298])), storedChunk(1, chunk(300, many[299])),
		}
		if diff := cmp.Diff(want, readAll(t, s, "tail")); diff != "" {
			t.Errorf("tail only (-want +got):\n%s", diff)
		}
		if got := logCounters(t, s, "tail"); got != "bytes=2700 omitted=2682" {
			t.Errorf("counters %s", got)
		}
	})
}

func TestReadLogsPaging(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		task := newTask("t1", "acc1", t0)
		task.Retries = 1
		mustCreate(t, s, task)

		// Attempt 1: head 1-2, 3-4 dropped, tail 5-6; then the delegate is lost.
		mustClaim(t, s, "t1", "i1", t0)
		a1 := chunks(1, "a1", "a2", "a3", "a4", "a5", "a6")
		if err := s.AppendLogs(ctx, "t1", 1, a1, LogCap{Head: 4, Tail: 4}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ExpireLeases(ctx, at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		// Attempt 2 on another delegate.
		mustClaim(t, s, "t1", "i2", at(time.Hour))
		a2 := chunks(1, "b1", "b2", "b3")
		if err := s.AppendLogs(ctx, "t1", 2, a2, LogCap{Head: 4, Tail: 4}); err != nil {
			t.Fatal(err)
		}
		// Attempt 1 is over: its delegate's late chunks are refused.
		wantErr(t, "late chunk of attempt 1", s.AppendLogs(ctx, "t1", 1, chunks(7, "a7"), LogCap{}), ErrStaleLease)

		full := []StoredChunk{
			storedChunk(1, a1[0]), storedChunk(1, a1[1]), marker(1, 3, 4),
			storedChunk(1, a1[4]), storedChunk(1, a1[5]),
			storedChunk(2, a2[0]), storedChunk(2, a2[1]), storedChunk(2, a2[2]),
		}
		if diff := cmp.Diff(full, readAll(t, s, "t1")); diff != "" {
			t.Fatalf("ReadLogs (-want +got):\n%s", diff)
		}
		if got := logCounters(t, s, "t1"); got != "bytes=18 omitted=4" {
			t.Errorf("counters %s", got)
		}

		for _, limit := range []int{1, 2, 3, 7} {
			var got []StoredChunk
			var cur LogCursor
			for pages := 0; ; pages++ {
				if pages > len(full)+1 {
					t.Fatalf("limit %d: paging does not end", limit)
				}
				page, err := s.ReadLogs(ctx, "t1", cur, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > limit {
					t.Fatalf("limit %d: page of %d", limit, len(page))
				}
				if len(page) == 0 {
					break
				}
				got = append(got, page...)
				last := page[len(page)-1]
				cur = LogCursor{Attempt: last.Attempt, Seq: last.Chunk.Seq}
			}
			if diff := cmp.Diff(full, got); diff != "" {
				t.Errorf("limit %d: pages (-want +got):\n%s", limit, diff)
			}
		}

		cursors := []struct {
			cur  LogCursor
			want []StoredChunk
		}{
			{LogCursor{Attempt: 1, Seq: 2}, full[2:]},
			{LogCursor{Attempt: 1, Seq: 3}, full[3:]},
			{LogCursor{Attempt: 1, Seq: 6}, full[5:]},
			{LogCursor{Attempt: 2, Seq: 1}, full[6:]},
			{LogCursor{Attempt: 2, Seq: 3}, nil},
			{LogCursor{Attempt: 9, Seq: 0}, nil},
		}
		for _, tt := range cursors {
			got, err := s.ReadLogs(ctx, "t1", tt.cur, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, equateEmpty); diff != "" {
				t.Errorf("after %+v (-want +got):\n%s", tt.cur, diff)
			}
		}
		if got, err := s.ReadLogs(ctx, "nope", LogCursor{}, 0); err != nil || len(got) != 0 {
			t.Errorf("ReadLogs of an unknown task = %v, %v", got, err)
		}
	})
}
