package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/k8stest"
)

// These tests run against the real Kubernetes control plane of
// scripts/k8s-ensure (internal/k8stest): the API server validates, admits
// and authorizes for real, and its controllers and scheduler act for real,
// but kwok stands in for the nodes' kubelet. It marks pods Running and
// Ready without running anything: no image is pulled, no delegate process
// starts in a pod, so a delegate installed here never connects to the
// manager. That is the limit of what they prove: the objects, their
// rights and their life cycle, not the container.

const k8sImage = "registry.invalid/legate"

// k8sPublicURL is the manager's --public-url in these tests: the URL its
// install specs give delegates (never reached: no pod runs here).
const k8sPublicURL = "http://legate-manager.legate.test:7460"

// startSpecCluster starts a manager that knows what its install specs
// need, as docs/install.md says to start it: its public URL and the image
// published for delegates.
func startSpecCluster(t *testing.T) *cluster {
	t.Helper()
	return startCluster(t, "--public-url", k8sPublicURL, "--delegate-image", k8sImage+":v1.90.0")
}

// installKubernetesDelegate prints `legate manifest kubernetes` for a
// delegate named k8s in a fresh namespace of the cluster (RBAC limited to
// it, automatic upgrades; the manager's URL and image, as c was started
// by startSpecCluster), applies it with server-side apply and strict
// validation, and waits until its StatefulSet has rolled out. It returns
// the namespace and the StatefulSet's name.
func installKubernetesDelegate(t *testing.T, k *k8stest.Cluster, c *cluster, replicas string) (ns, sts string) {
	t.Helper()
	ns = k.Namespace(t)
	out := c.mustCLI("manifest", "kubernetes", "--token", c.token("k8s"), "--name", "k8s", "--namespace", ns,
		"--rbac", "namespace", "--replicas", replicas, "--upgrade", "auto")
	k.Kubectl(t, out, "apply", "--server-side", "--field-manager", "legate-e2e", "--validate=strict", "-f", "-")
	// NAME-CODE, CODE the account's first six letters: the one StatefulSet.
	sts = strings.TrimPrefix(strings.TrimSpace(k.Kubectl(t, "", "get", "statefulset", "-n", ns, "-o", "name")), "statefulset.apps/")
	if !strings.HasPrefix(sts, "k8s-") || strings.Contains(sts, "\n") {
		t.Fatalf("the StatefulSets of the manifest: %q", sts)
	}
	k.WaitRolledOut(t, 90*time.Second, ns, sts)
	return ns, sts
}

