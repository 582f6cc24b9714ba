package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/protocol"
)

// runCount is how many runs `legate run list -o json` lists.
func (c *cluster) runCount() int {
	c.t.Helper()
	var l protocol.RunList
	out := c.mustCLI("run", "list", "-o", "json")
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		c.t.Fatalf("decode the run list: %v\n%s", err, out)
	}
	return len(l.Runs)
}

// TestUIRerunConfirmsAnOldVersion: the run page's Re-run button re-runs
// the run's definition. For the pipeline's current version of a pipeline
// that deploys nothing it is one click; once the pipeline has a newer
// version it first answers a page that names the version the re-run runs
// and says it is not the current one, and only that page's button
// re-runs (Cancel goes back to the run, starting nothing).
func TestUIRerunConfirmsAnOldVersion(t *testing.T) {
	bin := chromiumOrSkip(t)
	shots := screenshotDir(t)
	c := startCluster(t)
	c.delegate("runner", "ui-rerun-a", c.seed004Env(c.token("runners"), "runner", "linux")...)
	c.applyPipeline(uiRunPipeline)
	first := strings.TrimSpace(c.mustCLI("pipeline", "run", "greet", "--input", "who=ana", "--detach"))
	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in", chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))

	run(t, ctx, "re-run the current version: one click",
		chromedp.Navigate(c.url+"/runs/"+first),
		submitForm(`#run-rerun-form`),
		visible(`#run-rerun-of`))
	if r := c.getRun(value(t, ctx, "read the re-run's ID", chromedp.Evaluate[string](`location.pathname.split("/").pop()`))); r.RerunOf != first || r.Version != 1 {
		t.Errorf("the one-click re-run: rerun_of %q version %d, want %s version 1", r.RerunOf, r.Version, first)
	}

	c.applyPipeline(strings.Replace(uiRunPipeline, `echo "after the greeting"`, `echo "after the greeting, v2"`, 1))
	run(t, ctx, "re-run an old version: a confirmation first",
		chromedp.Navigate(c.url+"/runs/"+first),
		submitForm(`#run-rerun-form`),
		visible(`#confirm-rerun-form`))
	says := value(t, ctx, "read the confirmation", chromedp.Text(chromedp.CSS(`#rerun-version`)))
	if !strings.Contains(says, "version 1 of pipeline greet") || !strings.Contains(says, "not the current version, which is 2") {
		t.Errorf("the confirmation says %q, want the version it runs (1) and that it is not the current one (2)", says)
	}
	screenshot(t, ctx, shots, "run-rerun-confirm")
	before := c.runCount()
	run(t, ctx, "cancel", chromedp.Click(chromedp.CSS(`#cancel-rerun`)), visible(`#run-rerun-form`))
	if n := c.runCount(); n != before {
		t.Errorf("cancelling the confirmation started a run: %d runs, had %d", n, before)
	}
	run(t, ctx, "confirm the re-run",
		submitForm(`#run-rerun-form`),
		visible(`#confirm-rerun-form`),
		chromedp.Click(chromedp.CSS(`#confirm-rerun`)),
		visible(`#run-rerun-of`))
	if r := c.getRun(value(t, ctx, "read the confirmed re-run's ID", chromedp.Evaluate[string](`location.pathname.split("/").pop()`))); r.RerunOf != first || r.Version != 1 {
		t.Errorf("the confirmed re-run: rerun_of %q version %d, want %s version 1", r.RerunOf, r.Version, first)
	}
}
