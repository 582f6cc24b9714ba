package webui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// Tasks: pages of tasksPerPage, newest first, filtered by status and
// delegate in the store (the API's query), and by selector here: a page
// with a selector reads the API's pages until it has tasksPerPage tasks
// or has looked at tasksScan of them.
const (
	tasksPerPage = 50
	tasksBatch   = 200
	tasksScan    = 2000
)

var taskStatuses = []string{protocol.StatusQueued, protocol.StatusRunning, protocol.StatusSucceeded, protocol.StatusFailed,
	protocol.StatusTimedOut, protocol.StatusNotAssigned, protocol.StatusCancelled}

type taskFilter struct {
	Status   string
	Selector string
	Delegate string
	// Scope is ORG or ORG/PROJECT (the API checks it).
	Scope string
	// Page is the cursor: the last task of the previous page.
	Page string
}

func taskFilterOf(q url.Values) taskFilter {
	f := taskFilter{Status: q.Get("status"), Selector: strings.TrimSpace(q.Get("selector")), Delegate: strings.TrimSpace(q.Get("delegate")),
		Scope: strings.TrimSpace(q.Get("scope")), Page: q.Get("page")}
	if !protocol.ValidStatus(f.Status) {
		f.Status = ""
	}
	return f
}

func (f taskFilter) query() string {
	v := url.Values{}
	for k, s := range map[string]string{"status": f.Status, "selector": f.Selector, "delegate": f.Delegate, "scope": f.Scope, "page": f.Page} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

func (f taskFilter) matches(t protocol.Task) bool {
	if f.Selector == "" {
		return true
	}
	for _, s := range t.Selectors {
		if strings.EqualFold(s, f.Selector) {
			return true
		}
	}
	return false
}

type tasksView struct {
	Filter   taskFilter
	Statuses []string
	Tasks    []taskRow
	// FirstURL leads to the newest tasks (set on a later page), NextURL
	// to older ones.
	FirstURL string
	NextURL  string
	// Scanned: the page stopped after looking at tasksScan tasks.
	Scanned int
	// EventsURL is the page's live stream (handleTaskEvents).
	EventsURL string
	// Queued and Running count the page's tasks in those states (the
	// summary that screen readers hear when the list changes).
	Queued, Running int
	Now             time.Time
	// CanRun: the user may run tasks somewhere (the Run a task link).
	CanRun bool
}

type taskRow struct {
	protocol.Task
	What  string
	Scope string
}

// taskWhat is a one-line description of a task.
func taskWhat(t protocol.Task) string {
	switch {
	case t.Shell != nil:
		line, _, _ := strings.Cut(strings.TrimSpace(t.Shell.Script), "\n")
		return cut(line, 80)
	case t.HTTP != nil:
		return cut(t.HTTP.Method+" "+t.HTTP.URL, 80)
	case t.Container != nil:
		return cut(t.Container.Image, 80)
	case t.Kubernetes != nil:
		return cut("deploy "+strconv.Itoa(len(t.Kubernetes.Manifests))+" manifest(s) to namespace "+t.Kubernetes.Namespace, 80)
	case t.Helm != nil:
		return cut("helm release "+t.Helm.Release+" of "+t.Helm.Chart+" in namespace "+t.Helm.Namespace, 80)
	}
	return t.Type
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// tasksView reads the page of tasks that f asks for.
func (u *UI) tasksView(ctx context.Context, s *user, f taskFilter) (tasksView, error) {
	v := tasksView{Filter: f, Statuses: taskStatuses, Now: u.cfg.Now(), CanRun: s.policy.AllowsBelow(access.TaskRun, access.Account)}
	limit := tasksPerPage
	if f.Selector != "" {
		limit = tasksBatch
	}
	cursor, next := f.Page, ""
	for scanned := 0; ; {
		list, err := s.api.ListTasksPage(ctx, client.TaskQuery{Status: f.Status, Delegate: f.Delegate, Scope: f.Scope, Limit: limit, Page: cursor})
		if err != nil {
			return v, err
		}
		full := false
		for _, t := range list.Tasks {
			scanned++
			cursor = t.ID
			if f.matches(t) {
				v.Tasks = append(v.Tasks, taskRow{Task: t, What: taskWhat(t), Scope: protocol.ScopeLabel(t.Org, t.Project)})
			}
			if len(v.Tasks) == tasksPerPage || scanned == tasksScan {
				full = true
				break
			}
		}
		if full {
			// More may follow what was looked at.
			next = cursor
			if len(v.Tasks) < tasksPerPage {
				v.Scanned = scanned
			}
			break
		}
		if list.Next == "" {
			break
		}
		// Tasks the caller may not view are left out of a page, so a
		// page may be short while more follow: read on from its cursor.
		cursor = list.Next
	}
	if next != "" {
		nf := f
		nf.Page = next
		v.NextURL = "/tasks?" + nf.query()
	}
	if f.Page != "" {
		nf := f
		nf.Page = ""
		v.FirstURL = "/tasks?" + nf.query()
	}
	v.EventsURL = "/tasks/events?" + f.query()
	for _, t := range v.Tasks {
		switch t.Status {
		case protocol.StatusQueued:
			v.Queued++
		case protocol.StatusRunning:
			v.Running++
		}
	}
	return v, nil
}

func (u *UI) handleTasks(w http.ResponseWriter, r *http.Request, s *user) {
	v, err := u.tasksView(r.Context(), s, taskFilterOf(r.URL.Query()))
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "tasks", page{Title: "Tasks", Nav: "tasks", Data: v})
}

// livePause is the least time between two renders of a live list: however
// many tasks change, a stream sends at most one body per pause (a change
// during the pause is sent after it).
const livePause = time.Second

// pause waits d, or less when the request or the UI ends (false).
func (u *UI) pause(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-u.cfg.Stopping:
	}
	return false
}