// TestManifestKubernetesOnARealCluster applies legate manifest
// kubernetes, as printed with the manager's public URL and delegate image,
// to the real API server: every object is accepted under strict
// validation, and the delegate's StatefulSet's pods are scheduled and
// become Ready (through kwok: the limit above). A loopback manager URL is
// refused, and printed only for a same-host trial.
func TestManifestKubernetesOnARealCluster(t *testing.T) {
	k := k8stest.Require(t)
	c := startSpecCluster(t)
	ns, sts := installKubernetesDelegate(t, k, c, "2")

	s := k.GetStatefulSet(t, ns, sts)
	if s.Status.ReadyReplicas != 2 || s.Image("delegate") != k8sImage+":v1.90.0" {
		t.Fatalf("StatefulSet %s: image %s, status %+v", sts, s.Image("delegate"), s.Status)
	}
	if got := k.Kubectl(t, "", "get", "statefulset", sts, "-n", ns, "-o",
		`jsonpath={.spec.template.spec.containers[0].env[?(@.name=="MANAGER_HOST_AND_PORT")].value}`); got != k8sPublicURL {
		t.Errorf("the StatefulSet's MANAGER_HOST_AND_PORT = %q, want the manager's public URL %s", got, k8sPublicURL)
	}
	loopback := []string{"manifest", "kubernetes", "--token", "t", "--manager-url", c.url}
	if r := c.cli(loopback...); r.code == 0 || !strings.Contains(r.stderr, "--public-url") || !strings.Contains(r.stderr, "--allow-loopback") {
		t.Errorf("a loopback manager URL: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.cli(append(loopback, "--allow-loopback")...); r.code != 0 || !strings.Contains(r.stdout, c.url) {
		t.Errorf("a loopback manager URL with --allow-loopback: exit %d\n%s", r.code, r.stderr)
	}
	pods := k.Pods(t, ns, "legate.dev/name=k8s")
	if len(pods) != 2 {
		t.Fatalf("%d pods of the delegate, want 2", len(pods))
	}
	for _, p := range pods {
		if !p.Ready() || p.Spec.NodeName == "" || p.Spec.Containers[0].Image != k8sImage+":v1.90.0" {
			t.Errorf("pod %s: ready %v on node %q, image %s", p.Metadata.Name, p.Ready(), p.Spec.NodeName, p.Spec.Containers[0].Image)
		}
	}
	// The rest of the install exists as printed: the token's Secret, the
	// ServiceAccounts, the namespace's RBAC, the upgrader's CronJob.
	got := k.Kubectl(t, "", "get", "-n", ns, "secret,serviceaccount,role,rolebinding,cronjob", "-o", "name")
	for _, want := range []string{
		"secret/" + sts + "-token", "serviceaccount/" + sts, "serviceaccount/" + sts + "-upgrader",
		"role.rbac.authorization.k8s.io/" + sts, "rolebinding.rbac.authorization.k8s.io/" + sts,
		"role.rbac.authorization.k8s.io/" + sts + "-upgrader", "cronjob.batch/" + sts + "-upgrader",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no %s in the namespace:\n%s", want, got)
		}
	}
	// The delegate's ServiceAccount (rbac namespace) may deploy in its
	// namespace and nowhere else, as the real API server decides.
	for _, cs := range []struct{ ns, want string }{{ns, "yes"}, {"default", "no"}} {
		out, _ := k.KubectlCommand("", "auth", "can-i", "create", "deployments.apps", "-n", cs.ns,
			"--as", "system:serviceaccount:"+ns+":"+sts).Output()
		if strings.TrimSpace(string(out)) != cs.want {
			t.Errorf("may the delegate's ServiceAccount create Deployments in %s: %q, want %s", cs.ns, out, cs.want)
		}
	}
}

