package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// wedgedDelegate is a delegate that speaks the real protocol and keeps its
// heartbeat (with room: capacity 4) but does no work: it long-polls its
// events and records the offers; with claim it acquires what it is
// offered, lists it in its heartbeats and never starts it.
type wedgedDelegate struct {
	c     *client.Client
	claim bool

	mu      sync.Mutex
	offers  map[string]time.Time // task -> when the offer arrived
	running []protocol.RunningTask
	seq     int64
}

func (c *cluster) wedged(t *testing.T, ctx context.Context, token, name string, claim bool, tags ...string) *wedgedDelegate {
	t.Helper()
	w := &wedgedDelegate{claim: claim, offers: map[string]time.Time{}}
	var err error
	if w.c, err = client.New(c.url, nil); err != nil {
		t.Fatal(err)
	}
	w.register(t, ctx, c.account, token, name, tags)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { w.poll(ctx) })
	wg.Go(func() { w.heartbeat(ctx) })
	return w
}

// register registers (again: a new process, whose heartbeats count from 1).
func (w *wedgedDelegate) register(t *testing.T, ctx context.Context, account, token, name string, tags []string) {
	t.Helper()
	resp, err := w.c.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: account, Token: token,
		Name: name, Hostname: name + "-host", IP: "127.0.0.1", Tags: tags, Capacity: 4, Version: "test", TaskTypes: protocol.TaskTypes()})
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	w.c.SetSecret(resp.Session)
	w.mu.Lock()
	w.seq = 0
	w.mu.Unlock()
}

func (w *wedgedDelegate) poll(ctx context.Context) {
	for ctx.Err() == nil {
		ev, err := w.c.Poll(ctx, 2*time.Second)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond): // the manager may be busy: poll again
			}
			continue
		}
		for _, e := range ev.Events {
			if e.Kind != protocol.EventTaskAvailable {
				continue
			}
			w.mu.Lock()
			if _, ok := w.offers[e.TaskID]; !ok {
				w.offers[e.TaskID] = time.Now()
			}
			w.mu.Unlock()
			if w.claim {
				w.acquire(ctx, e.TaskID)
			}
		}
	}
}

// acquire claims a task and lists it from then on, never starting it.
func (w *wedgedDelegate) acquire(ctx context.Context, id string) error {
	acq, err := w.c.Acquire(ctx, id)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.running = append(w.running, protocol.RunningTask{ID: id, Epoch: acq.Epoch})
	w.mu.Unlock()
	return nil
}

func (w *wedgedDelegate) heartbeat(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond) // the cluster's heartbeat interval
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		w.seq++
		hb := protocol.Heartbeat{Seq: w.seq, Capacity: 4, Running: slices.Clone(w.running)}
		w.mu.Unlock()
		_, _ = w.c.Heartbeat(ctx, hb)
	}
}

func (w *wedgedDelegate) offeredAt(id string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.offers[id]
	return at, ok
}

// describe returns the one instance of the delegate named name.
func describe(t *testing.T, admin *client.Client, name string) protocol.DelegateDetail {
	t.Helper()
	d, err := admin.DescribeDelegate(context.Background(), name)
	if err != nil || len(d.Instances) != 1 {
		t.Fatalf("describe %s: %+v, %v", name, d, err)
	}
	return d.Instances[0]
}

