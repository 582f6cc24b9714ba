package delegate

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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
	// answerReq, when set, may answer a request instead (called with mu held).
	answerReq func(w http.ResponseWriter, r *http.Request) bool
	// old: JSON only, as a manager before log frames (which answers a
	// body of frames 400).
	old bool
	// requests counts the uploads taken as log frames and as JSON.
	frames, jsons int
	// gates: an upload of a task that has a gate waits for a value of it.
	gates map[string]chan struct{}
	// uploads lists every upload taken; byTask has each task's output.
	uploads []upload
	byTask  map[string]*strings.Builder
}

// upload is one log upload a logServer took.
type upload struct {
	task          string
	chunks, bytes int
	first         int64 // seq of its first chunk
	offset        int   // bytes of the task's output before it
}

// taskOf is the task ID in the path of a log upload.
func taskOf(path string) string {
	parts := strings.Split(strings.TrimSuffix(path, "/logs"), "/")
	return parts[len(parts)-1]
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
	ls.mu.Lock()
	answerReq := ls.answerReq
	ls.mu.Unlock()
	if answerReq != nil {
		ls.mu.Lock()
		refuse := answerReq(w, r)
		ls.mu.Unlock()
		if refuse {
			return
		}
	}
	ls.mu.Lock()
	gate := ls.gates[taskOf(r.URL.Path)]
	ls.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
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
	u := upload{task: taskOf(r.URL.Path), chunks: len(req.Chunks)}
	if ls.byTask == nil {
		ls.byTask = map[string]*strings.Builder{}
	}
	out := ls.byTask[u.task]
	if out == nil {
		out = &strings.Builder{}
		ls.byTask[u.task] = out
	}
	u.offset = out.Len()
	for i, c := range req.Chunks {
		if i == 0 {
			u.first = c.Seq
		}
		u.bytes += len(c.Data)
		out.WriteString(c.Data)
	}
	ls.uploads = append(ls.uploads, u)
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

// outputOf is the output of task the server took, and its uploads.
func (ls *logServer) outputOf(task string) (string, []upload) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var ups []upload
	for _, u := range ls.uploads {
		if u.task == task {
			ups = append(ups, u)
		}
	}
	if b := ls.byTask[task]; b != nil {
		return b.String(), ups
	}
	return "", ups
}

// gathering reports whether s gathers output, and how much waits.
func gathering(s *shipper) (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gather, len(s.buf)
}

// pumpUntilGathering lets the uploads of s through (gate) one at a time,
// each once its writer is held (a full batch waits for the sender), until
// s gathers.
func pumpUntilGathering(t *testing.T, s *shipper, gate chan struct{}) {
	t.Helper()
	for {
		waitFor(t, "the writer to be held in Write", writerHeld(s))
		if g, _ := gathering(s); g > 0 {
			return
		}
		select {
		case gate <- struct{}{}:
		case <-time.After(30 * time.Second):
			t.Fatal("no upload came to take its turn")
		}
	}
}

// defaultLimits are a manager's LogLimits by default.
var defaultLimits = protocol.LogLimits{HeadBytes: 4 << 20, TailBytes: 4 << 20, MaxUploadBytes: protocol.MaxLogUpload}

const gathered = gatherHalfTails * 2 << 20 // gatherSize with defaultLimits

// TestShipperGathersFastOutput: once a task's output is past the head and
// a tail and a full batch waited for the sender, output gathers into
// uploads of up to one and a half tails; the first head and tail go in
// uploads of at most maxBatch chunks, as before; every byte arrives in
// order, in chunks of at most maxChunk.
func TestShipperGathersFastOutput(t *testing.T) {
	t.Parallel()
	for _, head := range []int64{0, 4 << 20} {
		t.Run(fmt.Sprintf("head %d", head), func(t *testing.T) {
			t.Parallel()
			ls := &logServer{gates: map[string]chan struct{}{"t_1": make(chan struct{})}}
			a := shipperAgent(t, ls, nil)
			lim := defaultLimits
			lim.HeadBytes = head
			a.logLimits.Store(&lim)
			release := sync.OnceFunc(func() { close(ls.gates["t_1"]) })
			t.Cleanup(release)
			s := newShipper(a, "t_1", 1, func(error) {})
			data := pattern(48 << 20)
			done := writeAll(s, data)
			pumpUntilGathering(t, s, ls.gates["t_1"])
			release()
			<-done
			s.close()
			got, ups := ls.outputOf("t_1")
			if got != data {
				t.Fatalf("received %d bytes, want the %d written, in order", len(got), len(data))
			}
			seq, large := int64(1), 0
			for _, u := range ups {
				if u.first != seq {
					t.Fatalf("upload at byte %d starts with chunk %d, want %d", u.offset, u.first, seq)
				}
				seq += int64(u.chunks)
				if u.bytes > gathered || u.chunks*maxChunk < u.bytes {
					t.Errorf("upload at byte %d: %d bytes in %d chunks (at most %d bytes, chunks of %d)", u.offset, u.bytes, u.chunks, gathered, maxChunk)
				}
				if int64(u.offset) < head+lim.TailBytes && u.chunks > maxBatch {
					t.Errorf("upload at byte %d, in the first head and tail, carries %d chunks; want at most %d", u.offset, u.chunks, maxBatch)
				}
				if u.chunks > maxBatch {
					large++
				}
			}
			if large == 0 {
				t.Errorf("no upload gathered more than %d chunks: %+v", maxBatch, ups)
			}
			if len(a.gatherSlot) != 0 {
				t.Error("the gather slot is still held after the output ended")
			}
		})
	}
}

