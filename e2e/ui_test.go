package e2e

// The web UI in a real browser: headless Chromium (Debian's chromium
// package, which scripts/chromium-ensure installs) driven with chromedp,
// against a real manager and real delegate processes. Without Chromium
// these tests skip and say why; under CI=true they fail.
//
// Each page is screenshotted; with LEGATE_UI_SCREENSHOTS=DIR (docs/ui to
// refresh the documentation's) the PNGs are written there, otherwise to a
// temporary directory.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/protocol"
)

// chromiumOrSkip returns the Chromium binary, or skips (fails under CI).
func chromiumOrSkip(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LEGATE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("Chromium is not installed, and CI=true needs the web UI's browser tests (scripts/chromium-ensure installs it)")
	}
	t.Skip("Chromium is not installed, so the web UI's browser tests cannot run (run scripts/chromium-ensure as root, or set LEGATE_CHROMIUM)")
	return ""
}

// newBrowser starts a headless Chromium with an empty profile and returns
// a context of its first tab; it is closed when the test ends.
func newBrowser(t *testing.T, bin string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", bin, err)
	}
	return ctx
}

// run runs browser steps, failing the test after a minute.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	value(t, ctx, what, chromedp.Steps(steps...))
}

// value runs one browser action and returns its value, failing the test
// after a minute.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(actx, a)
	if err != nil {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		page, _ := chromedp.Run(pctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
		t.Fatalf("%s: %v\npage text: %s", what, err, page)
	}
	return v
}

// visible waits for the first element a CSS selector matches to be visible.
func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}

// until waits until a JavaScript expression is true.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))
}

