package manager

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// TestSweepKeepsTasksOfTheOtherManagersDelegates runs two managers on one
// PostgreSQL database, a delegate connected to A, and tasks submitted
// through B, which has no delegate of its own. B's queue sweep must not
// end as not_assigned a task that A's delegate can take (a queued one) or
// has taken (a running one), however long they wait or run; once the
// delegate has not been seen for a liveness window, the queued one still
// waits for it (a known delegate) until its queue timeout, and the
// running one is left to its lease.
func TestSweepKeepsTasksOfTheOtherManagersDelegates(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	// Sweeps are run by the test, with chosen times: B's own sweep loop
	// waits an hour.
	cfg := Config{HeartbeatInterval: time.Hour, DefaultQueueTimeout: 24 * time.Hour}
	bcfg := cfg
	bcfg.SweepInterval = time.Hour
	tms := startTestManagers(t, dsn, cfg, bcfg)
	a, b := tms[0], tms[1]
	ctx := context.Background()
	viaB := b.client(t, b.admin.APIKey)
	tok, err := viaB.CreateToken(ctx, "far")
	if err != nil {
		t.Fatal(err)
	}
	d, reg := a.registerFake(t, a.admin.AccountID, tok.Value, "far", "far-host", "far")
	spec := protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "x"}, Selectors: []string{"far"}}
	waiting, err := viaB.SubmitTask(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	running, err := viaB.SubmitTask(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	acq, err := d.Acquire(ctx, running.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Started(ctx, running.ID, protocol.StartedRequest{Epoch: acq.Epoch}); err != nil {
		t.Fatal(err)
	}
	status := func(id string) string {
		t.Helper()
		got, err := viaB.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}

	// Two windows pass; A records the delegate's heartbeats meanwhile.
	now := time.Now()
	window := b.m.window()
	b.m.dispatch.SweepQueue(ctx, now)
	later := now.Add(window + time.Second)
	if _, err := b.st.TouchInstances(ctx, []store.InstanceTouch{{ID: reg.InstanceID, LastHeartbeat: later, Connection: protocol.ConnPolling}}); err != nil {
		t.Fatal(err)
	}
	b.m.dispatch.SweepQueue(ctx, later)
	if got := status(waiting.ID); got != protocol.StatusQueued {
		t.Errorf("a task that the other manager's delegate can take: %s after a window, want queued", got)
	}
	if got := status(running.ID); got != protocol.StatusRunning {
		t.Errorf("a task that the other manager's delegate runs: %s after a window, want running", got)
	}

	// The delegate is not seen for two more windows.
	for _, at := range []time.Time{later.Add(window + time.Second), later.Add(2*window + 2*time.Second)} {
		b.m.dispatch.SweepQueue(ctx, at)
	}
	if got := status(waiting.ID); got != protocol.StatusQueued {
		t.Errorf("a task whose only delegate is not connected: %s, want %s until its queue timeout", got, protocol.StatusQueued)
	}
	if got := status(running.ID); got != protocol.StatusRunning {
		t.Errorf("a running task: %s after its delegate was not seen for a window, want running (its lease decides)", got)
	}
	b.m.dispatch.SweepQueue(ctx, now.Add(cfg.DefaultQueueTimeout+time.Second))
	if got := status(waiting.ID); got != protocol.StatusNotAssigned {
		t.Errorf("a task past its queue timeout: %s, want %s", got, protocol.StatusNotAssigned)
	}
}

// TestFollowThroughTheOtherManager runs two managers on one PostgreSQL
// database, a delegate connected to A, and follows its task's output
// through B, whose followers read the store only every hour on their own:
// each chunk and the end of the task reach B's follower by A's
// notification.
func TestFollowThroughTheOtherManager(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	tms := startTestManagers(t, dsn, Config{}, Config{FollowPollInterval: time.Hour})
	a, b := tms[0], tms[1]
	ctx := context.Background()
	viaB := b.client(t, b.admin.APIKey)
	tok, err := viaB.CreateToken(ctx, "far")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := a.registerFake(t, a.admin.AccountID, tok.Value, "far", "far-host", "far")
	task, err := viaB.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "x"}, Selectors: []string{"far"}})
	if err != nil {
		t.Fatal(err)
	}
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Started(ctx, task.ID, protocol.StartedRequest{Epoch: acq.Epoch}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "manager B listening", func() bool { return b.m.bus.Listening() })

	lines := make(chan protocol.LogStreamLine, 16)
	followed := make(chan error, 1)
	fctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop) // before the managers stop: the client would retry
	go func() {
		_, err := viaB.StreamLogs(fctx, task.ID, true, func(l protocol.LogStreamLine) error {
			lines <- l
			return nil
		})
		followed <- err
	}()
	eventually(t, 10*time.Second, "the follow subscribed on B", func() bool { return followers(b, task.ID) == 1 })
	next := func(what string) protocol.LogStreamLine {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not reach the follower on B within 10s (its own store reads are an hour apart)", what)
			return protocol.LogStreamLine{}
		}
	}
	for seq := int64(1); seq <= 3; seq++ {
		data := fmt.Sprintf("line %d\n", seq)
		if err := d.SendLogs(ctx, task.ID, protocol.LogsRequest{Epoch: acq.Epoch, Chunks: []protocol.LogChunk{{Seq: seq, Data: data}}}); err != nil {
			t.Fatal(err)
		}
		if l := next("chunk " + data); l.Chunk == nil || l.Chunk.Data != data {
			t.Fatalf("follower on B got %+v, want chunk %q", l, data)
		}
	}
	zero := 0
	if _, err := d.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero, LastSeq: 3}); err != nil {
		t.Fatal(err)
	}
	if l := next("the end of the task"); l.Task == nil || l.Task.Status != protocol.StatusSucceeded {
		t.Fatalf("follower on B got %+v, want the task, succeeded", l)
	}
	if err := <-followed; err != nil {
		t.Fatalf("follow through B: %v", err)
	}
}
