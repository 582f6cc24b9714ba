package manager

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// BenchmarkThroughput measures trivial tasks from submit to result through
// one in-process manager on a real SQLite file and loopback HTTP, with
// simulated delegates that long-poll, acquire, report started and report a
// result without starting a process. The figure that matters is tasks/s.
func BenchmarkThroughput10(b *testing.B) { benchThroughput(b, 10) }
func BenchmarkThroughput50(b *testing.B) { benchThroughput(b, 50) }

func benchThroughput(b *testing.B, delegates int) {
	tm := startTestManager(b, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := tm.client(b, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	for i := range delegates {
		c, _ := tm.registerFake(b, tm.admin.AccountID, tok.Value, "bench", fmt.Sprintf("h%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			simulateDelegate(ctx, c, &done)
		}()
	}
	spec := protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}}
	const submitters = 8
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var sw sync.WaitGroup
	for range submitters {
		sw.Add(1)
		go func() {
			defer sw.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := admin.SubmitTask(ctx, spec); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	sw.Wait()
	deadline := time.Now().Add(time.Minute)
	for done.Load() < int64(b.N) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	b.StopTimer()
	if got := done.Load(); got < int64(b.N) {
		b.Fatalf("%d of %d tasks finished within a minute", got, b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "tasks/s")
	cancel()
	wg.Wait()
}

// simulateDelegate long-polls and runs every offered task instantly.
func simulateDelegate(ctx context.Context, c *client.Client, done *atomic.Int64) {
	ok := 0
	for ctx.Err() == nil {
		resp, err := c.Poll(ctx, 5*time.Second)
		if err != nil {
			continue
		}
		for _, ev := range resp.Events {
			if ev.Kind != protocol.EventTaskAvailable {
				continue
			}
			acq, err := c.Acquire(ctx, ev.TaskID)
			if err != nil {
				continue
			}
			if err := c.Started(ctx, acq.TaskID, protocol.StartedRequest{Epoch: acq.Epoch}); err != nil {
				continue
			}
			if _, err := c.Result(ctx, acq.TaskID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &ok}); err != nil {
				continue
			}
			done.Add(1)
		}
	}
}
