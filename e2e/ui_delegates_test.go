package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestUIDelegatesFilterAndNewDelegateHint: in Chromium, the Delegates
// page filtered by name shows only the matching delegate (and stays
// live); the delegate's page shows the figures its heartbeats carry; the
// New delegate page says what to check when nothing registers
// within the manager's (here short) hint delay.
func TestUIDelegatesFilterAndNewDelegateHint(t *testing.T) {
	bin := chromiumOrSkip(t)
	shots := screenshotDir(t)
	c := startCluster(t, "--ui-new-delegate-hint-after", "2s")
	tok := c.token("builders")
	c.delegate("alpha-build", "ui-alpha-1", c.seed004Env(tok, "alpha-build", "linux,alpha")...)
	c.delegate("beta-deploy", "ui-beta-1", c.seed004Env(tok, "beta-deploy", "linux")...)
	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in and see both delegates",
		chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")),
		visible(`tr[data-hostname="ui-alpha-1"] .state.connected`),
		visible(`tr[data-hostname="ui-beta-1"] .state.connected`))
	run(t, ctx, "filter by name",
		chromedp.SendKeys(chromedp.CSS("#name"), "alpha"),
		chromedp.Click(chromedp.CSS("#filter-delegates")),
		visible(`form.filters a[href="/delegates"]`), // Clear: the filtered page
		until(`location.search.includes("name=alpha")`),
		visible(`tr[data-hostname="ui-alpha-1"] .state.connected`),
		visible(`#live-status.on`),
		until(`document.querySelectorAll("tbody.group").length === 1 && !document.querySelector('tbody.group[data-delegate="beta-deploy"]')`),
		until(`document.getElementById("delegate-summary").textContent.includes("(filtered)")`))
	screenshot(t, ctx, shots, "delegates-filtered")

	// The figures a real delegate reports in its heartbeats: on its page
	// and in legate delegates describe.
	c.mustCLI("task", "run", "--selector", "alpha", "--script", "echo perf")
	eventually(t, 20*time.Second, "the delegate reports its task and figures", func() bool {
		var det protocol.DelegateDetails
		if err := json.Unmarshal([]byte(c.mustCLI("delegates", "describe", "alpha-build", "-o", "json")), &det); err != nil || len(det.Instances) != 1 {
			return false
		}
		p := det.Instances[0].Perf
		return p != nil && p.TasksRun == 1 && p.RSSBytes != nil && *p.RSSBytes > 0 && p.MemoryPercent != nil && p.CPUPercent != nil && p.AcquireMS > 0
	})
	if out := c.mustCLI("delegates", "describe", "alpha-build"); !strings.Contains(out, "Performance:") || !strings.Contains(out, "1 task run, last acquire") {
		t.Errorf("describe without the figures:\n%s", out)
	}
	run(t, ctx, "see the figures on the delegate's page",
		chromedp.Navigate(c.url+"/delegates/alpha-build"),
		visible(`section[data-hostname="ui-alpha-1"] dd.perf`),
		until(`/^cpu [0-9.]+% \(delegate [0-9.]+%\), memory [0-9.]+%, rss [0-9.]+ MiB, 1 task run, last acquire [0-9.]+ ms$/.test(document.querySelector('section[data-hostname="ui-alpha-1"] dd.perf').textContent)`))

	run(t, ctx, "ask for a delegate that never starts",
		chromedp.Navigate(c.url+"/delegates/new"),
		visible("#kind-docker"),
		chromedp.Click(chromedp.CSS("#kind-docker")),
		// A trial on the manager's own host, with an image the manager
		// does not name (it has no --delegate-image here).
		chromedp.Click(chromedp.CSS("#allow_loopback")),
		chromedp.SendKeys(chromedp.CSS("#image"), "registry.example.com/legate:v1.2.3"),
		chromedp.SendKeys(chromedp.CSS("#name"), "ghost"),
		chromedp.Click(chromedp.CSS("#create-delegate")),
		visible("#manifest"))
	run(t, ctx, "see what to check",
		visible(`#wait-status[data-hint="shown"]`),
		visible(`#wait-hint`),
		until(`document.getElementById("wait-hint").textContent.includes("is not revoked")`),
		until(`document.getElementById("wait-hint").textContent.includes("the manager URL in the spec")`))
	screenshot(t, ctx, shots, "new-delegate-hint")
}
