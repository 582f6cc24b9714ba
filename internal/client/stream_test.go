package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// streamServer is a fake manager log endpoint; handle is called with the
// number of the connection (1, 2, ...).
type streamServer struct {
	t      *testing.T
	conns  atomic.Int32
	handle func(n int, w http.ResponseWriter, r *http.Request)

	mu      sync.Mutex
	queries []url.Values
}

func (s *streamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/api/v1/tasks/t_1/logs" {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusTeapot)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer key" {
		http.Error(w, "bad auth "+got, http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	s.queries = append(s.queries, r.URL.Query())
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	s.handle(int(s.conns.Add(1)), w, r)
}

func (s *streamServer) query(i int) url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.queries) {
		s.t.Fatalf("only %d connections, want query of #%d", len(s.queries), i+1)
	}
	return s.queries[i]
}

func newStreamServer(t *testing.T, handle func(n int, w http.ResponseWriter, r *http.Request)) (*streamServer, *Client) {
	t.Helper()
	s := &streamServer{t: t, handle: handle}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecret("key")
	c.backoffMin, c.backoffMax = time.Millisecond, 5*time.Millisecond
	return s, c
}

func chunk(attempt int, seq int64) protocol.LogStreamLine {
	return protocol.LogStreamLine{Chunk: &protocol.LogChunk{Seq: seq, Attempt: attempt,
		Time: time.Date(2026, 11, 22, 10, 0, int(seq), 0, time.UTC), Data: fmt.Sprintf("a%d-s%d\n", attempt, seq)}}
}

func finalTask(status string, exit int) *protocol.Task {
	return &protocol.Task{ID: "t_1", Status: status, ExitCode: &exit}
}

// send writes lines and flushes them.
func send(w http.ResponseWriter, lines ...protocol.LogStreamLine) {
	enc := json.NewEncoder(w)
	for _, l := range lines {
		_ = enc.Encode(l)
	}
	w.(http.Flusher).Flush()
}

func keepAlive(w http.ResponseWriter) {
	_, _ = io.WriteString(w, "\n")
	w.(http.Flusher).Flush()
}

// cut breaks the connection after writing half a line.
func cut(w http.ResponseWriter) {
	_, _ = io.WriteString(w, `{"chunk":{"seq":99,"da`)
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler)
}

// collect runs StreamLogs and returns the lines fn saw.
func collect(ctx context.Context, c *Client, follow bool) ([]protocol.LogStreamLine, protocol.Task, error) {
	var got []protocol.LogStreamLine
	task, err := c.StreamLogs(ctx, "t_1", follow, func(l protocol.LogStreamLine) error {
		got = append(got, l)
		return nil
	})
	return got, task, err
}

func TestStreamLogsWithoutFollow(t *testing.T) {
	t.Parallel()
	s, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		send(w, chunk(1, 1), chunk(1, 2), protocol.LogStreamLine{Task: finalTask(protocol.StatusRunning, 0)})
	})
	got, task, err := collect(t.Context(), c, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.LogStreamLine{chunk(1, 1), chunk(1, 2), {Task: finalTask(protocol.StatusRunning, 0)}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("lines (-want +got):\n%s", d)
	}
	if task.Status != protocol.StatusRunning {
		t.Errorf("task status = %q", task.Status)
	}
	if q := s.query(0); q.Encode() != "" {
		t.Errorf("query = %q, want none", q.Encode())
	}
}

// TestStreamLogsReconnect cuts the stream mid-line once; the client must
// resume after the last chunk it saw, skip a chunk the manager repeats, and
// ignore keep-alive lines.
func TestStreamLogsReconnect(t *testing.T) {
	t.Parallel()
	s, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			send(w, chunk(1, 1))
			keepAlive(w)
			send(w, chunk(1, 2), chunk(1, 3))
			cut(w)
		case 2:
			keepAlive(w)
			// Repeats chunk 3, which the client must not deliver again.
			send(w, chunk(1, 3), chunk(1, 4), chunk(2, 1))
			keepAlive(w)
			send(w, chunk(2, 2), protocol.LogStreamLine{Task: finalTask(protocol.StatusFailed, 3)})
		default:
			t.Errorf("connection %d, want 2", n)
		}
	})
	got, task, err := collect(t.Context(), c, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.LogStreamLine{chunk(1, 1), chunk(1, 2), chunk(1, 3), chunk(1, 4), chunk(2, 1), chunk(2, 2),
		{Task: finalTask(protocol.StatusFailed, 3)}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("lines (-want +got):\n%s", d)
	}
	if d := cmp.Diff(*finalTask(protocol.StatusFailed, 3), task); d != "" {
		t.Errorf("task (-want +got):\n%s", d)
	}
	if q := s.query(0); q.Encode() != "follow=1" {
		t.Errorf("first query = %q, want follow=1", q.Encode())
	}
	if q := s.query(1); q.Encode() != "after_attempt=1&after_seq=3&follow=1" {
		t.Errorf("second query = %q, want after_attempt=1&after_seq=3&follow=1", q.Encode())
	}
}

