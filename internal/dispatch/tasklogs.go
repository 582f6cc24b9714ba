package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/logbus"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// handleTaskLogs streams a task's output as NDJSON (or as log frames, to
// a client that accepts protocol.ContentTypeLogFrames): stored chunks
// first, then (with follow=1) live chunks, and last the task once it is
// terminal.
func (m *Service) handleTaskLogs(w http.ResponseWriter, r *http.Request, acct string) {
	id := r.PathValue("id")
	follow, cur, err := logsQuery(r.URL.Query())
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	ctx := r.Context()
	if _, err := m.st.GetTask(ctx, acct, id); err != nil {
		api.StoreError(w, err, "task "+id)
		return
	}
	s := &logStream{m: m, acct: acct, id: id, cur: cur, w: w, enc: json.NewEncoder(w),
		frames: strings.Contains(r.Header.Get("Accept"), protocol.ContentTypeLogFrames)}
	s.flusher, _ = w.(http.Flusher)
	if follow {
		// Subscribed before the stored output is read, so that nothing
		// falls between the two.
		s.sub = m.logs.Subscribe(id)
		// s.sub changes when a lagged follow subscribes again.
		defer func() { m.logs.Unsubscribe(id, s.sub) }()
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if s.frames {
		w.Header().Set("Content-Type", protocol.ContentTypeLogFrames)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if !s.drain(ctx) {
		return
	}
	if follow {
		s.follow(ctx)
		return
	}
	s.end(ctx)
}

// logsQuery reads a task log request's parameters: follow, and the cursor
// to start after (after_attempt, after_seq).
func logsQuery(q url.Values) (follow bool, cur store.LogCursor, err error) {
	follow = q.Get("follow") == "1" || q.Get("follow") == "true"
	if v := q.Get("after_attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return false, cur, errors.New("after_attempt must be a non-negative integer")
		}
		cur.Attempt = n
	}
	if v := q.Get("after_seq"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return false, cur, errors.New("after_seq must be a non-negative integer")
		}
		cur.Seq = n
	}
	return follow, cur, nil
}

// logStream writes one task log answer. Its methods return false when the
// answer cannot go on (the client left, or the store failed).
type logStream struct {
	m       *Service
	acct    string
	id      string
	cur     store.LogCursor // the last chunk sent
	w       http.ResponseWriter
	enc     *json.Encoder
	flusher http.Flusher     // nil when the writer cannot flush
	sub     *logbus.Follower // nil unless following
	// frames: the answer is log frames, not NDJSON; buf holds the header
	// of the frame being written.
	frames bool
	buf    []byte
}

// send writes one chunk and moves the cursor past it.
func (s *logStream) send(c store.StoredChunk) bool {
	ch := c.Chunk
	ch.Attempt = c.Attempt
	if s.frames {
		s.buf = protocol.AppendChunkFrameHeader(s.buf[:0], ch)
		if _, err := s.w.Write(s.buf); err != nil {
			return false
		}
		if _, err := io.WriteString(s.w, ch.Data); err != nil {
			return false
		}
	} else if err := s.enc.Encode(protocol.LogStreamLine{Chunk: &ch}); err != nil {
		return false
	}
	s.cur = store.LogCursor{Attempt: c.Attempt, Seq: c.Chunk.Seq}
	return true
}

func (s *logStream) flush() {
	if s.flusher != nil {
		s.flusher.Flush()
	}
}

// after reports whether c comes after the cursor (was not sent yet).
func (s *logStream) after(c store.StoredChunk) bool {
	return c.Attempt > s.cur.Attempt || (c.Attempt == s.cur.Attempt && c.Chunk.Seq > s.cur.Seq)
}

// drain sends everything stored after the cursor.
func (s *logStream) drain(ctx context.Context) bool {
	const page = 500
	for {
		cs, err := s.m.st.ReadLogs(ctx, s.id, s.cur, page)
		if err != nil {
			s.m.log.Error("read logs", "task", s.id, "err", err)
			return false
		}
		for _, c := range cs {
			if !s.send(c) {
				return false
			}
		}
		s.flush()
		if len(cs) < page {
			return true
		}
	}
}

