package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/legate-dev/legate/internal/protocol"
)

// Log storage. Every chunk is a row of task_logs; task_log_attempts holds
// per-attempt counters so an append never re-scans the chunks to learn how
// much is stored:
//
//   - received_bytes: bytes accepted for the attempt (dropped ones included);
//     a chunk whose received_bytes-before-it is below cap.Head is a head
//     chunk (head = 1) and is never dropped, even if it straddles the limit;
//   - stored_bytes: bytes of the chunks still stored; head_bytes: those of
//     the head chunks among them;
//   - omitted_bytes, first_dropped_seq..last_dropped_seq, first_dropped_ts:
//     what the cap dropped. The cap drops the oldest non-head chunks, so
//     the dropped chunks form one range per attempt, which ReadLogs shows as
//     one marker chunk. A redelivered chunk whose seq lies in that range is
//     a duplicate of a dropped chunk and is ignored.
//
// The newest chunk of an attempt is never dropped while cap.Tail > 0, so the
// stored tail can exceed cap.Tail by less than one chunk.
//
// A chunk the cap drops is usually never written: an append whose new
// chunks carry more than the tail (a delegate gathers output into large
// uploads when a task writes fast) drops them before storing anything
// (appendFresh), with the same result as storing every chunk and then
// deleting what the cap drops (appendEach, which a redelivery of stored
// chunks still takes). A chunk counts as dropped only within the
// transaction that accounts for it, so the delegate's acknowledged upload
// is durable either way: stored, or recorded as omitted.

// AppendLogs stores chunks for the task's attempt at epoch (the attempt
// number equals the epoch) if the task's epoch equals epoch (running, or
// terminal within the same epoch); else ErrStaleLease (ErrNotFound for an
// unknown task). Once a delegate's result ended the task, a batch with a
// chunk numbered past the result's LastSeq is refused whole with
// ErrLogClosed (which matches ErrTaskTerminal); chunks up to it are still
// taken. A chunk whose (attempt, seq) is already stored is ignored
// (delivery is idempotent). The cap keeps the first cap.Head bytes and the
// last cap.Tail bytes of each attempt; chunks that fall between are dropped
// (deleted, or never written when the append itself shows the cap drops
// them) and their size added to LogOmitted. LogBytes counts all bytes received.
// A chunk that starts inside the head is kept whole; while cap.Tail > 0 the
// newest chunk is never dropped, so the tail may exceed cap.Tail by less
// than one chunk. A zero cap keeps everything. NUL bytes and invalid UTF-8
// in Data are stored as U+FFFD (see cleanText), and sizes count the bytes
// stored (for a dropped chunk: the bytes it would take stored).
func (s *Store) AppendLogs(ctx context.Context, taskID string, epoch int64, chunks []protocol.LogChunk, cap LogCap) error {
	if len(chunks) == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		return s.appendLogs(ctx, tx, taskID, epoch, chunks, cap, true)
	})
	if err != nil {
		return fmt.Errorf("append %d log chunks to task %s (epoch %d): %w", len(chunks), taskID, epoch, err)
	}
	return nil
}

// ReadLogs returns up to limit chunks after cursor, ordered by attempt then
// seq. Where chunks were dropped by the cap, a synthetic chunk is returned
// in their place whose Data is "\n[legate: N bytes of output omitted
// here: ...]\n" (omittedMarker) and whose Seq is that of the first
// dropped chunk. limit <= 0 means 1000 (at most 10000). An unknown task
// has no chunks.
func (s *Store) ReadLogs(ctx context.Context, taskID string, after LogCursor, limit int) ([]StoredChunk, error) {
	var out []StoredChunk
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.readLogs(ctx, tx, taskID, after, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read logs of task %s: %w", taskID, err)
	}
	return out, nil
}

// cleanText makes free text (log data, error messages) storable in a TEXT
// column of both dialects alike: PostgreSQL rejects NUL bytes and invalid
// UTF-8 in text, so both become U+FFFD, on SQLite too.
func cleanText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// cleanLen is len(cleanText(s)) without making it, and whether s is
// stored as it is (cleanText(s) == s).
func cleanLen(s string) (n int, clean bool) {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return len(s), true
	}
	const repl = len("\uFFFD")
	invalid := false // in a run of invalid bytes (one U+FFFD for the run)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			invalid = false
			if c == 0 {
				n += repl
			} else {
				n++
			}
			continue
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		if w == 1 {
			i++
			if !invalid {
				invalid = true
				n += repl
			}
			continue
		}
		invalid = false
		n += w
		i += w
	}
	return n, false
}

