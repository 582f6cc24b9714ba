package webui

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
)

// Deleting a delegate is a step of its own: the delegate's page links to a
// confirmation page that names the delegate, its instances and what
// deleting does, and only that page's form (which carries the name in its
// confirm field) deletes. A POST without it is sent to the confirmation.
// Refusals are worded for the page (its buttons and the Settings pages),
// not with the CLI's commands that the API's messages name.

// delegatePageRoutes registers the routes of the delegate pages besides
// those of webui.go.
func (u *UI) delegatePageRoutes() {
	u.pages["delegatedelete"] = template.Must(template.New("delegatedelete").Funcs(funcs).ParseFS(templateFS,
		"templates/layout.html", "templates/fragments.html", "templates/delegatedelete.html"))
	u.mux.HandleFunc("GET /delegates/{name}/delete", u.signedIn(u.handleDeleteDelegatePage))
}

// deleteDelegateView is the confirmation page.
type deleteDelegateView struct {
	Name      string
	Scope     string
	Instances []deleteInstance
	// Busy says why the manager would refuse now ("": it would not).
	Busy string
	// Refusal says why the user may not delete it ("": they may).
	Refusal string
	// Failed is why the last attempt failed.
	Failed string
	CSRF   string
}

type deleteInstance struct {
	Hostname, Version, State string
	Running                  int
}

// deleteDelegateView reads the delegate: the view, or the API's error.
func (u *UI) deleteDelegateView(r *http.Request, s *user, name string) (deleteDelegateView, error) {
	d, err := s.api.DescribeDelegate(r.Context(), name)
	if err != nil {
		return deleteDelegateView{}, err
	}
	v := deleteDelegateView{Name: d.Name, CSRF: s.csrf}
	plain := make([]protocol.Delegate, len(d.Instances))
	for i, in := range d.Instances {
		plain[i] = in.Delegate
	}
	replaced := replacements(plain, u.cfg.Liveness)
	var res []access.Resource
	var connected []string
	running := 0
	for _, in := range d.Instances {
		if sc := protocol.ScopeLabel(in.Org, in.Project); !strings.Contains(v.Scope, sc) {
			v.Scope = strings.TrimPrefix(v.Scope+", "+sc, ", ")
		}
		res = append(res, access.Resource{Kind: "delegate", Name: in.Name, Scope: access.Scope{Org: in.Org, Project: in.Project}})
		st := "not connected"
		switch rp, ok := replaced[in.InstanceID]; {
		case in.Status == protocol.DelegateConnected:
			st = "connected"
			connected = append(connected, in.Hostname)
		case ok:
			st = rp.State()
		case in.Status == protocol.DelegateDeregistered:
			st = "stopped"
		}
		running += in.RunningTasks
		v.Instances = append(v.Instances, deleteInstance{Hostname: in.Hostname, Version: in.Version, State: st, Running: in.RunningTasks})
	}
	v.Busy = busyWords(d.Name, connected, running)
	if !s.may(access.DelegateDelete, res...) {
		v.Refusal = refusalWords(s, "delete delegate "+d.Name, access.DelegateDelete, "its scope ("+v.Scope+")")
	}
	return v, nil
}

// busyWords says why the manager refuses to delete a delegate with these
// connected instances and running tasks, and what to do on the pages.
func busyWords(name string, connected []string, running int) string {
	var why, todo []string
	if len(connected) > 0 {
		why = append(why, "connected from "+strings.Join(connected, ", "))
		todo = append(todo, "stop the delegate (one stopped with Ctrl-C or SIGTERM deregisters by itself), or revoke its token under Settings → Delegate tokens to disconnect it")
	}
	if running > 0 {
		why = append(why, fmt.Sprintf("running %d task(s)", running))
		todo = append(todo, "wait for its tasks to end, or cancel them on the Tasks page")
	}
	if len(why) == 0 {
		return ""
	}
	return "Delegate " + name + " cannot be deleted now: it is " + strings.Join(why, " and ") +
		" (a delegate still running would register again at once). To delete it, " + strings.Join(todo, "; then ") + "."
}

