package webui

import (
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
)

// The forms that start work: run a pipeline, re-run a run, run a task.
// Each calls the API in-process like every page, so the API's permission
// rules and audit apply; the UI checks first only what it can say better
// in the words of its fields (a required input left empty, a timeout that
// is no duration), and explains the API's refusals the same way.

// runRoutes registers the forms' pages and routes.
func (u *UI) runRoutes() {
	for _, p := range []string{"pipelinerun", "rerun", "taskrun"} {
		u.pages[p] = template.Must(template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/fragments.html", "templates/"+p+".html"))
	}
	u.mux.HandleFunc("GET /pipelines/{name}/run", u.signedIn(u.handlePipelineRunForm))
	u.mux.HandleFunc("POST /pipelines/{name}/run", u.signedIn(u.handlePipelineRun))
	u.mux.HandleFunc("GET /runs/{id}/rerun", u.signedIn(u.handleRerunForm))
	u.mux.HandleFunc("POST /runs/{id}/rerun", u.signedIn(u.handleRerun))
	u.rerunConfirmRoutes()
	u.mux.HandleFunc("GET /tasks/new", u.signedIn(u.handleTaskRunForm))
	u.mux.HandleFunc("POST /tasks/new", u.signedIn(u.handleTaskRun))
}

// formField is one field of a form, with what the page says about it.
type formField struct {
	// Name is the form value's name, ID the element's.
	Name, ID, Label string
	Value           string
	Hint            string
	Placeholder     string
	// Error says what is wrong with the value, in the field's words.
	Error     string
	Multiline bool
}

// fieldErrors reports whether any field has an error.
func fieldErrors(fs []formField) bool {
	for _, f := range fs {
		if f.Error != "" {
			return true
		}
	}
	return false
}

// cliHint matches the parts of an API message that tell a CLI user what
// to type: "(legate role bind ROLE --user ana ...)", "with --input V=X".
var cliHint = regexp.MustCompile(`\s*\((?:legate |[^()]*--)[^()]*\)|: give it with --input \S+`)

// actionRefusal is an API error as a page says it: doing ("run this
// pipeline") names what was refused; the CLI's hints are left out and a
// permission refusal says where permissions are granted.
func actionRefusal(err error, doing string) string {
	msg := strings.TrimSpace(cliHint.ReplaceAllString(apiMessage(err), ""))
	switch statusOf(err) {
	case http.StatusForbidden:
		return "You may not " + doing + ": " + msg + " (" + grantHint + ")."
	case http.StatusNotFound:
		return "Could not " + doing + ": " + msg + "."
	}
	return "Could not " + doing + ": " + msg
}

// inputFieldName is the form value of input name.
func inputFieldName(name string) string { return "input." + name }

// runForm is the page of a form that starts a run.
type runForm struct {
	Action string
	// Back is the page the form came from.
	Back, BackLabel string
	Scope           string
	Pipeline        string
	Version         int64
	// Run is the run a re-run form runs again.
	Run    string
	Fields []formField
	// Denied says why the user's role does not allow it ("" when it
	// does); the form stays, and the API decides.
	Denied string
	// Current is the pipeline's current version (0: unknown), Deploys
	// what its definition deploys, for a re-run (see confirmRerun).
	Current int64
	Deploys []string
}

// pipelineRunFields are the fields of the pipeline's inputs, with the
// given values (the defaults where none is given).
func pipelineRunFields(p protocol.Pipeline, given url.Values) []formField {
	var fs []formField
	for _, in := range p.Inputs {
		f := formField{Name: inputFieldName(in.Name), ID: "input-" + in.Name, Label: in.Name}
		hint := []string{"text"}
		if in.Default != nil {
			f.Value = *in.Default
			hint = append(hint, "default "+quoteEmpty(*in.Default))
		} else {
			hint = append(hint, "required")
		}
		if in.Description != "" {
			hint = append([]string{in.Description}, hint...)
		}
		f.Hint = strings.Join(hint, "; ")
		if given != nil {
			f.Value = given.Get(f.Name)
			if in.Default == nil && strings.TrimSpace(f.Value) == "" {
				f.Error = "Fill in " + in.Name + ": the pipeline has no default for it."
			}
		}
		fs = append(fs, f)
	}
	return fs
}

func quoteEmpty(s string) string {
	if s == "" {
		return "empty"
	}
	return `"` + s + `"`
}

func (u *UI) pipelineRunForm(r *http.Request, s *user, given url.Values) (runForm, protocol.Pipeline, error) {
	q := r.URL.Query()
	p, err := s.api.GetPipeline(r.Context(), r.PathValue("name"), q.Get("org"), q.Get("project"))
	if err != nil {
		return runForm{}, p, err
	}
	v := runForm{Back: pipelineURL(p.Name, p.Org, p.Project), BackLabel: "Pipeline " + p.Name, Scope: protocol.ScopeLabel(p.Org, p.Project),
		Pipeline: p.Name, Version: p.Version, Fields: pipelineRunFields(p, given)}
	v.Action = "/pipelines/" + url.PathEscape(p.Name) + "/run" + scopeQuery(p.Org, p.Project)
	if !s.may(access.PipelineExecute, pipelineResource(p.Name, p.Org, p.Project)) {
		v.Denied = "Your role does not allow running this pipeline: it needs the permission pipeline:execute at " + v.Scope + "."
	}
	return v, p, nil
}

func pipelineResource(name, org, project string) access.Resource {
	return access.Resource{Kind: "pipeline", Name: name, Scope: access.Scope{Org: org, Project: project}}
}

func (u *UI) handlePipelineRunForm(w http.ResponseWriter, r *http.Request, s *user) {
	v, p, err := u.pipelineRunForm(r, s, nil)
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "pipelinerun", page{Title: "Run pipeline " + p.Name, Nav: "pipelines", Data: v})
}

