package webui

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// Pipelines and runs. The API lists pipelines whole (an account has few):
// the pages here cut that list into pages of perPage. Runs come a page at
// a time, newest first, filtered in the store, by the API's cursor.
const perPage = 25

// pageOf returns the page number (from 1) of q's "p".
func pageOf(q url.Values) int {
	n, err := strconv.Atoi(q.Get("p"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// pager is the navigation between numbered pages.
type pager struct {
	Page    int
	PrevURL string
	NextURL string
}

// newPager returns the links of page p of a listing at base with query q,
// when more holds that a next page exists.
func newPager(base string, q url.Values, p int, more bool) pager {
	pg := pager{Page: p}
	link := func(n int) string {
		v := url.Values{}
		for k, vs := range q {
			if k != "p" && len(vs) > 0 && vs[0] != "" {
				v.Set(k, vs[0])
			}
		}
		if n > 1 {
			v.Set("p", strconv.Itoa(n))
		}
		if e := v.Encode(); e != "" {
			return base + "?" + e
		}
		return base
	}
	if p > 1 {
		pg.PrevURL = link(p - 1)
	}
	if more {
		pg.NextURL = link(p + 1)
	}
	return pg
}

// window returns page p of items and whether more follow.
func window[T any](items []T, p int) ([]T, bool) {
	lo := (p - 1) * perPage
	if lo >= len(items) {
		return nil, false
	}
	hi := min(lo+perPage, len(items))
	return items[lo:hi], hi < len(items)
}

type pipelineRow struct {
	protocol.Pipeline
	Scope string
	URL   string
}

func pipelineURL(name, org, project string) string {
	v := url.Values{}
	if org != "" {
		v.Set("org", org)
	}
	if project != "" {
		v.Set("project", project)
	}
	u := "/pipelines/" + url.PathEscape(name)
	if e := v.Encode(); e != "" {
		u += "?" + e
	}
	return u
}

type pipelinesView struct {
	Name      string
	Pipelines []pipelineRow
	Pager     pager
	Now       time.Time
}

func (u *UI) handlePipelines(w http.ResponseWriter, r *http.Request, s *user) {
	q := r.URL.Query()
	v := pipelinesView{Name: strings.TrimSpace(q.Get("name")), Now: u.cfg.Now()}
	list, err := s.api.ListPipelines(r.Context())
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	var rows []pipelineRow
	for _, p := range list.Pipelines {
		if v.Name != "" && !strings.Contains(strings.ToLower(p.Name), strings.ToLower(v.Name)) {
			continue
		}
		rows = append(rows, pipelineRow{Pipeline: p, Scope: protocol.ScopeLabel(p.Org, p.Project), URL: pipelineURL(p.Name, p.Org, p.Project)})
	}
	p := pageOf(q)
	var more bool
	v.Pipelines, more = window(rows, p)
	v.Pager = newPager("/pipelines", q, p, more)
	u.render(w, r, s, http.StatusOK, "pipelines", page{Title: "Pipelines", Nav: "pipelines", Data: v})
}

type runRow struct {
	protocol.Run
	Scope string
}

type runsView struct {
	Pipeline string
	Status   string
	Statuses []string
	Runs     []runRow
	// FirstURL leads to the newest runs (set on a later page), NextURL to
	// older ones.
	FirstURL string
	NextURL  string
	Now      time.Time
}

var runStatuses = []string{protocol.RunRunning, protocol.RunSucceeded, protocol.RunFailed, protocol.RunCancelled}

// runsPage lists a page of the runs (of pipeline, when set) with status,
// from the cursor in q's "page". With scoped, only the runs of the
// pipeline of scope org/project. Links keep q's other parameters.
func (u *UI) runsPage(r *http.Request, s *user, base string, q url.Values, pipeline string, scoped bool, org, project, status string) (runsView, error) {
	v := runsView{Pipeline: pipeline, Status: status, Statuses: runStatuses, Now: u.cfg.Now()}
	cursor := q.Get("page")
	list, err := s.api.ListRunsPage(r.Context(), client.RunQuery{Pipeline: pipeline, InScope: scoped, Org: org, Project: project,
		Status: status, Limit: perPage, Page: cursor})
	if err != nil {
		return v, err
	}
	for _, run := range list.Runs {
		v.Runs = append(v.Runs, runRow{Run: run, Scope: protocol.ScopeLabel(run.Org, run.Project)})
	}
	link := func(page string) string {
		l := url.Values{}
		for k, vs := range q {
			if k != "page" && len(vs) > 0 && vs[0] != "" {
				l.Set(k, vs[0])
			}
		}
		if page != "" {
			l.Set("page", page)
		}
		if e := l.Encode(); e != "" {
			if strings.Contains(base, "?") {
				return base + "&" + e
			}
			return base + "?" + e
		}
		return base
	}
	if list.Next != "" {
		v.NextURL = link(list.Next)
	}
	if cursor != "" {
		v.FirstURL = link("")
	}
	return v, nil
}

func (u *UI) handleRuns(w http.ResponseWriter, r *http.Request, s *user) {
	q := r.URL.Query()
	status := q.Get("status")
	if !slices.Contains(runStatuses, status) {
		status = ""
	}
	v, err := u.runsPage(r, s, "/runs", q, strings.TrimSpace(q.Get("pipeline")), false, "", "", status)
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "runs", page{Title: "Runs", Nav: "runs", Data: v})
}

type pipelineView struct {
	pipelineRow
	Runs runsView
	// CanRun: the user may run the pipeline; RunURL is its run form.
	CanRun bool
	RunURL string
	Now    time.Time
}

func (u *UI) handlePipeline(w http.ResponseWriter, r *http.Request, s *user) {
	q := r.URL.Query()
	name, org, project := r.PathValue("name"), q.Get("org"), q.Get("project")
	p, err := s.api.GetPipeline(r.Context(), name, org, project)
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	runs, err := u.runsPage(r, s, pipelineURL(p.Name, "", ""), q, p.Name, true, p.Org, p.Project, "")
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	v := pipelineView{pipelineRow: pipelineRow{Pipeline: p, Scope: protocol.ScopeLabel(p.Org, p.Project), URL: pipelineURL(p.Name, p.Org, p.Project)}, Runs: runs,
		CanRun: s.may(access.PipelineExecute, pipelineResource(p.Name, p.Org, p.Project)), Now: u.cfg.Now()}
	v.RunURL = "/pipelines/" + url.PathEscape(p.Name) + "/run" + scopeQuery(p.Org, p.Project)
	u.render(w, r, s, http.StatusOK, "pipeline", page{Title: "Pipeline " + p.Name, Nav: "pipelines", Data: v})
}

// runView is the run page's live part.
type runView struct {
	runRow
	PipelineURL string
	Stages      []stageView
	Terminal    bool
	CanCancel   bool
	// Step is the index (in Run.Steps) of the step whose output shows:
	// the failed step when one failed, else the latest with a task.
	Step int
	CSRF string
	Now  time.Time
	// Failed is the first step (in the pipeline's order) that did not
	// succeed; nil when none.
	Failed *stepView
	// Took is how long the run took, once it ended.
	Took string
}

type stageView struct {
	Name  string
	Steps []stepView
}

type stepView struct {
	protocol.RunStep
	Index    int
	Selected bool
	// Delegate is the delegate that ran the step's task.
	Delegate string
	// Duration is how long it took, once it ended; Running that it
	// runs (since StartedAt). A skipped step has neither.
	Duration string
	Running  bool
}

// stepFailed reports whether a step's status is an end other than success.
func stepFailed(status string) bool {
	switch status {
	case protocol.StatusQueued, protocol.StatusRunning, protocol.StatusSucceeded, protocol.StepSkipped:
		return false
	}
	return true
}

// pipelineOrder returns the indices of steps in their pipeline's order
// (steps are stored in the order they started or were skipped).
func pipelineOrder(steps []protocol.RunStep) []int {
	idx := make([]int, len(steps))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return steps[a].Order - steps[b].Order })
	return idx
}

