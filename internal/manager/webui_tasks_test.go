package manager

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// Tests of the live Tasks page and the live timeline of a task's page
// (see webui_test.go for the browser helper).

// rowStatus is the status a task list body shows for task id ("" when
// the task is not in it).
func rowStatus(body, id string) string {
	m := regexp.MustCompile(`<tr data-task="` + regexp.QuoteMeta(id) + `">\s*<td[^>]*><a[^>]*>[^<]*</a></td>\s*<td data-label="Status"><span class="state s-([a-z_]+)"`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

var taskRows = regexp.MustCompile(`<tr data-task="`)

func TestUITasksListIsLive(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := tm.client(t, tm.admin.APIKey)
	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/tasks")
	mustContain(t, "the Tasks page", page, `data-events="/tasks/events?"`, `id="tasks-announce"`)
	ev := b.openEvents(ctx, "/tasks/events")
	// The list as it is when the stream starts.
	waitNamed(t, ev, "tasks", func(d string) bool { return strings.Contains(d, "No task matches") })
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	body := waitNamed(t, ev, "tasks", func(d string) bool { return rowStatus(d, task.ID) != "" })
	if got := rowStatus(body, task.ID); got != protocol.StatusQueued {
		t.Errorf("the new task shows %q", got)
	}
	mustContain(t, "the live body", body, `id="task-summary">1 task on this page, 1 queued</p>`)
	tok, _ := admin.CreateToken(ctx, "t")
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d", "h")
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	if _, err := d.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	waitNamed(t, ev, "tasks", func(d string) bool { return rowStatus(d, task.ID) == protocol.StatusSucceeded })
}

// TestUITasksListCoalesces: however many tasks change, a stream renders
// the list at most once per pause; a change during the pause is sent
// after it, not lost.
func TestUITasksListCoalesces(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := tm.client(t, tm.admin.APIKey)
	b := newBrowserSignedIn(t, tm)
	ev := b.openEvents(ctx, "/tasks/events")
	waitNamed(t, ev, "tasks", func(string) bool { return true })
	const n = 40
	for range n {
		if _, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"nobody"}}); err != nil {
			t.Fatal(err)
		}
	}
	bodies := 0
	for {
		name, data := readEvent(t, ev)
		if name != "tasks" {
			t.Fatalf("event %s: %s", name, data)
		}
		bodies++
		if len(taskRows.FindAllString(data, -1)) == n {
			break
		}
	}
	// 40 wake-ups; one body per pause while they came.
	if bodies > n/4 {
		t.Errorf("%d bodies for %d tasks created", bodies, n)
	}
}

