package webui

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Changes in the settings: each form posts to /settings/SECTION/ACTION
// and the action calls the API in-process (so it is allowed, refused and
// audited exactly as the API's). A destructive action first answers a
// page that asks to confirm it, whose form posts the same fields with
// confirm=yes: the step works without JavaScript. The guard against a
// forged post is the CSRF token, not the page: a same-origin post that
// carries confirm=yes and the token performs the action without it. A
// refusal shows the section again with the API's reason in the words of
// the page's fields, and the form filled as it was sent (without any
// secret value or password).

// settingsAction is one change a settings page offers.
type settingsAction struct {
	// confirm, for a destructive action, asks the question before it.
	confirm func(f url.Values) confirmView
	// do makes the change through the API.
	do func(ctx context.Context, s *user, f url.Values) (actionResult, error)
}

// actionResult is what a change answers: a notice on the section's page,
// or (created once, shown once) a new API key or delegate token.
type actionResult struct {
	notice string
	key    *protocol.APIKey
	token  *protocol.Token
}

// confirmView is the page that asks before a destructive action.
type confirmView struct {
	Question string
	// Detail says what follows from it.
	Detail string
	Button string
	Action string
	Fields []hiddenField
	// Force, when set, is a box that overrides a refusal the API explains
	// (revoke the account's last API key anyway).
	Force string
}

type hiddenField struct{ Name, Value string }

// fieldsOfSection name, by the CLI flag an API message may name, the
// page's field that gives the same value.
var fieldsOfSection = map[string]map[string]string{
	"tokens":         {"org": "Organization", "project": "Project", "init-secret": "Init secrets", "uses": "Uses"},
	"apikeys":        {"owner": "Owner", "force": "Revoke it even if it is the account's last active key"},
	"users":          {"owner": "Owner", "service-account": "Kind", "password-stdin": "Password", "display": "Display name"},
	"roles":          {"permission": "Permissions", "description": "Description"},
	"bindings":       {"user": "Subject", "service-account": "Subject", "group": "Subject", "org": "Organization", "project": "Project"},
	"secrets":        {"org": "Organization", "project": "Project"},
	"connectors":     {"url": "URL", "type": "Type", "selector": "Selectors", "ca-file": "CA certificate", "token-secret": "Token secret", "username": "User name", "password-secret": "Password secret"},
	"configurations": {"org": "Organization", "project": "Project", "selector": "Selectors", "script": "Script", "script-file": "Script"},
	"limits":         {"per-hour": "Per hour", "per-day": "Per day", "default": "Back to the defaults"},
}

// grantHint is where a page sends someone who lacks a permission (the
// API's own hint is a CLI command).
const grantHint = "someone who manages users can bind you a role that has it under Settings → Role bindings"

var (
	flagWord   = regexp.MustCompile(`--([a-z][a-z-]*)`)
	cliCommand = regexp.MustCompile(`legate [a-z][^();]*`)
	// roleBindHint is the API's hint of how to get a permission, a CLI
	// command; the page points to its own page instead.
	roleBindHint = regexp.MustCompile(`\(legate role bind [^)]*\)`)
)

// refusalText is the API's reason for a refusal in the words of a page:
// the CLI flags its message names become the page's fields that give the
// same value.
func refusalText(section string, err error) string {
	msg := roleBindHint.ReplaceAllString(apiMessage(err), "("+grantHint+")")
	fields := fieldsOfSection[section]
	// A flag in a whole command (legate project create --org ...) stays:
	// the command is the advice, for a page this one is not.
	swap := func(part string) string {
		return flagWord.ReplaceAllStringFunc(part, func(m string) string {
			if label, ok := fields[m[2:]]; ok {
				return `the field "` + label + `"`
			}
			return m
		})
	}
	var b strings.Builder
	last := 0
	for _, c := range cliCommand.FindAllStringIndex(msg, -1) {
		b.WriteString(swap(msg[last:c[0]]))
		b.WriteString(msg[c[0]:c[1]])
		last = c[1]
	}
	b.WriteString(swap(msg[last:]))
	msg = b.String()
	if statusOf(err) == http.StatusForbidden && !strings.HasPrefix(msg, "Refused") {
		msg = "Refused: " + msg
	}
	return msg
}