// screenshot saves the page as NAME.png.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func screenshotDir(t *testing.T) string {
	if d := os.Getenv("LEGATE_UI_SCREENSHOTS"); d != "" {
		if !filepath.IsAbs(d) {
			d = filepath.Join("..", d) // relative to the repository
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// uiLink runs legate ui with key and returns the link it prints.
func (c *cluster) uiLink(key string) string {
	c.t.Helper()
	r := c.cliEnv([]string{"LEGATE_API_KEY=" + key}, "ui")
	link := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(link, c.url+protocol.PathUISignIn+"?token=lgl_") || !strings.Contains(r.stderr, "valid until") {
		c.t.Fatalf("legate ui: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return link
}

// TestUIInBrowser: sign in with legate ui's link; the Delegates page shows
// delegates Connected, one that stops turns Not connected without a
// reload; a task's output appears live and the page's cancel stops it; a
// viewer is offered no action and a forged one is refused.
func TestUIInBrowser(t *testing.T) {
	bin := chromiumOrSkip(t)
	shots := screenshotDir(t)
	c := startCluster(t)
	tok := c.token("builders")
	c.delegate("builder", "ui-host-a", c.seed004Env(tok, "builder", "linux,amd64")...)
	stopping := c.delegate("builder", "ui-host-b", c.seed004Env(tok, "builder", "linux,amd64")...)
	// A delegate that waits for approval (its group shows Approve and
	// Reject to the administrator).
	out := strings.Split(strings.TrimSpace(c.mustCLI("token", "create", "edge", "--require-approval")), "\n")
	c.delegate("edge", "ui-edge-1", c.seed004Env(strings.TrimSpace(out[len(out)-1]), "edge", "arm64")...)
	ctx := newBrowser(t, bin)

	// The sign-in page, then the one-time link.
	run(t, ctx, "open the sign-in page", chromedp.Navigate(c.url+"/"), visible("#user"))
	if h := value(t, ctx, "read the heading", chromedp.Text(chromedp.CSS("h1"))); h != "Sign in to legate" {
		t.Errorf("sign-in page heading %q", h)
	}
	screenshot(t, ctx, shots, "signin")
	link := c.uiLink(c.apiKey)
	run(t, ctx, "open the link's page", chromedp.Navigate(link), visible("#use-link"))
	screenshot(t, ctx, shots, "signin-link")
	run(t, ctx, "sign in with the link and see the delegates connected",
		chromedp.Click(chromedp.CSS("#use-link")),
		visible(`tr[data-hostname="ui-host-a"] .state.connected`),
		visible(`tr[data-hostname="ui-host-b"] .state.connected`),
		visible(`#live-status.on`),
		visible(`form[action="/delegates/edge/approve"]`))
	// The link was for one sign-in.
	other := newBrowser(t, bin)
	run(t, other, "use the link again", chromedp.Navigate(link), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(".error"))
	if refused := value(t, other, "read the error", chromedp.Text(chromedp.CSS(".error"))); !strings.Contains(refused, "used already or expired") {
		t.Errorf("second use of the link: %q", refused)
	}

	// A delegate that stops turns Not connected on the open page.
	value(t, ctx, "mark the page", chromedp.Evaluate[string](`window.legateTestMarker = "same page"`))
	screenshot(t, ctx, shots, "delegates")
	stopping.signal(syscall.SIGTERM)
	run(t, ctx, "see the stopped delegate not connected",
		visible(`tr[data-hostname="ui-host-b"] .state.disconnected`),
		visible(`tr[data-hostname="ui-host-a"] .state.connected`))
	if marker := value(t, ctx, "read the mark", chromedp.Evaluate[string](`String(window.legateTestMarker)`)); marker != "same page" {
		t.Errorf("the page was reloaded (marker %q)", marker)
	}
	if code := stopping.wait(30 * time.Second); code != 0 {
		t.Errorf("the stopped delegate exited %d", code)
	}

	// New delegate: a plain host's spec, whose environment starts a
	// delegate that the page then shows connected. The manager's URL is
	// on loopback here: a trial on its own host.
	run(t, ctx, "fill in the New delegate form",
		chromedp.Navigate(c.url+"/delegates/new"),
		visible("#kind-systemd"),
		chromedp.Click(chromedp.CSS("#kind-systemd")),
		chromedp.Click(chromedp.CSS("#allow_loopback")),
		chromedp.SendKeys(chromedp.CSS("#name"), "fresh"),
		chromedp.SendKeys(chromedp.CSS("#tags"), "ui, fresh"))
	screenshot(t, ctx, shots, "new-delegate-form")
	run(t, ctx, "create the token and the spec",
		chromedp.Click(chromedp.CSS("#create-delegate")),
		visible("#manifest"),
		visible(`#delegate-list p.summary`))
	spec := value(t, ctx, "read the spec", chromedp.Evaluate[string](`document.getElementById("manifest").textContent`))
	env := specEnv(t, spec)
	if !strings.Contains(strings.Join(env, " "), "DELEGATE_NAME=fresh") || !strings.Contains(strings.Join(env, " "), "MANAGER_HOST_AND_PORT="+c.url) {
		t.Fatalf("the spec's environment: %q", env)
	}
	start(t, "delegate ui-fresh-1", append(env, "DELEGATE_HOSTNAME=ui-fresh-1"), "delegate", "--grace", "20s")
	run(t, ctx, "see the new delegate connected",
		visible(`#wait-status[data-connected="true"]`),
		visible(`tr[data-hostname="ui-fresh-1"] .state.connected`))
	screenshot(t, ctx, shots, "new-delegate")

	// A task's output, live, and a cancel from the page.
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "linux", "--script",
		`i=0; while true; do i=$((i+1)); echo "line $i"; sleep 0.2; done`))
	run(t, ctx, "watch the task's output",
		chromedp.Navigate(c.url+"/tasks/"+id),
		until(`document.getElementById("output").textContent.includes("line 3")`),
		visible(`#output-status.on`))
	before := value(t, ctx, "read the output", chromedp.Evaluate[string](`document.getElementById("output").textContent`))
	run(t, ctx, "see more output without a reload",
		until(fmt.Sprintf(`document.getElementById("output").textContent.length > %d`, len(before))))
	after := value(t, ctx, "read the output again", chromedp.Evaluate[string](`document.getElementById("output").textContent`))
	if !strings.HasPrefix(after, before) {
		t.Errorf("the output was replaced, not appended: %q then %q", before, after)
	}
	screenshot(t, ctx, shots, "task")
	run(t, ctx, "cancel the task from its page",
		chromedp.Click(chromedp.CSS(`#cancel-form button`)),
		visible(`.notice`),
		until(`document.getElementById("task-status").textContent === "cancelled"`))
	eventually(t, 20*time.Second, "the task cancelled and its delegate idle", func() bool {
		d, ok := c.findDelegate("ui-host-a")
		return c.task(id).Status == protocol.StatusCancelled && ok && d.RunningTasks == 0
	})
	run(t, ctx, "list tasks",
		chromedp.Navigate(c.url+"/tasks"),
		visible(fmt.Sprintf(`tr[data-task=%q] .s-cancelled`, id)))
	screenshot(t, ctx, shots, "tasks")
	run(t, ctx, "open the delegate's page",
		chromedp.Navigate(c.url+"/delegates/builder"),
		visible(`section[data-hostname="ui-host-a"] .state.connected`),
		visible(fmt.Sprintf(`tr[data-task=%q]`, id)))
	screenshot(t, ctx, shots, "delegate")

	// A viewer: sees the delegates and a running task, is offered no
	// action, and a forged one is refused.
	c.mustCLI("user", "create", "vera")
	c.mustCLI("role", "bind", "viewer", "--user", "vera")
	var vk protocol.APIKey
	if err := json.Unmarshal([]byte(c.mustCLI("apikey", "create", "vera-key", "--owner", "vera", "-o", "json")), &vk); err != nil {
		t.Fatal(err)
	}
	running := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "linux", "--script", "sleep 300"))
	t.Cleanup(func() { c.cli("task", "cancel", running) })
	viewer := newBrowser(t, bin)
	run(t, viewer, "sign the viewer in",
		chromedp.Navigate(c.uiLink(vk.Value)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")),
		visible(`tr[data-hostname="ui-host-a"] .state.connected`),
		visible(`#live-status.on`))
	if n := value(t, viewer, "count the viewer's delegate actions", chromedp.Evaluate[int](`document.querySelectorAll('form[action^="/delegates/"]').length`)); n != 0 {
		t.Errorf("the viewer is offered %d delegate actions", n)
	}
	screenshot(t, viewer, shots, "delegates-viewer")
	run(t, viewer, "open the running task",
		chromedp.Navigate(c.url+"/tasks/"+running),
		visible(`#output-status.on`))
	if n := value(t, viewer, "count cancel forms", chromedp.Evaluate[int](`document.querySelectorAll('#cancel-form').length`)); n != 0 {
		t.Errorf("the viewer is offered a cancel")
	}
	forge := fmt.Sprintf(`(async () => {
		const csrf = document.querySelector('input[name="csrf"]').value;
		const r = await fetch("/tasks/%s/cancel", {method: "POST", body: new URLSearchParams({csrf}), redirect: "manual"});
		return r.status;
	})()`, running)
	if status := value(t, viewer, "forge a cancel", chromedp.Evaluate[int](forge, chromedp.EvalAwaitPromise)); status != 403 {
		t.Errorf("the viewer's forged cancel: HTTP %d, want 403", status)
	}
	if st := c.task(running).Status; st != protocol.StatusRunning && st != protocol.StatusQueued {
		t.Errorf("after the viewer's forged cancel the task is %s", st)
	}

	// On a phone.
	run(t, viewer, "open the Delegates page on a phone's screen",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(c.url+"/delegates"),
		visible(`tr[data-hostname="ui-host-a"] .state.connected`))
	screenshot(t, viewer, shots, "delegates-phone")
}

// specEnv is the environment a plain host's spec (legate manifest
// systemd) writes to its environment file, as KEY=VALUE.
func specEnv(t *testing.T, spec string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(spec, "<<'LEGATE_ENV_EOF'\n")
	body, _, ok2 := strings.Cut(rest, "\nLEGATE_ENV_EOF")
	if !ok || !ok2 {
		t.Fatalf("no environment file in the spec:\n%s", spec)
	}
	var env []string
	for _, line := range strings.Split(body, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		env = append(env, k+"="+strings.Trim(v, `"`))
	}
	return env
}

// TestUICommand: legate ui prints a link for the CLI's user (-o json
// too), --open hands it to $BROWSER, and a service account gets none.
func TestUICommand(t *testing.T) {
	c := startCluster(t)
	r := c.cli("ui", "-o", "json")
	var out struct {
		URL       string    `json:"url"`
		User      string    `json:"user"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
		t.Fatalf("legate ui -o json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(out.URL, c.url+protocol.PathUISignIn+"?token=lgl_") || out.User != "admin" || time.Until(out.ExpiresAt) > 5*time.Minute {
		t.Errorf("legate ui -o json: %+v", out)
	}
	dir := t.TempDir()
	opened := filepath.Join(dir, "opened")
	browser := filepath.Join(dir, "browser")
	if err := os.WriteFile(browser, []byte("#!/bin/sh\nprintf '%s' \"$1\" > "+opened+".tmp && mv "+opened+".tmp "+opened+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = c.cliEnv([]string{"BROWSER=" + browser}, "ui", "--open")
	if r.code != 0 {
		t.Fatalf("legate ui --open: exit %d\n%s", r.code, r.stderr)
	}
	eventually(t, 10*time.Second, "the browser given the link", func() bool {
		b, err := os.ReadFile(opened)
		return err == nil && string(b) == strings.TrimSpace(r.stdout)
	})
	c.mustCLI("user", "create", "robot", "--service-account")
	var k protocol.APIKey
	if err := json.Unmarshal([]byte(c.mustCLI("apikey", "create", "robot-key", "--owner", "robot", "-o", "json")), &k); err != nil {
		t.Fatal(err)
	}
	r = c.cliEnv([]string{"LEGATE_API_KEY=" + k.Value}, "ui")
	if r.code == 0 || !strings.Contains(r.stderr, "sign-in links are for users") || r.stdout != "" {
		t.Errorf("legate ui as a service account: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}
