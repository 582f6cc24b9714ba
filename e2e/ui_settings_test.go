package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/protocol"
)

// The Settings pages change things (see ui_test.go for the browser
// helpers): each change is made on the page and checked through the CLI,
// and in the audit log as the API's changes are.

// settingsPage drives the settings pages of one browser.
type settingsPage struct {
	t   *testing.T
	ctx context.Context
	c   *cluster
}

// open opens a settings page.
func (p settingsPage) open(section string) {
	p.t.Helper()
	run(p.t, p.ctx, "open settings "+section, chromedp.Navigate(p.c.url+"/settings/"+section), visible(".settings-body h1"))
}

// fill sets the fields of the form sel (by name) and submits it.
func (p settingsPage) fill(sel string, fields map[string]string) {
	p.t.Helper()
	var steps []chromedp.Action[chromedp.Void]
	for name, v := range fields {
		field := fmt.Sprintf(`%s [name=%q]`, sel, name)
		if v == "" { // SetValue takes an empty value for a failure
			value(p.t, p.ctx, "clear "+field, chromedp.Evaluate[bool](fmt.Sprintf(`(function(){document.querySelector(%q).value="";return true})()`, field)))
			continue
		}
		steps = append(steps, chromedp.SetValue(chromedp.CSS(field), v))
	}
	steps = append(steps, chromedp.Click(chromedp.CSS(sel+` button[type=submit]`)))
	run(p.t, p.ctx, "fill and submit "+sel, steps...)
}

// says waits until the page's notice (or error) says text; it waits
// across the navigation of the form that was just sent.
func (p settingsPage) says(kind, text string) {
	p.t.Helper()
	run(p.t, p.ctx, "see the "+kind+" "+text,
		chromedp.WaitVisible(chromedp.Search(`//p[contains(@class,"`+kind+`") and contains(., `+xpathString(text)+`)]`)))
}

// xpathString is text as an XPath string literal.
func xpathString(text string) string {
	if !strings.Contains(text, `"`) {
		return `"` + text + `"`
	}
	if !strings.Contains(text, "'") {
		return "'" + text + "'"
	}
	parts := strings.Split(text, `"`)
	return `concat("` + strings.Join(parts, `", '"', "`) + `")`
}

// confirm answers the confirmation step of a destructive action: the
// page asks first, and only its button does it.
func (p settingsPage) confirm(question string) {
	p.t.Helper()
	run(p.t, p.ctx, "see the confirmation "+question, visible("#confirm-button"),
		until(fmt.Sprintf(`document.getElementById("confirm-heading").textContent.includes(%q)`, question)))
	p.click("#confirm-button")
}

