package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestPriorityHighRunsNext: a manager process and one delegate process of
// capacity 1. While the delegate is busy, 100 tasks of the normal priority
// queue up, then one of high priority is submitted last (with `task run
// --priority high`); when the delegate frees its slot, the high task is
// the next to start — before the 100 queued ahead of it — and `task
// list`, `task get` and their JSON show the priorities. The order is read
// from started_at, never from timings.
func TestPriorityHighRunsNext(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("prio")
	c.startDelegates(deliveryModes[0], delegateSpec{name: "one", host: "prio-1", token: tok, env: []string{"DELEGATE_TASK_CAPACITY=1"}})

	script, release := blocker(t, "busy")
	busy := c.submit("--script", script)
	c.waitRunning(busy)

	cl, err := client.New(c.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl.SetSecret(c.apiKey)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var normal []string
	for i := range 100 {
		tk, err := cl.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: fmt.Sprintf("echo %d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		if tk.Priority != protocol.PriorityNormal {
			t.Fatalf("task submitted without a priority has priority %d, want %d (normal)", tk.Priority, protocol.PriorityNormal)
		}
		normal = append(normal, tk.ID)
	}
	high := c.submit("--priority", "high", "--script", "echo high")

	// Shown while they wait: a column of task list, a line of task get,
	// a field of the JSON.
	list := c.mustCLI("task", "list", "--limit", "3")
	if !strings.Contains(strings.SplitN(list, "\n", 2)[0], "PRIORITY") || !lineWith(list, high, "high") || !lineWith(list, normal[99], "normal") {
		t.Errorf("task list does not show the priorities:\n%s", list)
	}
	if got := c.mustCLI("task", "get", high); !lineWith(got, "Priority:", "high (8)") {
		t.Errorf("task get does not show the priority:\n%s", got)
	}
	if tk := c.task(high); tk.Priority != protocol.PriorityHigh || tk.Status != protocol.StatusQueued {
		t.Errorf("high task before the slot frees: priority %d, status %s; want %d, queued", tk.Priority, tk.Status, protocol.PriorityHigh)
	}

	release()
	all := map[string]bool{busy: true, high: true}
	for _, id := range normal {
		all[id] = true
	}
	var done []protocol.Task
	eventually(t, 3*time.Minute, "all 102 tasks finished", func() bool {
		done = done[:0]
		for _, tk := range c.taskList() {
			if all[tk.ID] && protocol.Terminal(tk.Status) {
				done = append(done, tk)
			}
		}
		return len(done) == len(all)
	})
	for _, tk := range done {
		if tk.Status != protocol.StatusSucceeded || tk.StartedAt == nil {
			t.Fatalf("task %s: %s, started %v", tk.ID, tk.Status, tk.StartedAt)
		}
	}
	slices.SortFunc(done, func(a, b protocol.Task) int { return a.StartedAt.Compare(*b.StartedAt) })
	order := make([]string, len(done))
	for i, tk := range done {
		order[i] = tk.ID
	}
	if order[0] != busy || order[1] != high {
		t.Fatalf("start order begins %v; want the busy task %s, then the high task %s (submitted after 100 normal ones)", order[:3], busy, high)
	}
}

// lineWith reports whether a line of out contains every one of words.
func lineWith(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			return true
		}
	}
	return false
}