// handleTaskEvents streams the Tasks page's list: on the first page (no
// cursor), the list rendered again after the account's tasks changed, at
// most once per livePause; on a later page, a "newer" event once tasks
// newer than the newest at the start of the stream appeared (the page is
// not re-rendered under the reader: its cursor would move).
func (u *UI) handleTaskEvents(w http.ResponseWriter, r *http.Request, s *user) {
	f := taskFilterOf(r.URL.Query())
	changes, stop := u.cfg.Backend.WatchTasks(s.account)
	defer stop()
	first := f
	first.Page = ""
	// newest is the newest task when the stream starts (read before it
	// answers: a task created after the answer is newer).
	newest := func() (string, error) {
		v, err := u.tasksView(r.Context(), s, first)
		if err != nil || len(v.Tasks) == 0 {
			return "", err
		}
		return v.Tasks[0].ID, nil
	}
	var top string
	if f.Page != "" {
		var err error
		if top, err = newest(); err != nil {
			u.apiError(w, r, s, err)
			return
		}
	}
	ev, ok := u.startEvents(w)
	if !ok {
		return
	}
	failed := func(err error) bool {
		if statusOf(err) == http.StatusUnauthorized {
			_ = ev.send("signedout", "")
		}
		return false
	}
	if f.Page != "" {
		u.follow(r, ev, changes, func() bool {
			now, err := newest()
			if err != nil {
				return failed(err)
			}
			if now == top {
				return u.pause(r, livePause)
			}
			b, _ := json.Marshal(map[string]string{"url": "/tasks?" + first.query()})
			_ = ev.send("newer", string(b))
			return false
		})
		return
	}
	u.follow(r, ev, changes, func() bool {
		v, err := u.tasksView(r.Context(), s, f)
		if err != nil {
			return failed(err)
		}
		var b strings.Builder
		if err := u.fragments.ExecuteTemplate(&b, "task-list", v); err != nil {
			u.cfg.Logger.Error("web UI: render the task list", "err", err)
			return false
		}
		if ev.send("tasks", b.String()) != nil {
			return false
		}
		return u.pause(r, livePause)
	})
}

