package manager

import (
	"context"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestTaskPriorityShownAndChecked: a submitted task's priority is checked
// (out of range: 400 naming the range), defaults to normal, and is shown
// in the API's task, the web UI's task list and the task's page.
func TestTaskPriorityShownAndChecked(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	spec := func(p int) protocol.TaskSpec {
		return protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"nobody"}, Priority: p}
	}
	for _, p := range []int{-1, 11} {
		if _, err := admin.SubmitTask(ctx, spec(p)); err == nil || !strings.Contains(err.Error(), "use 1 (lowest) to 10 (highest)") {
			t.Errorf("priority %d: %v; want a refusal naming the range", p, err)
		}
	}
	normal, err := admin.SubmitTask(ctx, spec(0))
	if err != nil || normal.Priority != protocol.PriorityNormal {
		t.Fatalf("task without a priority: %d, %v; want %d", normal.Priority, err, protocol.PriorityNormal)
	}
	urgent, err := admin.SubmitTask(ctx, spec(protocol.PriorityUrgent))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := admin.GetTask(ctx, urgent.ID); err != nil || got.Priority != protocol.PriorityUrgent {
		t.Errorf("get urgent task: priority %d, %v", got.Priority, err)
	}
	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/tasks")
	mustContain(t, "the Tasks page", page, `<th scope="col">Priority</th>`, `<td data-label="Priority">urgent</td>`, `<td data-label="Priority">normal</td>`)
	_, page = b.get("/tasks/" + urgent.ID)
	mustContain(t, "the urgent task's page", page, `<dd id="task-priority">urgent (10)</dd>`)
}
