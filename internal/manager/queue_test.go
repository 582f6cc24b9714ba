package manager

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestDeepQueueDoesNotHideARunnableTask: a delegate that connects is
// offered the task it can run even behind thousands of queued tasks that
// it cannot (the manager once looked at the oldest 256 only).
func TestDeepQueueDoesNotHideARunnableTask(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for range 600 {
		if _, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"nobody"}}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d", "h1", "gpu")
	resp, err := c.Poll(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, ev := range resp.Events {
		if ev.Kind == protocol.EventTaskAvailable {
			offered = append(offered, ev.TaskID)
		}
	}
	if diff := cmp.Diff([]string{want.ID}, offered); diff != "" {
		t.Errorf("offers at connect (-want +got):\n%s", diff)
	}
}
