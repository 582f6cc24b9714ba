package manager

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestUnresponsiveOnDelegatePages: a delegate that heartbeats with room
// and ignores the offer of a queued task is marked unresponsive; the web
// UI's Delegates page and the delegate's page say so, an idle delegate
// next to it is not marked, and task explain names the rule.
func TestUnresponsiveOnDelegatePages(t *testing.T) {
	tm := startTestManager(t, Config{HeartbeatInterval: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	wedged, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "wedged", "wedged-host", "pool")
	idle, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "idle", "idle-host", "elsewhere")
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	// Both heartbeat with room; the wedged one reads its offers and drops them.
	for _, c := range []interface {
		Heartbeat(context.Context, protocol.Heartbeat) (protocol.HeartbeatResponse, error)
	}{wedged, idle} {
		wg.Go(func() {
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for seq := int64(1); ; seq++ {
				_, _ = c.Heartbeat(ctx, protocol.Heartbeat{Seq: seq, Capacity: 2})
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			_, _ = wedged.Poll(ctx, time.Second)
		}
	})
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "echo x"}, Selectors: []string{"pool"}})
	if err != nil {
		t.Fatal(err)
	}
	var u *protocol.DelegateUnresponsive
	eventually(t, 30*time.Second, "the wedged delegate marked unresponsive", func() bool {
		d, err := admin.DescribeDelegate(ctx, "wedged")
		if err != nil || len(d.Instances) != 1 {
			t.Fatalf("describe: %+v %v", d, err)
		}
		u = d.Instances[0].Unresponsive
		return u != nil
	})
	if u.IgnoredOffers != 1 || !strings.Contains(u.Reason, "ignored 1 task offer") {
		t.Errorf("mark %+v", u)
	}
	if d, err := admin.DescribeDelegate(ctx, "idle"); err != nil || d.Instances[0].Unresponsive != nil {
		t.Errorf("the idle delegate: %+v %v", d, err)
	}
	ex, err := admin.ExplainTask(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range ex.Delegates {
		for _, r := range v.Reasons {
			found = found || (v.Name == "wedged" && r.Rule == protocol.RuleUnresponsive)
		}
	}
	if !found {
		t.Errorf("explain does not name the unresponsive rule: %+v", ex)
	}
	b := newBrowserSignedIn(t, tm)
	if _, page := b.get("/delegates"); !strings.Contains(page, "data-unresponsive") || !strings.Contains(page, "ignored 1 task offer") {
		t.Errorf("the Delegates page does not show the mark:\n%s", page)
	}
	if _, page := b.get("/delegates/wedged"); !strings.Contains(page, "Unresponsive: ignored 1 task offer") {
		t.Errorf("the delegate's page does not say why:\n%s", page)
	}
	if _, page := b.get("/delegates/idle"); strings.Contains(page, "data-unresponsive") {
		t.Error("the idle delegate's page shows a mark")
	}
}