// TestUITasksLaterPageSaysNewer: a later page is not re-rendered under
// its reader; it hears that newer tasks arrived.
func TestUITasksLaterPageSaysNewer(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := tm.client(t, tm.admin.APIKey)
	for range 60 {
		if _, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"nobody"}}); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/tasks")
	m := regexp.MustCompile(`href="/tasks\?(page=[^"]*)" rel="next"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no older page:\n%s", page)
	}
	_, page = b.get("/tasks?" + m[1])
	mustContain(t, "a later page", page, `data-events="/tasks/events?`+m[1]+`"`, `id="tasks-newer"`, `data-later="true"`)
	ev := b.openEvents(ctx, "/tasks/events?"+m[1])
	if _, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}}); err != nil {
		t.Fatal(err)
	}
	if name, data := readEvent(t, ev); name != "newer" || data != `{"url":"/tasks?"}` {
		t.Fatalf("a later page got %s: %s", name, data)
	}
}

// TestUITasksLiveListKeepsScope: a viewer of one project never sees
// another project's tasks in the live list.
func TestUITasksLiveListKeepsScope(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := tm.client(t, tm.admin.APIKey)
	tm.mustAPI(t, tm.admin.APIKey, "POST", protocol.PathOrgs, `{"name":"o1"}`, 201)
	for _, p := range []string{"p1", "p2"} {
		tm.mustAPI(t, tm.admin.APIKey, "POST", protocol.PathOrgs+"/o1/projects", fmt.Sprintf(`{"name":%q}`, p), 201)
	}
	viewer := tm.userKey(t, "vic", access.RoleViewer, access.Scope{Org: "o1", Project: "p1"})
	b := newBrowser(t, tm)
	b.signIn(viewer)
	ev := b.openEvents(ctx, "/tasks/events")
	waitNamed(t, ev, "tasks", func(string) bool { return true })
	submit := func(project string) string {
		tk, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}, Org: "o1", Project: project})
		if err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	other := submit("p2")
	mine := submit("p1")
	other2 := submit("p2")
	for {
		_, data := readEvent(t, ev)
		if strings.Contains(data, other) || strings.Contains(data, other2) {
			t.Fatalf("the viewer of o1/p1 sees a task of o1/p2:\n%s", data)
		}
		if rowStatus(data, mine) != "" {
			break
		}
	}
}

// TestUITaskTimelineIsLive: a task page's stream sends the task's status
// and timeline on every change, before any output: queued, acquired,
// started, ended.
func TestUITaskTimelineIsLive(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := tm.client(t, tm.admin.APIKey)
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowserSignedIn(t, tm)
	ev := b.openEvents(ctx, "/tasks/"+task.ID+"/output")
	state := func(r *bufio.Reader) stateOfTask {
		t.Helper()
		name, data := readEvent(t, r)
		if name != "task" {
			t.Fatalf("event %s: %s", name, data)
		}
		var s stateOfTask
		if err := json.Unmarshal([]byte(data), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := state(ev); s.Status != protocol.StatusQueued || s.at("Created") == "" || s.at("Acquired") != "" {
		t.Fatalf("first state: %+v", s)
	}
	tok, _ := admin.CreateToken(ctx, "t")
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d", "h")
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := state(ev); s.at("Acquired") == "" || s.at("Started") != "" || s.Delegate != "d (h)" {
		t.Fatalf("after the acquire: %+v", s)
	}
	if err := d.Started(ctx, task.ID, protocol.StartedRequest{Epoch: acq.Epoch}); err != nil {
		t.Fatal(err)
	}
	if s := state(ev); s.at("Started") == "" || s.at("Finished") != "" {
		t.Fatalf("after the start: %+v", s)
	}
	zero := 0
	if _, err := d.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero}); err != nil {
		t.Fatal(err)
	}
	if s := state(ev); s.Status != protocol.StatusSucceeded || s.at("Finished") == "" {
		t.Fatalf("after the result: %+v", s)
	}
	if name, data := readEvent(t, ev); name != "end" {
		t.Fatalf("after the last state: %s %s", name, data)
	}
}

type stateOfTask struct {
	Status   string
	Delegate string
	Timeline []struct{ Label, At string }
}

func (s stateOfTask) at(label string) string {
	for _, st := range s.Timeline {
		if st.Label == label {
			return st.At
		}
	}
	panic(fmt.Sprintf("no step %q", label))
}

// TestUITasksListIsLiveAcrossManagers: two managers on one PostgreSQL
// database; the Tasks page served by one shows a task created and ended
// through the other.
func TestUITasksListIsLiveAcrossManagers(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	tms := startTestManagers(t, dsn, Config{}, Config{})
	a, b := tms[0], tms[1]
	eventually(t, 10*time.Second, "both managers listening", func() bool { return a.m.bus.Listening() && b.m.bus.Listening() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	br := newBrowserSignedIn(t, a)
	ev := br.openEvents(ctx, "/tasks/events")
	waitNamed(t, ev, "tasks", func(string) bool { return true })
	onB := b.client(t, b.admin.APIKey)
	task, err := onB.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"nobody"}})
	if err != nil {
		t.Fatal(err)
	}
	waitNamed(t, ev, "tasks", func(d string) bool { return rowStatus(d, task.ID) == protocol.StatusQueued })
	if _, err := onB.CancelTask(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	waitNamed(t, ev, "tasks", func(d string) bool { return rowStatus(d, task.ID) == protocol.StatusCancelled })
}

// BenchmarkTaskWatchNotify: the cost a task change pays for the web UI's
// task watch, with no page open, and with a page open on another
// account.
func BenchmarkTaskWatchNotify(b *testing.B) {
	b.Run("unwatched", func(b *testing.B) {
		var w delegateWatch
		for b.Loop() {
			w.notify("acct")
		}
	})
	b.Run("other account watched", func(b *testing.B) {
		var w delegateWatch
		_, stop := w.subscribe("other")
		defer stop()
		for b.Loop() {
			w.notify("acct")
		}
	})
}