func (p settingsPage) click(sel string) {
	p.t.Helper()
	run(p.t, p.ctx, "click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

func (p settingsPage) html() string {
	p.t.Helper()
	return value(p.t, p.ctx, "read the page", chromedp.Evaluate[string](`document.documentElement.outerHTML`))
}

// cliJSON runs the CLI with --json and decodes its answer.
func cliJSON[T any](c *cluster, args ...string) T {
	c.t.Helper()
	var v T
	out := c.mustCLI(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		c.t.Fatalf("legate %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v
}

// audited checks that the audit log holds action on resource, with outcome.
func audited(c *cluster, action, resource, outcome string) {
	c.t.Helper()
	l := cliJSON[protocol.AuditList](c, "audit", "list", "--action", action)
	for _, e := range l.Events {
		if e.Action == action && e.Resource == resource && e.Outcome == outcome {
			return
		}
	}
	c.t.Errorf("the audit log has no %s of %q with outcome %s: %+v", action, resource, outcome, l.Events)
}

// TestUISettingsChanges: users and service accounts, groups, roles,
// bindings, API keys, secrets, connectors, configurations, deployment
// limits and delegate tokens are created, changed and deleted on the
// Settings pages; each change shows through the CLI and in the audit log,
// destructive ones ask first, an API key is shown once and a secret's
// value never.
func TestUISettingsChanges(t *testing.T) {
	bin := chromiumOrSkip(t)
	c := startCluster(t)
	c.mustCLI("org", "create", "eng")
	shots := screenshotDir(t)
	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in", chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))
	p := settingsPage{t: t, ctx: ctx, c: c}

	// Users and service accounts.
	p.open("users")
	p.fill("#create-user", map[string]string{"name": "dora", "password": "dora-pass-1234", "display": "Dora"})
	p.says("notice", "Created user dora")
	p.fill("#create-user", map[string]string{"name": "robot", "kind": "service_account"})
	p.says("notice", "Created service account robot")
	users := cliJSON[protocol.UserList](c, "user", "list")
	kinds := map[string]string{}
	for _, u := range users.Users {
		kinds[u.Name] = u.Kind
	}
	if kinds["dora"] != protocol.PrincipalUser || kinds["robot"] != protocol.PrincipalServiceAccount {
		t.Errorf("users after the page created them: %v", kinds)
	}
	p.click(`tr[data-user="dora"] form[action="/settings/users/disable"] button`)
	p.confirm("Disable dora?")
	p.says("notice", "Disabled dora")
	if u := cliJSON[protocol.User](c, "user", "get", "dora"); !u.Disabled {
		t.Errorf("dora is not disabled: %+v", u)
	}
	run(t, ctx, "see the relative times", visible(`tr[data-user="dora"] time[data-age][title]`),
		until(`/ago|just now/.test(document.querySelector('tr[data-user="dora"] time[data-age]').textContent)`))
	screenshot(t, ctx, shots, "settings-users")
	p.click(`tr[data-user="dora"] form[action="/settings/users/enable"] button`)
	p.says("notice", "Enabled dora")
	p.fill(`tr[data-user="dora"] form.set-password`, map[string]string{"password": "dora-new-pass-5678"})
	p.says("notice", "Password of dora set")
	if r := c.cliStdin("dora-new-pass-5678\n", []string{"LEGATE_API_KEY=", "XDG_CONFIG_HOME=" + t.TempDir()}, "login", "--user", "dora"); r.code != 0 {
		t.Errorf("dora cannot log in with the password the page set: exit %d\n%s", r.code, r.stderr)
	}

	// Groups and their members.
	p.open("groups")
	p.fill("#create-group", map[string]string{"group": "ops"})
	p.says("notice", "Created group ops")
	p.fill(`tr[data-group="ops"] form.add-member`, map[string]string{"member": "dora"})
	p.says("notice", "Added dora to group ops")
	if g := cliJSON[protocol.GroupList](c, "group", "list"); len(g.Groups) != 1 || !slices.Equal(g.Groups[0].Members, []string{"dora"}) {
		t.Errorf("groups: %+v", g)
	}
	p.click(`tr[data-group="ops"] [data-member="dora"] button`)
	p.confirm("Remove dora from group ops?")
	p.says("notice", "Removed dora from group ops")
	if g := cliJSON[protocol.GroupList](c, "group", "list"); len(g.Groups) != 1 || len(g.Groups[0].Members) != 0 {
		t.Errorf("groups after the member was removed: %+v", g)
	}

	// Roles (their permissions) and bindings.
	p.open("roles")
	p.click("details.create summary")
	p.click(`#create-role input[value="pipeline:view"]`)
	p.click(`#create-role input[value="pipeline:execute"]`)
	p.fill("#create-role", map[string]string{"name": "deployer", "description": "runs pipelines"})
	p.says("notice", "Created role deployer")
	var deployer protocol.Role
	for _, r := range cliJSON[protocol.RoleList](c, "role", "list").Roles {
		if r.Name == "deployer" {
			deployer = r
		}
	}
	if perms := slices.Sorted(slices.Values(deployer.Permissions)); !slices.Equal(perms, []string{"pipeline:execute", "pipeline:view"}) || deployer.Description != "runs pipelines" {
		t.Errorf("role deployer: %+v", deployer)
	}
	screenshot(t, ctx, shots, "settings-roles")
	p.open("bindings")
	p.fill("#create-binding", map[string]string{"role": "deployer", "subject_kind": "group", "subject": "ops", "org": "eng"})
	p.says("notice", "Bound deployer for group ops at org eng")
	hasBinding := func() bool {
		for _, b := range cliJSON[protocol.BindingList](c, "role", "bindings").Bindings {
			if b.Role == "deployer" && b.Subject == "ops" && b.Org == "eng" {
				return true
			}
		}
		return false
	}
	if !hasBinding() {
		t.Error("the binding made on the page is not listed")
	}
	p.click(`tr[data-binding^="deployer ops"] button`)
	p.confirm("Remove the binding of deployer to ops?")
	p.says("notice", "Removed the binding of deployer to ops")
	if hasBinding() {
		t.Error("the binding removed on the page is still listed")
	}
	p.open("roles")
	p.click(`tr[data-role="deployer"] form[action="/settings/roles/delete"] button`)
	p.confirm("Delete role deployer?")
	p.says("notice", "Deleted role deployer")
	p.open("groups")
	p.click(`tr[data-group="ops"] form[action="/settings/groups/delete"] button`)
	p.confirm("Delete group ops?")
	p.says("notice", "Deleted group ops")

	// An API key for the service account: shown once, then never.
	p.open("apikeys")
	p.fill("#create-apikey", map[string]string{"name": "robot-key", "owner": "robot"})
	p.says("notice", "API key robot-key created")
	key := strings.TrimSpace(value(t, ctx, "read the key", chromedp.Text(chromedp.CSS("#new-apikey-value"))))
	if len(key) < 20 || strings.ContainsAny(key, " \n") {
		t.Fatalf("the page shows the key %q", key)
	}
	screenshot(t, ctx, shots, "settings-apikey-created")
	if r := c.as(key, "whoami"); r.code != 0 || !strings.Contains(r.stdout, "robot") {
		t.Errorf("the key the page showed: whoami exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	p.open("apikeys")
	if strings.Contains(p.html(), key) {
		t.Error("the API key is on the page again after it was created")
	}
	p.click(`tr[data-apikey="robot-key"] button`)
	p.confirm("Revoke API key robot-key?")
	p.says("notice", "API key robot-key revoked")
	wantKeyRevoked(t, c.as(key, "whoami"), "robot-key")

	// Users are deleted after the rest, as asked.
	p.open("users")
	p.click(`tr[data-user="robot"] form[action="/settings/users/delete"] button`)
	p.click("#confirm-cancel")
	run(t, ctx, "cancel leaves the user", visible(`tr[data-user="robot"]`))
	p.click(`tr[data-user="robot"] form[action="/settings/users/delete"] button`)
	p.confirm("Delete robot?")
	p.says("notice", "Deleted robot")
	if r := c.cli("user", "get", "robot"); r.code == 0 {
		t.Errorf("robot is still there: %s", r.stdout)
	}

	// Secrets: values go in and never come out.
	const v1, v2 = "ui-secret-value-one-7f3a", "ui-secret-value-two-91bc"
	p.open("secrets")
	// The API's words name the page's field, not the CLI's flag.
	p.fill("#create-secret", map[string]string{"name": "UI_SECRET", "project": "web", "value": v1})
	p.says("error", `the field "Organization"`)
	if msg := value(t, ctx, "read the refusal", chromedp.Text(chromedp.CSS("p.error"))); strings.Contains(msg, "--org") {
		t.Errorf("the refusal names a CLI flag: %q", msg)
	}
	if got := value(t, ctx, "read the refilled form", chromedp.Value(chromedp.CSS("#secret-project"))); got != "web" {
		t.Errorf("the refused form is not filled again: project %q", got)
	}
	if strings.Contains(p.html(), v1) {
		t.Error("a refused secret's value is sent back to the page")
	}
	p.fill("#create-secret", map[string]string{"name": "UI_SECRET", "org": "eng", "project": "", "value": v1})
	p.says("notice", "Secret UI_SECRET created at org eng")
	p.fill(`tr[data-secret="UI_SECRET"] form.update-secret`, map[string]string{"value": v2})
	p.says("notice", "Secret UI_SECRET updated to version 2")
	if s := cliJSON[protocol.Secret](c, "secret", "get", "UI_SECRET", "--org", "eng"); s.Version != 2 {
		t.Errorf("secret after the update: %+v", s)
	}
	screenshot(t, ctx, shots, "settings-secrets")
	if h := p.html(); strings.Contains(h, v1) || strings.Contains(h, v2) {
		t.Error("a secret's value is on the page")
	}
	// The stored value is the page's: a task reads it.
	p.open("secrets")
	p.click(`tr[data-secret="UI_SECRET"] form[action="/settings/secrets/delete"] button`)
	p.confirm("Delete secret UI_SECRET (org eng)?")
	p.says("notice", "Secret UI_SECRET deleted")
	if l := cliJSON[protocol.SecretList](c, "secret", "list"); len(l.Secrets) != 0 {
		t.Errorf("secrets after the delete: %+v", l)
	}

	// Connectors.
	p.open("connectors")
	p.click("details.create summary")
	p.fill("#create-connector", map[string]string{"name": "git", "url": "https://git.example.com/", "type": "git", "selectors": "linux, ci"})
	p.says("notice", "Connector git created")
	if l := cliJSON[protocol.ConnectorList](c, "connector", "list"); len(l.Connectors) != 1 || !slices.Equal(slices.Sorted(slices.Values(l.Connectors[0].Selectors)), []string{"ci", "linux"}) {
		t.Errorf("connectors: %+v", l)
	}
	p.click(`tr[data-connector="git"] button`)
	p.confirm("Delete connector git?")
	p.says("notice", "Connector git deleted")

	// Configurations, with their scope.
	p.open("configurations")
	p.click("details.create summary")
	p.fill("#create-configuration", map[string]string{"name": "setup", "org": "eng", "selectors": "linux", "script": "echo one"})
	p.says("notice", "Configuration setup created at org eng")
	p.fill(`[data-configuration="setup"] form.update-configuration`, map[string]string{"script": "echo two"})
	p.says("notice", "Configuration setup updated to version 2")
	if conf := cliJSON[protocol.Configuration](c, "configuration", "get", "setup"); conf.Org != "eng" || conf.Script != "echo two" || conf.Version != 2 || !slices.Equal(conf.Selectors, []string{"linux"}) {
		t.Errorf("configuration: %+v", conf)
	}
	screenshot(t, ctx, shots, "settings-configurations")
	p.click(`[data-configuration="setup"] form[action="/settings/configurations/delete"] button`)
	p.confirm("Delete configuration setup?")
	p.says("notice", "Configuration setup deleted")

	// Deployment limits.
	p.open("limits")
	p.fill("#set-limits", map[string]string{"per_hour": "7"})
	p.says("notice", "Deployment limits set")
	if l := cliJSON[protocol.DeploymentLimits](c, "limits"); l.PerHour.Limit != 7 || !l.Custom {
		t.Errorf("limits: %+v", l)
	}
	p.click(`form[action="/settings/limits/reset"] button`)
	p.confirm("Return the deployment limits to the manager's defaults?")
	p.says("notice", "Deployment limits returned to the defaults")
	if l := cliJSON[protocol.DeploymentLimits](c, "limits"); l.Custom {
		t.Errorf("limits after the reset: %+v", l)
	}

	// Delegate tokens with init secrets; refusals name the page's fields.
	p.open("secrets")
	p.fill("#create-secret", map[string]string{"name": "REGISTRY_PASSWORD", "value": "reg-pass-2718"})
	p.says("notice", "Secret REGISTRY_PASSWORD created")
	p.open("tokens")
	p.fill("#create-token", map[string]string{"name": "builders", "init_secrets": "REGISTRY_PASSWORD", "uses": "3"})
	p.says("notice", "Token builders created")
	run(t, ctx, "see the token's init secrets", visible("#new-token-init-secrets"))
	if out := c.mustCLI("token", "list"); !strings.Contains(out, "INIT-SECRETS") || !strings.Contains(out, "REGISTRY_PASSWORD") || !strings.Contains(out, "uses-left=3/3") {
		t.Errorf("token list does not show the init secret and the uses:\n%s", out)
	}
	p.open("tokens")
	run(t, ctx, "see the token's uses", visible(`tr[data-token="builders"] .uses`))
	p.fill("#create-token", map[string]string{"name": "other", "init_secrets": "NO_SUCH"})
	p.says("error", "unknown secret NO_SUCH: the delegate token's account has none of that name")
	if h := value(t, ctx, "read the error", chromedp.Text(chromedp.CSS("p.error"))); strings.Contains(h, "--") || strings.Contains(h, "task's") {
		t.Errorf("the refusal names a flag or a task: %q", h)
	}
	if got := value(t, ctx, "read the refilled form", chromedp.Value(chromedp.CSS("#token-name"))); got != "other" {
		t.Errorf("the refused form is not filled again: name %q", got)
	}
	p.click(`tr[data-token="builders"] button`)
	p.confirm("Revoke delegate token builders?")
	p.says("notice", "Token builders revoked")

	for _, a := range [][2]string{
		{"user.create", "dora"}, {"user.create", "robot"}, {"user.update", "dora"}, {"user.delete", "robot"},
		{"group.create", "ops"}, {"group.add_member", "ops"}, {"group.remove_member", "ops"}, {"group.delete", "ops"},
		{"role.create", "deployer"}, {"role.delete", "deployer"}, {"binding.create", ""}, {"binding.delete", ""},
		{"apikey.create", "robot-key"}, {"apikey.revoke", "robot-key"},
		{"secret.create", "UI_SECRET"}, {"secret.update", "UI_SECRET"}, {"secret.delete", "UI_SECRET"},
		{"connector.create", "git"}, {"connector.delete", "git"},
		{"configuration.create", "setup"}, {"configuration.update", "setup"}, {"configuration.delete", "setup"},
		{"limits.update", ""}, {"token.create", "builders"}, {"token.revoke", "builders"},
	} {
		auditedLike(c, a[0], a[1], protocol.AuditSuccess)
	}

	// The audit log's page: relative times that do not wrap.
	p.open("audit")
	run(t, ctx, "see the audit log", visible(`tr[data-action="secret.delete"]`))
	if ws := value(t, ctx, "read the time column's wrapping", chromedp.Evaluate[string](`getComputedStyle(document.querySelector('table.audit td[data-label="Time"]')).whiteSpace`)); ws != "nowrap" {
		t.Errorf("the audit log's time column wraps (white-space %q)", ws)
	}
	if title := value(t, ctx, "read a time's title", chromedp.Evaluate[string](`document.querySelector('table.audit time').title`)); !strings.HasSuffix(title, "UTC") {
		t.Errorf("an audit time's absolute time on hover: %q", title)
	}
}

// auditedLike is audited with resource a prefix ("" for any).
func auditedLike(c *cluster, action, resource, outcome string) {
	c.t.Helper()
	l := cliJSON[protocol.AuditList](c, "audit", "list", "--action", action)
	for _, e := range l.Events {
		if e.Action == action && strings.HasPrefix(e.Resource, resource) && e.Outcome == outcome {
			return
		}
	}
	c.t.Errorf("the audit log has no %s of %q with outcome %s: %+v", action, resource, outcome, l.Events)
}

// TestUISettingsRefusals: a user whose roles lack a permission is not
// offered the form and is told what it needs; a change the API refuses
// (a forged form, a scope the role does not reach) is refused on the
// page, in its words, and audited as denied.
func TestUISettingsRefusals(t *testing.T) {
	bin := chromiumOrSkip(t)
	c := startCluster(t)
	c.mustCLI("org", "create", "eng")
	c.mustCLI("user", "create", "vera")
	c.mustCLI("role", "bind", "viewer", "--user", "vera")
	c.mustCLI("role", "bind", "org-admin", "--user", "vera", "--org", "eng")
	key := c.newAPIKeyFor("vera-key", "vera")
	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in as vera", chromedp.Navigate(c.uiLink(key)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))
	p := settingsPage{t: t, ctx: ctx, c: c}

	p.open("users")
	run(t, ctx, "see what creating users needs", visible(`.needs[data-needs="user:manage"]`))
	if n := value(t, ctx, "count the forms", chromedp.Evaluate[int](`document.querySelectorAll("#create-user, form[action='/settings/users/delete']").length`)); n != 0 {
		t.Errorf("vera is offered %d forms to change users", n)
	}
	// A forged form (the page offers none): the API refuses it.
	value(t, ctx, "forge a form", chromedp.Evaluate[bool](`(function(){
		var f=document.createElement("form");f.method="post";f.action="/settings/users/create";
		[["csrf",document.querySelector("input[name=csrf]").value],["name","mallory"]].forEach(function(kv){
			var i=document.createElement("input");i.type="hidden";i.name=kv[0];i.value=kv[1];f.appendChild(i)});
		document.body.appendChild(f);f.submit();return true})()`))
	p.says("error", "Refused: ")
	msg := value(t, ctx, "read the refusal", chromedp.Text(chromedp.CSS("p.error")))
	if !strings.Contains(msg, "user:manage") || !strings.Contains(msg, "Role bindings") || strings.Contains(msg, "legate role bind") {
		t.Errorf("the refusal does not explain itself in the page's words: %q", msg)
	}
	if r := c.cli("user", "get", "mallory"); r.code == 0 {
		t.Error("the forged form created a user")
	}
	auditedLike(c, "user.create", "", protocol.AuditDenied)

	// Secrets: vera may create them in org eng, not in the account.
	p.open("secrets")
	p.fill("#create-secret", map[string]string{"name": "TOP", "value": "top-value-3141"})
	p.says("error", "Refused: ")
	if msg := value(t, ctx, "read the refusal", chromedp.Text(chromedp.CSS("p.error"))); !strings.Contains(msg, "secret:edit") {
		t.Errorf("the refusal of a secret in the account: %q", msg)
	}
	if strings.Contains(p.html(), "top-value-3141") {
		t.Error("a refused secret's value is sent back to the page")
	}
	p.fill("#create-secret", map[string]string{"name": "TOP", "org": "eng", "value": "top-value-3141"})
	p.says("notice", "Secret TOP created at org eng")
	audited(c, "secret.create", "TOP", protocol.AuditSuccess)
}