func (u *UI) runView(r *http.Request, s *user, id string, step int) (runView, error) {
	run, err := s.api.GetRun(r.Context(), id)
	if err != nil {
		return runView{}, err
	}
	v := runView{runRow: runRow{Run: run, Scope: protocol.ScopeLabel(run.Org, run.Project)}, PipelineURL: pipelineURL(run.Pipeline, run.Org, run.Project),
		Terminal: run.Status != protocol.RunRunning, Step: step, Now: u.cfg.Now()}
	v.CanCancel = !v.Terminal && !run.CancelRequested && s.may(access.PipelineExecute, pipelineResource(run.Pipeline, run.Org, run.Project))
	if run.FinishedAt != nil {
		v.Took = took(run.FinishedAt.Sub(run.CreatedAt))
	}
	order := pipelineOrder(run.Steps)
	failed := -1
	for _, i := range order {
		if stepFailed(run.Steps[i].Status) {
			failed = i
			break
		}
	}
	if v.Step < 0 || v.Step >= len(run.Steps) || run.Steps[v.Step].TaskID == "" {
		v.Step = -1
		if failed >= 0 && run.Steps[failed].TaskID != "" {
			// What failed, not the "when: failure" steps that ran after.
			v.Step = failed
		} else {
			// The latest step with a task: the one most likely running.
			for i, st := range run.Steps {
				if st.TaskID != "" {
					v.Step = i
				}
			}
		}
	}
	for _, i := range order {
		st := run.Steps[i]
		sv := stepView{RunStep: st, Index: i, Selected: i == v.Step}
		if st.TaskID != "" {
			if t, err := s.api.GetTask(r.Context(), st.TaskID); err == nil && t.DelegateName != "" {
				sv.Delegate = t.DelegateName + " (" + t.DelegateHostname + ")"
			}
		}
		switch {
		case st.Status == protocol.StepSkipped:
		case st.FinishedAt != nil:
			sv.Duration = took(st.FinishedAt.Sub(st.StartedAt))
		case !v.Terminal:
			sv.Running = true
		}
		if i == failed {
			f := sv
			v.Failed = &f
		}
		if n := len(v.Stages); n == 0 || v.Stages[n-1].Name != st.Stage {
			v.Stages = append(v.Stages, stageView{Name: st.Stage})
		}
		v.Stages[len(v.Stages)-1].Steps = append(v.Stages[len(v.Stages)-1].Steps, sv)
	}
	return v, nil
}

