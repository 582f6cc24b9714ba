package delegate

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// logServer is a manager stand-in on a real socket that takes log chunks.
// While hold is set every request waits for release; answer, when set,
// decides the reply instead of 204.
type logServer struct {
	mu     sync.Mutex
	chunks []protocol.LogChunk
	hold   chan struct{} // closed: requests go through
	answer func(w http.ResponseWriter) bool
	// old: JSON only, as a manager before log frames (which answers a
	// body of frames 400).
	old bool
	// requests counts the uploads taken as log frames and as JSON.
	frames, jsons int
}

func (ls *logServer) handler(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/logs") {
		http.NotFound(w, r)
		return
	}
	ls.mu.Lock()
	hold, answer := ls.hold, ls.answer
	ls.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if answer != nil && answer(w) {
		return
	}
	var req protocol.LogsRequest
	asFrames := r.Header.Get("Content-Type") == protocol.ContentTypeLogFrames && !ls.old
	if asFrames {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			req.Chunks, err = protocol.DecodeChunkFrames(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(protocol.ErrorBody{Error: protocol.Error{Code: protocol.CodeBadRequest, Message: "invalid JSON body: " + err.Error()}})
		return
	}
	ls.mu.Lock()
	ls.chunks = append(ls.chunks, req.Chunks...)
	if asFrames {
		ls.frames++
	} else {
		ls.jsons++
	}
	ls.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (ls *logServer) received() (string, []int64, int) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var b strings.Builder
	seqs := make([]int64, 0, len(ls.chunks))
	biggest := 0
	for _, c := range ls.chunks {
		b.WriteString(c.Data)
		seqs = append(seqs, c.Seq)
		biggest = max(biggest, len(c.Data))
	}
	return b.String(), seqs, biggest
}

// shipperAgent returns an agent whose manager is ls.
func shipperAgent(t *testing.T, ls *logServer, forceStop chan struct{}) *Agent {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(ls.handler))
	t.Cleanup(srv.Close)
	a, err := New(Options{
		Config:    validConfig(srv.URL, 0),
		WorkDir:   t.TempDir(),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		IP:        "127.0.0.1",
		TaskEnv:   []string{},
		ForceStop: forceStop,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// pattern is n bytes of numbered lines.
func pattern(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(strconv.Itoa(1000000 + i))
		b.WriteByte('\n')
	}
	return b.String()[:n]
}

// writeAll writes data in pieces of 32 KiB (as the executor does) and
// closes done when every Write returned.
func writeAll(s *shipper, data string) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := []byte(data); len(p) > 0; {
			n := min(len(p), 32<<10)
			_, _ = s.Write(p[:n])
			p = p[n:]
		}
	}()
	return done
}

// writerHeld reports whether a writer waits in s.Write for room.
func writerHeld(s *shipper) func() bool {
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.held > 0
	}
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestShipperBackPressure: while the manager does not take output, a task
// writing 8 MiB is held once maxBuffered bytes wait (its Write blocks), and
// once the manager takes it again everything arrives, in order.
func TestShipperBackPressure(t *testing.T) {
	t.Parallel()
	ls := &logServer{hold: make(chan struct{})}
	a := shipperAgent(t, ls, nil)
	release := sync.OnceFunc(func() { close(ls.hold) })
	t.Cleanup(release) // before the server closes, also when the test fails
	s := newShipper(a, "t_1", 1, func(error) {})
	data := pattern(8 << 20)
	done := writeAll(s, data)

	waitFor(t, "the writer to be held in Write", writerHeld(s))
	s.mu.Lock()
	buffered := len(s.buf)
	s.mu.Unlock()
	if closed(done) || buffered > maxBuffered {
		t.Fatalf("writer done %v with %d bytes buffered: output is not bounded by %d", closed(done), buffered, maxBuffered)
	}

	release()
	<-done
	last := s.close()
	got, seqs, biggest := ls.received()
	if got != data {
		t.Fatalf("received %d bytes, want the %d written, in order", len(got), len(data))
	}
	if biggest > maxChunk {
		t.Errorf("a chunk of %d bytes, more than %d", biggest, maxChunk)
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("chunk %d has seq %d", i, seq)
		}
	}
	if last != int64(len(seqs)) {
		t.Errorf("close returned last seq %d, want %d", last, len(seqs))
	}
}

