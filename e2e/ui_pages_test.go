package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestUIPipelinesInBrowser: run a pipeline and watch its run page in
// Chromium: a step's output appears live and the steps follow the run to
// its end without a reload; the Deployments page shows the deployment
// with the limits' usage; the Settings pages render; a task page opened
// while its task waits follows its timeline. Screenshots of each (see
// ui_test.go for the browser helpers).
func TestUIPipelinesInBrowser(t *testing.T) {
	bin := chromiumOrSkip(t)
	shots := screenshotDir(t)
	c := startCluster(t, "--deployments-per-hour", "10")
	tok := c.token("builders")
	c.delegate("builder", "ui-pipe-a", c.seed004Env(tok, "builder", "linux,amd64")...)
	// The build step prints until the test lets it end (a file appears).
	release := filepath.Join(t.TempDir(), "release")
	c.applyPipeline(fmt.Sprintf(`name: ship
description: Build the web service and deploy it to production
inputs:
  version: "1.4.2"
stages:
  - name: build
    steps:
      - name: compile
        delegateSelectors: [linux]
        shell: |
          i=0
          while [ ! -e %q ]; do i=$((i+1)); echo "compiling unit $i"; sleep 0.2; done
          echo "build done"
      - name: test
        delegateSelectors: [linux]
        shell: echo "all tests passed"
  - name: deploy
    environment: production
    service: web
    steps:
      - name: push
        delegateSelectors: [linux]
        shell: echo "pushed web $VERSION"
        env: {VERSION: "${{ inputs.version }}"}
`, release))
	id := strings.TrimSpace(c.mustCLI("pipeline", "run", "ship", "--detach"))
	c.mustCLI("secret", "create", "DB_PASSWORD", "--from-file", writeTemp(t, "never-shown-in-the-ui"))
	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in", chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))

	run(t, ctx, "open the run page and see the step's output live",
		chromedp.Navigate(c.url+"/runs/"+id),
		visible(`#run-live-status.on`),
		visible(`tr[data-step="compile"][data-status="running"]`),
		until(`document.getElementById("output").textContent.includes("compiling unit 3")`))
	value(t, ctx, "mark the page", chromedp.Evaluate[string](`window.legateTestMarker = "same page"`))
	before := value(t, ctx, "read the output", chromedp.Evaluate[string](`document.getElementById("output").textContent`))
	run(t, ctx, "see more output without a reload",
		until(fmt.Sprintf(`document.getElementById("output").textContent.length > %d`, len(before))))
	screenshot(t, ctx, shots, "run")
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "see the run advance to its end on the open page",
		until(`document.getElementById("output").textContent.includes("build done")`),
		visible(`tr[data-step="test"][data-status="succeeded"]`),
		visible(`tr[data-step="push"][data-status="succeeded"]`),
		visible(`#run-status.s-succeeded`),
		visible(`#run-live-status[data-ended="succeeded"]`))
	if marker := value(t, ctx, "read the mark", chromedp.Evaluate[string](`String(window.legateTestMarker)`)); marker != "same page" {
		t.Errorf("the run page was reloaded (marker %q)", marker)
	}
	if n := value(t, ctx, "count cancel forms", chromedp.Evaluate[int](`document.querySelectorAll('#run-cancel-form').length`)); n != 0 {
		t.Errorf("an ended run offers a cancel")
	}
	if st := c.getRun(id).Status; st != protocol.RunSucceeded {
		t.Errorf("the run is %s", st)
	}
	screenshot(t, ctx, shots, "run-done")
	href := value(t, ctx, "read the push step's output link", chromedp.Evaluate[string](`document.querySelector('tr[data-step="push"] a[href*="step="]').href`))
	run(t, ctx, "another step's output",
		chromedp.Navigate(href),
		until(`document.getElementById("output").textContent.includes("pushed web 1.4.2")`))

	run(t, ctx, "the pipelines", chromedp.Navigate(c.url+"/pipelines"), visible(`tr[data-pipeline="ship"]`))
	screenshot(t, ctx, shots, "pipelines")
	run(t, ctx, "the pipeline", chromedp.Navigate(c.url+"/pipelines/ship"),
		visible(`#pipeline-source`), visible(fmt.Sprintf(`tr[data-run=%q] .s-succeeded`, id)))
	screenshot(t, ctx, shots, "pipeline")
	run(t, ctx, "the runs", chromedp.Navigate(c.url+"/runs"), visible(fmt.Sprintf(`tr[data-run=%q]`, id)))
	screenshot(t, ctx, shots, "runs")

	run(t, ctx, "the deployments",
		chromedp.Navigate(c.url+"/deployments"),
		visible(`tr[data-deployment] .s-succeeded`),
		visible(`#limits meter`))
	dep := value(t, ctx, "read the deployment", chromedp.Text(chromedp.CSS(`tr[data-deployment]`)))
	for _, want := range []string{"web", "production", "1.4.2", "succeeded", "ship / deploy"} {
		if !strings.Contains(dep, want) {
			t.Errorf("the deployment row %q lacks %q", dep, want)
		}
	}
	if lim := value(t, ctx, "read the limits", chromedp.Text(chromedp.CSS(`#limits`))); !strings.Contains(lim, "1 of 10 used") {
		t.Errorf("the limits: %q", lim)
	}
	screenshot(t, ctx, shots, "deployments")

	run(t, ctx, "the settings",
		chromedp.Navigate(c.url+"/settings"),
		visible(`a[href="/settings/audit"]`),
		visible(`a[href="/settings/tokens"]`))
	run(t, ctx, "the tokens", chromedp.Navigate(c.url+"/settings/tokens"), visible(`tr[data-token="builders"]`))
	screenshot(t, ctx, shots, "settings-tokens")
	run(t, ctx, "the secrets", chromedp.Navigate(c.url+"/settings/secrets"), visible(`tr[data-secret="DB_PASSWORD"]`))
	if body := value(t, ctx, "read the page", chromedp.Evaluate[string](`document.documentElement.outerHTML`)); strings.Contains(body, "never-shown-in-the-ui") {
		t.Error("the secrets page shows a value")
	}
	run(t, ctx, "the audit log filtered by action",
		chromedp.Navigate(c.url+"/settings/audit"),
		visible(`#action`),
		chromedp.SendKeys(chromedp.CSS("#action"), "pipeline\r"),
		// The filtered page renders the filter as the field's value.
		visible(`#action[value="pipeline"]`),
		visible(`tr[data-action="pipeline.apply"]`))
	if n := value(t, ctx, "count other actions", chromedp.Evaluate[int](`document.querySelectorAll('tr[data-action]:not([data-action^="pipeline."])').length`)); n != 0 {
		t.Errorf("the audit log filtered by pipeline shows %d other events", n)
	}
	screenshot(t, ctx, shots, "settings-audit")

	// A task page opened while the task waits: its status and timeline
	// follow it once a delegate takes it, without a reload. The delegate
	// that will run it is connected and busy (capacity 1, a blocker
	// running), so the task waits for it; one that no connected delegate
	// could run would fail fast (not_assigned after one liveness window,
	// 1.5 s here), which a delegate starting on a loaded machine missed.
	c.delegate("late", "ui-late-1", append(c.seed004Env(tok, "late", "late"), "DELEGATE_TASK_CAPACITY=1")...)
	blocker := c.submit("--selector", "late", "--script", "sleep 600")
	c.waitRunning(blocker)
	waiting := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "late", "--script", "echo started late; sleep 1"))
	run(t, ctx, "open the queued task",
		chromedp.Navigate(c.url+"/tasks/"+waiting),
		visible(`#task-status.s-queued`),
		visible(`#timeline li[data-label="Started"].pending`))
	value(t, ctx, "mark the page", chromedp.Evaluate[string](`window.legateTestMarker = "task page"`))
	c.mustCLI("task", "cancel", blocker)
	run(t, ctx, "see the task start and end on the open page",
		until(`document.getElementById("output").textContent.includes("started late")`),
		visible(`#timeline li[data-label="Acquired"]:not(.pending) time`),
		visible(`#timeline li[data-label="Started"]:not(.pending) time`),
		visible(`#timeline li[data-label="Finished"]:not(.pending) time`),
		visible(`#task-status.s-succeeded`))
	if marker := value(t, ctx, "read the mark", chromedp.Evaluate[string](`String(window.legateTestMarker)`)); marker != "task page" {
		t.Errorf("the task page was reloaded (marker %q)", marker)
	}

	run(t, ctx, "the run page on a phone",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(c.url+"/runs/"+id),
		visible(`tr[data-step="push"]`))
	screenshot(t, ctx, shots, "run-phone")
}

// writeTemp writes content to a new file and returns its path.
func writeTemp(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "value")
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
