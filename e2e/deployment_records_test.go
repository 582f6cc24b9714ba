package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/protocol"
)

// recordsPipeline deploys web with a shell step that reports what it
// deployed (deploy_record) and how (deploy_status) to $LEGATE_OUTPUT,
// failing when the input fail is yes; its rollback step reports
// rolled_back.
const recordsPipeline = `name: web-deploy
inputs:
  version: "1.0"
  fail: "no"
stages:
  - name: deploy
    environment: prod
    service: web
    steps:
      - name: push
        shell: |
          echo "deploying web:$V"
          printf 'deploy_record={"type":"kubernetes","strategy":"rolling","namespace":"shop","workloads":[{"kind":"Deployment","name":"web","images":["web:%s"],"revision":"%s"}]}\n' "$V" "$V" >> "$LEGATE_OUTPUT"
          if [ "$F" = yes ]; then echo deploy_status=failed >> "$LEGATE_OUTPUT"; exit 1; fi
          echo deploy_status=succeeded >> "$LEGATE_OUTPUT"
        env: {V: "${{ inputs.version }}", F: "${{ inputs.fail }}"}
      - name: rollback
        when: failure
        shell: |
          echo "rolling back"
          echo deploy_status=rolled_back >> "$LEGATE_OUTPUT"
`