// TestUpgraderPatchesARealStatefulSet runs legate upgrader against a real
// manager and the real API server, as the upgrader's own ServiceAccount
// from the manifest (it may get and patch that one StatefulSet): its
// patch is accepted, the StatefulSet's controller rolls the pods to the
// new image one by one until they are Ready again, and the patch leaves
// the rest of the container as it was. Its ServiceAccount is refused any
// other StatefulSet.
func TestUpgraderPatchesARealStatefulSet(t *testing.T) {
	k := k8stest.Require(t)
	c := startSpecCluster(t)
	ns, sts := installKubernetesDelegate(t, k, c, "2")
	before := k.Kubectl(t, "", "get", "statefulset", sts, "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[0]}")

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(k.Token(t, ns, sts+"-upgrader")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok := c.token("k8s-upgrader")
	run := func(statefulSet string) (int, string) {
		t.Helper()
		p := start(t, "upgrader", []string{"ACCOUNT_ID=" + c.account, "DELEGATE_TOKEN=" + tok, "MANAGER_HOST_AND_PORT=" + c.url,
			"DELEGATE_NAME=k8s", "DELEGATE_TYPE=KUBERNETES", "UPGRADER_NAMESPACE=" + ns, "UPGRADER_STATEFULSET=" + statefulSet,
			"UPGRADER_KUBERNETES_API=" + k.API, "UPGRADER_KUBERNETES_TOKEN_FILE=" + tokenFile,
			"UPGRADER_KUBERNETES_CA_FILE=" + k.CAFile}, "upgrader")
		return p.wait(60 * time.Second), p.out.String()
	}

	c.mustCLI("delegates", "upgrade", "pin", "k8s", "v1.90.1")
	if code, out := run(sts); code != 0 {
		t.Fatalf("upgrader: exit %d\n%s", code, out)
	}
	s := k.WaitRolledOut(t, 90*time.Second, ns, sts)
	if img := s.Image("delegate"); img != k8sImage+":v1.90.1" {
		t.Fatalf("after the upgrader's patch: image %s", img)
	}
	for _, p := range k.Pods(t, ns, "legate.dev/name=k8s") {
		if !p.Ready() || p.Spec.Containers[0].Image != k8sImage+":v1.90.1" {
			t.Errorf("pod %s after the rollout: ready %v, image %s", p.Metadata.Name, p.Ready(), p.Spec.Containers[0].Image)
		}
	}
	// A strategic merge patch: only the image changed.
	after := k.Kubectl(t, "", "get", "statefulset", sts, "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[0]}")
	if strings.ReplaceAll(before, "v1.90.0", "v1.90.1") != after {
		t.Errorf("the patch changed more than the image:\nbefore %s\nafter  %s", before, after)
	}
	// Up to date: nothing to patch, the StatefulSet stays at its generation.
	if code, out := run(sts); code != 0 || !strings.Contains(out, "it runs the version the manager wants") {
		t.Fatalf("upgrader on the wanted version: exit %d\n%s", code, out)
	}
	if g := k.GetStatefulSet(t, ns, sts).Metadata.Generation; g != s.Metadata.Generation {
		t.Errorf("an up-to-date StatefulSet was changed: generation %d, was %d", g, s.Metadata.Generation)
	}
	// Its Role names one StatefulSet: the real API server refuses it another.
	if code, out := run(sts + "-other"); code == 0 || !strings.Contains(out, "HTTP 403") {
		t.Fatalf("upgrader on another StatefulSet: exit %d\n%s", code, out)
	}
}

// TestHelmChartOnARealCluster installs the delegate's chart
// (deploy/helm/legate-delegate) with the values legate manifest helm
// prints (the manager's public URL and delegate image), with the
// cluster's helm: helm install --wait returns once the StatefulSet's pods
// are Ready (kwok), and helm uninstall removes it.
func TestHelmChartOnARealCluster(t *testing.T) {
	k := k8stest.Require(t)
	c := startSpecCluster(t)
	ns := k.Namespace(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	out := c.mustCLI("manifest", "helm", "--token", c.token("k8s"), "--name", "k8s", "--namespace", ns,
		"--rbac", "namespace", "--replicas", "2")
	if err := os.WriteFile(values, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(repoRoot, "deploy", "helm", "legate-delegate")
	k.Helm(t, "install", "k8s", chart, "--namespace", ns, "--values", values, "--wait", "--timeout", "90s")
	sts := strings.TrimPrefix(strings.TrimSpace(k.Kubectl(t, "", "get", "statefulset", "-n", ns, "-o", "name")), "statefulset.apps/")
	s := k.GetStatefulSet(t, ns, sts)
	if !s.RolledOut() || s.Status.ReadyReplicas != 2 || s.Image("delegate") != k8sImage+":v1.90.0" {
		t.Fatalf("after helm install --wait: StatefulSet %q, image %s, status %+v", sts, s.Image("delegate"), s.Status)
	}
	if got := k.Kubectl(t, "", "get", "statefulset", sts, "-n", ns, "-o",
		`jsonpath={.spec.template.spec.containers[0].env[?(@.name=="MANAGER_HOST_AND_PORT")].value}`); got != k8sPublicURL {
		t.Errorf("the chart's MANAGER_HOST_AND_PORT = %q, want the manager's public URL %s", got, k8sPublicURL)
	}
	if got := k.Helm(t, "list", "--namespace", ns, "--short"); strings.TrimSpace(got) != "k8s" {
		t.Errorf("helm list: %q", got)
	}
	k.Helm(t, "uninstall", "k8s", "--namespace", ns, "--wait", "--timeout", "90s")
	if got := k.Kubectl(t, "", "get", "statefulset,serviceaccount,role,rolebinding", "-n", ns, "-l", "legate.dev/name=k8s", "-o", "name"); got != "" {
		t.Errorf("left after helm uninstall:\n%s", got)
	}
}