// Read limits of ReadLogs.
const (
	defaultLogLimit = 1000
	maxLogLimit     = 10000
)

// omittedMarker is the text of the chunk that stands for dropped output.
// It says why: the manager keeps the start and the end of a task's output
// (Config.LogCap of package manager: 4 MiB of each by default).
func omittedMarker(n int64) string {
	return fmt.Sprintf("\n[legate: %d bytes of output omitted here: a task's stored output keeps its first and last 4 MiB]\n", n)
}

type attemptState struct {
	exists                    bool
	received, stored, omitted int64
	// headBytes: bytes of the stored head chunks (never dropped), so
	// stored-headBytes is what the cap may drop.
	headBytes                 int64
	maxSeq                    int64
	firstDropped, lastDropped sql.NullInt64
	firstDroppedTS            sql.NullInt64
}

func (a *attemptState) inDropped(seq int64) bool {
	return a.firstDropped.Valid && seq >= a.firstDropped.Int64 && seq <= a.lastDropped.Int64
}

// dropRange extends the dropped range by chunk seq (taken at ts).
func (a *attemptState) dropRange(seq, ts int64) {
	if !a.firstDropped.Valid || seq < a.firstDropped.Int64 {
		a.firstDropped = sql.NullInt64{Int64: seq, Valid: true}
		a.firstDroppedTS = sql.NullInt64{Int64: ts, Valid: true}
	}
	if !a.lastDropped.Valid || seq > a.lastDropped.Int64 {
		a.lastDropped = sql.NullInt64{Int64: seq, Valid: true}
	}
}

// newChunk is a chunk of an append that is neither stored nor dropped yet.
type newChunk struct {
	c     *protocol.LogChunk
	size  int64
	clean bool // c.Data is stored as it is (see cleanLen)
	head  bool
	skip  bool // dropped by the cap before it was stored
}

