package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/protocol"
)

// cliWords finds a CLI command or flag in a page's words.
var cliWords = regexp.MustCompile(`(^|[^A-Za-z])legate [a-z]|(^|\s)--[a-z]`)

// TestUIDelegateDeleteNeedsConfirmation: in Chromium, the Delegates list
// offers no Delete; the delegate's page leads to a confirmation that
// names the delegate and what deleting does; cancelling it, or a POST
// without it, leaves the delegate; confirming deletes it (the CLI no
// longer finds it). A connected delegate's refusal and a viewer's are
// explained in the page's words, not the CLI's.
func TestUIDelegateDeleteNeedsConfirmation(t *testing.T) {
	bin := chromiumOrSkip(t)
	shots := screenshotDir(t)
	c := startCluster(t)
	tok := c.token("builders")
	doomed := c.delegate("doomed", "ui-doomed-1", c.seed004Env(tok, "doomed", "linux")...)
	c.delegate("keeper", "ui-keeper-1", c.seed004Env(tok, "keeper", "linux")...)
	doomed.signal(syscall.SIGTERM)
	if code := doomed.wait(30 * time.Second); code != 0 {
		t.Fatalf("the stopped delegate exited %d", code)
	}
	exists := func(name string) bool { return c.cli("delegates", "describe", name).code == 0 }

	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in",
		chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")),
		visible(`tr[data-hostname="ui-keeper-1"] .state.connected`),
		visible(`tr[data-hostname="ui-doomed-1"] .state.disconnected`))
	if n := value(t, ctx, "count the list's delete forms", chromedp.Evaluate[int](`document.querySelectorAll('form[action$="/delete"], a[href$="/delete"]').length`)); n != 0 {
		t.Errorf("the Delegates list offers %d deletes in its rows", n)
	}

	run(t, ctx, "open the confirmation from the delegate's page",
		chromedp.Navigate(c.url+"/delegates/doomed"),
		visible(`#delete-delegate`),
		chromedp.Click(chromedp.CSS(`#delete-delegate`)),
		visible(`#confirm-delete`),
		until(`location.pathname === "/delegates/doomed/delete"`))
	text := value(t, ctx, "read the confirmation", chromedp.Text(chromedp.CSS(`.confirm-delete`)))
	for _, want := range []string{"Delete delegate doomed?", "ui-doomed-1", "stopped", "capability checks", "past tasks stay", "token stays valid"} {
		if !strings.Contains(text, want) {
			t.Errorf("the confirmation does not say %q:\n%s", want, text)
		}
	}
	screenshot(t, ctx, shots, "delegate-delete-confirm")
	run(t, ctx, "cancel",
		chromedp.Click(chromedp.CSS(`#cancel-delete`)),
		visible(`section[data-hostname="ui-doomed-1"]`),
		until(`location.pathname === "/delegates/doomed"`))
	if !exists("doomed") {
		t.Fatal("cancelling the confirmation deleted the delegate")
	}
	// A POST without the confirmation's field (an old page's form) is
	// sent to the confirmation and deletes nothing.
	unconfirmed := `(async () => {
		const csrf = document.querySelector('input[name="csrf"]').value;
		const r = await fetch("/delegates/doomed/delete", {method: "POST", body: new URLSearchParams({csrf})});
		return r.status + " " + new URL(r.url).pathname;
	})()`
	if got := value(t, ctx, "post a delete without the confirmation", chromedp.Evaluate[string](unconfirmed, chromedp.EvalAwaitPromise)); got != "200 /delegates/doomed/delete" {
		t.Errorf("an unconfirmed delete answered %q, want the confirmation page", got)
	}
	if !exists("doomed") {
		t.Fatal("a POST without the confirmation deleted the delegate")
	}
	run(t, ctx, "delete with the confirmation",
		chromedp.Navigate(c.url+"/delegates/doomed/delete"),
		visible(`#confirm-delete`),
		chromedp.Click(chromedp.CSS(`#confirm-delete`)),
		visible(`.notice`),
		until(`location.pathname === "/delegates"`),
		until(`!document.querySelector('tbody.group[data-delegate="doomed"]')`))
	if n := value(t, ctx, "read the notice", chromedp.Text(chromedp.CSS(`.notice`))); n != "Delegate doomed deleted." {
		t.Errorf("notice %q", n)
	}
	if exists("doomed") {
		t.Error("the confirmed delete left the delegate (legate delegates describe doomed finds it)")
	}

	// A connected delegate: the confirmation says why it cannot be
	// deleted now and what to do on the pages; confirming anyway is
	// refused with the same words.
	run(t, ctx, "open a connected delegate's confirmation",
		chromedp.Navigate(c.url+"/delegates/keeper/delete"),
		visible(`#delete-busy`))
	busy := value(t, ctx, "read why not", chromedp.Text(chromedp.CSS(`#delete-busy`)))
	run(t, ctx, "confirm anyway", chromedp.Click(chromedp.CSS(`#confirm-delete`)), visible(`#delete-failed`))
	failed := value(t, ctx, "read the refusal", chromedp.Text(chromedp.CSS(`#delete-failed`)))
	for _, msg := range []string{busy, failed} {
		if !strings.Contains(msg, "connected from ui-keeper-1") || !strings.Contains(msg, "Settings → Delegate tokens") || cliWords.MatchString(msg) {
			t.Errorf("the refusal of a connected delegate's delete: %q", msg)
		}
	}
	if !exists("keeper") {
		t.Fatal("the connected delegate was deleted")
	}

	// A viewer: no Delete on the delegate's page; the confirmation's
	// address explains the refusal and has no form; a forged POST is
	// refused with the same explanation.
	c.mustCLI("user", "create", "vera")
	c.mustCLI("role", "bind", "viewer", "--user", "vera")
	var vk protocol.APIKey
	if err := json.Unmarshal([]byte(c.mustCLI("apikey", "create", "vera-key", "--owner", "vera", "-o", "json")), &vk); err != nil {
		t.Fatal(err)
	}
	viewer := newBrowser(t, bin)
	run(t, viewer, "sign the viewer in and open the delegate",
		chromedp.Navigate(c.uiLink(vk.Value)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")),
		visible(`tr[data-hostname="ui-keeper-1"] .state.connected`),
		chromedp.Navigate(c.url+"/delegates/keeper"),
		visible(`section[data-hostname="ui-keeper-1"]`))
	if n := value(t, viewer, "count the viewer's deletes", chromedp.Evaluate[int](`document.querySelectorAll('#delete-delegate, form[action$="/delete"]').length`)); n != 0 {
		t.Errorf("the viewer is offered %d deletes", n)
	}
	run(t, viewer, "open the confirmation's address", chromedp.Navigate(c.url+"/delegates/keeper/delete"), visible(`#delete-refusal`))
	refusal := value(t, viewer, "read the refusal", chromedp.Text(chromedp.CSS(`#delete-refusal`)))
	if !strings.Contains(refusal, "You (vera) may not delete delegate keeper: that needs the permission delegate:delete at its scope (account)") ||
		!strings.Contains(refusal, "Settings → Role bindings") || cliWords.MatchString(refusal) {
		t.Errorf("the viewer's refusal: %q", refusal)
	}
	if n := value(t, viewer, "count confirm buttons", chromedp.Evaluate[int](`document.querySelectorAll('#confirm-delete').length`)); n != 0 {
		t.Errorf("the viewer is offered the confirmation's button")
	}
	forge := `(async () => {
		const csrf = document.querySelector('input[name="csrf"]').value;
		const r = await fetch("/delegates/keeper/delete", {method: "POST", body: new URLSearchParams({csrf, confirm: "keeper"})});
		const page = new DOMParser().parseFromString(await r.text(), "text/html");
		const why = page.getElementById("delete-refusal");
		return r.status + " " + (why ? why.textContent : "");
	})()`
	if got := value(t, viewer, "forge a delete", chromedp.Evaluate[string](forge, chromedp.EvalAwaitPromise)); !strings.HasPrefix(got, "403 You (vera) may not delete delegate keeper") {
		t.Errorf("the viewer's forged delete: %q", got)
	}
	if !exists("keeper") {
		t.Fatal("the viewer's forged delete deleted the delegate")
	}
}

