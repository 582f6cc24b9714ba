package webui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// Tasks: the list filters the newest tasksWindow tasks the API returns
// (filtered by status and by what the user may view in the store) by
// selector and delegate, and shows tasksPerPage of them a page.
const (
	tasksWindow  = 1000
	tasksPerPage = 50
)

var taskStatuses = []string{protocol.StatusQueued, protocol.StatusRunning, protocol.StatusSucceeded, protocol.StatusFailed,
	protocol.StatusTimedOut, protocol.StatusNotAssigned, protocol.StatusCancelled}

type taskFilter struct {
	Status   string
	Selector string
	Delegate string
	Page     int
}

func taskFilterOf(q url.Values) taskFilter {
	f := taskFilter{Status: q.Get("status"), Selector: strings.TrimSpace(q.Get("selector")), Delegate: strings.TrimSpace(q.Get("delegate")), Page: 1}
	if !protocol.ValidStatus(f.Status) {
		f.Status = ""
	}
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 1 {
		f.Page = n
	}
	return f
}

func (f taskFilter) query(page int) string {
	v := url.Values{}
	for k, s := range map[string]string{"status": f.Status, "selector": f.Selector, "delegate": f.Delegate} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	return v.Encode()
}

func (f taskFilter) matches(t protocol.Task) bool {
	if f.Delegate != "" && !strings.EqualFold(t.DelegateName, f.Delegate) && !strings.EqualFold(t.DelegateHostname, f.Delegate) {
		return false
	}
	if f.Selector != "" {
		for _, s := range t.Selectors {
			if strings.EqualFold(s, f.Selector) {
				return true
			}
		}
		return false
	}
	return true
}

type tasksView struct {
	Filter   taskFilter
	Statuses []string
	Tasks    []taskRow
	Page     int
	Pages    int
	PrevURL  string
	NextURL  string
	Window   int
	Capped   bool
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
	}
	return t.Type
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (u *UI) handleTasks(w http.ResponseWriter, r *http.Request, s *user) {
	f := taskFilterOf(r.URL.Query())
	list, err := s.api.ListTasks(r.Context(), f.Status, tasksWindow)
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	v := tasksView{Filter: f, Statuses: taskStatuses, Window: tasksWindow, Capped: len(list.Tasks) >= tasksWindow}
	var rows []taskRow
	for _, t := range list.Tasks {
		if f.matches(t) {
			rows = append(rows, taskRow{Task: t, What: taskWhat(t), Scope: scopeLabel(t.Org, t.Project)})
		}
	}
	v.Pages = max(1, (len(rows)+tasksPerPage-1)/tasksPerPage)
	v.Page = min(f.Page, v.Pages)
	lo := (v.Page - 1) * tasksPerPage
	v.Tasks = rows[lo:min(lo+tasksPerPage, len(rows))]
	if v.Page > 1 {
		v.PrevURL = "/tasks?" + f.query(v.Page-1)
	}
	if v.Page < v.Pages {
		v.NextURL = "/tasks?" + f.query(v.Page+1)
	}
	u.render(w, r, s, http.StatusOK, "tasks", page{Title: "Tasks", Nav: "tasks", Data: v})
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
	created := t.CreatedAt
	v := taskView{taskRow: taskRow{Task: t, What: taskWhat(t), Scope: scopeLabel(t.Org, t.Project)},
		Terminal: terminal(t.Status), OutputURL: "/tasks/" + url.PathEscape(t.ID) + "/output",
		Timeline: []timelineStep{{"Created", &created}, {"Acquired", t.AcquiredAt}, {"Started", t.StartedAt}, {"Finished", t.FinishedAt}}}
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

// outputChunk is one event of a task's output stream.
type outputChunk struct {
	Data string `json:"data"`
	// Marker: the text stands for output the manager did not keep (the
	// head/tail cap).
	Marker bool `json:"marker,omitempty"`
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
func (u *UI) handleTaskOutput(w http.ResponseWriter, r *http.Request, s *user) {
	id := r.PathValue("id")
	ev, ok := u.startEvents(w)
	if !ok {
		return
	}
	// The stream ends with the manager's shutdown, too.
	ctx, cancel := context.WithCancel(r.Context())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-u.cfg.Stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		cancel()
		<-watched
	}()
	t, err := s.api.StreamLogsWith(ctx, id, client.StreamOptions{Follow: true}, func(l protocol.LogStreamLine) error {
		if l.Chunk == nil {
			return nil
		}
		b, _ := json.Marshal(outputChunk{Data: l.Chunk.Data, Marker: strings.HasPrefix(strings.TrimLeft(l.Chunk.Data, "\n"), "[legate: ")})
		return ev.send("output", string(b))
	})
	if err != nil {
		if statusOf(err) == http.StatusUnauthorized {
			_ = ev.send("signedout", "")
			return
		}
		if ctx.Err() == nil {
			b, _ := json.Marshal(map[string]string{"error": apiMessage(err)})
			_ = ev.send("failure", string(b))
		}
		return
	}
	b, _ := json.Marshal(outputEnd{Status: t.Status, ExitCode: t.ExitCode, Error: t.Error})
	_ = ev.send("end", string(b))
}

func (u *UI) handleCancelTask(w http.ResponseWriter, r *http.Request, s *user) {
	id := r.PathValue("id")
	if _, err := s.api.CancelTask(r.Context(), id); err != nil {
		u.apiError(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/tasks/"+url.PathEscape(id)+"?notice="+url.QueryEscape("Task cancelled."), http.StatusSeeOther)
}
