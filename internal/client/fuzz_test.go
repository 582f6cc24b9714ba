package client

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// bodyTransport answers the first request with a fuzzed body and every
// later one with a clean end of stream, so StreamLogs always terminates.
type bodyTransport struct {
	first string
	n     atomic.Int32
}

func (bt *bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body := bt.first
	if bt.n.Add(1) > 1 {
		body = `{"task":{"id":"t_1","status":"succeeded"}}` + "\n"
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-ndjson"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// FuzzStreamLogs feeds arbitrary stream bodies to the NDJSON decoder: it
// must not panic, must deliver chunks in strictly increasing order without
// repeats, and must end.
func FuzzStreamLogs(f *testing.F) {
	f.Add(`{"chunk":{"seq":1,"data":"a","attempt":1}}` + "\n\n" + `{"chunk":{"seq":2,"data":"b","attempt":1}}` + "\n" + `{"task":{"id":"t_1","status":"failed","exit_code":3}}` + "\n")
	f.Add(`{"chunk":{"seq":2,"attempt":1}}` + "\n" + `{"chunk":{"seq":1,"attempt":1}}` + "\n" + `{"chunk":{"seq":1,"attempt":2}}` + "\n")
	f.Add(`{"chunk":{"seq":1,"da`)
	f.Add("\n\n\n")
	f.Add(`{"task":{"id":"t_1"}}`)
	f.Add(`{"chunk":null,"task":null}` + "\n" + `[1,2]` + "\n")
	f.Fuzz(func(t *testing.T, body string) {
		c, err := New("http://fuzz.invalid", &http.Client{Transport: &bodyTransport{first: body}})
		if err != nil {
			t.Fatal(err)
		}
		c.backoffMin, c.backoffMax = time.Microsecond, time.Microsecond
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var last streamPos
		_, err = c.StreamLogs(ctx, "t_1", true, func(l protocol.LogStreamLine) error {
			if l.Chunk != nil {
				if !last.after(l.Chunk) {
					t.Fatalf("chunk %d/%d delivered after %d/%d", l.Chunk.Attempt, l.Chunk.Seq, last.attempt, last.seq)
				}
				last = streamPos{seen: true, attempt: l.Chunk.Attempt, seq: l.Chunk.Seq}
			}
			return nil
		})
		if ctx.Err() != nil {
			t.Fatalf("StreamLogs did not end: %v", err)
		}
	})
}
