package kube

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/k8stest"
)

// These tests deploy to the real control plane of scripts/k8s-ensure
// (internal/k8stest: a real API server, controller manager and scheduler;
// kwok for the nodes), with a ServiceAccount that may act in the test's
// namespace only, and check the cluster, not only the deploy's output.
// Without a cluster they skip (under CI=true they fail).

// webDeployment is a Deployment of 3 replicas running image; neverReady
// labels its pods so that kwok never makes them Ready (a failing readiness
// probe).
func webDeployment(image string, neverReady bool) string {
	extra := ""
	if neverReady {
		extra = `, kwok.local/never-ready: "true"`
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web%s}}
    spec:
      containers:
        - {name: web, image: %q}
`, extra, image)
}

const webService = `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config}
data: {greeting: hello}
`

// clusterDeploy is a client of the cluster as a ServiceAccount limited to
// a fresh namespace, and that namespace.
func clusterDeploy(t *testing.T) (*k8stest.Cluster, *Client, string) {
	t.Helper()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "deployer")
	cfg, err := FromKubeconfig(cr.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return k, c, ns
}

func run(t *testing.T, c *Client, d Deploy) (Outcome, string, error) {
	t.Helper()
	r, out, err := runResult(t, c, d)
	return r.Outcome, out, err
}

// runResult runs d and returns its whole result.
func runResult(t *testing.T, c *Client, d Deploy) (Result, string, error) {
	t.Helper()
	var out strings.Builder
	d.Poll = 200 * time.Millisecond
	r, err := Run(context.Background(), c, d, &out)
	t.Logf("deploy output:\n%s", out.String())
	return r, out.String(), err
}

type deployment struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
	Status struct {
		Replicas          int `json:"replicas"`
		UpdatedReplicas   int `json:"updatedReplicas"`
		AvailableReplicas int `json:"availableReplicas"`
	} `json:"status"`
}

func getDeployment(t *testing.T, k *k8stest.Cluster, ns string) deployment {
	t.Helper()
	var d deployment
	k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/web", nil, &d)
	return d
}

// TestClusterRollingDeploy: a Deployment, a Service and a ConfigMap are
// applied and the rollout completes; a new image rolls out again, as
// revision 2.
func TestClusterRollingDeploy(t *testing.T) {
	t.Parallel()
	k, c, ns := clusterDeploy(t)
	o, out, err := run(t, c, Deploy{Namespace: ns, Manifests: []string{webDeployment("web:1", false), webService}, Timeout: 2 * time.Minute})
	if o != Succeeded || err != nil {
		t.Fatalf("first deploy: %v %v", o, err)
	}
	for _, line := range []string{"deployment/web applied in namespace " + ns, "service/web applied", "configmap/web-config applied", "deployment/web: 3 of 3 replicas updated and available", "deployment/web: rolled out"} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q", line)
		}
	}
	d := getDeployment(t, k, ns)
	if d.Spec.Template.Spec.Containers[0].Image != "web:1" || d.Status.AvailableReplicas != 3 || d.Metadata.Annotations[RevisionAnnotation] != "1" {
		t.Fatalf("after the first deploy: %+v", d)
	}

	o, _, err = run(t, c, Deploy{Namespace: ns, Manifests: []string{webDeployment("web:2", false), webService}, Timeout: 2 * time.Minute})
	if o != Succeeded || err != nil {
		t.Fatalf("image change: %v %v", o, err)
	}
	d = getDeployment(t, k, ns)
	if d.Spec.Template.Spec.Containers[0].Image != "web:2" || d.Status.UpdatedReplicas != 3 || d.Status.AvailableReplicas != 3 || d.Status.Replicas != 3 ||
		d.Metadata.Annotations[RevisionAnnotation] != "2" {
		t.Fatalf("after the image change: %+v", d)
	}
}

// TestClusterRollback: a version whose pods never become Ready fails
// within the deploy's timeout, and rollback restores the revision from
// before: the cluster's Deployment runs the old image again, all replicas
// available.
func TestClusterRollback(t *testing.T) {
	t.Parallel()
	k, c, ns := clusterDeploy(t)
	if o, _, err := run(t, c, Deploy{Namespace: ns, Manifests: []string{webDeployment("web:1", false)}, Timeout: 2 * time.Minute}); o != Succeeded {
		t.Fatalf("first deploy: %v %v", o, err)
	}
	o, out, err := run(t, c, Deploy{Namespace: ns, Manifests: []string{webDeployment("web:2", true)}, Timeout: 8 * time.Second, Rollback: true})
	if o != RolledBack || err == nil || !strings.Contains(err.Error(), "rolled back: deployment/web: rollout not complete after 8s") {
		t.Fatalf("never-ready version: %v %v", o, err)
	}
	for _, line := range []string{"not ready (", "deployment/web: rolling back from revision 2 to the template of revision 1", "deployment/web: rolled back to the template of revision 1"} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q", line)
		}
	}
	d := getDeployment(t, k, ns)
	if d.Spec.Template.Spec.Containers[0].Image != "web:1" || d.Spec.Template.Metadata.Labels["kwok.local/never-ready"] != "" ||
		d.Status.AvailableReplicas != 3 || d.Status.UpdatedReplicas != 3 || d.Status.Replicas != 3 || d.Metadata.Annotations[RevisionAnnotation] != "3" {
		t.Fatalf("after the rollback: %+v", d)
	}

	// Without rollback the failed version stays, and the deploy fails.
	o, _, err = run(t, c, Deploy{Namespace: ns, Manifests: []string{webDeployment("web:3", true)}, Timeout: 3 * time.Second})
	if o != Failed || err == nil || !strings.Contains(err.Error(), "deployment/web: rollout not complete after 3s") {
		t.Fatalf("never-ready without rollback: %v %v", o, err)
	}
	if d := getDeployment(t, k, ns); d.Spec.Template.Spec.Containers[0].Image != "web:3" {
		t.Fatalf("without rollback the new version stays: %+v", d)
	}
}

// TestClusterOtherNamespaceRefused: a document that names another
// namespace is refused before anything is applied.
func TestClusterOtherNamespaceRefused(t *testing.T) {
	t.Parallel()
	k, c, ns := clusterDeploy(t)
	other := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sneaky, namespace: default}\n"
	o, _, err := run(t, c, Deploy{Namespace: ns, Manifests: []string{webService, other}, Timeout: time.Minute})
	if o != Failed || err == nil || !strings.Contains(err.Error(), `names the namespace "default", but this step deploys to "`+ns+`"`) {
		t.Fatalf("another namespace: %v %v", o, err)
	}
	code, _, _ := k.Request(context.Background(), "", http.MethodGet, "/api/v1/namespaces/"+ns+"/configmaps/web-config", "", nil)
	if code != http.StatusNotFound {
		t.Fatalf("the step's own ConfigMap was applied before the refusal: HTTP %d", code)
	}
	// The ServiceAccount could not have done it anyway: RBAC refuses.
	cm := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"sneaky","namespace":"default"}}`)
	if err := c.Apply(context.Background(), "/api/v1/namespaces/default/configmaps/sneaky", cm, nil); err == nil || !strings.Contains(err.Error(), "403 Forbidden") {
		t.Fatalf("RBAC: %v", err)
	}
}

