package executor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestHelmTaskOnACluster runs helm tasks as the delegate does (the real
// helm binary, a process per command) against the real control plane of
// scripts/k8s-ensure, as a ServiceAccount limited to the test's
// namespace, with charts from a chart repository served on loopback: an
// install; an upgrade to a new chart version and image, which the
// cluster then runs; an upgrade whose pods never become Ready, failing
// at its timeout and rolled back (the cluster runs the previous image
// again, and helm's history shows the rollback); a first install that
// fails, uninstalled. The deploy records say what was deployed. Without
// a cluster it skips (under CI=true it fails).
func TestHelmTaskOnACluster(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "delegate")
	repo := k.ServeCharts(t, k8stest.WebChart("0.1.0", "1.0"), k8stest.WebChart("0.2.0", "2.0"))
	opts := Options{KubeEnv: []string{"KUBECONFIG=" + cr.Kubeconfig}, Helm: filepath.Join(k.Bin, "helm")}
	spec := func(release, version, values string, timeoutMS int64) protocol.TaskSpec {
		return protocol.TaskSpec{Type: protocol.TaskHelm, Helm: &protocol.HelmSpec{Release: release, Namespace: ns, Repo: repo, Chart: "web",
			Version: version, Values: json.RawMessage(values), TimeoutMS: timeoutMS, Rollback: protocol.RollbackAuto}}
	}
	record := func(o Outcome) protocol.DeployRecord {
		t.Helper()
		r, err := protocol.ParseDeployRecord(o.Outputs[protocol.OutputDeployRecord])
		if err != nil {
			t.Fatalf("deploy record: %v (outputs %v)", err, o.Outputs)
		}
		return r
	}
	web := func(revision int, image, chartVersion, appVersion string) protocol.DeployRecord {
		return protocol.DeployRecord{Type: protocol.TaskHelm, Namespace: ns, Release: "web", Chart: "web", ChartVersion: chartVersion,
			AppVersion: appVersion, ReleaseRevision: revision,
			Workloads: []protocol.DeployedWorkload{{Kind: "Deployment", Name: "web", Images: []string{image}}}}
	}

	for i, step := range []struct{ version, image, app string }{{"0.1.0", "web:1", "1.0"}, {"0.2.0", "web:2", "2.0"}} {
		var out buffer
		o := Run(t.Context(), spec("web", step.version, fmt.Sprintf(`{"image": %q}`, step.image), 120000), opts, &out)
		if o.Status != protocol.StatusSucceeded || o.Outputs[protocol.OutputDeployStatus] != protocol.DeploySucceeded {
			t.Fatalf("deploy %d: %+v\n%s", i+1, o, out.String())
		}
		if diff := cmp.Diff(web(i+1, step.image, step.version, step.app), record(o)); diff != "" {
			t.Fatalf("deploy %d's record (-want +got):\n%s", i+1, diff)
		}
		if d := deploymentOf(t, k, ns, "web"); d.image != step.image || d.available != 2 || d.updated != 2 {
			t.Fatalf("after deploy %d the cluster's Deployment is %+v", i+1, d)
		}
	}

	var out buffer
	o := Run(t.Context(), spec("web", "0.2.0", `{"image": "web:3", "neverReady": true}`, 5000), opts, &out)
	t.Logf("output:\n%s", out.String())
	if o.Status != protocol.StatusFailed || o.Outputs[protocol.OutputDeployStatus] != protocol.DeployRolledBack || o.DelegateFault ||
		!strings.HasPrefix(o.Error, "rolled back: release web to revision 2: helm upgrade: UPGRADE FAILED:") {
		t.Fatalf("never-ready upgrade: %+v", o)
	}
	if !strings.Contains(out.String(), "helm: rolled release web back to revision 2") {
		t.Fatal("the output does not report the rollback")
	}
	want := web(4, "web:2", "0.2.0", "2.0")
	want.RolledBackTo = "2"
	if diff := cmp.Diff(want, record(o)); diff != "" {
		t.Fatalf("the rollback's record (-want +got):\n%s", diff)
	}
	if d := deploymentOf(t, k, ns, "web"); d.image != "web:2" || d.available != 2 || d.updated != 2 {
		t.Fatalf("after the rollback the cluster's Deployment is %+v", d)
	}
	var history []struct {
		Revision    int    `json:"revision"`
		Status      string `json:"status"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal([]byte(k.Helm(t, "history", "web", "--namespace", ns, "--output", "json")), &history); err != nil {
		t.Fatal(err)
	}
	if len(history) != 4 || history[2].Status != "failed" || history[3].Status != "deployed" || history[3].Description != "Rollback to 2" {
		t.Fatalf("helm history: %+v", history)
	}

	var out2 buffer
	o = Run(t.Context(), spec("first", "0.1.0", `{"neverReady": true}`, 3000), opts, &out2)
	t.Logf("output:\n%s", out2.String())
	if o.Status != protocol.StatusFailed || o.Outputs[protocol.OutputDeployStatus] != protocol.DeployRolledBack ||
		!strings.HasPrefix(o.Error, "rolled back: uninstalled release first, whose first install failed") {
		t.Fatalf("failed first install: %+v", o)
	}
	if !strings.Contains(out2.String(), "helm: the first install of release first failed: uninstalling it") {
		t.Fatal("the output does not report the uninstall")
	}
	if code := k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/first", nil, nil, http.StatusNotFound); code != http.StatusNotFound {
		t.Fatalf("the failed first install's Deployment is still there (HTTP %d)", code)
	}
}

// deployment is what a test checks of a Deployment in the cluster.
type deployment struct {
	image              string
	available, updated int
}

func deploymentOf(t *testing.T, k *k8stest.Cluster, ns, name string) deployment {
	t.Helper()
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
		Status struct {
			AvailableReplicas int `json:"availableReplicas"`
			UpdatedReplicas   int `json:"updatedReplicas"`
		} `json:"status"`
	}
	k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/"+name, nil, &d)
	return deployment{d.Spec.Template.Spec.Containers[0].Image, d.Status.AvailableReplicas, d.Status.UpdatedReplicas}
}

// TestHelmTaskOutsideItsNamespace: with a ServiceAccount limited to one
// namespace, a helm task into another fails, naming the refusal, as the
// task's failure (not the delegate's: another delegate with the same
// rights fares no better), and installs nothing there.
func TestHelmTaskOutsideItsNamespace(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns, other := k.Namespace(t), k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "delegate")
	repo := k.ServeCharts(t, k8stest.WebChart("0.1.0", "1.0"))
	spec := protocol.TaskSpec{Type: protocol.TaskHelm, Helm: &protocol.HelmSpec{Release: "web", Namespace: other, Repo: repo, Chart: "web",
		TimeoutMS: 60000, Rollback: protocol.RollbackAuto}}
	var out buffer
	o := Run(t.Context(), spec, Options{KubeEnv: []string{"KUBECONFIG=" + cr.Kubeconfig}, Helm: filepath.Join(k.Bin, "helm")}, &out)
	t.Logf("output:\n%s", out.String())
	if o.Status != protocol.StatusFailed || o.DelegateFault || o.Outputs[protocol.OutputDeployStatus] != protocol.DeployFailed ||
		!strings.Contains(o.Error, "forbidden") || !strings.Contains(o.Error, `"`+other+`"`) {
		t.Fatalf("%+v", o)
	}
	var secrets struct {
		Items []any `json:"items"`
	}
	k.Do(t, http.MethodGet, "/api/v1/namespaces/"+other+"/secrets?labelSelector=owner%3Dhelm", nil, &secrets)
	if code := k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+other+"/deployments/web", nil, nil, http.StatusNotFound); code != http.StatusNotFound || len(secrets.Items) != 0 {
		t.Fatalf("something was installed in %s: HTTP %d, %d release secrets", other, code, len(secrets.Items))
	}
}
