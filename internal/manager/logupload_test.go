package manager

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestLargestLogUploads: the registration answer says how output is
// stored and how much one upload may carry; two uploads that large (log
// frames, 256 KiB chunks) are taken, a follower gets every byte live, and
// the store keeps the head, the marker and the tail.
func TestLargestLogUploads(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, err := a.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	d, reg := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d", "h")
	want := &protocol.LogLimits{HeadBytes: 4 << 20, TailBytes: 4 << 20, MaxUploadBytes: protocol.MaxLogUpload}
	if diff := cmp.Diff(want, reg.Logs); diff != "" {
		t.Fatalf("registration answer's Logs (-want +got):\n%s", diff)
	}
	task, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}

	const chunk = 256 << 10
	per := protocol.MaxLogUpload / chunk
	data := func(seq int) string { return strings.Repeat(fmt.Sprintf("%07d\n", seq), chunk/8) }

	followed := make(chan string, 1)
	go func() {
		var b strings.Builder
		_, err := a.StreamLogs(ctx, task.ID, true, func(l protocol.LogStreamLine) error {
			if l.Chunk != nil {
				b.WriteString(l.Chunk.Data)
			}
			return nil
		})
		if err != nil {
			b.WriteString("stream: " + err.Error())
		}
		followed <- b.String()
	}()
	eventually(t, 30*time.Second, "the follower subscribed", func() bool {
		return followers(tm, task.ID) > 0
	})

	var all strings.Builder
	seq := 0
	for range 2 {
		req := protocol.LogsRequest{Epoch: acq.Epoch}
		for range per {
			seq++
			req.Chunks = append(req.Chunks, protocol.LogChunk{Seq: int64(seq), Time: time.Now(), Data: data(seq)})
			all.WriteString(data(seq))
		}
		if err := d.SendLogFrames(ctx, task.ID, req); err != nil {
			t.Fatalf("upload of %d bytes: %v", per*chunk, err)
		}
	}
	zero := 0
	if _, err := d.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero, LastSeq: int64(seq)}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-followed:
		if got != all.String() {
			t.Errorf("the follower got %d bytes, want all %d of them", len(got), all.Len())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the follower did not end")
	}

	// Stored: chunks 1-16 (the head), the marker, chunks 113-128 (the tail).
	var stored []string
	if _, err := a.StreamLogs(ctx, task.ID, false, func(l protocol.LogStreamLine) error {
		if l.Chunk != nil {
			if strings.Contains(l.Chunk.Data, "omitted") {
				stored = append(stored, l.Chunk.Data)
			} else {
				stored = append(stored, strings.TrimSpace(l.Chunk.Data[:8]))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var wantStored []string
	for i := 1; i <= 16; i++ {
		wantStored = append(wantStored, fmt.Sprintf("%07d", i))
	}
	wantStored = append(wantStored, fmt.Sprintf("\n[legate: %d bytes of output omitted here: a task's stored output keeps its first and last 4 MiB]\n", 24<<20))
	for i := 113; i <= 128; i++ {
		wantStored = append(wantStored, fmt.Sprintf("%07d", i))
	}
	if diff := cmp.Diff(wantStored, stored); diff != "" {
		t.Errorf("stored output (-want +got):\n%s", diff)
	}
	st, err := tm.m.st.GetTask(ctx, tm.admin.AccountID, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.LogBytes != 32<<20 || st.LogOmitted != 24<<20 {
		t.Errorf("log bytes %d, omitted %d; want %d and %d", st.LogBytes, st.LogOmitted, 32<<20, 24<<20)
	}
}