func (u *UI) handlePipelineRun(w http.ResponseWriter, r *http.Request, s *user) {
	v, p, err := u.pipelineRunForm(r, s, r.PostForm)
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	pg := page{Title: "Run pipeline " + p.Name, Nav: "pipelines", Data: v}
	if fieldErrors(v.Fields) {
		pg.Error = "The run did not start: see the fields below."
		u.render(w, r, s, http.StatusBadRequest, "pipelinerun", pg)
		return
	}
	inputs := map[string]string{}
	for _, in := range p.Inputs {
		inputs[in.Name] = r.PostFormValue(inputFieldName(in.Name))
	}
	run, err := s.api.RunPipeline(r.Context(), p.Name, p.Org, p.Project, protocol.RunPipelineRequest{Inputs: inputs})
	if err != nil {
		if statusOf(err) == http.StatusUnauthorized {
			u.apiError(w, r, s, err)
			return
		}
		pg.Error = actionRefusal(err, "run pipeline "+p.Name)
		u.render(w, r, s, statusOf(err), "pipelinerun", pg)
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(run.ID)+"?notice="+url.QueryEscape("Run "+run.ID+" of "+p.Name+" started."), http.StatusSeeOther)
}

// rerunForm is the re-run form of run id: its inputs, as given (or the
// run's).
func (u *UI) rerunForm(r *http.Request, s *user, given url.Values) (runForm, protocol.Run, error) {
	run, err := s.api.GetRun(r.Context(), r.PathValue("id"))
	if err != nil {
		return runForm{}, run, err
	}
	v := runForm{Action: "/runs/" + url.PathEscape(run.ID) + "/rerun", Back: "/runs/" + url.PathEscape(run.ID), BackLabel: "Run " + run.ID,
		Scope: protocol.ScopeLabel(run.Org, run.Project), Pipeline: run.Pipeline, Version: run.Version, Run: run.ID}
	// The run's definition may differ from the current one: its inputs
	// are the run's; the current definition only describes them.
	desc, rank := map[string]string{}, map[string]int{}
	if p, err := s.api.GetPipeline(r.Context(), run.Pipeline, run.Org, run.Project); err == nil {
		v.Current = p.Version
		if p.Version == run.Version {
			// The run's definition is the current one (another version
			// asks anyway).
			v.Deploys = deploysOf(p.Source)
		}
		for i, in := range p.Inputs {
			desc[in.Name], rank[in.Name] = in.Description, i+1
		}
	}
	// In the definition's order where it still has them, then by name.
	names := sortedInputs(run.Inputs)
	slices.SortStableFunc(names, func(a, b string) int { return orLast(rank[a]) - orLast(rank[b]) })
	for _, k := range names {
		f := formField{Name: inputFieldName(k), ID: "input-" + k, Label: k, Value: run.Inputs[k], Hint: "text; the run had " + quoteEmpty(run.Inputs[k])}
		if d := desc[k]; d != "" {
			f.Hint = d + "; " + f.Hint
		}
		if given != nil {
			f.Value = given.Get(f.Name)
		}
		v.Fields = append(v.Fields, f)
	}
	if !s.may(access.PipelineExecute, pipelineResource(run.Pipeline, run.Org, run.Project)) {
		v.Denied = "Your role does not allow re-running this run: it needs the permission pipeline:execute on pipeline " + run.Pipeline + " at " + v.Scope + "."
	}
	return v, run, nil
}

// orLast puts a rank of 0 (none) after every other.
func orLast(rank int) int {
	if rank == 0 {
		return 1 << 20
	}
	return rank
}

func sortedInputs(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (u *UI) handleRerunForm(w http.ResponseWriter, r *http.Request, s *user) {
	v, run, err := u.rerunForm(r, s, nil)
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "rerun", page{Title: "Re-run " + run.ID, Nav: "runs", Data: v})
}

// handleRerun re-runs a run: with the form's inputs, or the run's own
// when the form has none (the run page's Re-run button).
func (u *UI) handleRerun(w http.ResponseWriter, r *http.Request, s *user) {
	edited := r.PostFormValue("edited") != ""
	var given url.Values
	if edited {
		given = r.PostForm
	}
	v, run, err := u.rerunForm(r, s, given)
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	if !edited && u.confirmRerun(w, r, s, v) {
		return
	}
	req := protocol.RerunRequest{}
	if edited {
		req.Inputs = map[string]string{}
		for k := range run.Inputs {
			req.Inputs[k] = r.PostFormValue(inputFieldName(k))
		}
	}
	next, err := s.api.RerunRun(r.Context(), run.ID, req)
	if err != nil {
		if statusOf(err) == http.StatusUnauthorized {
			u.apiError(w, r, s, err)
			return
		}
		msg := actionRefusal(err, "re-run run "+run.ID)
		if !edited {
			// The run page's button: say it there.
			u.renderRun(w, r, s, run.ID, -1, statusOf(err), msg)
			return
		}
		u.render(w, r, s, statusOf(err), "rerun", page{Title: "Re-run " + run.ID, Nav: "runs", Error: msg, Data: v})
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(next.ID)+"?notice="+url.QueryEscape("Run "+next.ID+" started: a re-run of "+run.ID+"."), http.StatusSeeOther)
}