// TestDeploymentRecordsCLI: with a real manager and delegate, shell deploy
// steps report their records and status; legate deployments list shows
// a failed deploy whose rollback step ran as rolled_back, get shows what
// a deployment deployed and by whom, current shows the version now and
// the one before, and rollback re-deploys the one before through the
// same pipeline, marked as a rollback of the current deployment.
func TestDeploymentRecordsCLI(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("dr")
	c.delegate("deployer", "dr-deployer", c.seed004Env(tok, "deployer", "deployer")...)
	file := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(file, []byte(recordsPipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("pipeline", "apply", "-f", file)
	c.mustCLI("pipeline", "run", "web-deploy", "--input", "version=1.0")
	c.mustCLI("pipeline", "run", "web-deploy", "--input", "version=2.0")
	if r := c.cli("pipeline", "run", "web-deploy", "--input", "version=3.0", "--input", "fail=yes"); r.code != 1 || !strings.Contains(r.stdout, "rolling back") {
		t.Fatalf("the failing deploy: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	var ds protocol.DeploymentList
	if err := json.Unmarshal([]byte(c.mustCLI("deployments", "list", "-o", "json")), &ds); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds.Deployments {
		got = append(got, d.Version+" "+d.Status)
	}
	if strings.Join(got, ", ") != "3.0 rolled_back, 2.0 succeeded, 1.0 succeeded" {
		t.Fatalf("deployments: %v", got)
	}
	out := c.mustCLI("deployments", "get", ds.Deployments[1].ID)
	for _, want := range []string{"Status:", "succeeded", "Triggered by:", "user:", "Namespace:", "shop", "Deployment", "web:2.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("deployments get: no %q in\n%s", want, out)
		}
	}
	out = c.mustCLI("deployments", "current")
	if !regexpLine(out, `^web\s+prod\s+2\.0\s+\S+ ago\s+1\.0\s*$`) {
		t.Errorf("deployments current: want web prod 2.0, previous 1.0:\n%s", out)
	}
	if r := c.cli("deployments", "rollback", "api", "prod"); r.code == 0 || !strings.Contains(r.stderr, "nothing to roll back") {
		t.Errorf("rollback of a service never deployed: exit %d %s", r.code, r.stderr)
	}

	r := c.cli("deployments", "rollback", "web", "prod")
	if r.code != 0 || !strings.Contains(r.stdout, "deploying web:1.0") || !strings.Contains(r.stderr, "rolling back web in prod (deployment "+ds.Deployments[1].ID+")") {
		t.Fatalf("rollback: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	ds = protocol.DeploymentList{}
	if err := json.Unmarshal([]byte(c.mustCLI("deployments", "list", "-o", "json")), &ds); err != nil {
		t.Fatal(err)
	}
	back := ds.Deployments[0]
	if back.Version != "1.0" || back.Status != "succeeded" || back.RollbackOf != ds.Deployments[2].ID || len(back.Records) != 1 ||
		back.Records[0].Workloads[0].Images[0] != "web:1.0" {
		t.Errorf("the rollback's deployment: %+v", back)
	}
	if out := c.mustCLI("run", "get", back.RunID); !strings.Contains(out, "rollback by user admin") || !strings.Contains(out, "Rolls back:") {
		t.Errorf("run get of the rollback:\n%s", out)
	}
	out = c.mustCLI("deployments", "current", "--service", "web", "-o", "wide")
	if !regexpLine(out, `^web\s+prod\s+1\.0\s+\S+ ago\s+2\.0\s+`+back.ID) {
		t.Errorf("deployments current after the rollback: want 1.0, previous 2.0:\n%s", out)
	}
}

// regexpLine reports whether a line of out matches the expression.
func regexpLine(out, expr string) bool {
	re := regexp.MustCompile(expr)
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// TestUIDeploymentsCurrentInBrowser: in Chromium, the Deployments page
// shows what runs where (the version now and the one before, above the
// list), a rolled-back deploy as rolled back, and a deployment's page
// what it deployed and who triggered it.
func TestUIDeploymentsCurrentInBrowser(t *testing.T) {
	bin := chromiumOrSkip(t)
	shots := screenshotDir(t)
	c := startCluster(t)
	tok := c.token("ui-dr")
	c.delegate("deployer", "ui-dr-deployer", c.seed004Env(tok, "deployer", "deployer")...)
	c.applyPipeline(recordsPipeline)
	c.mustCLI("pipeline", "run", "web-deploy", "--input", "version=1.0")
	c.mustCLI("pipeline", "run", "web-deploy", "--input", "version=2.0")
	if r := c.cli("pipeline", "run", "web-deploy", "--input", "version=3.0", "--input", "fail=yes"); r.code != 1 {
		t.Fatalf("the failing deploy: exit %d\n%s", r.code, r.stderr)
	}
	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in", chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))
	run(t, ctx, "the deployments", chromedp.Navigate(c.url+"/deployments"),
		visible(`#current tr[data-current="web/prod"]`),
		visible(`tr[data-deployment] .s-rolled_back`))
	now := value(t, ctx, "read the version now", chromedp.Text(chromedp.CSS(`#current tr[data-current="web/prod"] .now`)))
	before := value(t, ctx, "read the version before", chromedp.Text(chromedp.CSS(`#current tr[data-current="web/prod"] .before`)))
	if now != "2.0" || before != "1.0" {
		t.Errorf("what runs where: now %q, before %q; want 2.0 and 1.0", now, before)
	}
	if st := value(t, ctx, "read the newest status", chromedp.Text(chromedp.CSS(`tr[data-deployment] .state`))); st != "rolled back" {
		t.Errorf("the newest deployment's status %q, want rolled back", st)
	}
	screenshot(t, ctx, shots, "deployments-current")
	run(t, ctx, "the current deployment's page", chromedp.Click(chromedp.CSS(`#current tr[data-current="web/prod"] .now a`)),
		visible(`#deployment-status.s-succeeded`), visible(`tr[data-workload="Deployment/web"]`))
	rec := value(t, ctx, "read the record", chromedp.Text(chromedp.CSS(`#main`)))
	for _, want := range []string{"web:2.0", "shop", "user:admin", "rolling"} {
		if !strings.Contains(rec, want) {
			t.Errorf("the deployment's page lacks %q:\n%s", want, rec)
		}
	}
	screenshot(t, ctx, shots, "deployment")
}

// kubeVersionPipeline deploys web:VERSION with the kubernetes step, rolled
// back when it never becomes Ready (the never-ready label, kwok).
const kubeVersionPipeline = `name: ship-web
inputs:
  namespace: {}
  version: {}
  broken: "false"
stages:
  - name: deploy
    environment: prod
    service: web
    steps:
      - name: web
        delegateSelectors: [k8s]
        kubernetes:
          namespace: ${{ inputs.namespace }}
          timeout: 8s
          rollback: auto
          manifests:
            - apiVersion: apps/v1
              kind: Deployment
              metadata: {name: web}
              spec:
                replicas: 2
                selector: {matchLabels: {app: web}}
                template:
                  metadata:
                    labels: {app: web, kwok.local/never-ready: "${{ inputs.broken }}"}
                  spec:
                    containers:
                      - {name: web, image: "web:${{ inputs.version }}"}
`

// TestDeploymentRollbackOnARealCluster: with the real kubernetes step on
// the control plane of scripts/k8s-ensure, a version that never becomes
// Ready is rolled back by the step and recorded rolled_back (not
// current: the cluster still runs the version before); legate
// deployments rollback then re-deploys the previous good version through
// the same pipeline, and the cluster's Deployment runs its image.
func TestDeploymentRollbackOnARealCluster(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "legate")
	c := startCluster(t)
	c.delegate("k8s", "k8s-rollback", append(c.seed004Env(c.token("k8s"), "k8s", "k8s"), "KUBECONFIG="+cr.Kubeconfig)...)
	c.applyPipeline(kubeVersionPipeline)
	image := func() string { return k.Image(t, ns, "deployments/web") }
	for _, v := range []string{"1", "2"} {
		c.mustCLI("pipeline", "run", "ship-web", "--input", "namespace="+ns, "--input", "version="+v)
	}
	if r := c.cli("pipeline", "run", "ship-web", "--input", "namespace="+ns, "--input", "version=3", "--input", "broken=true"); r.code != 1 {
		t.Fatalf("never-ready deploy: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if got := image(); got != "web:2" {
		t.Fatalf("after the step's rollback the cluster runs %s, want web:2", got)
	}
	var ds protocol.DeploymentList
	if err := json.Unmarshal([]byte(c.mustCLI("deployments", "list", "-o", "json")), &ds); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds.Deployments {
		got = append(got, d.Version+" "+d.Status)
	}
	if strings.Join(got, ", ") != "3 rolled_back, 2 succeeded, 1 succeeded" {
		t.Fatalf("deployments: %v", got)
	}
	if out := c.mustCLI("deployments", "current", "--service", "web"); !regexpLine(out, `^web\s+prod\s+2\s+\S+ ago\s+1\s*$`) {
		t.Errorf("deployments current: want 2 now, 1 before:\n%s", out)
	}

	r := c.cli("deployments", "rollback", "web", "prod")
	if r.code != 0 || !strings.Contains(r.stdout, "deployment/web: rolled out") {
		t.Fatalf("legate deployments rollback: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if got := image(); got != "web:1" {
		t.Errorf("after legate deployments rollback the cluster runs %s, want web:1", got)
	}
	ds = protocol.DeploymentList{}
	if err := json.Unmarshal([]byte(c.mustCLI("deployments", "list", "-o", "json")), &ds); err != nil {
		t.Fatal(err)
	}
	if d := ds.Deployments[0]; d.Version != "1" || d.Status != "succeeded" || d.RollbackOf != ds.Deployments[2].ID {
		t.Errorf("the rollback's deployment %+v, want 1 succeeded, a rollback of %s", d, ds.Deployments[2].ID)
	}
}
