package e2e

import (
	"encoding/json"
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
	image := func() string { return k.Image(t, ns, "deployments/web") }

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

// canaryPipeline starts a canary of the web Deployment (half its
// replicas), promotes it, and aborts it when a step failed. YAML anchors
// are refused in manifests, so each step writes them out.
func canaryPipeline() string {
	manifests := `          manifests:
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
            - {apiVersion: v1, kind: Service, metadata: {name: web}, spec: {selector: {app: web}, ports: [{port: 80}]}}
        outputs: [deploy_status, deploy_record]
`
	step := func(name, when, action string) string {
		s := "      - name: " + name + "\n"
		if when != "" {
			s += "        when: " + when + "\n"
		}
		s += "        delegateSelectors: [k8s]\n        kubernetes:\n          namespace: ${{ inputs.namespace }}\n          timeout: 8s\n" +
			"          strategy: canary\n          action: " + action + "\n          canary: {percent: 50}\n"
		return s + manifests
	}
	return `name: canary-k8s
inputs:
  namespace: {}
  image: {}
  broken: "false"
stages:
  - name: deploy
    environment: prod
    service: web
    steps:
` + step("canary", "", "start") + step("promote", "", "promote") + step("abort", "failure", "abort")
}

// TestKubernetesCanaryOnARealCluster: a pipeline's canary start, promote
// and (when a step failed) abort steps, run through the manager by a real
// delegate process against the real control plane: a run promotes the new
// image to the stable Deployment and deletes the canary; a run whose
// canary never becomes Ready fails, its abort step deletes the canary and
// the stable Deployment still runs the image before; each step reports
// its deploy_record. Without a cluster it skips (under CI=true it fails).
func TestKubernetesCanaryOnARealCluster(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "legate")
	c := startCluster(t)
	c.delegate("k8s", "k8s-deployer", append(c.seed004Env(c.token("k8s"), "k8s", "k8s"), "KUBECONFIG="+cr.Kubeconfig)...)
	file := filepath.Join(t.TempDir(), "canary.yaml")
	if err := os.WriteFile(file, []byte(canaryPipeline()), 0o600); err != nil {
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
	record := func(s protocol.RunStep) protocol.DeployRecord {
		rec, err := protocol.ParseDeployRecord(s.Outputs[protocol.OutputDeployRecord])
		if err != nil {
			t.Fatalf("step %s: %v (%+v)", s.Step, err, s.Outputs)
		}
		return rec
	}

	for _, img := range []string{"web:1", "web:2"} {
		r := c.cli("pipeline", "run", "canary-k8s", "--input", "namespace="+ns, "--input", "image="+img)
		if r.code != 0 || !strings.Contains(r.stdout, "deployment/web-canary: rolled out") || !strings.Contains(r.stdout, "canary promoted") {
			t.Fatalf("canary of %s: exit %d\nstdout: %s\nstderr: %s", img, r.code, r.stdout, r.stderr)
		}
		if got, _ := deployment("web"); got != img {
			t.Fatalf("the stable Deployment runs %s, want %s", got, img)
		}
		if _, found := deployment("web-canary"); found {
			t.Fatalf("the canary is still there after the promote of %s", img)
		}
	}
	run := lastRun()
	if run.Status != protocol.RunSucceeded || len(run.Steps) != 3 || run.Steps[2].Status != protocol.StepSkipped {
		t.Fatalf("the promoted run: %+v", run)
	}
	start, promote := record(run.Steps[0]), record(run.Steps[1])
	if start.Strategy != "canary: start" || start.Namespace != ns || start.Cluster != k.API || len(start.Workloads) != 1 ||
		start.Workloads[0].Name != "web-canary" || start.Workloads[0].Images[0] != "web:2" {
		t.Fatalf("the start's record: %+v", start)
	}
	if promote.Strategy != "canary: promote" || len(promote.Workloads) != 1 || promote.Workloads[0].Name != "web" ||
		promote.Workloads[0].Images[0] != "web:2" || promote.Workloads[0].Revision != "2" {
		t.Fatalf("the promote's record: %+v", promote)
	}

	r := c.cli("pipeline", "run", "canary-k8s", "--input", "namespace="+ns, "--input", "image=web:3", "--input", "broken=true")
	if r.code != 1 || !strings.Contains(r.stdout, "deployment/web-canary: rollout not complete after 8s") || !strings.Contains(r.stdout, "canary aborted") {
		t.Fatalf("never-ready canary: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if _, found := deployment("web-canary"); found {
		t.Fatal("the canary is still there after the abort")
	}
	if got, _ := deployment("web"); got != "web:2" {
		t.Fatalf("after the abort the stable Deployment runs %s, want web:2", got)
	}
	run = lastRun()
	steps := map[string]protocol.RunStep{}
	for _, s := range run.Steps {
		steps[s.Step] = s
	}
	if run.Status != protocol.RunFailed || len(run.Steps) != 3 || steps["canary"].Outputs[protocol.OutputDeployStatus] != protocol.DeployFailed ||
		steps["promote"].Status != protocol.StepSkipped || steps["abort"].Status != protocol.StatusSucceeded ||
		steps["abort"].Outputs[protocol.OutputDeployStatus] != protocol.DeployRolledBack || record(steps["abort"]).RolledBackTo != "2" ||
		record(steps["canary"]).Workloads[0].Images[0] != "web:3" {
		t.Fatalf("the aborted run: %+v", run)
	}
}