// appendLogs is AppendLogs in tx. skip lets an append drop what the cap
// drops before storing it (appendFresh); without it, every new chunk is
// stored and then the cap deletes (appendEach), which tests compare with.
func (s *Store) appendLogs(ctx context.Context, tx *sql.Tx, taskID string, epoch int64, chunks []protocol.LogChunk, cap LogCap, skip bool) error {
	var t Task
	var acquired, lastSeq sql.NullInt64
	// The task row is locked (PostgreSQL) for the read-modify-write of the
	// attempt's counters below: appends for one task (a delegate's retry
	// may reach another manager) run one after the other, and after the
	// result that closes the log.
	err := s.w(tx).queryRow(ctx, `SELECT epoch, status, acquired_at, result_last_seq FROM tasks WHERE id = ?`+s.lockClause("FOR UPDATE"), taskID).
		Scan(&t.Epoch, &t.Status, &acquired, &lastSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	t.AcquiredAt = fromNullMicros(acquired)
	if !heldAt(t, epoch) {
		return ErrStaleLease
	}
	if lastSeq.Valid {
		// The result closed the log: late chunks it counted are taken
		// (stored once, like any redelivery), chunks past it are not.
		for _, c := range chunks {
			if c.Seq > lastSeq.Int64 {
				return ErrLogClosed
			}
		}
	}
	attempt := epoch

	var st attemptState
	err = s.w(tx).queryRow(ctx, `SELECT received_bytes, stored_bytes, omitted_bytes, head_bytes, max_seq,
	first_dropped_seq, last_dropped_seq, first_dropped_ts
	FROM task_log_attempts WHERE task_id = ? AND attempt = ?`, taskID, attempt).
		Scan(&st.received, &st.stored, &st.omitted, &st.headBytes, &st.maxSeq, &st.firstDropped, &st.lastDropped, &st.firstDroppedTS)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	default:
		st.exists = true
	}

	var added, dropped int64
	var changed bool
	if fresh, ok := freshChunks(&st, chunks); skip && ok {
		added, dropped, changed, err = s.appendFresh(ctx, tx, taskID, attempt, &st, fresh, cap)
	} else {
		added, dropped, changed, err = s.appendEach(ctx, tx, taskID, attempt, &st, chunks, cap)
	}
	if err != nil || !changed {
		return err // !changed: all duplicates
	}

	if st.exists {
		_, err = s.w(tx).exec(ctx, `UPDATE task_log_attempts SET received_bytes = ?, stored_bytes = ?,
	omitted_bytes = ?, head_bytes = ?, max_seq = ?, first_dropped_seq = ?, last_dropped_seq = ?, first_dropped_ts = ?
	WHERE task_id = ? AND attempt = ?`,
			st.received, st.stored, st.omitted, st.headBytes, st.maxSeq, st.firstDropped, st.lastDropped, st.firstDroppedTS,
			taskID, attempt)
	} else {
		_, err = s.w(tx).exec(ctx, `INSERT INTO task_log_attempts (task_id, attempt, received_bytes,
	stored_bytes, omitted_bytes, head_bytes, max_seq, first_dropped_seq, last_dropped_seq, first_dropped_ts)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			taskID, attempt, st.received, st.stored, st.omitted, st.headBytes, st.maxSeq, st.firstDropped, st.lastDropped,
			st.firstDroppedTS)
	}
	if err != nil {
		return err
	}
	_, err = s.w(tx).exec(ctx, `UPDATE tasks SET log_bytes = log_bytes + ?, log_omitted = log_omitted + ? WHERE id = ?`,
		added, dropped, taskID)
	return err
}

// freshChunks returns the chunks of an append that are not known yet, in
// the order they came, when every chunk is either in the dropped range
// (a redelivery: ignored) or numbered past every chunk received so far,
// so none can be stored already; a chunk numbered twice counts once, as
// its first copy. Otherwise (a redelivery of stored chunks, or a chunk
// filling a gap) it returns false: only the store can tell which chunks
// are new (appendEach).
func freshChunks(st *attemptState, chunks []protocol.LogChunk) ([]newChunk, bool) {
	fresh := make([]newChunk, 0, len(chunks))
	sorted := true
	var seen map[int64]bool
	for i := range chunks {
		c := &chunks[i]
		if st.inDropped(c.Seq) {
			continue
		}
		if c.Seq <= st.maxSeq {
			return nil, false
		}
		if n := len(fresh); sorted && n > 0 && c.Seq <= fresh[n-1].c.Seq {
			// Out of order within the append: check for numbers seen twice.
			sorted = false
			seen = make(map[int64]bool, len(chunks))
			for _, f := range fresh {
				seen[f.c.Seq] = true
			}
		}
		if !sorted {
			if seen[c.Seq] {
				continue
			}
			seen[c.Seq] = true
		}
		fresh = append(fresh, newChunk{c: c})
	}
	return fresh, true
}

// appendEach stores each new chunk of an append, then lets the cap drop
// what it drops (enforceCap). It returns the bytes added and dropped,
// and whether any chunk was new (a new chunk may be empty).
func (s *Store) appendEach(ctx context.Context, tx *sql.Tx, taskID string, attempt int64, st *attemptState, chunks []protocol.LogChunk, cap LogCap) (added, dropped int64, changed bool, err error) {
	ins, err := s.w(tx).stmt(ctx, insertLogChunk)
	if err != nil {
		return 0, 0, false, err
	}
	for _, c := range chunks {
		if st.inDropped(c.Seq) {
			continue
		}
		data := cleanText(c.Data)
		size := int64(len(data))
		head := st.received < cap.Head
		res, err := ins.ExecContext(ctx, taskID, attempt, c.Seq, micros(c.Time), data, size, boolInt(head))
		if err != nil {
			return 0, 0, false, fmt.Errorf("chunk %d: %w", c.Seq, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, 0, false, err
		}
		if n == 0 {
			continue // duplicate
		}
		st.received += size
		st.stored += size
		if head {
			st.headBytes += size
		}
		st.maxSeq = max(st.maxSeq, c.Seq)
		added += size
		changed = true
	}
	if !changed {
		return 0, 0, false, nil
	}
	dropped, err = s.enforceCap(ctx, tx, taskID, attempt, st, cap)
	return added, dropped, true, err
}

const insertLogChunk = `INSERT INTO task_logs (task_id, attempt, seq, ts, data, size, head)
	VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`

// appendFresh appends chunks none of which is stored or dropped yet (see
// freshChunks) with the same result as appendEach, but without storing
// the chunks the cap would drop at once: an append that carries more than
// the tail drops every stored non-head chunk of the attempt and the oldest
// of its own. Those are counted as omitted and extend the dropped range as
// if they had been stored and deleted; they are never written. A chunk's
// size is the length it has (or would have) once stored (cleanLen: NUL
// bytes and invalid UTF-8 become U+FFFD), whether it is stored or not.
// It returns the bytes added and dropped, and whether any chunk was new.
func (s *Store) appendFresh(ctx context.Context, tx *sql.Tx, taskID string, attempt int64, st *attemptState, fresh []newChunk, cap LogCap) (added, dropped int64, changed bool, err error) {
	if len(fresh) == 0 {
		return 0, 0, false, nil
	}
	received, maxSeq := st.received, st.maxSeq
	var newHead int64
	for i := range fresh {
		f := &fresh[i]
		n, clean := cleanLen(f.c.Data)
		f.size, f.clean = int64(n), clean
		f.head = received < cap.Head
		received += f.size
		added += f.size
		if f.head {
			newHead += f.size
		}
		maxSeq = max(maxSeq, f.c.Seq)
	}

	// What the cap drops of st.stored+added: the stored non-head chunks
	// first (all numbered below the new ones), then the new non-head
	// chunks, oldest first; never a chunk numbered from below on.
	limit := max(cap.Head, 0) + max(cap.Tail, 0)
	oldTail := st.stored - st.headBytes
	excess := st.stored + added - limit
	if limit == 0 || excess <= oldTail {
		// Nothing to drop, or only some of the stored chunks: store all
		// (appendEach does the same with the new chunks).
		if err := s.insertFresh(ctx, tx, taskID, attempt, fresh); err != nil {
			return 0, 0, false, err
		}
		st.received, st.stored, st.headBytes, st.maxSeq = received, st.stored+added, st.headBytes+newHead, maxSeq
		dropped, err = s.enforceCap(ctx, tx, taskID, attempt, st, cap)
		return added, dropped, true, err
	}
	below := maxSeq + 1
	if cap.Tail > 0 {
		below = maxSeq // while a tail is wanted, the newest chunk stays
	}
	// (Stored non-head chunks may be empty: oldTail == 0 does not mean none.)
	if err := s.dropStoredTail(ctx, tx, taskID, attempt, st); err != nil {
		return 0, 0, false, err
	}
	dropped = oldTail
	excess -= oldTail
	order := make([]*newChunk, 0, len(fresh))
	for i := range fresh {
		if !fresh[i].head {
			order = append(order, &fresh[i])
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].c.Seq < order[j].c.Seq })
	for _, f := range order {
		if excess <= 0 || f.c.Seq >= below {
			break
		}
		f.skip = true
		excess -= f.size
		dropped += f.size
		st.dropRange(f.c.Seq, micros(f.c.Time))
	}
	if err := s.insertFresh(ctx, tx, taskID, attempt, fresh); err != nil {
		return 0, 0, false, err
	}
	st.received, st.maxSeq = received, maxSeq
	st.headBytes += newHead
	st.stored += added - dropped
	st.omitted += dropped
	return added, dropped, true, nil
}

// insertFresh stores the chunks of fresh that are not skipped.
func (s *Store) insertFresh(ctx context.Context, tx *sql.Tx, taskID string, attempt int64, fresh []newChunk) error {
	var ins *sql.Stmt
	for _, f := range fresh {
		if f.skip {
			continue
		}
		if ins == nil {
			var err error
			if ins, err = s.w(tx).stmt(ctx, insertLogChunk); err != nil {
				return err
			}
		}
		data := f.c.Data
		if !f.clean {
			data = cleanText(data)
		}
		if _, err := ins.ExecContext(ctx, taskID, attempt, f.c.Seq, micros(f.c.Time), data, f.size, boolInt(f.head)); err != nil {
			return fmt.Errorf("chunk %d: %w", f.c.Seq, err)
		}
	}
	return nil
}

// dropStoredTail deletes every stored non-head chunk of the attempt and
// extends st's dropped range by them (the caller counts their bytes:
// st.stored-st.headBytes).
func (s *Store) dropStoredTail(ctx context.Context, tx *sql.Tx, taskID string, attempt int64, st *attemptState) error {
	rows, err := s.w(tx).query(ctx, `DELETE FROM task_logs WHERE task_id = ? AND attempt = ? AND head = 0 RETURNING seq, ts`,
		taskID, attempt)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq, ts int64
		if err := rows.Scan(&seq, &ts); err != nil {
			return err
		}
		st.dropRange(seq, ts)
	}
	return rows.Err()
}

// enforceCap deletes the oldest non-head chunks of the attempt while the
// stored bytes exceed cap.Head+cap.Tail, updates st and returns how many
// bytes it dropped. A zero cap keeps everything.
func (s *Store) enforceCap(ctx context.Context, tx *sql.Tx, taskID string, attempt int64, st *attemptState, cap LogCap) (int64, error) {
	limit := max(cap.Head, 0) + max(cap.Tail, 0)
	if limit == 0 || st.stored <= limit {
		return 0, nil
	}
	// While a tail is wanted, the newest chunk stays.
	below := st.maxSeq + 1
	if cap.Tail > 0 {
		below = st.maxSeq
	}
	const page = 256
	var dropped int64
	after := int64(-1 << 63)
	lastDeleted := int64(0)
	deleted := false
	for st.stored > limit {
		rows, err := s.w(tx).query(ctx, `SELECT seq, size, ts FROM task_logs
	WHERE task_id = ? AND attempt = ? AND head = 0 AND seq > ? AND seq < ? ORDER BY seq LIMIT ?`,
			taskID, attempt, after, below, page)
		if err != nil {
			return 0, err
		}
		n := 0
		for rows.Next() && st.stored > limit {
			var seq, size, ts int64
			if err := rows.Scan(&seq, &size, &ts); err != nil {
				rows.Close()
				return 0, err
			}
			n++
			after = seq
			st.stored -= size
			st.omitted += size
			dropped += size
			lastDeleted, deleted = seq, true
			st.dropRange(seq, ts)
		}
		if err := rows.Close(); err != nil {
			return 0, err
		}
		if n < page && st.stored > limit {
			break // nothing more may be dropped
		}
	}
	if !deleted {
		return 0, nil
	}
	if _, err := s.w(tx).exec(ctx, `DELETE FROM task_logs WHERE task_id = ? AND attempt = ? AND head = 0 AND seq <= ?`,
		taskID, attempt, lastDeleted); err != nil {
		return 0, err
	}
	return dropped, nil
}

func (s *Store) readLogs(ctx context.Context, tx *sql.Tx, taskID string, after LogCursor, limit int) ([]StoredChunk, error) {
	switch {
	case limit <= 0:
		limit = defaultLogLimit
	case limit > maxLogLimit:
		limit = maxLogLimit
	}
	rows, err := s.r(tx).query(ctx, `SELECT attempt, seq, ts, data FROM task_logs
	WHERE task_id = ? AND (attempt > ? OR (attempt = ? AND seq > ?))
	ORDER BY attempt, seq LIMIT ?`, taskID, after.Attempt, after.Attempt, after.Seq, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []StoredChunk
	for rows.Next() {
		var c StoredChunk
		var ts int64
		if err := rows.Scan(&c.Attempt, &c.Chunk.Seq, &ts, &c.Chunk.Data); err != nil {
			return nil, err
		}
		c.Chunk.Time = fromMicros(ts)
		c.Chunk.Attempt = c.Attempt
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()

	markers, err := s.r(tx).query(ctx, `SELECT attempt, first_dropped_seq, first_dropped_ts, omitted_bytes
	FROM task_log_attempts
	WHERE task_id = ? AND first_dropped_seq IS NOT NULL
	AND (attempt > ? OR (attempt = ? AND first_dropped_seq > ?))
	ORDER BY attempt LIMIT ?`, taskID, after.Attempt, after.Attempt, after.Seq, limit)
	if err != nil {
		return nil, err
	}
	defer markers.Close()
	n := len(out)
	for markers.Next() {
		var c StoredChunk
		var ts, omitted int64
		if err := markers.Scan(&c.Attempt, &c.Chunk.Seq, &ts, &omitted); err != nil {
			return nil, err
		}
		c.Chunk.Time = fromMicros(ts)
		c.Chunk.Attempt = c.Attempt
		c.Chunk.Data = omittedMarker(omitted)
		out = append(out, c)
	}
	if err := markers.Err(); err != nil {
		return nil, err
	}
	if len(out) > n {
		sort.SliceStable(out, func(i, j int) bool {
			if out[i].Attempt != out[j].Attempt {
				return out[i].Attempt < out[j].Attempt
			}
			return out[i].Chunk.Seq < out[j].Chunk.Seq
		})
		if len(out) > limit {
			out = out[:limit]
		}
	}
	return out, nil
}