// runPage is what the run page renders besides the live part.
type runPage struct {
	Live      runView
	EventsURL string
	OutputURL string
	StepName  string
	// CanRerun: the user may run the run's pipeline.
	CanRerun bool
}

func (u *UI) handleRun(w http.ResponseWriter, r *http.Request, s *user) {
	step, err := strconv.Atoi(r.URL.Query().Get("step"))
	if err != nil {
		step = -1
	}
	u.renderRun(w, r, s, r.PathValue("id"), step, http.StatusOK, "")
}

// renderRun renders the page of run id with status, and errMsg (an
// action of the page the API refused) when set.
func (u *UI) renderRun(w http.ResponseWriter, r *http.Request, s *user, id string, step, status int, errMsg string) {
	v, err := u.runView(r, s, id, step)
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	v.CSRF = s.csrf
	p := runPage{Live: v, EventsURL: "/runs/" + url.PathEscape(id) + "/events?step=" + strconv.Itoa(v.Step),
		CanRerun: s.may(access.PipelineExecute, pipelineResource(v.Run.Pipeline, v.Run.Org, v.Run.Project))}
	if v.Step >= 0 {
		st := v.Run.Steps[v.Step]
		p.OutputURL, p.StepName = "/tasks/"+url.PathEscape(st.TaskID)+"/output", st.Stage+" / "+st.Step
	}
	u.render(w, r, s, status, "run", page{Title: "Run " + id, Nav: "runs", Error: errMsg, Data: p})
}

// handleRunEvents sends the run's stages and steps again whenever the
// manager advanced one of the account's runs, until the run has ended.
func (u *UI) handleRunEvents(w http.ResponseWriter, r *http.Request, s *user) {
	id := r.PathValue("id")
	step, err := strconv.Atoi(r.URL.Query().Get("step"))
	if err != nil {
		step = -1
	}
	changes, stop := u.cfg.Backend.WatchRuns(s.account)
	defer stop()
	ev, ok := u.startEvents(w)
	if !ok {
		return
	}
	last := ""
	// send reports whether the stream goes on.
	send := func() bool {
		v, err := u.runView(r, s, id, step)
		if err != nil {
			if statusOf(err) == http.StatusUnauthorized {
				_ = ev.send("signedout", "")
			}
			return false
		}
		v.CSRF = s.csrf
		var b strings.Builder
		if err := u.fragments.ExecuteTemplate(&b, "run-live", v); err != nil {
			u.cfg.Logger.Error("web UI: render a run", "err", err)
			return false
		}
		if b.String() != last {
			last = b.String()
			if ev.send("run", last) != nil {
				return false
			}
		}
		if v.Terminal {
			_ = ev.send("end", v.Run.Status)
			return false
		}
		return true
	}
	u.follow(r, ev, changes, send)
}

func (u *UI) handleCancelRun(w http.ResponseWriter, r *http.Request, s *user) {
	id := r.PathValue("id")
	if _, err := s.api.CancelRun(r.Context(), id); err != nil {
		if st := statusOf(err); st == http.StatusForbidden || st == http.StatusConflict {
			u.renderRun(w, r, s, id, -1, st, actionRefusal(err, "cancel run "+id))
			return
		}
		u.apiError(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(id)+"?notice="+url.QueryEscape("Run cancelled: its running steps stop."), http.StatusSeeOther)
}

// took says how long something took, to the second.
func took(d time.Duration) string {
	if d < time.Second {
		return "under 1s"
	}
	return d.Round(time.Second).String()
}