// TestShipperSendsLogFrames: output goes as log frames, up to maxBatch
// chunks a request; to a manager that cannot read them (it answers
// bad_request) the same output goes as JSON, complete and in order.
func TestShipperSendsLogFrames(t *testing.T) {
	t.Parallel()
	for _, old := range []bool{false, true} {
		t.Run(map[bool]string{false: "frames", true: "older manager"}[old], func(t *testing.T) {
			t.Parallel()
			ls := &logServer{old: old}
			a := shipperAgent(t, ls, nil)
			s := newShipper(a, "t_1", 1, func(error) {})
			data := pattern(5 << 20)
			<-writeAll(s, data)
			last := s.close()
			got, seqs, _ := ls.received()
			if got != data {
				t.Fatalf("received %d bytes, want the %d written, in order", len(got), len(data))
			}
			for i, seq := range seqs {
				if seq != int64(i+1) {
					t.Fatalf("chunk %d has seq %d", i, seq)
				}
			}
			if last != int64(len(seqs)) {
				t.Errorf("close returned last seq %d, want %d", last, len(seqs))
			}
			ls.mu.Lock()
			frames, jsons := ls.frames, ls.jsons
			ls.mu.Unlock()
			switch {
			case !old && (jsons != 0 || frames == 0 || frames*maxBatch < len(seqs)):
				t.Errorf("%d uploads as log frames and %d as JSON for %d chunks, want frames only, at most %d chunks each", frames, jsons, len(seqs), maxBatch)
			case old && (frames != 0 || jsons == 0):
				t.Errorf("older manager took %d uploads as log frames and %d as JSON, want JSON only", frames, jsons)
			}
		})
	}
}

// TestShipperUnblocksWhenTheManagerRefuses: a task that is no longer ours
// (stale lease) is aborted, and its blocked writes return (dropped).
func TestShipperUnblocksWhenTheManagerRefuses(t *testing.T) {
	t.Parallel()
	ls := &logServer{answer: func(w http.ResponseWriter) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(protocol.ErrorBody{Error: protocol.Error{Code: protocol.CodeStaleLease, Message: "stale"}})
		return true
	}}
	a := shipperAgent(t, ls, nil)
	var cause error
	var mu sync.Mutex
	s := newShipper(a, "t_1", 1, func(err error) { mu.Lock(); cause = err; mu.Unlock() })
	<-writeAll(s, pattern(8<<20))
	s.close()
	mu.Lock()
	defer mu.Unlock()
	if cause != errLeaseLost {
		t.Fatalf("task cancelled with %v, want errLeaseLost", cause)
	}
}

// TestShipperUnblocksOnForceStop: while the manager is unreachable a
// blocked writer returns once the delegate is told to stop now, and the
// tail of the unsent output is kept on disk for the next start.
func TestShipperUnblocksOnForceStop(t *testing.T) {
	t.Parallel()
	ls := &logServer{answer: func(w http.ResponseWriter) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	}}
	force := make(chan struct{})
	a := shipperAgent(t, ls, force)
	s := newShipper(a, "t_1", 1, func(error) {})
	data := pattern(8 << 20)
	done := writeAll(s, data)
	waitFor(t, "the writer to be held in Write while the manager is unavailable", writerHeld(s))
	s.mu.Lock()
	buffered := len(s.buf)
	s.mu.Unlock()
	if closed(done) || buffered > maxBuffered {
		t.Fatalf("writer done %v with %d bytes buffered: output is not bounded by %d", closed(done), buffered, maxBuffered)
	}
	close(force)
	<-done
	s.close()
	kept, ok := a.spool.loadLogs("t_1")
	if !ok || len(kept.Chunks) == 0 {
		t.Fatal("no output kept on disk")
	}
	var b strings.Builder
	for _, c := range kept.Chunks {
		b.WriteString(c.Data)
	}
	// What was kept is a piece of the output in order: the first chunk
	// (in flight) and the buffer behind it, tail-bounded.
	if tail := b.String(); len(tail) > maxSpooledLogs || !strings.Contains(data, tail) {
		t.Fatalf("kept %d bytes that are not a contiguous piece of the output (limit %d)", len(tail), maxSpooledLogs)
	}
}

// TestShipperChunksEndOnRuneBoundaries: a chunk never ends inside a UTF-8
// sequence (the manager stores text; a split rune would become U+FFFD).
func TestShipperChunksEndOnRuneBoundaries(t *testing.T) {
	t.Parallel()
	ls := &logServer{}
	a := shipperAgent(t, ls, nil)
	s := newShipper(a, "t_1", 1, func(error) {})
	data := strings.Repeat("aé€😀", 300000) // 3 MiB: chunks split it at every offset
	// Odd write sizes so writes end inside runes too.
	for p := []byte(data); len(p) > 0; {
		n := min(len(p), 32749)
		_, _ = s.Write(p[:n])
		p = p[n:]
	}
	s.close()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var b strings.Builder
	for _, c := range ls.chunks {
		if !utf8.ValidString(c.Data) {
			t.Fatalf("chunk %d (%d bytes) is not valid UTF-8: it splits a rune", c.Seq, len(c.Data))
		}
		b.WriteString(c.Data)
	}
	if b.String() != data {
		t.Fatal("received output differs from what was written")
	}
}

func TestRuneBoundary(t *testing.T) {
	t.Parallel()
	b := []byte("a€b😀") // a | e2 82 ac | b | f0 9f 98 80
	var got []int
	for n := 0; n <= len(b); n++ {
		got = append(got, runeBoundary(b, n))
	}
	want := []int{0, 1, 1, 1, 4, 5, 5, 5, 5, 9}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runeBoundary (-want +got):\n%s", diff)
	}
	// Invalid bytes are not held back.
	if n := runeBoundary([]byte{'x', 0x80, 0x80, 0x80, 0x80}, 5); n != 5 {
		t.Errorf("runeBoundary over continuation bytes = %d, want 5", n)
	}
}
