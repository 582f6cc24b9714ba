package manager

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// BenchmarkThroughput measures trivial tasks from submit to result through
// one in-process manager on a real SQLite file and loopback HTTP, with
// simulated delegates that long-poll, acquire, report started and report a
// result without starting a process. The figure that matters is tasks/s.
func BenchmarkThroughput10(b *testing.B) { benchThroughput(b, 10, false) }
func BenchmarkThroughput50(b *testing.B) { benchThroughput(b, 50, false) }

// BenchmarkThroughputWS is BenchmarkThroughput with delegates that keep a
// WebSocket and claim and report in frames on it (protocol 5): no HTTP
// request per task but the submit.
func BenchmarkThroughputWS10(b *testing.B) { benchThroughput(b, 10, true) }
func BenchmarkThroughputWS50(b *testing.B) { benchThroughput(b, 50, true) }

func benchThroughput(b *testing.B, delegates int, ws bool) {
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
		c, reg := tm.registerFake(b, tm.admin.AccountID, tok.Value, "bench", fmt.Sprintf("h%d", i))
		if ws {
			conn := dialBench(b, tm, reg.Session)
			wg.Go(func() { simulateWSDelegate(ctx, conn, &done) })
			continue
		}
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

func dialBench(b *testing.B, tm *testManager, session string) *websocket.Conn {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+session)
	c, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(tm.url, "http")+protocol.PathWebSocket, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	return c
}

// simulateWSDelegate claims the offers that arrived while its last claim
// was on its way in one acquire frame, then sends their started frames,
// and once those are acknowledged their result frames, and runs every
// task instantly.
func simulateWSDelegate(ctx context.Context, c *websocket.Conn, done *atomic.Int64) {
	defer c.CloseNow()
	offers := make(chan string, 4096)
	acks := make(chan protocol.Event, 4096)
	var rd sync.WaitGroup
	rd.Go(func() {
		defer close(acks)
		for {
			var ev protocol.Event
			if err := wsjson.Read(ctx, c, &ev); err != nil {
				return
			}
			switch ev.Kind {
			case protocol.EventTaskAvailable:
				offers <- ev.TaskID
			case protocol.EventAck:
				acks <- ev
			}
		}
	})
	defer rd.Wait()
	var req int64
	// call sends frames and waits for as many acks (answered in any order).
	call := func(frames []protocol.Frame) map[int64]protocol.Event {
		for i := range frames {
			req++
			frames[i].Req = req
			if err := wsjson.Write(ctx, c, frames[i]); err != nil {
				return nil
			}
		}
		got := map[int64]protocol.Event{}
		for len(got) < len(frames) {
			ev, ok := <-acks
			if !ok {
				return nil
			}
			got[ev.Req] = ev
		}
		return got
	}
	ok := 0
	for {
		var ids []string
		select {
		case <-ctx.Done():
			_ = c.Close(websocket.StatusNormalClosure, "")
			return
		case id := <-offers:
			ids = append(ids, id)
		}
	more:
		for len(ids) < protocol.MaxAcquireBatch {
			select {
			case id := <-offers:
				ids = append(ids, id)
			default:
				break more
			}
		}
		got := call([]protocol.Frame{{Kind: protocol.FrameAcquire, TaskIDs: ids}})
		if got == nil {
			return
		}
		var started, results []protocol.Frame
		for _, an := range got[req].Acquired {
			if an.Acquired == nil {
				continue
			}
			started = append(started, protocol.Frame{Kind: protocol.FrameStarted, TaskID: an.TaskID, Started: &protocol.StartedRequest{Epoch: an.Acquired.Epoch}})
			results = append(results, protocol.Frame{Kind: protocol.FrameResult, TaskID: an.TaskID,
				Result: &protocol.ResultRequest{Epoch: an.Acquired.Epoch, Status: protocol.StatusSucceeded, ExitCode: &ok}})
		}
		if len(started) == 0 {
			continue
		}
		if call(started) == nil {
			return
		}
		got = call(results)
		if got == nil {
			return
		}
		for _, ev := range got {
			if ev.Error == nil {
				done.Add(1)
			}
		}
	}
}
