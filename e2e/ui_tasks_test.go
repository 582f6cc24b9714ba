package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestUITasksLiveInBrowser: the Tasks page shows a task created from the
// CLI and its end without a reload; a task page opened while its task
// waits for a delegate shows Acquired and Started as they happen, before
// any output (see ui_test.go for the browser helpers).
func TestUITasksLiveInBrowser(t *testing.T) {
	bin := chromiumOrSkip(t)
	c := startCluster(t)
	tok := c.token("builders")
	c.delegate("builder", "ui-tl-a", c.seed004Env(tok, "builder", "linux")...)
	c.waitConnected("ui-tl-a", "")
	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in", chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))

	run(t, ctx, "open the Tasks page", chromedp.Navigate(c.url+"/tasks"), visible(`#tasks-live-status.on`))
	value(t, ctx, "mark the page", chromedp.Evaluate[string](`window.legateTestMarker = "tasks page"`))
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "linux", "--script", "sleep 1; echo done"))
	run(t, ctx, "see the new task and its end without a reload",
		visible(fmt.Sprintf(`tr[data-task=%q]`, id)),
		visible(fmt.Sprintf(`tr[data-task=%q] .s-succeeded`, id)))
	if marker := value(t, ctx, "read the mark", chromedp.Evaluate[string](`String(window.legateTestMarker)`)); marker != "tasks page" {
		t.Errorf("the Tasks page was reloaded (marker %q)", marker)
	}
	if said := value(t, ctx, "read the announcement", chromedp.Text(chromedp.CSS(`#tasks-announce`))); !strings.Contains(said, "on this page") {
		t.Errorf("screen readers heard %q", said)
	}

	// A task that waits for a delegate, and prints nothing. The delegate
	// that will run it is connected and busy (capacity 1, a blocker
	// running), so the task waits for it: one that no connected delegate
	// could run fails fast (not_assigned after one liveness window), which
	// a delegate starting on a loaded machine can miss.
	c.delegate("late", "ui-tl-late", append(c.seed004Env(tok, "late", "late"), "DELEGATE_TASK_CAPACITY=1")...)
	blocker := c.submit("--selector", "late", "--script", "sleep 600")
	c.waitRunning(blocker)
	waiting := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "late", "--script", "sleep 3"))
	run(t, ctx, "open the queued task",
		chromedp.Navigate(c.url+"/tasks/"+waiting),
		visible(`#task-status.s-queued`),
		visible(`#timeline li[data-label="Acquired"].pending`))
	value(t, ctx, "mark the page", chromedp.Evaluate[string](`window.legateTestMarker = "task page"`))
	c.mustCLI("task", "cancel", blocker)
	run(t, ctx, "see the task acquired and started, before any output",
		visible(`#timeline li[data-label="Acquired"]:not(.pending) time`),
		visible(`#timeline li[data-label="Started"]:not(.pending) time`),
		visible(`#task-status.s-running`))
	if dg := value(t, ctx, "read the delegate", chromedp.Text(chromedp.CSS(`#task-delegate`))); dg != "late (ui-tl-late)" {
		t.Errorf("the task's delegate shows %q", dg)
	}
	if st := c.task(waiting).Status; st == protocol.StatusRunning {
		if out := value(t, ctx, "read the output", chromedp.Evaluate[string](`document.getElementById("output").textContent`)); out != "" {
			t.Errorf("output before the end of a task that prints nothing: %q", out)
		}
	}
	run(t, ctx, "see the task end",
		visible(`#timeline li[data-label="Finished"]:not(.pending) time`),
		visible(`#task-status.s-succeeded`))
	if marker := value(t, ctx, "read the mark", chromedp.Evaluate[string](`String(window.legateTestMarker)`)); marker != "task page" {
		t.Errorf("the task page was reloaded (marker %q)", marker)
	}
}

// TestAuditListByActionCLI: legate audit list --action keeps an action
// and those beneath it, or a prefix; a bad one is refused clearly.
func TestAuditListByActionCLI(t *testing.T) {
	c := startCluster(t)
	c.mustCLI("token", "create", "ci")
	c.mustCLI("token", "revoke", "ci")
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "nobody", "--script", "true"))
	c.mustCLI("task", "cancel", id)
	actions := func(action string) string {
		t.Helper()
		var l protocol.AuditList
		if err := json.Unmarshal([]byte(c.mustCLI("audit", "list", "--action", action, "-o", "json")), &l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range l.Events {
			out = append(out, e.Action+" "+e.Resource)
		}
		return strings.Join(out, "; ")
	}
	for action, want := range map[string]string{
		"token":        "token.revoke ci; token.create ci",
		"token.":       "token.revoke ci; token.create ci",
		"token.create": "token.create ci",
		"task":         "task.cancel " + id,
	} {
		if got := actions(action); got != want {
			t.Errorf("audit list --action %s: %q, want %q", action, got, want)
		}
	}
	r := c.cli("audit", "list", "--action", "Token Create")
	if r.code == 0 || !strings.Contains(r.stderr, `action="Token Create"`) {
		t.Errorf("a bad --action: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if got := c.mustCLI("audit", "list", "--help"); !strings.Contains(got, "--action") {
		t.Errorf("audit list --help does not explain --action:\n%s", got)
	}
}