type taskView struct {
	taskRow
	Terminal   bool
	CanCancel  bool
	Timeline   []timelineStep
	Explain    *protocol.Explanation
	ExplainErr string
	OutputURL  string
}

type timelineStep struct {
	Label string
	At    *time.Time
}

func terminal(status string) bool {
	switch status {
	case protocol.StatusQueued, protocol.StatusRunning:
		return false
	}
	return true
}

func (u *UI) handleTask(w http.ResponseWriter, r *http.Request, s *user) {
	id := r.PathValue("id")
	t, err := s.api.GetTask(r.Context(), id)
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	v := taskView{taskRow: taskRow{Task: t, What: taskWhat(t), Scope: protocol.ScopeLabel(t.Org, t.Project)},
		Terminal: terminal(t.Status), OutputURL: "/tasks/" + url.PathEscape(t.ID) + "/output",
		Timeline: timelineOf(t)}
	v.CanCancel = !v.Terminal && s.may(access.TaskCancel, access.Resource{Kind: "task", Name: t.ID, Scope: access.Scope{Org: t.Org, Project: t.Project}})
	if t.Status == protocol.StatusQueued || t.Status == protocol.StatusNotAssigned {
		ex, err := s.api.ExplainTask(r.Context(), t.ID)
		if err != nil {
			v.ExplainErr = apiMessage(err)
		} else {
			v.Explain = &ex
		}
	}
	u.render(w, r, s, http.StatusOK, "task", page{Title: "Task " + t.ID, Nav: "tasks", Data: v})
}

// taskPause is the least time between two reads of a followed task
// after changes of the account's tasks.
const taskPause = 250 * time.Millisecond

// outputChunk is one event of a task's output stream.
type outputChunk struct {
	Data string `json:"data"`
	// Marker: the text stands for output the manager did not keep (the
	// head/tail cap).
	Marker bool `json:"marker,omitempty"`
}

// stateEvent is a task's status and timeline, as the "task" event of its
// output stream sends them.
type stateEvent struct {
	Status   string      `json:"status"`
	Timeline []stateStep `json:"timeline"`
	// Delegate is the delegate that holds or held the task ("name
	// (hostname)"), empty while none has.
	Delegate string `json:"delegate,omitempty"`
}

type stateStep struct {
	Label string `json:"label"`
	// At is RFC 3339 and Clock as the page shows it; both empty while
	// the step has not happened.
	At    string `json:"at,omitempty"`
	Clock string `json:"clock,omitempty"`
}

func timelineOf(t protocol.Task) []timelineStep {
	created := t.CreatedAt
	return []timelineStep{{"Created", &created}, {"Acquired", t.AcquiredAt}, {"Started", t.StartedAt}, {"Finished", t.FinishedAt}}
}

func taskState(t protocol.Task) stateEvent {
	e := stateEvent{Status: t.Status}
	if t.DelegateName != "" {
		e.Delegate = t.DelegateName + " (" + t.DelegateHostname + ")"
	}
	for _, st := range timelineOf(t) {
		s := stateStep{Label: st.Label}
		if st.At != nil {
			s.At, s.Clock = st.At.UTC().Format(time.RFC3339), st.At.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		e.Timeline = append(e.Timeline, s)
	}
	return e
}

// outputEnd is the last event: the task as it ended.
type outputEnd struct {
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	Error    string `json:"error"`
}

// handleTaskOutput streams a task's output (masked, as the API serves it)
// as server-sent events until the task has ended and its output is all
// there; the last event is the task's final status.
//
// The task's status and timeline go at the start, after every change of
// the account's tasks that changed this one (acquired, started, ended:
// the manager's task watch), with its first output (in case a delegate on
// another manager started it) and at its end: the page's timeline follows
// without a reload, before any output too.
func (u *UI) handleTaskOutput(w http.ResponseWriter, r *http.Request, s *user) {
	id := r.PathValue("id")
	ev, ok := u.startEvents(w)
	if !ok {
		return
	}
	// The stream ends with the manager's shutdown, too.
	ctx, release := u.untilStopping(r.Context())
	defer release()
	ts := &taskStream{ev: ev, api: s.api, id: id}
	changes, stop := u.cfg.Backend.WatchTasks(s.account)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		defer stop()
		ts.watch(ctx, changes)
	}()
	defer func() {
		release()
		<-watching
	}()
	t, err := ts.output(ctx)
	if err != nil {
		ts.fail(ctx, err)
		return
	}
	ts.end(ctx, t)
}

