package protocol

import (
	"strings"
	"testing"
)

// TestDeployWorkspaceValidate: a kubernetes task's files and a helm
// task's chart_path come with the workspace the manager sets, are paths
// inside it, and say what to write when they are not.
func TestDeployWorkspaceValidate(t *testing.T) {
	t.Parallel()
	ws := func() *DeployWorkspace {
		return &DeployWorkspace{Name: "build", Key: "abc123", WrittenBy: []string{"render"}}
	}
	kube := func(mod func(*KubernetesSpec)) error {
		k := &KubernetesSpec{Namespace: "web", Files: []string{"k8s/deployment.yaml", "k8s"}, Workspace: ws()}
		mod(k)
		return k.Validate()
	}
	helm := func(mod func(*HelmSpec)) error {
		h := &HelmSpec{Release: "web", Namespace: "web", ChartPath: "charts/web", Workspace: ws()}
		mod(h)
		return h.Validate()
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"files alone", kube(func(*KubernetesSpec) {}), ""},
		{"files beside manifests", kube(func(k *KubernetesSpec) { k.Manifests = []string{"kind: ConfigMap"} }), ""},
		{"the workspace itself", kube(func(k *KubernetesSpec) { k.Files = []string{"."} }), ""},
		{"files without workspace", kube(func(k *KubernetesSpec) { k.Workspace = nil }), "only a pipeline step that names its workspace"},
		{"workspace without files", kube(func(k *KubernetesSpec) { k.Files = nil }), "a kubernetes workspace needs files"},
		{"absolute", kube(func(k *KubernetesSpec) { k.Files = []string{"/ws/a.yaml"} }), "relative to the workspace"},
		{"dot-dot", kube(func(k *KubernetesSpec) { k.Files = []string{"k8s/../../etc/passwd"} }), `"..`},
		{"unclean", kube(func(k *KubernetesSpec) { k.Files = []string{"k8s//a.yaml"} }), `write it as "k8s/a.yaml"`},
		{"empty path", kube(func(k *KubernetesSpec) { k.Files = []string{""} }), "give a path in the workspace"},
		{"control", kube(func(k *KubernetesSpec) { k.Files = []string{"a\nb"} }), "control"},
		{"too many", kube(func(k *KubernetesSpec) { k.Files = make([]string, MaxKubernetesManifests+1) }), "at most 100"},
		{"bad key", kube(func(k *KubernetesSpec) { k.Workspace.Key = "../x" }), "kubernetes workspace.key"},
		{"bad name", kube(func(k *KubernetesSpec) { k.Workspace.Name = "a/b" }), "kubernetes workspace.name"},
		{"chart path", helm(func(*HelmSpec) {}), ""},
		{"archive", helm(func(h *HelmSpec) { h.ChartPath = "dist/web-1.0.0.tgz" }), ""},
		{"chart path without workspace", helm(func(h *HelmSpec) { h.Workspace = nil }), "only a pipeline step that names its workspace"},
		{"workspace without chart path", helm(func(h *HelmSpec) { h.ChartPath = "" }), "needs chart_path"},
		{"chart path and chart", helm(func(h *HelmSpec) { h.Chart = "web" }), "leave out chart, repo and version"},
		{"chart path and version", helm(func(h *HelmSpec) { h.Version = "1.0.0" }), "leave out chart, repo and version"},
		{"chart path escapes", helm(func(h *HelmSpec) { h.ChartPath = "../web" }), `"..`},
		{"chart path option", helm(func(h *HelmSpec) { h.ChartPath = "/-x" }), "relative"},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("%s: %v", tc.name, tc.err)
		case tc.want != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error with %q", tc.name, tc.err, tc.want)
		}
	}
}

// TestTaskSpecSetsWorkspace: what only the manager sets is found in every
// task type that has one.
func TestTaskSpecSetsWorkspace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec TaskSpec
		want string
	}{
		{TaskSpec{Type: TaskShell}, ""},
		{TaskSpec{Type: TaskKubernetes, Kubernetes: &KubernetesSpec{Namespace: "web"}}, ""},
		{TaskSpec{Type: TaskKubernetes, Kubernetes: &KubernetesSpec{Workspace: &DeployWorkspace{Key: "x"}}}, "kubernetes.workspace"},
		{TaskSpec{Type: TaskHelm, Helm: &HelmSpec{Workspace: &DeployWorkspace{}}}, "helm.workspace"},
		{TaskSpec{Type: TaskContainer, Container: &ContainerSpec{Volumes: []Volume{{EmptyDir: &EmptyDirVolume{Workspace: &Workspace{}}}}}}, "container.volumes[0].empty_dir.workspace"},
	} {
		if got := tc.spec.SetsWorkspace(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.spec, got, tc.want)
		}
	}
}
