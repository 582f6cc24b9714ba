package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// Output uploaded as log frames and as JSON is one log: stored in order,
// redelivered chunks once, and served alike as log frames (to a client
// that accepts them) and as NDJSON.
func TestLogFramesUploadAndStream(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, _ := a.CreateToken(ctx, "t")
	d, reg := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d", "h")
	task, _ := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}})
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789\n", 30000) // 330 kB, escapes nothing
	odd := "quote \" backslash \\ tab \t nul \x00 é\n"
	frames := []protocol.LogChunk{{Seq: 1, Data: "one\n"}, {Seq: 2, Data: big}, {Seq: 3, Data: odd}}
	if err := d.SendLogFrames(ctx, task.ID, protocol.LogsRequest{Epoch: acq.Epoch, Chunks: frames}); err != nil {
		t.Fatal(err)
	}
	if err := d.SendLogs(ctx, task.ID, protocol.LogsRequest{Epoch: acq.Epoch, Chunks: []protocol.LogChunk{{Seq: 4, Data: "four\n"}}}); err != nil {
		t.Fatal(err)
	}
	// A redelivery (the answer was lost) is stored once.
	if err := d.SendLogFrames(ctx, task.ID, protocol.LogsRequest{Epoch: acq.Epoch, Chunks: frames[1:]}); err != nil {
		t.Fatal(err)
	}
	// Another lease's frames are refused as stale.
	wantCode(t, "stale frames", d.SendLogFrames(ctx, task.ID, protocol.LogsRequest{Epoch: acq.Epoch + 1, Chunks: frames[:1]}), protocol.CodeStaleLease)
	zero := 0
	if _, err := d.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero, LastSeq: 4}); err != nil {
		t.Fatal(err)
	}
	want := "one\n" + big + strings.ReplaceAll(odd, "\x00", "\uFFFD") + "four\n"

	// The client asks for log frames.
	var got strings.Builder
	final, err := a.StreamLogs(ctx, task.ID, true, func(l protocol.LogStreamLine) error {
		if l.Chunk != nil {
			got.WriteString(l.Chunk.Data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want || final.Status != protocol.StatusSucceeded {
		t.Errorf("streamed as log frames: %d bytes (want %d), equal %v; task %s", got.Len(), len(want), got.String() == want, final.Status)
	}

	// A client that asks for NDJSON gets NDJSON.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tm.url+protocol.PathTasks+"/"+task.ID+"/logs", nil)
	req.Header.Set("Authorization", "Bearer "+tm.admin.APIKey)
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("Content-Type %q, want application/x-ndjson", ct)
	}
	var nd strings.Builder
	for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
		var l protocol.LogStreamLine
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("NDJSON line %q: %v", line, err)
		}
		if l.Chunk != nil {
			nd.WriteString(l.Chunk.Data)
		}
	}
	if nd.String() != want {
		t.Errorf("streamed as NDJSON: %d bytes, want the %d uploaded", nd.Len(), len(want))
	}

	// Malformed uploads are refused with a clear error.
	for _, tt := range []struct {
		name, epoch string
		body        []byte
	}{
		{"no epoch", "", protocol.AppendChunkFrame(nil, protocol.LogChunk{Seq: 5, Data: "x"})},
		{"bad epoch", "one", protocol.AppendChunkFrame(nil, protocol.LogChunk{Seq: 5, Data: "x"})},
		{"garbage", "1", []byte("not frames")},
		{"cut short", "1", protocol.AppendChunkFrame(nil, protocol.LogChunk{Seq: 5, Data: "xyz"})[:5]},
		{"seq 0", "1", protocol.AppendChunkFrame(nil, protocol.LogChunk{Seq: 0, Data: "x"})},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tm.url+protocol.PathDelegateTask+"/"+task.ID+"/logs", bytes.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer "+reg.Session)
		req.Header.Set("Content-Type", protocol.ContentTypeLogFrames)
		req.Header.Set(protocol.HeaderProtocolVersion, strconv.Itoa(protocol.Version))
		if tt.epoch != "" {
			req.Header.Set(protocol.HeaderLogEpoch, tt.epoch)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte(protocol.CodeBadRequest)) {
			t.Errorf("%s: HTTP %d %s, want 400 bad_request", tt.name, resp.StatusCode, b)
		}
	}
}
