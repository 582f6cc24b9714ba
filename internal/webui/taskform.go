package webui

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
)

// taskForm is the Run a task page: a shell task's script, selectors,
// timeout, the stored secrets it uses (by name) and its scope, as legate
// task run offers them.
type taskForm struct {
	Script, Selectors, Timeout, Secrets, Scope formField
	Denied                                     string
}

func (f *taskForm) Fields() []formField {
	return []formField{f.Script, f.Selectors, f.Timeout, f.Secrets, f.Scope}
}

func newTaskForm(s *user, given url.Values) taskForm {
	f := taskForm{
		Script: formField{Name: "script", ID: "script", Label: "Script", Multiline: true,
			Hint: "The shell script the task runs on a delegate."},
		Selectors: formField{Name: "selectors", ID: "selectors", Label: "Selectors", Placeholder: "linux, builder",
			Hint: "Optional. Tags, names or hostnames, comma-separated: only a delegate that matches all of them runs the task."},
		Timeout: formField{Name: "timeout", ID: "timeout", Label: "Timeout", Placeholder: "10m",
			Hint: "Optional. How long the task may run, as 90s, 10m or 1h30m; empty for the manager's default."},
		Secrets: formField{Name: "secrets", ID: "secrets", Label: "Secrets", Placeholder: "DB_PASSWORD, API_TOKEN",
			Hint: "Optional. Names of stored secrets, comma-separated: each is in the script's environment under its name, masked in the output."},
		Scope: formField{Name: "scope", ID: "scope", Label: "Scope", Placeholder: "ORG or ORG/PROJECT",
			Hint: "Optional. Empty for the account; an org, or a project as ORG/PROJECT."},
	}
	if given != nil {
		f.Script.Value = given.Get("script")
		f.Selectors.Value = strings.TrimSpace(given.Get("selectors"))
		f.Timeout.Value = strings.TrimSpace(given.Get("timeout"))
		f.Secrets.Value = strings.TrimSpace(given.Get("secrets"))
		f.Scope.Value = strings.TrimSpace(given.Get("scope"))
	}
	if !s.policy.AllowsBelow(access.TaskRun, access.Account) {
		f.Denied = "Your role does not allow running tasks: it needs the permission task:run at the task's scope."
	}
	return f
}

func validSecretName(n string) bool {
	for _, c := range n {
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return n != "" && (n[0] < '0' || n[0] > '9')
}

// spec checks the form and returns its task; the fields with errors say
// what to change.
func (f *taskForm) spec() protocol.TaskSpec {
	spec := protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: f.Script.Value}}
	if strings.TrimSpace(f.Script.Value) == "" {
		f.Script.Error = "Write the script the task runs."
	}
	if sel := protocol.NormalizeSelectors(splitList(f.Selectors.Value)); len(sel) > 0 {
		spec.Selectors = sel
	}
	if f.Timeout.Value != "" {
		d, err := time.ParseDuration(f.Timeout.Value)
		switch {
		case err != nil:
			f.Timeout.Error = `"` + f.Timeout.Value + `" is not a duration: write it as 90s, 10m or 1h30m.`
		case d < time.Second:
			f.Timeout.Error = "The timeout must be at least 1s (empty for the manager's default)."
		default:
			spec.TimeoutMS = d.Milliseconds()
		}
	}
	for _, n := range splitList(f.Secrets.Value) {
		if !validSecretName(n) {
			f.Secrets.Error = `"` + n + `" is not a secret's name: names are letters, digits and underscores, not starting with a digit.`
			break
		}
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		spec.Env[n] = "${secrets." + n + "}"
	}
	if f.Scope.Value != "" {
		org, project, _ := strings.Cut(f.Scope.Value, "/")
		if org == "" || strings.Contains(project, "/") {
			f.Scope.Error = `"` + f.Scope.Value + `" is not a scope: write an org, or ORG/PROJECT.`
		}
		spec.Org, spec.Project = org, project
	}
	return spec
}

// fieldOf is the field an API refusal of the task is about, by what it
// names; nil when it is about none in particular.
func (f *taskForm) fieldOf(msg string) *formField {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "secret"):
		return &f.Secrets
	case strings.Contains(m, "project") || strings.Contains(m, " org"):
		return &f.Scope
	case strings.Contains(m, "selector"):
		return &f.Selectors
	case strings.Contains(m, "timeout"):
		return &f.Timeout
	case strings.Contains(m, "script"):
		return &f.Script
	}
	return nil
}

func (u *UI) handleTaskRunForm(w http.ResponseWriter, r *http.Request, s *user) {
	f := newTaskForm(s, nil)
	u.render(w, r, s, http.StatusOK, "taskrun", page{Title: "Run a task", Nav: "tasks", Data: &f})
}

func (u *UI) handleTaskRun(w http.ResponseWriter, r *http.Request, s *user) {
	f := newTaskForm(s, r.PostForm)
	spec := f.spec()
	pg := page{Title: "Run a task", Nav: "tasks", Data: &f}
	if fieldErrors(f.Fields()) {
		pg.Error = "The task was not submitted: see the fields below."
		u.render(w, r, s, http.StatusBadRequest, "taskrun", pg)
		return
	}
	t, err := s.api.SubmitTask(r.Context(), spec)
	if err != nil {
		if statusOf(err) == http.StatusUnauthorized {
			u.apiError(w, r, s, err)
			return
		}
		pg.Error = actionRefusal(err, "run this task")
		if fld := f.fieldOf(apiMessage(err)); fld != nil && statusOf(err) != http.StatusForbidden {
			fld.Error = strings.TrimPrefix(pg.Error, "Could not run this task: ")
			pg.Error = "The task was not submitted: see the " + fld.Label + " field below."
		}
		u.render(w, r, s, statusOf(err), "taskrun", pg)
		return
	}
	http.Redirect(w, r, "/tasks/"+url.PathEscape(t.ID)+"?notice="+url.QueryEscape("Task "+t.ID+" submitted."), http.StatusSeeOther)
}