// TestUINotFoundKeepsTheNavigation: an unknown address shows the 404
// inside the layout: with the navigation for a signed-in user, a sign-in
// link for one who is not.
func TestUINotFoundKeepsTheNavigation(t *testing.T) {
	bin := chromiumOrSkip(t)
	shots := screenshotDir(t)
	c := startCluster(t)
	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in and open an unknown address",
		chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")),
		visible(`#delegate-list`),
		chromedp.Navigate(c.url+"/no/such/page"),
		visible(`nav[aria-label="Main"] a[href="/tasks"]`),
		visible(`#error-links a[href="/delegates"]`))
	if h := value(t, ctx, "read the heading", chromedp.Text(chromedp.CSS("h1"))); h != "Not Found" {
		t.Errorf("heading %q", h)
	}
	if e := value(t, ctx, "read the error", chromedp.Text(chromedp.CSS(".error"))); e != "There is no page at /no/such/page." {
		t.Errorf("error %q", e)
	}
	if who := value(t, ctx, "read who is signed in", chromedp.Text(chromedp.CSS(".who"))); !strings.Contains(who, "Signed in as") {
		t.Errorf("the 404 does not say who is signed in: %q", who)
	}
	screenshot(t, ctx, shots, "not-found")

	out := newBrowser(t, bin)
	run(t, out, "open an unknown address signed out",
		chromedp.Navigate(c.url+"/no/such/page"),
		visible(`#error-signin`))
	if n := value(t, out, "count the navigation", chromedp.Evaluate[int](`document.querySelectorAll('nav[aria-label="Main"]').length`)); n != 0 {
		t.Errorf("a signed-out visitor sees the navigation")
	}
	if href := value(t, out, "read the sign-in link", chromedp.Evaluate[string](`document.getElementById("error-signin").getAttribute("href")`)); href != "/signin?next=%2fno%2fsuch%2fpage" {
		t.Errorf("sign-in link %q", href)
	}
}

