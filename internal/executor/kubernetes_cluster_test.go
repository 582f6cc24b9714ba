package executor

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestKubernetesTaskOnACluster runs kubernetes tasks as the delegate does
// (the deploy in a child process) against the real control plane of
// scripts/k8s-ensure, as a ServiceAccount limited to the test's namespace:
// a deploy succeeds; a version whose pods never become Ready is rolled
// back, and the task fails with the distinct deploy status rolled_back;
// the cluster's Deployment runs the first version again. Without a
// cluster it skips (under CI=true it fails).
func TestKubernetesTaskOnACluster(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "delegate")
	env := []string{"KUBECONFIG=" + cr.Kubeconfig}
	deployment := func(image, label string) string {
		return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: api}}\n"+
			"  template:\n    metadata: {labels: {app: api%s}}\n    spec: {containers: [{name: api, image: %q}]}\n", label, image)
	}
	spec := func(manifest string, timeoutMS int64) protocol.TaskSpec {
		return protocol.TaskSpec{Type: protocol.TaskKubernetes, Kubernetes: &protocol.KubernetesSpec{
			Namespace: ns, Manifests: []string{manifest}, TimeoutMS: timeoutMS, Rollback: protocol.RollbackAuto}}
	}

	var out buffer
	o := Run(t.Context(), spec(deployment("api:1", ""), 120000), Options{KubeEnv: env}, &out)
	rec := outputRecord(t, o)
	wantRec := protocol.DeployRecord{Type: protocol.TaskKubernetes, Strategy: "rolling", Cluster: k.API, Namespace: ns,
		Workloads: []protocol.DeployedWorkload{{Kind: "Deployment", Name: "api", Images: []string{"api:1"}, Revision: "1"}}}
	if diff := cmp.Diff(wantRec, rec); diff != "" {
		t.Fatalf("first deploy's record (-want +got):\n%s", diff)
	}
	want := Outcome{Status: protocol.StatusSucceeded, Outputs: map[string]string{protocol.OutputDeployStatus: protocol.DeploySucceeded}}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Fatalf("first deploy (-want +got):\n%s\n%s", diff, out.String())
	}

	var out2 buffer
	o = Run(t.Context(), spec(deployment("api:2", `, kwok.local/never-ready: "true"`), 6000), Options{KubeEnv: env}, &out2)
	t.Logf("output:\n%s", out2.String())
	if o.Status != protocol.StatusFailed || o.Outputs[protocol.OutputDeployStatus] != protocol.DeployRolledBack ||
		!strings.HasPrefix(o.Error, "rolled back: deployment/api: rollout not complete after 6s") || o.DelegateFault {
		t.Fatalf("never-ready version: %+v", o)
	}
	if !strings.Contains(out2.String(), "deployment/api: rolled back to the template of revision 1") {
		t.Fatal("the output does not report the rollback")
	}
	wantRec.RolledBackTo, wantRec.Workloads[0].Revision = "1", "3"
	if diff := cmp.Diff(wantRec, outputRecord(t, o)); diff != "" {
		t.Fatalf("the rollback's record (-want +got):\n%s", diff)
	}
	if d := deploymentOf(t, k, ns, "api"); d.image != "api:1" || d.available != 2 || d.updated != 2 {
		t.Fatalf("the cluster's Deployment after the rollback: %+v", d)
	}

	// A canary start, then its abort: the abort did what it was asked
	// (the task succeeds), and reports rolled_back.
	canary := func(action string) protocol.TaskSpec {
		s := spec(deployment("api:4", ""), 120000)
		s.Kubernetes.Strategy, s.Kubernetes.Action, s.Kubernetes.Canary = protocol.StrategyCanary, action, &protocol.KubeCanary{Replicas: 1}
		return s
	}
	var out3 buffer
	o = Run(t.Context(), canary(protocol.CanaryStart), Options{KubeEnv: env}, &out3)
	if rec := outputRecord(t, o); o.Status != protocol.StatusSucceeded || rec.Strategy != "canary: start" || len(rec.Workloads) != 1 ||
		rec.Workloads[0].Name != "api-canary" || rec.Workloads[0].Images[0] != "api:4" {
		t.Fatalf("canary start: %+v %+v\n%s", o, rec, out3.String())
	}
	o = Run(t.Context(), canary(protocol.CanaryAbort), Options{KubeEnv: env}, &out3)
	rec = outputRecord(t, o)
	if o.Status != protocol.StatusSucceeded || o.Outputs[protocol.OutputDeployStatus] != protocol.DeployRolledBack || rec.Strategy != "canary: abort" ||
		rec.RolledBackTo != "3" || len(rec.Workloads) != 1 || rec.Workloads[0].Name != "api" || rec.Workloads[0].Images[0] != "api:1" {
		t.Fatalf("canary abort: %+v %+v\n%s", o, rec, out3.String())
	}
	code, _, _ := k.Request(t.Context(), "", http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/api-canary", "", nil)
	if code != http.StatusNotFound {
		t.Fatalf("the canary after the abort: HTTP %d", code)
	}
}

// TestKubernetesTaskThroughItsCluster: a kubernetes task whose spec names
// a cluster (what a Kubernetes connector gives it) deploys there with
// that server, CA and token, and not with the delegate's credentials:
// the child's environment has none (no KUBECONFIG, not in a pod, a HOME
// without a kubeconfig). A wrong token fails the task, not as the
// delegate's fault, with a message that names the cluster; the token is
// not in the output.
func TestKubernetesTaskThroughItsCluster(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "deployer")
	env := []string{"HOME=" + t.TempDir()}
	spec := func(token string) protocol.TaskSpec {
		return protocol.TaskSpec{Type: protocol.TaskKubernetes, Kubernetes: &protocol.KubernetesSpec{
			Namespace: ns, Manifests: []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: through-connector}\ndata: {k: v}\n"},
			Cluster: &protocol.KubeCluster{Server: k.API, CAPEM: string(k.CAPEM), Token: token}}}
	}
	var out buffer
	o := Run(t.Context(), spec(cr.Token), Options{KubeEnv: env}, &out)
	if o.Status != protocol.StatusSucceeded {
		t.Fatalf("deploy through the cluster: %+v\n%s", o, out.String())
	}
	if !strings.Contains(out.String(), "at "+k.API+" (the task's cluster)") || strings.Contains(out.String(), cr.Token) {
		t.Errorf("the output does not say where it deployed, or holds the token:\n%s", out.String())
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	k.Do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/configmaps/through-connector", nil, &cm)
	if cm.Data["k"] != "v" {
		t.Fatalf("the cluster's ConfigMap: %+v", cm)
	}

	var out2 buffer
	o = Run(t.Context(), spec("not-a-valid-token"), Options{KubeEnv: env}, &out2)
	want := "the cluster " + k.API + " refused the task's token (401 Unauthorized)"
	if o.Status != protocol.StatusFailed || o.DelegateFault || !strings.Contains(o.Error, want) {
		t.Fatalf("a wrong token: %+v, want a failure (not the delegate's fault) saying %q\n%s", o, want, out2.String())
	}
}