// TestShipperGatherBoundsMemory: while gathering, the writer is held once
// gatherSize bytes wait; another task of the delegate, writing fast at
// the same time, does not gather (one at a time) and is held at
// maxBuffered. Both outputs arrive whole.
func TestShipperGatherBoundsMemory(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	ls := &logServer{gates: map[string]chan struct{}{"t_1": gate}}
	a := shipperAgent(t, ls, nil)
	lim := defaultLimits
	lim.HeadBytes = 0
	a.logLimits.Store(&lim)
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	s1 := newShipper(a, "t_1", 1, func(error) {})
	data1 := pattern(32 << 20)
	done1 := writeAll(s1, data1)
	pumpUntilGathering(t, s1, gate)
	waitFor(t, "task 1 to gather, its writer held", func() bool {
		g, _ := gathering(s1)
		return g > 0 && writerHeld(s1)()
	})
	if g, buffered := gathering(s1); g != gathered || buffered > gathered {
		t.Fatalf("gathering %d with %d bytes waiting; want %d at most", g, buffered, gathered)
	}

	s2 := newShipper(a, "t_2", 1, func(error) {})
	data2 := pattern(8 << 20)
	<-writeAll(s2, data2)
	s2.close()
	got2, ups2 := ls.outputOf("t_2")
	if got2 != data2 {
		t.Fatalf("task 2: received %d bytes, want the %d written", len(got2), len(data2))
	}
	for _, u := range ups2 {
		if u.chunks > maxBatch {
			t.Fatalf("task 2 gathered an upload of %d chunks while task 1 gathered", u.chunks)
		}
	}

	release()
	<-done1
	s1.close()
	if got1, _ := ls.outputOf("t_1"); got1 != data1 {
		t.Fatalf("task 1: received %d bytes, want the %d written", len(got1), len(data1))
	}
	if len(a.gatherSlot) != 0 {
		t.Error("the gather slot is still held after the output ended")
	}
}

// TestShipperSlowOutputIsNotGathered: output that comes slowly goes as it
// comes, one upload per write, even past the head of a manager that takes
// large uploads; and output that slows down after coming fast stops
// gathering.
func TestShipperSlowOutputIsNotGathered(t *testing.T) {
	t.Parallel()
	ls := &logServer{}
	a := shipperAgent(t, ls, nil)
	lim := defaultLimits
	lim.HeadBytes = 0
	a.logLimits.Store(&lim)
	s := newShipper(a, "t_1", 1, func(error) {})
	var want strings.Builder
	line := func(i int) {
		l := fmt.Sprintf("line %d\n", i)
		_, _ = s.Write([]byte(l))
		want.WriteString(l)
		waitFor(t, fmt.Sprintf("line %d to arrive without more output", i), func() bool {
			got, _ := ls.outputOf("t_1")
			return got == want.String()
		})
		if g, _ := gathering(s); g != 0 {
			t.Fatalf("slow output gathers (%d)", g)
		}
	}
	for i := range 20 {
		line(i)
	}
	_, ups := ls.outputOf("t_1")
	if len(ups) != 20 {
		t.Errorf("%d uploads for 20 slow writes, want one each", len(ups))
	}

	// Fast (each upload held until a full batch waits) until it gathers,
	// then slow again.
	gate := make(chan struct{})
	ls.mu.Lock()
	ls.gates = map[string]chan struct{}{"t_1": gate}
	ls.mu.Unlock()
	fast := pattern(20 << 20)
	_, _ = s.Write([]byte("x"))
	want.WriteString("x")
	done := writeAll(s, fast)
	pumpUntilGathering(t, s, gate)
	close(gate)
	<-done
	want.WriteString(fast)
	waitFor(t, "the fast output to arrive", func() bool {
		got, _ := ls.outputOf("t_1")
		return got == want.String()
	})
	if g, _ := gathering(s); g == 0 {
		t.Log("the fast output ended without gathering") // possible: its last upload was small
	}
	for i := 20; i < 25; i++ {
		line(i)
	}
	s.close()
	if len(a.gatherSlot) != 0 {
		t.Error("the gather slot is still held after the output ended")
	}
}

// TestShipperSplitsALargeUploadTheManagerRefuses: a manager that said it
// takes large uploads and then refuses one as too large (413) gets the
// same chunks in uploads of maxBatch, and no more large ones.
func TestShipperSplitsALargeUploadTheManagerRefuses(t *testing.T) {
	t.Parallel()
	ls := &logServer{gates: map[string]chan struct{}{"t_1": make(chan struct{})}}
	a := shipperAgent(t, ls, nil)
	lim := defaultLimits
	lim.HeadBytes = 0
	a.logLimits.Store(&lim)
	refused := 0
	srvAnswer := func(w http.ResponseWriter, r *http.Request) bool {
		if r.ContentLength > int64(maxBatch*maxChunk+1024) {
			refused++
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_ = json.NewEncoder(w).Encode(protocol.ErrorBody{Error: protocol.Error{Code: protocol.CodeBadRequest, Message: "too large"}})
			return true
		}
		return false
	}
	ls.mu.Lock()
	ls.answerReq = srvAnswer
	ls.mu.Unlock()
	s := newShipper(a, "t_1", 1, func(error) {})
	data := pattern(24 << 20)
	done := writeAll(s, data)
	pumpUntilGathering(t, s, ls.gates["t_1"])
	close(ls.gates["t_1"])
	<-done
	s.close()
	got, ups := ls.outputOf("t_1")
	if got != data {
		t.Fatalf("received %d bytes, want the %d written, in order", len(got), len(data))
	}
	ls.mu.Lock()
	n := refused
	ls.mu.Unlock()
	if n != 1 {
		t.Errorf("%d uploads refused as too large, want 1 (then no more large ones)", n)
	}
	for _, u := range ups {
		if u.chunks > maxBatch {
			t.Errorf("an upload of %d chunks was taken", u.chunks)
		}
	}
}