// TestUIUpgradedDelegateShowsReplaced: a watcher upgrades a delegate from
// vA to vB (a real switch: the new version's instance connects, the old
// one drains and deregisters); the Delegates page and the delegate's page
// show the old instance as replaced by the new version, not as a
// delegate that is not connected.
func TestUIUpgradedDelegateShowsReplaced(t *testing.T) {
	bin := chromiumOrSkip(t)
	shots := screenshotDir(t)
	u := startUpgradeCluster(t)
	b, err := os.ReadFile(u.builds.b)
	if err != nil {
		t.Fatal(err)
	}
	u.publish(b, vB, nil)
	u.watcher(u.token("up"), "up", "ui-up-1")
	eventually(t, 30*time.Second, "the delegate connected on "+vA, func() bool { return onlyOn(u.connectedVersions(), vA, "ui-up-1") })
	u.mustCLI("delegates", "upgrade", "pin", "up", vB)
	eventually(t, 90*time.Second, "the delegate on "+vB+" and the old instance deregistered", func() bool {
		if !onlyOn(u.connectedVersions(), vB, "ui-up-1") {
			return false
		}
		for _, d := range u.instances() {
			if d.Version == vA && d.Status == protocol.DelegateDeregistered {
				return true
			}
		}
		return false
	})

	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in and see the old instance replaced",
		chromedp.Navigate(u.uiLink(u.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")),
		visible(`tbody.group[data-delegate="up"] tr[data-replaced] .state.replaced`),
		visible(`tbody.group[data-delegate="up"] tr:not([data-replaced]) .state.connected`))
	row := value(t, ctx, "read the replaced row", chromedp.Text(chromedp.CSS(`tr[data-replaced] td[data-label="Status"]`)))
	if !strings.Contains(row, "Replaced") || !strings.Contains(row, "replaced by ui-up-1 "+vB) {
		t.Errorf("the replaced instance's status: %q", row)
	}
	if n := value(t, ctx, "count not connected", chromedp.Evaluate[int](`document.querySelectorAll('tbody.group[data-delegate="up"] .state.disconnected').length`)); n != 0 {
		t.Errorf("%d instances of the upgraded delegate shown not connected", n)
	}
	if s := value(t, ctx, "read the summary", chromedp.Text(chromedp.CSS(`#delegate-summary`))); !strings.Contains(s, "1 of 1 instance connected, 1 replaced by an upgrade") {
		t.Errorf("summary %q", s)
	}
	hover := value(t, ctx, "read the time's title", chromedp.Evaluate[string](`document.querySelector('tr[data-replaced] .replaced-by time').title`))
	if !strings.HasSuffix(hover, " UTC") {
		t.Errorf("the replacement's time has no absolute time on hover: %q", hover)
	}

	run(t, ctx, "open the delegate's page",
		chromedp.Navigate(u.url+"/delegates/up"),
		visible(`section[data-replaced] .state.replaced`),
		visible(`section:not([data-replaced]) .state.connected`))
	detail := value(t, ctx, "read the replaced instance", chromedp.Text(chromedp.CSS(`section[data-replaced] p.replaced-by`)))
	if !strings.Contains(detail, fmt.Sprintf("Replaced by ui-up-1 %s (instance ", vB)) {
		t.Errorf("the delegate page's replaced instance: %q", detail)
	}
	screenshot(t, ctx, shots, "delegate-replaced")
}