func TestStreamLogsRetriesUnavailable(t *testing.T) {
	t.Parallel()
	s, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			send(w, chunk(1, 1))
			panic(http.ErrAbortHandler)
		case 2, 3:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"restarting"}}`)
		default:
			send(w, chunk(1, 2), protocol.LogStreamLine{Task: finalTask(protocol.StatusSucceeded, 0)})
		}
	})
	got, _, err := collect(t.Context(), c, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Errorf("got %d lines, want 3", len(got))
	}
	if q := s.query(3); q.Get("after_seq") != "1" || q.Get("after_attempt") != "1" {
		t.Errorf("fourth query = %q, want after chunk 1/1", q.Encode())
	}
}

// TestStreamLogsEvents: the caller hears of each connection, each break
// and each failed attempt, in order, with the error and the wait.
func TestStreamLogsEvents(t *testing.T) {
	t.Parallel()
	_, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			send(w, chunk(1, 1))
			panic(http.ErrAbortHandler)
		case 2, 3:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"restarting"}}`)
		default:
			send(w, chunk(1, 2), protocol.LogStreamLine{Task: finalTask(protocol.StatusSucceeded, 0)})
		}
	})
	var kinds []StreamEventKind
	var lines int
	_, err := c.StreamLogsWith(t.Context(), "t_1", StreamOptions{Follow: true, OnEvent: func(e StreamEvent) {
		kinds = append(kinds, e.Kind)
		switch {
		case e.Kind == StreamConnected && (e.Err != nil || e.Retry != 0):
			t.Errorf("connected event %+v has an error or a wait", e)
		case e.Kind != StreamConnected && (e.Err == nil || e.Retry <= 0):
			t.Errorf("event %+v lacks the error or the wait", e)
		case e.Kind == StreamFailed && !IsCode(e.Err, protocol.CodeUnavailable):
			t.Errorf("failed event: %v, want the manager's unavailable error", e.Err)
		}
	}}, func(protocol.LogStreamLine) error { lines++; return nil })
	if err != nil || lines != 3 {
		t.Fatalf("err %v, %d lines", err, lines)
	}
	want := []StreamEventKind{StreamConnected, StreamLost, StreamFailed, StreamFailed, StreamConnected}
	if d := cmp.Diff(want, kinds); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}

func TestStreamLogsCleanEOFWithoutTaskReconnects(t *testing.T) {
	t.Parallel()
	_, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			send(w, chunk(1, 1)) // ends cleanly, but without the task line
			return
		}
		send(w, protocol.LogStreamLine{Task: finalTask(protocol.StatusSucceeded, 0)})
	})
	got, task, err := collect(t.Context(), c, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || task.Status != protocol.StatusSucceeded {
		t.Errorf("got %d lines and status %q, want 2 lines and succeeded", len(got), task.Status)
	}
}

func TestStreamLogsIdleWatchdog(t *testing.T) {
	t.Parallel()
	s, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			send(w, chunk(1, 1))
			<-r.Context().Done() // silent: not even keep-alives
			return
		}
		// From the start again if the watchdog fired before chunk 1 arrived
		// (a loaded machine); the client must then deliver it once.
		send(w, chunk(1, 1), protocol.LogStreamLine{Task: finalTask(protocol.StatusSucceeded, 0)})
	})
	c.streamIdle = 200 * time.Millisecond
	got, _, err := collect(t.Context(), c, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || s.conns.Load() < 2 {
		t.Errorf("got %d lines over %d connections, want 2 lines over 2 or more", len(got), s.conns.Load())
	}
}

func TestStreamLogsPermanentErrors(t *testing.T) {
	t.Parallel()
	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		s, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"task t_1 not found"}}`)
		})
		_, _, err := collect(t.Context(), c, true)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeNotFound || pe.Status != 404 {
			t.Fatalf("err = %v, want not_found", err)
		}
		if n := s.conns.Load(); n != 1 {
			t.Errorf("%d connections, want 1", n)
		}
	})
	t.Run("not found after a reconnect", func(t *testing.T) {
		t.Parallel()
		_, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				send(w, chunk(1, 1))
				cut(w)
			}
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"gone"}}`)
		})
		if _, _, err := collect(t.Context(), c, true); !IsCode(err, protocol.CodeNotFound) {
			t.Fatalf("err = %v, want not_found", err)
		}
	})
	t.Run("malformed line", func(t *testing.T) {
		t.Parallel()
		_, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "this is not json\n")
		})
		if _, _, err := collect(t.Context(), c, true); err == nil || !strings.Contains(err.Error(), "decode") {
			t.Fatalf("err = %v, want a decode error", err)
		}
	})
	t.Run("first connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		c, _ := New(srv.URL, nil)
		if _, _, err := collect(t.Context(), c, true); err == nil {
			t.Fatal("no error from a closed server")
		}
	})
}