// when is a time as a settings list shows it: how long ago, the absolute
// time on hover (the page's script keeps the relative one current).
func when(now, t time.Time) template.HTML {
	return template.HTML(`<time datetime="` + t.UTC().Format(time.RFC3339) + `" title="` + t.UTC().Format("2006-01-02 15:04:05 UTC") + `" data-age>` + ago(now, t) + `</time>`)
}

// secretFields are never sent back to a page.
var secretFields = []string{"csrf", "value", "password", "confirm"}

func (u *UI) settingsRoutes() {
	u.pages["settings"] = template.Must(template.New("settings").Funcs(funcs).Funcs(template.FuncMap{"when": when, "granted": granted}).ParseFS(templateFS,
		"templates/layout.html", "templates/fragments.html", "templates/settings*.html"))
	u.mux.HandleFunc("POST /settings/{section}/{action}", u.signedIn(u.handleSettingsAction))
}

func (u *UI) settingsActions() map[string]settingsAction {
	out := map[string]settingsAction{}
	for k, a := range accessActions() {
		out[k] = a
	}
	for k, a := range resourceActions() {
		out[k] = a
	}
	for k, a := range groupActions() {
		out[k] = a
	}
	return out
}

func (u *UI) handleSettingsAction(w http.ResponseWriter, r *http.Request, s *user) {
	key, name := r.PathValue("section"), r.PathValue("action")
	sec := sectionOf(key)
	a, ok := u.settingsActions()[key+"/"+name]
	if sec == nil || !ok {
		u.errorPage(w, r, s, http.StatusNotFound, "There is no settings action "+key+"/"+name+".")
		return
	}
	f := r.PostForm
	if a.confirm != nil && f.Get("confirm") != "yes" {
		c := a.confirm(f)
		c.Action = "/settings/" + key + "/" + name
		for k, vs := range f {
			if slices.Contains(secretFields, k) || k == "force" {
				continue
			}
			for _, x := range vs {
				c.Fields = append(c.Fields, hiddenField{k, x})
			}
		}
		slices.SortFunc(c.Fields, func(a, b hiddenField) int { return strings.Compare(a.Name, b.Name) })
		v := u.newSettingsView(s, sec)
		v.Confirm = &c
		u.render(w, r, s, http.StatusOK, "settings", page{Title: c.Question, Nav: "settings", Data: v})
		return
	}
	res, err := a.do(r.Context(), s, f)
	if err != nil {
		u.settingsRefused(w, r, s, sec, err)
		return
	}
	if res.key != nil || res.token != nil {
		// A value shown once: on this answer only (not cached, not in a URL).
		v := u.newSettingsView(s, sec)
		v.NewAPIKey, v.NewToken = res.key, res.token
		u.render(w, r, s, http.StatusOK, "settings", page{Title: sec.Title, Nav: "settings", Data: v, Notice: res.notice})
		return
	}
	http.Redirect(w, r, "/settings/"+key+"?notice="+url.QueryEscape(res.notice), http.StatusSeeOther)
}

// settingsRefused shows the section again with why the API refused the
// change, its form filled as it was sent.
func (u *UI) settingsRefused(w http.ResponseWriter, r *http.Request, s *user, sec *section, err error) {
	status := statusOf(err)
	if status == http.StatusUnauthorized {
		u.apiError(w, r, s, err)
		return
	}
	v := u.newSettingsView(s, sec)
	v.Form = url.Values{}
	// The page's create form is filled again; the forms of its rows show
	// what they show.
	for k, vs := range r.PostForm {
		if !slices.Contains(secretFields, k) && r.PathValue("action") == "create" {
			v.Form[k] = vs
		}
	}
	if lerr := u.loadSection(r, s, &v); lerr != nil {
		u.apiError(w, r, s, lerr)
		return
	}
	u.render(w, r, s, status, "settings", page{Title: sec.Title, Nav: "settings", Data: v, Error: refusalText(sec.Key, err)})
}

// words splits a list a field gives (commas, spaces or lines) into its
// items.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

// field is a form's value without surrounding space.
func field(f url.Values, name string) string { return strings.TrimSpace(f.Get(name)) }

// scopeQuery is the query that names a scope (org, project) in the API.
func scopeQuery(org, project string) string {
	q := url.Values{}
	if org != "" {
		q.Set("org", org)
	}
	if project != "" {
		q.Set("project", project)
	}
	if e := q.Encode(); e != "" {
		return "?" + e
	}
	return ""
}
