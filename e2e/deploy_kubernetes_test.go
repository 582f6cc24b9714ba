package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/protocol"
)

// kubePipeline deploys the web Deployment with the image and the
// never-ready label from the run's inputs; kwok never makes a pod with
// kwok.local/never-ready=true Ready (a failing readiness probe).
const kubePipeline = `name: ship-k8s
inputs:
  namespace: {}
  image: {}
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
                      - {name: web, image: "${{ inputs.image }}"}
        outputs: [deploy_status]
`

// TestKubernetesStepOnARealCluster: a pipeline's kubernetes step, run by
// a real delegate process (its deploy in a child process) with a
// kubeconfig of a ServiceAccount limited to one namespace, deploys to the
// real control plane of scripts/k8s-ensure; a new image rolls out; a
// version that never becomes Ready fails the run, is rolled back (the
// cluster's Deployment runs the previous image again), and the step's
// output says deploy_status=rolled_back. Without a cluster it skips
// (under CI=true it fails).
func TestKubernetesStepOnARealCluster(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "legate")
	c := startCluster(t)
	c.delegate("k8s", "k8s-deployer", append(c.seed004Env(c.token("k8s"), "k8s", "k8s"), "KUBECONFIG="+cr.Kubeconfig)...)
	file := filepath.Join(t.TempDir(), "ship.yaml")
	if err := os.WriteFile(file, []byte(kubePipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("pipeline", "apply", "-f", file)
	image := func() string {
		var d struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Image string `json:"image"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/web", nil, &d)
		return d.Spec.Template.Spec.Containers[0].Image
	}

	for _, img := range []string{"web:1", "web:2"} {
		r := c.cli("pipeline", "run", "ship-k8s", "--input", "namespace="+ns, "--input", "image="+img)
		if r.code != 0 || !strings.Contains(r.stdout, "deployment/web: rolled out") {
			t.Fatalf("deploy of %s: exit %d\nstdout: %s\nstderr: %s", img, r.code, r.stdout, r.stderr)
		}
		if got := image(); got != img {
			t.Fatalf("the cluster runs %s, want %s", got, img)
		}
	}

	r := c.cli("pipeline", "run", "ship-k8s", "--input", "namespace="+ns, "--input", "image=web:3", "--input", "broken=true")
	if r.code != 1 || !strings.Contains(r.stdout, "deployment/web: rolled back to the template of revision 2") {
		t.Fatalf("never-ready deploy: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
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
		!strings.HasPrefix(run.Steps[0].Error, "rolled back: deployment/web") {
		t.Fatalf("the failed run: %+v", run)
	}
}
