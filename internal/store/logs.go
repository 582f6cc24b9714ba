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
//   - stored_bytes: bytes of the chunks still stored;
//   - omitted_bytes, first_dropped_seq..last_dropped_seq, first_dropped_ts:
//     what the cap deleted. The cap deletes the oldest non-head chunks, so
//     the dropped chunks form one range per attempt, which ReadLogs shows as
//     one marker chunk. A redelivered chunk whose seq lies in that range is
//     a duplicate of a dropped chunk and is ignored.
//
// The newest chunk of an attempt is never dropped while cap.Tail > 0, so the
// stored tail can exceed cap.Tail by less than one chunk.

// cleanText makes free text (log data, error messages) storable in a TEXT
// column of both dialects alike: PostgreSQL rejects NUL bytes and invalid
// UTF-8 in text, so both become U+FFFD, on SQLite too.
func cleanText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
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
	maxSeq                    int64
	firstDropped, lastDropped sql.NullInt64
	firstDroppedTS            sql.NullInt64
}

func (a *attemptState) inDropped(seq int64) bool {
	return a.firstDropped.Valid && seq >= a.firstDropped.Int64 && seq <= a.lastDropped.Int64
}

func (s *Store) appendLogs(ctx context.Context, tx *sql.Tx, taskID string, epoch int64, chunks []protocol.LogChunk, cap LogCap) error {
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
	err = s.w(tx).queryRow(ctx, `SELECT received_bytes, stored_bytes, omitted_bytes, max_seq,
	first_dropped_seq, last_dropped_seq, first_dropped_ts
	FROM task_log_attempts WHERE task_id = ? AND attempt = ?`, taskID, attempt).
		Scan(&st.received, &st.stored, &st.omitted, &st.maxSeq, &st.firstDropped, &st.lastDropped, &st.firstDroppedTS)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	default:
		st.exists = true
	}

	ins, err := s.w(tx).stmt(ctx, `INSERT INTO task_logs (task_id, attempt, seq, ts, data, size, head)
	VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`)
	if err != nil {
		return err
	}
	var added int64
	for _, c := range chunks {
		if st.inDropped(c.Seq) {
			continue
		}
		data := cleanText(c.Data)
		size := int64(len(data))
		head := st.received < cap.Head
		res, err := ins.ExecContext(ctx, taskID, attempt, c.Seq, micros(c.Time), data, size, boolInt(head))
		if err != nil {
			return fmt.Errorf("chunk %d: %w", c.Seq, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			continue // duplicate
		}
		st.received += size
		st.stored += size
		st.maxSeq = max(st.maxSeq, c.Seq)
		added += size
	}
	if added == 0 {
		return nil // all duplicates
	}

	dropped, err := s.enforceCap(ctx, tx, taskID, attempt, &st, cap)
	if err != nil {
		return err
	}

	if st.exists {
		_, err = s.w(tx).exec(ctx, `UPDATE task_log_attempts SET received_bytes = ?, stored_bytes = ?,
	omitted_bytes = ?, max_seq = ?, first_dropped_seq = ?, last_dropped_seq = ?, first_dropped_ts = ?
	WHERE task_id = ? AND attempt = ?`,
			st.received, st.stored, st.omitted, st.maxSeq, st.firstDropped, st.lastDropped, st.firstDroppedTS,
			taskID, attempt)
	} else {
		_, err = s.w(tx).exec(ctx, `INSERT INTO task_log_attempts (task_id, attempt, received_bytes,
	stored_bytes, omitted_bytes, max_seq, first_dropped_seq, last_dropped_seq, first_dropped_ts)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			taskID, attempt, st.received, st.stored, st.omitted, st.maxSeq, st.firstDropped, st.lastDropped,
			st.firstDroppedTS)
	}
	if err != nil {
		return err
	}
	_, err = s.w(tx).exec(ctx, `UPDATE tasks SET log_bytes = log_bytes + ?, log_omitted = log_omitted + ? WHERE id = ?`,
		added, dropped, taskID)
	return err
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
			if !st.firstDropped.Valid || seq < st.firstDropped.Int64 {
				st.firstDropped = sql.NullInt64{Int64: seq, Valid: true}
				st.firstDroppedTS = sql.NullInt64{Int64: ts, Valid: true}
			}
			if !st.lastDropped.Valid || seq > st.lastDropped.Int64 {
				st.lastDropped = sql.NullInt64{Int64: seq, Valid: true}
			}
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