// TestClusterDocumentedRole: the Role that docs/deployments.md gives is
// enough for a deploy of a Deployment, a Service and a ConfigMap and for
// a rollback, and nothing more is needed.
func TestClusterDocumentedRole(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	rule := func(group string, resources []string, verbs ...string) map[string]any {
		return map[string]any{"apiGroups": []string{group}, "resources": resources, "verbs": verbs}
	}
	cr := k.ServiceAccountWithRole(t, ns, "legate-deployer", []map[string]any{
		rule("apps", []string{"deployments"}, "get", "create", "patch", "delete"),
		rule("apps", []string{"statefulsets", "daemonsets"}, "get", "create", "patch"),
		rule("apps", []string{"replicasets", "controllerrevisions"}, "list"),
		rule("", []string{"services", "configmaps"}, "get", "create", "patch"),
		rule("", []string{"pods"}, "list", "delete"),
		rule("", []string{"events"}, "list"),
	})
	c, err := NewClient(Config{Server: k.API, Source: "test", CA: k.CAPEM, Token: cr.Token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if o, out, err := run(t, c, Deploy{Namespace: ns, Manifests: []string{webDeployment("web:1", false), webService}, Timeout: 2 * time.Minute}); o != Succeeded || strings.Contains(out, "cannot") {
		t.Fatalf("deploy with the documented Role: %v %v", o, err)
	}
	o, out, err := run(t, c, Deploy{Namespace: ns, Manifests: []string{webDeployment("web:2", true)}, Timeout: 5 * time.Second, Rollback: true})
	if o != RolledBack || strings.Contains(out, "cannot") {
		t.Fatalf("rollback with the documented Role: %v %v", o, err)
	}
	// The strategies and a StatefulSet's rollback need no more either.
	canary := Deploy{Namespace: ns, Manifests: []string{webDeployment("web:3", false), webService}, Timeout: 2 * time.Minute, Strategy: StrategyCanary, CanaryReplicas: 1}
	bg := Deploy{Namespace: ns, Manifests: []string{webDeployment("web:3", false), webService}, Timeout: 2 * time.Minute, Strategy: StrategyBlueGreen, Service: "web"}
	for _, d := range []Deploy{
		withAction(canary, CanaryStart), withAction(canary, CanaryAbort), withAction(canary, CanaryStart), withAction(canary, CanaryPromote),
		withAction(bg, BlueGreenDeploy), withAction(bg, BlueGreenDeploy), withAction(bg, BlueGreenSwapBack),
		{Namespace: ns, Manifests: []string{dbStatefulSet("db:1", false)}, Timeout: 2 * time.Minute},
	} {
		if o, out, err := run(t, c, d); o == Failed || strings.Contains(out, "cannot") {
			t.Fatalf("%s %s with the documented Role: %v %v", d.Strategy, d.Action, o, err)
		}
	}
	if o, out, err := run(t, c, Deploy{Namespace: ns, Manifests: []string{dbStatefulSet("db:2", true)}, Timeout: 5 * time.Second, Rollback: true}); o != RolledBack || strings.Contains(out, "cannot") {
		t.Fatalf("a StatefulSet's rollback with the documented Role: %v %v", o, err)
	}
}

func withAction(d Deploy, action string) Deploy {
	d.Action = action
	return d
}