// end sends the task, which ends the answer.
func (s *logStream) end(ctx context.Context) {
	t, err := s.m.st.GetTask(ctx, s.acct, s.id)
	if err != nil {
		return
	}
	v := s.m.taskView(t)
	if s.frames {
		b, err := json.Marshal(protocol.LogStreamLine{Task: &v})
		if err == nil {
			_, _ = s.w.Write(protocol.AppendLogFrame(nil, protocol.FrameLine, b))
		}
		return
	}
	_ = s.enc.Encode(protocol.LogStreamLine{Task: &v})
}

// sendQueued sends what waits on the log bus. A follower does so before
// it reads the store: the chunks the cap dropped are only there (an
// upload that carries more than the tail never writes them).
func (s *logStream) sendQueued() bool {
	select {
	case c := <-s.sub.C():
		return s.sendLive(c)
	default:
		return true
	}
}

// sendLive sends the chunk c from the log bus and what else waits there,
// skipping those already sent from the store.
func (s *logStream) sendLive(c store.StoredChunk) bool {
	for {
		s.sub.Took(c)
		if s.after(c) && !s.send(c) {
			return false
		}
		select {
		case c = <-s.sub.C():
			continue
		default:
		}
		s.flush()
		return true
	}
}

// follow sends output as it arrives until the task ends (then the rest of
// its stored output and the task), the client leaves or the manager
// stops. Output comes on the log bus when its delegate sends it to this
// manager; when it comes through another manager, that manager's
// notification, or at the latest the next poll, has it read from the
// store.
func (s *logStream) follow(ctx context.Context) {
	poll := time.NewTicker(s.m.cfg.FollowPollInterval)
	defer poll.Stop()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	// live: output came on the bus since the last poll. The poll is for
	// output that comes through another manager; while this manager's bus
	// brings it, the poll does not read the store, which holds an upload's
	// stored chunks before the bus has them all (it skips the chunks the
	// cap drops: read from the store first, the stored ones would pass
	// the cursor over them).
	live := false
	for check := true; ; {
		if check {
			// A terminal task whose stored log is drained is complete.
			// What waits on the bus goes first: the middle of a big
			// output is only there, and the store's tail would pass the
			// cursor over it. (Every chunk is on the bus before its
			// upload is answered, so before the result that ends the
			// task.)
			t, err := s.m.st.GetTask(ctx, s.acct, s.id)
			if err == nil && protocol.Terminal(t.Status) {
				if s.sendQueued() && s.drain(ctx) {
					s.end(ctx)
				}
				return
			}
		}
		// Output does not end a task: only the other paths check.
		check = true
		select {
		case c := <-s.sub.C():
			if !s.sendLive(c) {
				return
			}
			check, live = false, true
		case <-s.sub.StoredC():
			if !s.sendQueued() || !s.drain(ctx) {
				return
			}
			check = false
		case <-s.sub.Lagged():
			// Fell behind: send what the bus holds, read the rest from the
			// store, and subscribe again.
			if !s.sendQueued() {
				return
			}
			s.sub = s.m.logs.Resubscribe(s.id, s.sub)
			if !s.drain(ctx) {
				return
			}
		case <-s.sub.Done():
			if !s.sendQueued() {
				return
			}
		case <-poll.C:
			if live {
				live = false
				continue
			}
			if !s.sendQueued() || !s.drain(ctx) {
				return
			}
		case <-keepAlive.C:
			alive := []byte("\n")
			if s.frames {
				alive = protocol.AppendLogFrame(nil, protocol.FrameKeepAlive, nil)
			}
			if _, err := s.w.Write(alive); err != nil {
				return
			}
			s.flush()
		case <-s.m.stopping:
			return
		case <-ctx.Done():
			return
		}
	}
}
