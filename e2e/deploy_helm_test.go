package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/protocol"
)

// helmPipeline installs the chart web of the repository (%[1]s) as the
// release web, the image, chart version and never-ready value from the
// run's inputs; helm waits at most %[3]s.
const helmPipeline = `name: %[2]s
inputs:
  namespace: {}
  image: {}
  version: {}
  broken: "false"
stages:
  - name: deploy
    environment: prod
    service: web
    steps:
      - name: web
        delegateSelectors: [k8s]
        helm:
          release: web
          namespace: ${{ inputs.namespace }}
          repo: %[1]s
          chart: web
          version: ${{ inputs.version }}
          timeout: %[3]s
          rollback: auto
          values:
            image: "${{ inputs.image }}"
            neverReady: ${{ inputs.broken }}
        outputs: [deploy_status, deploy_record]
`

// TestHelmStepOnARealCluster: a pipeline's helm step, run by a real
// delegate process with the real helm binary (LEGATE_HELM) and a
// kubeconfig of a ServiceAccount limited to one namespace, installs a
// chart from a chart repository on loopback into the real control plane
// of scripts/k8s-ensure; an upgrade to a new chart version and image
// rolls out; an upgrade that never becomes Ready fails the run and is
// rolled back (the cluster's Deployment runs the previous image again),
// and the step's outputs say deploy_status=rolled_back with a deploy
// record of the release. Without a cluster it skips (under CI=true it
// fails).
func TestHelmStepOnARealCluster(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "legate")
	repo := k.ServeCharts(t, k8stest.WebChart("0.1.0", "1.0"), k8stest.WebChart("0.2.0", "2.0"))
	c := startCluster(t)
	c.delegate("k8s", "k8s-deployer", append(c.seed004Env(c.token("k8s"), "k8s", "k8s"),
		"KUBECONFIG="+cr.Kubeconfig, "LEGATE_HELM="+filepath.Join(k.Bin, "helm"))...)
	for name, wait := range map[string]string{"ship-helm": "2m", "ship-helm-short": "6s"} {
		file := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(file, []byte(fmt.Sprintf(helmPipeline, repo, name, wait)), 0o600); err != nil {
			t.Fatal(err)
		}
		c.mustCLI("pipeline", "apply", "-f", file)
	}
	image := func() string { return k.Image(t, ns, "deployments/web") }

	for _, v := range []struct{ image, version string }{{"web:1", "0.1.0"}, {"web:2", "0.2.0"}} {
		r := c.cli("pipeline", "run", "ship-helm", "--input", "namespace="+ns, "--input", "image="+v.image, "--input", "version="+v.version)
		if r.code != 0 || !strings.Contains(r.stdout, "helm: release web deployed") {
			t.Fatalf("deploy of %s: exit %d\nstdout: %s\nstderr: %s", v.image, r.code, r.stdout, r.stderr)
		}
		if got := image(); got != v.image {
			t.Fatalf("the cluster runs %s, want %s", got, v.image)
		}
	}

	r := c.cli("pipeline", "run", "ship-helm-short", "--input", "namespace="+ns, "--input", "image=web:3", "--input", "version=0.2.0", "--input", "broken=true")
	if r.code != 1 || !strings.Contains(r.stdout, "helm: rolled release web back to revision 2") {
		t.Fatalf("never-ready upgrade: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if got := image(); got != "web:2" {
		t.Fatalf("after the rollback the cluster runs %s, want web:2", got)
	}
	var runs protocol.RunList
	if err := json.Unmarshal([]byte(c.mustCLI("run", "list", "-o", "json")), &runs); err != nil || len(runs.Runs) != 3 {
		t.Fatalf("runs: %+v %v", runs, err)
	}
	var run protocol.Run
	if err := json.Unmarshal([]byte(c.mustCLI("run", "get", runs.Runs[0].ID, "-o", "json")), &run); err != nil {
		t.Fatal(err)
	}
	if run.Status != protocol.RunFailed || len(run.Steps) != 1 || run.Steps[0].Outputs[protocol.OutputDeployStatus] != protocol.DeployRolledBack ||
		!strings.HasPrefix(run.Steps[0].Error, "rolled back: release web to revision 2") {
		t.Fatalf("the failed run: %+v", run)
	}
	rec, err := protocol.ParseDeployRecord(run.Steps[0].Outputs[protocol.OutputDeployRecord])
	if err != nil || rec.Type != protocol.TaskHelm || rec.Release != "web" || rec.Namespace != ns || rec.Chart != "web" || rec.ChartVersion != "0.2.0" ||
		rec.AppVersion != "2.0" || rec.ReleaseRevision != 4 || rec.RolledBackTo != "2" || len(rec.Workloads) != 1 || rec.Workloads[0].Images[0] != "web:2" {
		t.Fatalf("deploy record %+v %v", rec, err)
	}
	history := k.Helm(t, "history", "web", "--namespace", ns)
	if !strings.Contains(history, "Rollback to 2") {
		t.Fatalf("helm history:\n%s", history)
	}
}