// TestWedgedDelegate: a delegate that heartbeats with room but ignores its
// offers is marked unresponsive (delegates list, describe, explain, the
// metric), is offered nothing while so, and the tasks it was offered run
// on a healthy real delegate; a delegate that claims a task and never
// starts it loses the task, which runs elsewhere; a marked delegate that
// restarts, or claims a task, is responsive again. The healthy delegate,
// idle or busy, is never marked.
func TestWedgedDelegate(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx := context.Background()
	tok := c.token("wedged")
	admin, err := client.New(c.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin.SetSecret(c.apiKey)

	// The ignoring one is alone with the pool: its queue waits for it.
	ign := c.wedged(t, ctx, tok, "ignorer", false, "pool", "ignorer-only")
	claimer := c.wedged(t, ctx, tok, "claimer", true, "pool2")
	var first []string
	for range 3 {
		first = append(first, c.submit("--selector", "pool", "--script", "echo moved"))
	}
	var mark *protocol.DelegateUnresponsive
	eventually(t, 30*time.Second, "the ignoring delegate marked unresponsive", func() bool {
		mark = describe(t, admin, "ignorer").Unresponsive
		return mark != nil
	})
	if mark.IgnoredOffers < 1 || mark.IgnoredSince == nil || !strings.Contains(mark.Reason, "ignored") {
		t.Errorf("mark %+v: want the offers it ignored", mark)
	}
	for _, id := range first {
		if _, ok := ign.offeredAt(id); !ok {
			t.Errorf("task %s was never offered to the ignoring delegate", id)
		}
		if tk := c.task(id); tk.Status != protocol.StatusQueued {
			t.Errorf("task %s is %s before a healthy delegate came, want queued", id, tk.Status)
		}
	}
	// Tasks queued while it is marked are not offered to it.
	var later []string
	for range 3 {
		later = append(later, c.submit("--selector", "pool", "--script", "echo healthy"))
	}
	list := c.mustCLI("delegates", "list")
	if !rowWith(list, "ignorer", "unresponsive") || rowWith(list, "claimer", "unresponsive") {
		t.Errorf("delegates list: want ignorer unresponsive, claimer not:\n%s", list)
	}
	if out := c.mustCLI("delegates", "describe", "ignorer"); !strings.Contains(out, "Unresponsive:") || !strings.Contains(out, "ignored") {
		t.Errorf("delegates describe ignorer does not say what it ignored:\n%s", out)
	}
	if out := c.mustCLI("task", "explain", first[0]); !strings.Contains(out, "unresponsive") {
		t.Errorf("task explain does not name the unresponsive rule:\n%s", out)
	}

	// The claiming one takes a task and never starts it.
	stuck := c.submit("--selector", "pool2", "--script", "echo finally")
	c.waitTask(stuck, "claimed by the claiming delegate", func(tk protocol.Task) bool {
		return tk.Status == protocol.StatusRunning && tk.DelegateName == "claimer"
	})

	// A healthy real delegate joins: the queue moves to it.
	c.delegate("healthy", "healthy-host", c.seed004Env(tok, "healthy", "pool,pool2")...)
	for _, id := range append(first, later...) {
		tk := c.waitTask(id, "done on the healthy delegate", func(tk protocol.Task) bool { return protocol.Terminal(tk.Status) })
		if tk.Status != protocol.StatusSucceeded || tk.DelegateName != "healthy" {
			t.Errorf("task %s: %s on %q, want succeeded on healthy", id, tk.Status, tk.DelegateName)
		}
	}
	for _, id := range later {
		if at, ok := ign.offeredAt(id); ok && !at.Before(mark.Since) && at.Before(mark.RetryAt) {
			t.Errorf("task %s was offered to the delegate marked unresponsive", id)
		}
	}

	// The claimed, never started task runs on the healthy delegate.
	tk := c.waitTask(stuck, "done after its claim was lost", func(tk protocol.Task) bool { return protocol.Terminal(tk.Status) })
	if tk.Status != protocol.StatusSucceeded || tk.DelegateName != "healthy" {
		t.Errorf("the claimed task: %s on %q (%s), want succeeded on healthy", tk.Status, tk.DelegateName, tk.Error)
	}
	if u := describe(t, admin, "claimer").Unresponsive; u == nil || u.UnstartedTask != stuck || u.ClaimedAt == nil {
		t.Fatalf("the claiming delegate's mark %+v, want the task it never started", u)
	}
	f := promtest.Scrape(t, c.url+protocol.PathMetrics)
	if got := f.Value(t, "legate_manager_delegates_unresponsive"); got < 1 {
		t.Errorf("legate_manager_delegates_unresponsive = %v, want the claiming delegate counted", got)
	}
	if got := f.Value(t, "legate_manager_delegates_marked_unresponsive_total", "why", "unstarted_claim"); got != 1 {
		t.Errorf("marked for an unstarted claim = %v, want 1", got)
	}

	// A marked delegate whose process restarts is responsive again.
	claimer.register(t, ctx, c.account, tok, "claimer", []string{"pool2"})
	eventually(t, 20*time.Second, "the restarted delegate responsive again", func() bool {
		return strings.Contains(c.mgr.out.String(), "a new delegate process registered") && describe(t, admin, "claimer").Unresponsive == nil
	})
	// A marked delegate that claims a task is responsive again. (Its mark
	// lifts by itself after the retry pause: it is claimed well before.)
	mine := c.submit("--selector", "ignorer-only", "--script", "echo mine")
	eventually(t, 90*time.Second, "the ignoring delegate marked, with time left", func() bool {
		u := describe(t, admin, "ignorer").Unresponsive
		return u != nil && time.Until(u.RetryAt) > 5*time.Second
	})
	if err := ign.acquire(ctx, mine); err != nil {
		t.Fatalf("the marked delegate claims a task: %v", err)
	}
	eventually(t, 20*time.Second, "the ignoring delegate responsive again", func() bool {
		return strings.Contains(c.mgr.out.String(), "it claimed a task") && describe(t, admin, "ignorer").Unresponsive == nil
	})
	if u := describe(t, admin, "healthy").Unresponsive; u != nil {
		t.Errorf("the healthy delegate was marked: %+v", u)
	}
	if id := describe(t, admin, "healthy").InstanceID; strings.Contains(c.mgr.out.String(), "instance="+id) &&
		rowWith(c.mgr.out.String(), "marked unresponsive", id) {
		t.Errorf("the healthy delegate was marked unresponsive at some point:\n%s", c.mgr.out.String())
	}
}

// rowWith reports whether a line of out has both words.
func rowWith(out, a, b string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, a) && strings.Contains(l, b) {
			return true
		}
	}
	return false
}
