package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// benchFollowLatency measures how long a line of a task's output takes to
// reach a follower (legate task run, legate task logs --follow) when two
// managers share a PostgreSQL database and the delegate is connected to
// manager A: through A itself, or through B (other). The task prints b.N
// lines 20 ms apart, each its own print time; the latency of a line is
// from that time to its arrival at the follower. Run:
//
//	(cd e2e && go test -run '^$' -bench FollowLatency -benchtime 200x .)
func benchFollowLatency(b *testing.B, other bool) {
	p := startManagerPair(b)
	tok := p.a.token("follow")
	p.a.delegate("follow", "follow-host", p.a.seed004Env(tok, "follow", "mm-follow")...)
	via := p.a
	if other {
		via = p.b
	}
	c, err := client.New(via.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	c.SetSecret(via.apiKey)
	ctx := context.Background()
	spec := protocol.TaskSpec{Type: protocol.TaskShell, Selectors: []string{"mm-follow"}, Shell: &protocol.ShellSpec{
		Script: "for i in $(seq " + strconv.Itoa(b.N) + "); do date +%s%N; sleep 0.02; done",
	}}
	b.ResetTimer()
	task, err := c.SubmitTask(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	var partial string
	end, err := c.StreamLogs(ctx, task.ID, true, func(l protocol.LogStreamLine) error {
		if l.Chunk == nil {
			return nil
		}
		now := time.Now()
		lines := strings.Split(partial+l.Chunk.Data, "\n")
		partial = lines[len(lines)-1]
		for _, s := range lines[:len(lines)-1] {
			ns, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				b.Fatalf("output line %q: %v", s, err)
			}
			lat = append(lat, now.Sub(time.Unix(0, ns)))
		}
		return nil
	})
	b.StopTimer()
	if err != nil || end.Status != protocol.StatusSucceeded {
		b.Fatalf("task %s: %s (%s), %v", task.ID, end.Status, end.Error, err)
	}
	if len(lat) != b.N {
		b.Fatalf("%d output lines, want %d", len(lat), b.N)
	}
	b.ReportMetric(ms(percentile(lat, 0.5)), "p50-output-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-output-ms")
	b.ReportMetric(ms(percentile(lat, 1)), "max-output-ms")
}

func BenchmarkFollowLatencyOwnManager(b *testing.B)   { benchFollowLatency(b, false) }
func BenchmarkFollowLatencyOtherManager(b *testing.B) { benchFollowLatency(b, true) }
