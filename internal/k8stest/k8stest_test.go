package k8stest

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNamespaceName(t *testing.T) {
	label := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, name := range []string{
		"TestDeploy", "TestDeploy/sub_test#01", "Test" + strings.Repeat("VeryLong", 20), "___", "9lives", "Ünïcode/ok",
	} {
		got := NamespaceName(name)
		if len(got) > 63 || !label.MatchString(got) {
			t.Errorf("NamespaceName(%q) = %q: not a DNS label", name, got)
		}
		if again := NamespaceName(name); again == got {
			t.Errorf("NamespaceName(%q) twice: %q both times", name, got)
		}
	}
	if got := NamespaceName("TestDeploy/sub_test"); !strings.HasPrefix(got, "testdeploy-sub-test-") {
		t.Errorf("NamespaceName(TestDeploy/sub_test) = %q", got)
	}
}

func TestFindWithoutACluster(t *testing.T) {
	home := t.TempDir()
	if c, why := find(home); c != nil || !strings.Contains(why, "cluster.env") {
		t.Fatalf("find in an empty home: %v, %q", c, why)
	}
	if err := os.MkdirAll(filepath.Join(home, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(home, "run", "cluster.env")
	if err := os.WriteFile(env, []byte("K8S_API=https://127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, why := find(home); c != nil || !strings.Contains(why, "has no K8S_BIN") {
		t.Fatalf("find with a partial cluster.env: %v, %q", c, why)
	}
	if err := os.WriteFile(env, []byte("just words\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, why := find(home); c != nil || !strings.Contains(why, "not NAME=VALUE") {
		t.Fatalf("find with a bad cluster.env: %v, %q", c, why)
	}
}

// TestNamespaceLimitedServiceAccount is what tests of deploy steps rely
// on: a ServiceAccount limited by RBAC to namespace A may work there and
// is refused by the real API server in namespace B and cluster-wide.
func TestNamespaceLimitedServiceAccount(t *testing.T) {
	c := Require(t)
	a, b := c.Namespace(t), c.Namespace(t)
	sa := c.NamespaceServiceAccount(t, a, "deployer")
	ctx := context.Background()
	cm := func(ns, name string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"` + ns + `"},"data":{"k":"v"}}`)
	}
	for _, step := range []struct {
		what         string
		method, path string
		body         []byte
		want         int
	}{
		{"create a ConfigMap in A", http.MethodPost, "/api/v1/namespaces/" + a + "/configmaps", cm(a, "x"), http.StatusCreated},
		{"read it", http.MethodGet, "/api/v1/namespaces/" + a + "/configmaps/x", nil, http.StatusOK},
		{"list Deployments in A", http.MethodGet, "/apis/apps/v1/namespaces/" + a + "/deployments", nil, http.StatusOK},
		{"create a ConfigMap in B", http.MethodPost, "/api/v1/namespaces/" + b + "/configmaps", cm(b, "x"), http.StatusForbidden},
		{"list ConfigMaps in B", http.MethodGet, "/api/v1/namespaces/" + b + "/configmaps", nil, http.StatusForbidden},
		{"list Deployments in B", http.MethodGet, "/apis/apps/v1/namespaces/" + b + "/deployments", nil, http.StatusForbidden},
		{"list ConfigMaps of every namespace", http.MethodGet, "/api/v1/configmaps", nil, http.StatusForbidden},
		{"list namespaces", http.MethodGet, "/api/v1/namespaces", nil, http.StatusForbidden},
		{"create a ClusterRole", http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/clusterroles",
			[]byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"` + a + `-escalate"},"rules":[]}`),
			http.StatusForbidden},
	} {
		code, body, err := c.Request(ctx, sa.Token, step.method, step.path, "", step.body)
		if err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if code != step.want {
			t.Errorf("%s as %s/%s: HTTP %d, want %d: %s", step.what, a, sa.Name, code, step.want, body)
		}
	}
	// Its kubeconfig works with kubectl, in A only.
	out, err := c.KubectlCommand(sa.Kubeconfig, "auth", "can-i", "create", "deployments.apps", "-n", a).Output()
	if err != nil || strings.TrimSpace(string(out)) != "yes" {
		t.Errorf("kubectl auth can-i create deployments in A: %q %v", out, err)
	}
	out, _ = c.KubectlCommand(sa.Kubeconfig, "auth", "can-i", "create", "deployments.apps", "-n", b).Output()
	if strings.TrimSpace(string(out)) != "no" {
		t.Errorf("kubectl auth can-i create deployments in B: %q", out)
	}
	if out, err := c.KubectlCommand(sa.Kubeconfig, "get", "configmaps", "-n", b).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "forbidden") {
		t.Errorf("kubectl get configmaps in B as the ServiceAccount: %v\n%s", err, out)
	}
	// A made-up token is nobody.
	if code, _, err := c.Request(ctx, "not-a-token", http.MethodGet, "/api/v1/namespaces/"+a+"/configmaps", "", nil); err != nil ||
		code != http.StatusUnauthorized {
		t.Errorf("a made-up token: HTTP %d, %v", code, err)
	}
}

// TestStatefulSetBecomesReady: kwok's node takes the pods the scheduler
// gives it and marks them Ready, so a StatefulSet rolls out; a pod
// labelled kwok.local/never-ready=true never becomes Ready.
func TestStatefulSetBecomesReady(t *testing.T) {
	c := Require(t)
	ns := c.Namespace(t)
	sts := func(name string, labels string) string {
		return `{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"` + name + `"},"spec":{"replicas":2,
"podManagementPolicy":"Parallel","selector":{"matchLabels":{"app":"` + name + `"}},
"template":{"metadata":{"labels":{"app":"` + name + `"` + labels + `}},"spec":{"containers":[{"name":"c","image":"registry.invalid/x:1"}]}}}}`
	}
	c.Kubectl(t, sts("ok", "")+"\n"+sts("stuck", `,"kwok.local/never-ready":"true"`), "apply", "-n", ns, "-f", "-")
	s := c.WaitRolledOut(t, 60*time.Second, ns, "ok")
	if s.Status.ReadyReplicas != 2 {
		t.Fatalf("ok: %+v", s.Status)
	}
	for _, p := range c.Pods(t, ns, "app=ok") {
		if !p.Ready() || p.Status.Phase != "Running" || p.Spec.NodeName == "" {
			t.Errorf("pod %s: phase %s, ready %v, node %q", p.Metadata.Name, p.Status.Phase, p.Ready(), p.Spec.NodeName)
		}
	}
	Eventually(t, 60*time.Second, "stuck's pods running", func() (bool, string) {
		pods := c.Pods(t, ns, "app=stuck")
		running := 0
		for _, p := range pods {
			if p.Status.Phase == "Running" {
				running++
			}
			if p.Ready() {
				t.Fatalf("pod %s labelled never-ready is Ready", p.Metadata.Name)
			}
		}
		return running == 2, strings.Repeat("running ", running)
	})
	if s := c.GetStatefulSet(t, ns, "stuck"); s.Status.ReadyReplicas != 0 || s.RolledOut() {
		t.Errorf("stuck: %+v", s.Status)
	}
}
