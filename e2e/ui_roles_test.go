package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/protocol"
)

// checked lists the ticked permission boxes of a role's edit form.
func (p settingsPage) checked(role string) []string {
	p.t.Helper()
	return value(p.t, p.ctx, "read the ticked boxes of "+role, chromedp.Evaluate[[]string](fmt.Sprintf(
		`Array.from(document.querySelectorAll('#edit-role-%s input[name=permission]:checked')).map(function(i){return i.value})`, role)))
}

// TestUIRoleEdit: a custom role's Edit on Settings → Roles shows its
// permissions ticked and its description; what is saved there is the
// role the CLI reads, a user bound to it is allowed (and refused) at
// once, and the change is audited. Built-in roles have no Edit; a form
// with nothing ticked is refused before the API; a user who lost
// user:manage while the form was open is refused in the page's words.
func TestUIRoleEdit(t *testing.T) {
	bin := chromiumOrSkip(t)
	c := startCluster(t)
	c.mustCLI("role", "create", "auditor", "--permission", "task:view", "--description", "reads tasks")
	c.mustCLI("user", "create", "ada")
	c.mustCLI("role", "bind", "auditor", "--user", "ada")
	ada := c.newAPIKeyFor("ada-key", "ada")
	wantRefused(t, "ada reads the audit log before", c.as(ada, "audit", "list"), "audit:view", "account")

	shots := screenshotDir(t)
	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in", chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))
	p := settingsPage{t: t, ctx: ctx, c: c}

	p.open("roles")
	if n := value(t, ctx, "count the built-in roles' edits", chromedp.Evaluate[int](
		`Array.from(document.querySelectorAll("tr[data-role]")).filter(function(r){return r.querySelector("td[data-label=Kind]").textContent.trim()=="built-in" && r.querySelector("details.edit-role, form[action='/settings/roles/update']")}).length`)); n != 0 {
		t.Errorf("%d built-in roles offer an Edit", n)
	}
	if n := value(t, ctx, "count the built-in roles", chromedp.Evaluate[int](`document.querySelectorAll("tr[data-role=viewer], tr[data-role=account-admin]").length`)); n != 2 {
		t.Fatalf("the page lists %d of viewer and account-admin", n)
	}
	p.click(`tr[data-role="auditor"] details.edit-role summary`)
	run(t, ctx, "see the edit form", visible(`#edit-role-auditor`))
	if got := p.checked("auditor"); !slices.Equal(got, []string{"task:view"}) {
		t.Errorf("the edit form ticks %v, want the role's task:view", got)
	}
	if d := value(t, ctx, "read the description", chromedp.Value(chromedp.CSS(`#edit-role-description-auditor`))); d != "reads tasks" {
		t.Errorf("the edit form's description is %q", d)
	}
	p.click(`#edit-role-auditor input[value="audit:view"]`)
	screenshot(t, ctx, shots, "settings-role-edit")
	p.fill("#edit-role-auditor", map[string]string{"description": "reads tasks and the audit log"})
	p.says("notice", "Saved role auditor")

	r := cliJSON[protocol.Role](c, "role", "get", "auditor")
	if !slices.Equal(slices.Sorted(slices.Values(r.Permissions)), []string{"audit:view", "task:view"}) || r.Description != "reads tasks and the audit log" {
		t.Errorf("role auditor after the page saved it: %+v", r)
	}
	if res := c.as(ada, "audit", "list"); res.code != 0 {
		t.Errorf("ada reads the audit log after the role gained audit:view: exit %d, %s", res.code, res.stderr)
	}
	l := cliJSON[protocol.AuditList](c, "audit", "list", "--action", "role.update")
	if len(l.Events) != 1 || l.Events[0].Resource != "auditor" || l.Events[0].Outcome != protocol.AuditSuccess ||
		!strings.Contains(l.Events[0].Detail, "added audit:view") || !strings.Contains(l.Events[0].Detail, "description changed") {
		t.Errorf("role.update records: %+v", l.Events)
	}

	// The reverse: untick audit:view (on a page without the last notice,
	// so the next one is this save's).
	p.open("roles")
	p.click(`tr[data-role="auditor"] details.edit-role summary`)
	if got := p.checked("auditor"); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"audit:view", "task:view"}) {
		t.Errorf("the edit form ticks %v after the save", got)
	}
	p.click(`#edit-role-auditor input[value="audit:view"]`)
	p.fill("#edit-role-auditor", nil)
	p.says("notice", "Saved role auditor")
	wantRefused(t, "ada reads the audit log after", c.as(ada, "audit", "list"), "audit:view", "account")

	// Nothing ticked: refused before the API, the role unchanged.
	p.open("roles")
	p.click(`tr[data-role="auditor"] details.edit-role summary`)
	p.click(`#edit-role-auditor input[value="task:view"]`)
	p.fill("#edit-role-auditor", nil)
	p.says("error", "a role needs at least one permission")
	if r := cliJSON[protocol.Role](c, "role", "get", "auditor"); !slices.Equal(r.Permissions, []string{"task:view"}) {
		t.Errorf("role auditor after a form with nothing ticked: %+v", r)
	}

	// A user who may manage users opens the form, loses user:manage, saves.
	c.mustCLI("role", "create", "user-admin", "--permission", "user:manage", "--permission", "user:view")
	c.mustCLI("user", "create", "mia")
	c.mustCLI("role", "bind", "user-admin", "--user", "mia")
	mia := c.newAPIKeyFor("mia-key", "mia")
	run(t, ctx, "sign in as mia", chromedp.Navigate(c.uiLink(mia)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))
	p.open("roles")
	p.click(`tr[data-role="auditor"] details.edit-role summary`)
	p.click(`#edit-role-auditor input[value="audit:view"]`)
	c.mustCLI("role", "unbind", "user-admin", "--user", "mia")
	p.fill("#edit-role-auditor", nil)
	p.says("error", "Refused: ")
	msg := value(t, ctx, "read the refusal", chromedp.Text(chromedp.CSS("p.error")))
	if !strings.Contains(msg, "user:manage") || !strings.Contains(msg, "Role bindings") || strings.Contains(msg, "legate role bind") {
		t.Errorf("the refusal does not explain itself in the page's words: %q", msg)
	}
	if r := cliJSON[protocol.Role](c, "role", "get", "auditor"); !slices.Equal(r.Permissions, []string{"task:view"}) {
		t.Errorf("role auditor after a refused save: %+v", r)
	}
	audited(c, "role.update", "auditor", protocol.AuditDenied)
}