// refusalWords says that the user may not do what, which permission it
// needs where, and where an administrator grants it.
func refusalWords(s *user, what string, perm access.Permission, scope string) string {
	return fmt.Sprintf("You (%s) may not %s: that needs the permission %s at %s, which no role bound to you grants there; "+
		grantHint+".", s.name(), what, perm, scope)
}

func (u *UI) handleDeleteDelegatePage(w http.ResponseWriter, r *http.Request, s *user) {
	name := r.PathValue("name")
	v, err := u.deleteDelegateView(r, s, name)
	if err != nil {
		u.delegateError(w, r, s, name, err)
		return
	}
	status := http.StatusOK
	if v.Refusal != "" {
		status = http.StatusForbidden
	}
	u.render(w, r, s, status, "delegatedelete", page{Title: "Delete delegate " + v.Name, Nav: "delegates", Data: v})
}

// deleteDelegate is the confirmation form's POST: without the form's
// confirm field (the delegate's name) it is sent to the confirmation.
func (u *UI) deleteDelegate(w http.ResponseWriter, r *http.Request, s *user, name string) {
	confirmURL := delegateURL(name) + "/delete"
	if r.PostFormValue("confirm") != name {
		http.Redirect(w, r, confirmURL, http.StatusSeeOther)
		return
	}
	_, err := s.api.DeleteDelegate(r.Context(), name)
	if err == nil {
		http.Redirect(w, r, "/delegates?notice="+url.QueryEscape("Delegate "+name+" deleted."), http.StatusSeeOther)
		return
	}
	status := statusOf(err)
	if status != http.StatusForbidden && status != http.StatusConflict {
		u.delegateError(w, r, s, name, err)
		return
	}
	v, verr := u.deleteDelegateView(r, s, name)
	if verr != nil {
		u.delegateError(w, r, s, name, verr)
		return
	}
	switch {
	case status == http.StatusForbidden && v.Refusal == "":
		// The page's policy allowed it, the API did not (the roles
		// changed meanwhile).
		v.Refusal = refusalWords(s, "delete delegate "+v.Name, access.DelegateDelete, "its scope ("+v.Scope+")")
	case status == http.StatusConflict && v.Busy == "":
		// Not connected now, but heard of within the liveness window.
		v.Failed = fmt.Sprintf("Delegate %s was in contact within the last %s: the manager deletes it only after that, "+
			"so that a delegate still running does not register again. Try again in a moment.", v.Name, u.cfg.Liveness)
	case status == http.StatusConflict:
		v.Failed = v.Busy
	}
	u.render(w, r, s, status, "delegatedelete", page{Title: "Delete delegate " + v.Name, Nav: "delegates", Data: v})
}

// delegateActionRights are the permission each delegate action needs,
// at which scope, and its words (%s: the name), for the refusals.
var delegateActionRights = map[string]struct {
	perm         access.Permission
	scope, words string
}{
	"approve":         {access.DelegateEdit, "its scope", "approve delegate %s"},
	"reject":          {access.DelegateEdit, "its scope", "reject delegate %s"},
	"hold-upgrades":   {access.UserManage, "the account", "hold the upgrades of delegate %s"},
	"resume-upgrades": {access.UserManage, "the account", "resume the upgrades of delegate %s"},
}

// delegateError shows an error of the API about delegate name in the
// pages' words: a missing delegate, or a refused action.
func (u *UI) delegateError(w http.ResponseWriter, r *http.Request, s *user, name string, err error) {
	switch statusOf(err) {
	case http.StatusNotFound:
		u.errorPage(w, r, s, http.StatusNotFound, "There is no delegate named "+name+" in this account: the Delegates page lists them all (Status: Any).")
		return
	case http.StatusForbidden:
		if a, ok := delegateActionRights[r.PathValue("action")]; ok && r.Method == http.MethodPost {
			u.errorPage(w, r, s, http.StatusForbidden, refusalWords(s, fmt.Sprintf(a.words, name), a.perm, a.scope))
			return
		}
	}
	u.apiError(w, r, s, err)
}
