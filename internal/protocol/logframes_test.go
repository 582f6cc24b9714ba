package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func readAllFrames(t *testing.T, body []byte) ([]byte, []LogChunk, []string, error) {
	t.Helper()
	r := bufio.NewReader(bytes.NewReader(body))
	var kinds []byte
	var chunks []LogChunk
	var lines []string
	var buf []byte
	for {
		kind, p, err := ReadLogFrame(r, buf)
		if errors.Is(err, io.EOF) {
			return kinds, chunks, lines, nil
		}
		if err != nil {
			return kinds, chunks, lines, err
		}
		buf = p[:0]
		kinds = append(kinds, kind)
		switch kind {
		case FrameChunk:
			c, err := ParseChunkFrame(p)
			if err != nil {
				return kinds, chunks, lines, err
			}
			chunks = append(chunks, c)
		case FrameLine:
			lines = append(lines, string(p))
		}
	}
}

func TestLogFramesRoundTrip(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 26, 8, 0, 0, 123456789, time.UTC)
	chunks := []LogChunk{
		{Seq: 1, Time: ts, Data: "hello\n"},
		{Seq: 2, Attempt: 3, Time: ts.Add(time.Second), Data: strings.Repeat("x\x00\xff", 100000)},
		{Seq: 1 << 40, Data: ""}, // no time, no data
	}
	var body []byte
	for _, c := range chunks {
		body = AppendChunkFrame(body, c)
	}
	body = AppendLogFrame(body, FrameKeepAlive, nil)
	body = AppendLogFrame(body, FrameLine, []byte(`{"task":{"id":"t_1"}}`))
	kinds, got, lines, err := readAllFrames(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(chunks, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if string(kinds) != "ccckj" || len(lines) != 1 || lines[0] != `{"task":{"id":"t_1"}}` {
		t.Errorf("kinds %q lines %q", kinds, lines)
	}
}

// TestUploadFrameIsAChunkFrame: AppendUploadFrame makes from bytes what
// AppendChunkFrame makes from an uploaded chunk (attempt 0).
func TestUploadFrameIsAChunkFrame(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 26, 8, 0, 0, 123456789, time.UTC)
	for _, c := range []LogChunk{
		{Seq: 1, Time: ts, Data: "hello\n"},
		{Seq: 1 << 40, Data: strings.Repeat("x\x00\xff", 100000)},
		{Seq: 7, Time: ts, Data: ""},
	} {
		want := AppendChunkFrame([]byte("prefix"), c)
		got := AppendUploadFrame([]byte("prefix"), c.Seq, c.Time, []byte(c.Data))
		if !bytes.Equal(want, got) {
			t.Errorf("chunk %d: AppendUploadFrame differs from AppendChunkFrame", c.Seq)
		}
	}
}

func TestLogFramesRefuseMalformed(t *testing.T) {
	t.Parallel()
	good := AppendChunkFrame(nil, LogChunk{Seq: 7, Data: "abc"})
	huge := append([]byte{FrameChunk}, 0xff, 0xff, 0xff, 0xff, 0x0f) // a length over the limit
	for _, tt := range []struct {
		name string
		body []byte
		want error
	}{
		{"unknown kind", []byte("x\x00"), ErrLogFrame},
		{"too large", huge, ErrLogFrame},
		{"cut in the length", []byte{FrameChunk, 0x80}, io.ErrUnexpectedEOF},
		{"cut in the payload", good[:len(good)-1], io.ErrUnexpectedEOF},
		{"empty chunk payload", []byte{FrameChunk, 0}, ErrLogFrame},
		{"chunk without time", []byte{FrameChunk, 2, 1, 0}, ErrLogFrame},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := readAllFrames(t, tt.body)
			if !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
		})
	}
}

// FuzzLogFrames: any body decodes to frames or fails with an error (never a
// panic or an allocation beyond the payload limit), and the chunks decoded
// encode back to frames that decode to the same chunks.
func FuzzLogFrames(f *testing.F) {
	f.Add(AppendChunkFrame(nil, LogChunk{Seq: 1, Time: time.Unix(1, 2), Data: "hi"}))
	f.Add(AppendLogFrame(AppendLogFrame(nil, FrameKeepAlive, nil), FrameLine, []byte(`{}`)))
	f.Add([]byte{FrameChunk, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, body []byte) {
		kinds, chunks, _, err := readAllFrames(t, body)
		upload, uerr := DecodeChunkFrames(body)
		if onlyChunks := !bytes.ContainsFunc(kinds, func(r rune) bool { return byte(r) != FrameChunk }); err == nil && onlyChunks {
			if uerr != nil {
				t.Fatalf("the stream reader took the body, DecodeChunkFrames refused it: %v", uerr)
			}
			if diff := cmp.Diff(chunks, upload, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("DecodeChunkFrames differs from the stream reader (-stream +upload):\n%s", diff)
			}
		} else if uerr == nil {
			t.Fatalf("DecodeChunkFrames took a body the stream reader refused (%v) or with kinds %q", err, kinds)
		}
		var again []byte
		for _, c := range chunks {
			again = AppendChunkFrame(again, c)
		}
		_, back, _, err := readAllFrames(t, again)
		if err != nil {
			t.Fatalf("re-encoded chunks do not decode: %v", err)
		}
		if diff := cmp.Diff(chunks, back); diff != "" {
			t.Fatalf("re-encoded chunks differ (-first +again):\n%s", diff)
		}
	})
}
