package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/promserver"
	"github.com/legate-dev/legate/internal/protocol"
)

// verifyPipeline starts a canary of the web Deployment, verifies the new
// version's error rate on the Prometheus at promURL, promotes it, and
// aborts the canary when a step failed.
func verifyPipeline(promURL string) string {
	manifests := `          manifests:
            - apiVersion: apps/v1
              kind: Deployment
              metadata: {name: web}
              spec:
                replicas: 2
                selector: {matchLabels: {app: web}}
                template:
                  metadata: {labels: {app: web}}
                  spec:
                    containers:
                      - {name: web, image: "web:${{ inputs.version }}"}
        outputs: [deploy_status, deploy_record]
`
	step := func(name, when, action string) string {
		s := "      - name: " + name + "\n"
		if when != "" {
			s += "        when: " + when + "\n"
		}
		return s + "        delegateSelectors: [k8s]\n        kubernetes:\n          namespace: ${{ inputs.namespace }}\n          timeout: 20s\n" +
			"          strategy: canary\n          action: " + action + "\n          canary: {percent: 50}\n" + manifests
	}
	verify := `      - name: verify
        delegateSelectors: [k8s]
        verify:
          provider: {type: prometheus, url: "` + promURL + `"}
          duration: 5s
          interval: 1s
          min_points: 3
          metrics:
            - name: error_rate
              query: max(app_error_rate{version="${{ inputs.version }}"})
              threshold: "< 0.01"
        outputs: [verify_record, deploy_status]
`
	return `name: verified
inputs:
  namespace: {}
  version: {}
stages:
  - name: deploy
    environment: prod
    service: web
    steps:
` + step("canary", "", "start") + verify + step("promote", "", "promote") + step("abort", "failure", "abort")
}

// TestVerifyStepRollsBackOnARealCluster: through the manager and a real
// delegate process, a canary deployed to the real control plane is
// verified on a real Prometheus that scrapes a test service (kwok runs no
// containers: the metrics are the test's): a version whose error rate
// holds its threshold is promoted; one whose error rate breaks it fails
// its verify step with the reason, the `when: failure` abort deletes the
// canary (checked in the cluster), the stable Deployment keeps the
// version before, and the deployment is recorded rolled_back. Without a
// cluster or Prometheus it skips (under CI=true it fails).
func TestVerifyStepRollsBackOnARealCluster(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	target := promserver.NewTarget(t)
	target.Set(`app_error_rate{version="1"}`, 0.001)
	target.Set(`app_error_rate{version="2"}`, 0.3)
	prom := promserver.Start(t, "app", target.Addr)
	prom.WaitFor(t, `app_error_rate{version="2"}`)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "legate")
	c := startCluster(t)
	c.delegate("k8s", "k8s-deployer", append(c.seed004Env(c.token("k8s"), "k8s", "k8s"), "KUBECONFIG="+cr.Kubeconfig)...)
	file := filepath.Join(t.TempDir(), "verified.yaml")
	if err := os.WriteFile(file, []byte(verifyPipeline(prom.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("pipeline", "apply", "-f", file)
	deployment := func(name string) (image string, found bool) {
		images, found := k.Images(t, ns, "deployments/"+name)
		if !found || len(images) == 0 {
			return "", false
		}
		return images[0], true
	}
	lastRun := func() protocol.Run {
		var runs protocol.RunList
		if err := json.Unmarshal([]byte(c.mustCLI("run", "list", "-o", "json")), &runs); err != nil || len(runs.Runs) == 0 {
			t.Fatalf("runs: %+v %v", runs, err)
		}
		var run protocol.Run
		if err := json.Unmarshal([]byte(c.mustCLI("run", "get", runs.Runs[0].ID, "-o", "json")), &run); err != nil {
			t.Fatal(err)
		}
		return run
	}
	steps := func(run protocol.Run) map[string]protocol.RunStep {
		m := map[string]protocol.RunStep{}
		for _, s := range run.Steps {
			m[s.Step] = s
		}
		return m
	}

	r := c.cli("pipeline", "run", "verified", "--input", "namespace="+ns, "--input", "version=1")
	if r.code != 0 || !strings.Contains(r.stdout, "error_rate: 0.001 (< 0.01) ok") || !strings.Contains(r.stdout, "verification passed") ||
		!strings.Contains(r.stdout, "canary promoted") {
		t.Fatalf("the good version: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if got, _ := deployment("web"); got != "web:1" {
		t.Fatalf("the stable Deployment runs %s, want web:1", got)
	}
	good := steps(lastRun())["verify"]
	rec, err := protocol.ParseVerifyRecord(good.Outputs[protocol.OutputVerifyRecord])
	if err != nil || rec.Verdict != protocol.VerifyPassed || len(rec.Metrics) != 1 || len(rec.Metrics[0].Points) < 3 ||
		good.Outputs[protocol.OutputDeployStatus] != "" {
		t.Fatalf("the good version's verify step: %v %+v", err, good)
	}

	r = c.cli("pipeline", "run", "verified", "--input", "namespace="+ns, "--input", "version=2")
	if r.code != 1 || !strings.Contains(r.stdout, "error_rate: 0.3 (< 0.01) FAILED") || !strings.Contains(r.stdout, "canary aborted") {
		t.Fatalf("the bad version: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if _, found := deployment("web-canary"); found {
		t.Fatal("the canary is still there after the abort")
	}
	if got, _ := deployment("web"); got != "web:1" {
		t.Fatalf("after the abort the stable Deployment runs %s, want web:1", got)
	}
	run := lastRun()
	s := steps(run)
	rec, err = protocol.ParseVerifyRecord(s["verify"].Outputs[protocol.OutputVerifyRecord])
	if run.Status != protocol.RunFailed || s["verify"].Status != protocol.StatusFailed ||
		!strings.HasPrefix(s["verify"].Error, "verification failed: error_rate: 0.3 at ") ||
		s["verify"].Outputs[protocol.OutputDeployStatus] != protocol.DeployFailed || err != nil || rec.Verdict != protocol.VerifyFailed ||
		s["promote"].Status != protocol.StepSkipped || s["abort"].Outputs[protocol.OutputDeployStatus] != protocol.DeployRolledBack {
		t.Fatalf("the failed run: %v %+v", err, run)
	}
	var ds protocol.DeploymentList
	if err := json.Unmarshal([]byte(c.mustCLI("deployments", "list", "-o", "json")), &ds); err != nil {
		t.Fatal(err)
	}
	// The bad version's deployment (the latest) is rolled back. (The good
	// one's status is the deploy-status rule's, which counts the skipped
	// `when: failure` abort as a deploy step that never ran.)
	if len(ds.Deployments) != 2 || ds.Deployments[0].Version != "2" || ds.Deployments[0].Status != protocol.DeploymentRolledBack {
		t.Fatalf("deployments: %+v", ds.Deployments)
	}
}