func TestStreamLogsCallbackError(t *testing.T) {
	t.Parallel()
	s, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		send(w, chunk(1, 1), chunk(1, 2), protocol.LogStreamLine{Task: finalTask(protocol.StatusSucceeded, 0)})
	})
	errStop := errors.New("stop")
	calls := 0
	_, err := c.StreamLogs(t.Context(), "t_1", true, func(protocol.LogStreamLine) error {
		calls++
		return errStop
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("err = %v, want errStop", err)
	}
	if calls != 1 || s.conns.Load() != 1 {
		t.Errorf("fn called %d times over %d connections, want 1 and 1", calls, s.conns.Load())
	}
}

func TestStreamLogsContextCancel(t *testing.T) {
	t.Parallel()
	_, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		send(w, chunk(1, 1))
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.StreamLogs(ctx, "t_1", true, func(protocol.LogStreamLine) error {
			cancel()
			return nil
		})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("StreamLogs did not return after its context was cancelled")
	}
}

// sendFrames writes lines as log frames (chunks as FrameChunk, others as
// FrameLine) and flushes them.
func sendFrames(w http.ResponseWriter, lines ...protocol.LogStreamLine) {
	var b []byte
	for _, l := range lines {
		if l.Chunk != nil {
			b = protocol.AppendChunkFrame(b, *l.Chunk)
			continue
		}
		j, _ := json.Marshal(l)
		b = protocol.AppendLogFrame(b, protocol.FrameLine, j)
	}
	_, _ = w.Write(b)
	w.(http.Flusher).Flush()
}

// TestStreamLogsFramesReconnect is TestStreamLogsReconnect with a manager
// that answers in log frames (the client asks for them): the stream cut in
// the middle of a frame resumes after the last chunk seen, a repeated
// chunk is skipped and keep-alive frames are ignored. A frame of an
// unknown kind ends the stream with an error, not a retry.
func TestStreamLogsFramesReconnect(t *testing.T) {
	t.Parallel()
	frames := func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), protocol.ContentTypeLogFrames) {
			t.Errorf("Accept %q does not ask for log frames", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", protocol.ContentTypeLogFrames)
	}
	alive := func(w http.ResponseWriter) {
		_, _ = w.Write(protocol.AppendLogFrame(nil, protocol.FrameKeepAlive, nil))
		w.(http.Flusher).Flush()
	}
	s, c := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		frames(w, r)
		switch n {
		case 1:
			sendFrames(w, chunk(1, 1))
			alive(w)
			sendFrames(w, chunk(1, 2), chunk(1, 3))
			half := protocol.AppendChunkFrame(nil, *chunk(1, 4).Chunk)
			_, _ = w.Write(half[:len(half)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		case 2:
			alive(w)
			sendFrames(w, chunk(1, 3), chunk(1, 4), chunk(2, 1))
			sendFrames(w, chunk(2, 2), protocol.LogStreamLine{Task: finalTask(protocol.StatusFailed, 3)})
		default:
			t.Errorf("connection %d, want 2", n)
		}
	})
	got, task, err := collect(t.Context(), c, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.LogStreamLine{chunk(1, 1), chunk(1, 2), chunk(1, 3), chunk(1, 4), chunk(2, 1), chunk(2, 2),
		{Task: finalTask(protocol.StatusFailed, 3)}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("lines (-want +got):\n%s", d)
	}
	if d := cmp.Diff(*finalTask(protocol.StatusFailed, 3), task); d != "" {
		t.Errorf("task (-want +got):\n%s", d)
	}
	if q := s.query(1); q.Encode() != "after_attempt=1&after_seq=3&follow=1" {
		t.Errorf("second query = %q, want after_attempt=1&after_seq=3&follow=1", q.Encode())
	}

	_, bad := newStreamServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		frames(w, r)
		sendFrames(w, chunk(1, 1))
		_, _ = w.Write([]byte("z\x00"))
		w.(http.Flusher).Flush()
	})
	if _, _, err := collect(t.Context(), bad, true); !errors.Is(err, protocol.ErrLogFrame) {
		t.Errorf("unknown frame kind: error %v, want ErrLogFrame", err)
	}
}
