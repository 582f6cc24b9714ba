package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// shotsTaken parses e2e/*_test.go and returns, by screenshot name, the
// test functions that take it (a screenshot(t, ctx, dir, "NAME") call),
// and the calls that break the rules scripts/screenshots relies on: the
// name a literal string, the call in a Test function's own body (the
// script runs the tests whose body calls screenshot).
func shotsTaken(t *testing.T) (map[string][]string, []string) {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	taken := map[string][]string{}
	var problems []string
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "screenshot" {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "screenshot" || len(call.Args) != 4 {
					return true
				}
				at := fset.Position(call.Pos())
				if at.Column != firstColumn(fset, file, call.Pos()) {
					problems = append(problems, fmt.Sprintf("%s: call screenshot as a statement of its own line (scripts/screenshots finds the tests that take pictures by such lines)", at))
				}
				lit, ok := call.Args[3].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					problems = append(problems, fmt.Sprintf("%s: give screenshot its picture's name as a literal string (this check and scripts/screenshots read it from the source)", at))
					return true
				}
				name, _ := strconv.Unquote(lit.Value)
				if !strings.HasPrefix(fn.Name.Name, "Test") || fn.Recv != nil {
					problems = append(problems, fmt.Sprintf("%s: screenshot %q is taken in %s, not in a Test function's body: scripts/screenshots runs the tests whose body calls screenshot, so call it there", at, name, fn.Name.Name))
				}
				if !slices.Contains(taken[name], fn.Name.Name) {
					taken[name] = append(taken[name], fn.Name.Name)
				}
				return true
			})
		}
	}
	return taken, problems
}

// firstColumn is the column of the first non-blank character of pos's
// line.
func firstColumn(fset *token.FileSet, file *ast.File, pos token.Pos) int {
	src, err := os.ReadFile(fset.Position(file.Pos()).Filename)
	if err != nil {
		return 0
	}
	line := strings.Split(string(src), "\n")[fset.Position(pos).Line-1]
	return len(line) - len(strings.TrimLeft(line, " \t")) + 1
}

// TestUIScreenshotsAreTakenByTests: every picture under docs/ui/ is taken
// by a test (scripts/screenshots refreshes it; a picture no test takes
// goes stale), by one test only, and every image docs/ui.md shows exists.
func TestUIScreenshotsAreTakenByTests(t *testing.T) {
	taken, problems := shotsTaken(t)
	for _, p := range problems {
		t.Error(p)
	}
	for name, tests := range taken {
		if len(tests) > 1 {
			t.Errorf("screenshot %q is taken by %s: each picture needs one test (with scripts/screenshots the last one to run wins); rename one", name, strings.Join(tests, " and "))
		}
	}
	docs := filepath.Join(repoRoot, "docs")
	err := filepath.WalkDir(filepath.Join(docs, "ui"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".png") {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		name := strings.TrimSuffix(d.Name(), ".png")
		if filepath.Dir(p) != filepath.Join(docs, "ui") {
			t.Errorf("%s: the tests write their pictures to docs/ui itself, not below it; move it there", rel)
		} else if len(taken[name]) == 0 {
			t.Errorf("%s is taken by no test, so scripts/screenshots never refreshes it: take it in a UI test with screenshot(t, ctx, shots, %q), or delete it (and its reference in docs/ui.md)", rel, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(docs, "ui.md"))
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`!\[[^\]]*\]\(([^)\s]+)`).FindAllStringSubmatch(string(md), -1)
	if len(refs) == 0 {
		t.Fatal("docs/ui.md shows no image: the check of its references reads ![...](PATH)")
	}
	for _, m := range refs {
		if strings.Contains(m[1], "://") {
			continue
		}
		if _, err := os.Stat(filepath.Join(docs, filepath.FromSlash(m[1]))); err != nil {
			t.Errorf("docs/ui.md shows %s, which does not exist: run scripts/screenshots (it writes docs/ui/NAME.png for each screenshot(t, ctx, shots, \"NAME\")) and commit it, or fix the reference", m[1])
		}
	}
}

// TestScreenshotsScript: scripts/screenshots has --help, refuses an
// unknown argument, lists exactly the tests that take screenshots, and
// fails clearly before running any when Chromium is missing.
func TestScreenshotsScript(t *testing.T) {
	script := filepath.Join(repoRoot, "scripts", "screenshots")
	sh := func(env []string, args ...string) (string, int) {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := sh(nil, "--help"); code != 0 || !strings.Contains(out, "Usage: bash scripts/screenshots") || !strings.Contains(out, "LEGATE_UI_SCREENSHOTS=docs/ui") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
	if out, code := sh(nil, "--bogus"); code != 2 || !strings.Contains(out, "unknown argument '--bogus'") {
		t.Errorf("an unknown argument: exit %d\n%s", code, out)
	}
	out, code := sh(nil, "--list")
	if code != 0 {
		t.Fatalf("--list: exit %d\n%s", code, out)
	}
	taken, _ := shotsTaken(t)
	var want []string
	for _, tests := range taken {
		for _, fn := range tests {
			if !slices.Contains(want, fn) {
				want = append(want, fn)
			}
		}
	}
	slices.Sort(want)
	if got := strings.Fields(out); !slices.Equal(got, want) {
		t.Errorf("--list: %q, want the tests that take screenshots %q", got, want)
	}
	out, code = sh([]string{"LEGATE_CHROMIUM=" + filepath.Join(t.TempDir(), "no-chromium")})
	if code != 1 || !strings.Contains(out, "screenshots: Chromium is missing") || strings.Contains(out, "running") {
		t.Errorf("without Chromium: exit %d\n%s", code, out)
	}
}