// untilStopping returns a context that ends with parent or when the UI
// stops, whichever comes first, and a function that releases it (it may
// be called more than once).
func (u *UI) untilStopping(parent context.Context) (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancel(parent)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-u.cfg.Stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		<-watched
	}
}

// taskStream is the event stream of one task's output page. Its events
// are sent by two goroutines (the task watch and the output), one at a
// time.
type taskStream struct {
	ev  *events
	api *client.Client
	id  string

	mu   sync.Mutex
	last stateEvent // the task's state sent last
}

// send sends one event.
func (ts *taskStream) send(name, data string) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.ev.send(name, data)
}

// sendTask sends the task's state, unless it is the one sent last.
func (ts *taskStream) sendTask(t protocol.Task) error {
	st := taskState(t)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if reflect.DeepEqual(st, ts.last) {
		return nil
	}
	ts.last = st
	b, _ := json.Marshal(st)
	return ts.ev.send("task", string(b))
}

// watch sends the task's state at the start and after the changes of the
// account's tasks, until the task has ended, the stream fails or ctx
// ends.
func (ts *taskStream) watch(ctx context.Context, changes <-chan struct{}) {
	for {
		if t, err := ts.api.GetTask(ctx, ts.id); err == nil {
			if ts.sendTask(t) != nil || terminal(t.Status) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
		// Changes of other tasks wake this one too: read the task at
		// most every taskPause.
		select {
		case <-ctx.Done():
			return
		case <-time.After(taskPause):
		}
	}
}

// output sends the task's output as it comes, with its state before the
// first chunk, until the task has ended (it returns the task then).
func (ts *taskStream) output(ctx context.Context) (protocol.Task, error) {
	sentStarted := false
	return ts.api.StreamLogsWith(ctx, ts.id, client.StreamOptions{Follow: true}, func(l protocol.LogStreamLine) error {
		if l.Chunk == nil {
			return nil
		}
		if !sentStarted {
			sentStarted = true
			if t, err := ts.api.GetTask(ctx, ts.id); err == nil {
				if err := ts.sendTask(t); err != nil {
					return err
				}
			}
		}
		b, _ := json.Marshal(outputChunk{Data: l.Chunk.Data, Marker: strings.HasPrefix(strings.TrimLeft(l.Chunk.Data, "\n"), "[legate: ")})
		return ts.send("output", string(b))
	})
}

// fail ends a stream whose output could not be read: "signedout" when
// the session has ended, "failure" with the API's message unless the
// stream itself ended.
func (ts *taskStream) fail(ctx context.Context, err error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if statusOf(err) == http.StatusUnauthorized {
		_ = ts.ev.send("signedout", "")
		return
	}
	if ctx.Err() == nil {
		b, _ := json.Marshal(map[string]string{"error": apiMessage(err)})
		_ = ts.ev.send("failure", string(b))
	}
}

// end sends the task's final state and the "end" event with its outcome
// (t, as its output stream ended).
func (ts *taskStream) end(ctx context.Context, t protocol.Task) {
	if full, err := ts.api.GetTask(ctx, ts.id); err == nil {
		_ = ts.sendTask(full)
	}
	b, _ := json.Marshal(outputEnd{Status: t.Status, ExitCode: t.ExitCode, Error: t.Error})
	_ = ts.send("end", string(b))
}

func (u *UI) handleCancelTask(w http.ResponseWriter, r *http.Request, s *user) {
	id := r.PathValue("id")
	if _, err := s.api.CancelTask(r.Context(), id); err != nil {
		u.apiError(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/tasks/"+url.PathEscape(id)+"?notice="+url.QueryEscape("Task cancelled."), http.StatusSeeOther)
}
