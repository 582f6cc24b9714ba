package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/protocol"
)

// verifyRecordsPipeline deploys web, then its check step reports a
// verification (verify_record) of error_rate against a threshold and of
// latency against a baseline to $LEGATE_OUTPUT: passed, or, when the
// input bad is yes, failed on error_rate with deploy_status=failed, and
// the rollback step reports rolled_back.
const verifyRecordsPipeline = `name: web-verify
inputs:
  version: "1.0"
  bad: "no"
stages:
  - name: deploy
    environment: prod
    service: web
    steps:
      - name: push
        shell: |
          echo "deploying web:$V"
          echo deploy_status=succeeded >> "$LEGATE_OUTPUT"
        env: {V: "${{ inputs.version }}"}
      - name: check
        shell: |
          if [ "$B" = yes ]; then
            verdict=failed; reason='error_rate: 0.2 at 12:03:30 is not < 0.01'; last=0.2
          else
            verdict=passed; reason=''; last=0.003
          fi
          printf 'verify_record={"verdict":"%s","reason":"%s","provider":"http://prom:9090","start_ms":1764331200000,"interval_ms":30000,"metrics":[{"name":"error_rate","query":"sum(rate(errors_total[1m]))","threshold":{"op":"<","value":0.01},"verdict":"%s","reason":"%s","points":[[0,0.002],[30000,0.004],[60000,%s]]},{"name":"latency_p95","query":"histogram_quantile(0.95, new)","baseline":"histogram_quantile(0.95, old)","tolerance":0.1,"verdict":"passed","points":[[0,0.21],[30000,0.22],[60000,0.2]],"baseline_points":[[0,0.22],[30000,0.23],[60000,0.21]]}]}\n' "$verdict" "$reason" "$verdict" "$reason" "$last" >> "$LEGATE_OUTPUT"
          if [ "$verdict" = failed ]; then echo deploy_status=failed >> "$LEGATE_OUTPUT"; echo "verification failed: $reason"; exit 1; fi
        env: {B: "${{ inputs.bad }}"}
      - name: rollback
        when: failure
        shell: |
          echo "rolling back"
          echo deploy_status=rolled_back >> "$LEGATE_OUTPUT"
`

// TestUIDeploymentVerificationsInBrowser: with a real manager and
// delegate, a shell step reports verify records; a passed verification
// keeps the deployment succeeded, a failed one makes it rolled_back with
// the failed metric as its reason. legate deployments get prints each
// metric's numbers and verdict, and in Chromium the deployment's page
// draws each metric's series (SVG) with its threshold line and baseline,
// and shows the verdicts.
func TestUIDeploymentVerificationsInBrowser(t *testing.T) {
	bin := chromiumOrSkip(t)
	shots := screenshotDir(t)
	c := startCluster(t)
	tok := c.token("ui-vr")
	c.delegate("deployer", "ui-vr-deployer", c.seed004Env(tok, "deployer", "deployer")...)
	c.applyPipeline(verifyRecordsPipeline)
	c.mustCLI("pipeline", "run", "web-verify", "--input", "version=1.0")
	if r := c.cli("pipeline", "run", "web-verify", "--input", "version=2.0", "--input", "bad=yes"); r.code != 1 || !strings.Contains(r.stdout, "rolling back") {
		t.Fatalf("the bad deploy: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var ds protocol.DeploymentList
	if err := json.Unmarshal([]byte(c.mustCLI("deployments", "list", "-o", "json")), &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Deployments) != 2 || ds.Deployments[0].Status != protocol.DeploymentRolledBack || ds.Deployments[1].Status != protocol.DeploymentSucceeded {
		t.Fatalf("deployments: %+v", ds.Deployments)
	}
	bad, good := ds.Deployments[0].ID, ds.Deployments[1].ID
	out := c.mustCLI("deployments", "get", bad)
	for _, want := range []string{`Reason:`, "verification check failed: error_rate: 0.2 at 12:03:30 is not < 0.01", "Verification:", "check: failed",
		"error_rate", "< 0.01", "latency_p95", "10%"} {
		if !strings.Contains(out, want) {
			t.Errorf("deployments get: no %q in\n%s", want, out)
		}
	}

	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in", chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))
	run(t, ctx, "the failed verification's deployment", chromedp.Navigate(c.url+"/deployments/"+bad),
		visible(`#deployment-status.s-rolled_back`),
		visible(`section.verification[data-verdict="failed"]`),
		visible(`figure.metric[data-metric="error_rate"][data-verdict="failed"] svg g.series[data-name="new version"] polyline`),
		visible(`figure.metric[data-metric="error_rate"] svg g.refline[data-y="0.01"] line`),
		visible(`figure.metric[data-metric="latency_p95"] svg g.series[data-name="baseline"] polyline`))
	reason := value(t, ctx, "read the reason", chromedp.Text(chromedp.CSS(`#deployment-reason`)))
	if !strings.Contains(reason, "error_rate: 0.2 at 12:03:30 is not < 0.01") {
		t.Errorf("the deployment's reason %q: want the failed metric", reason)
	}
	fig := value(t, ctx, "read the failed metric", chromedp.Text(chromedp.CSS(`figure.metric[data-metric="error_rate"] figcaption`)))
	for _, want := range []string{"failed", "threshold < 0.01", "3 points", "max 0.2"} {
		if !strings.Contains(fig, want) {
			t.Errorf("the failed metric's caption lacks %q: %q", want, fig)
		}
	}
	title := value(t, ctx, "read the chart's title", chromedp.TextContent(chromedp.CSS(`figure.metric[data-metric="error_rate"] svg > text`)))
	if title != "error_rate: failed" {
		t.Errorf("the chart's title %q, want the verdict", title)
	}
	screenshot(t, ctx, shots, "deployment-verification-failed")

	run(t, ctx, "the passed verification's deployment", chromedp.Navigate(c.url+"/deployments/"+good),
		visible(`#deployment-status.s-succeeded`),
		visible(`section.verification[data-verdict="passed"] h3 .verdict`),
		visible(`figure.metric[data-metric="error_rate"][data-verdict="passed"] svg g.refline[data-y="0.01"] line`))
	verdict := value(t, ctx, "read the verdict", chromedp.Text(chromedp.CSS(`section.verification h3 .verdict`)))
	if verdict != "passed" {
		t.Errorf("the passed verification's verdict %q", verdict)
	}
	screenshot(t, ctx, shots, "deployment-verification-passed")
}
