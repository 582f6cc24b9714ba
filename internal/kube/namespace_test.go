package kube

import (
	"testing"
)

// TestConfigNamespace: the credentials' own namespace is the
// ServiceAccount's namespace file in a pod, the current context's in a
// kubeconfig, and empty when neither says (where a delegate runs its
// tasks' pods).
func TestConfigNamespace(t *testing.T) {
	t.Parallel()
	sa := t.TempDir()
	writeFile(t, sa, "ca.crt", "CA")
	writeFile(t, sa, "token", "sa-token\n")
	pod := map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	if got, err := Load(env(pod), sa); err != nil || got.Namespace != "" {
		t.Fatalf("no namespace file: %q %v", got.Namespace, err)
	}
	writeFile(t, sa, "namespace", "team-a\n")
	if got, err := Load(env(pod), sa); err != nil || got.Namespace != "team-a" {
		t.Fatalf("in a pod: %q %v", got.Namespace, err)
	}
	kc := writeFile(t, t.TempDir(), "config", "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u, namespace: team-b}}, {name: d, context: {cluster: k, user: u, namespace: other}}]\nclusters: [{name: k, cluster: {server: 'https://kc'}}]\nusers: [{name: u, user: {token: t}}]\n")
	if got, err := FromKubeconfig(kc); err != nil || got.Namespace != "team-b" {
		t.Fatalf("kubeconfig: %q %v", got.Namespace, err)
	}
}
