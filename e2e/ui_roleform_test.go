package e2e

import (
	"slices"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestUIRoleCreateRefilled: a Create-role form the API refuses comes back
// filled as it was sent, its permission boxes ticked again.
func TestUIRoleCreateRefilled(t *testing.T) {
	bin := chromiumOrSkip(t)
	c := startCluster(t)
	c.mustCLI("role", "create", "auditor", "--permission", "task:view")

	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in", chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))
	p := settingsPage{t: t, ctx: ctx, c: c}
	p.open("roles")
	p.click(`details.create summary`)
	p.click(`#create-role input[value="task:view"]`)
	p.click(`#create-role input[value="audit:view"]`)
	p.fill("#create-role", map[string]string{"name": "auditor", "description": "reads"})
	p.says("error", "auditor")
	got := value(t, ctx, "read the ticked boxes", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#create-role input[name=permission]:checked')).map(function(i){return i.value})`))
	if !slices.Equal(slices.Sorted(slices.Values(got)), []string{"audit:view", "task:view"}) {
		t.Errorf("the refused create form ticks %v, want audit:view and task:view as sent", got)
	}
	if d := value(t, ctx, "read the description", chromedp.Value(chromedp.CSS(`#role-description`))); d != "reads" {
		t.Errorf("the refused create form's description is %q", d)
	}
}
