package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// wsDeploySrc: a container step renders manifests and packages a chart
// into the empty_dir build; a kubernetes step applies files of it beside
// an inline manifest, and a helm step installs the chart from it.
const wsDeploySrc = `name: ship
inputs:
  tag: {default: "1.0"}
stages:
  - name: deploy
    steps:
      - name: render
        container:
          image: localhost/debian-min:bookworm
          script: render
          volumes: [{name: build, mount_path: /ws, empty_dir: {}}]
      - name: manifests
        kubernetes:
          namespace: web
          workspace: build
          files: [k8s/deployment.yaml, k8s/extra]
          manifests:
            - {apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {tag: "${{ inputs.tag }}"}}
      - name: chart
        helm:
          release: web
          namespace: web
          workspace: build
          chart_path: charts/web
          values: {image: "web:${{ inputs.tag }}"}
`

// TestDeployStepsFromAWorkspace: the deploy steps' tasks carry the
// workspace (its name, the steps before that use it, whether this step
// is the last), with the key left for the manager; the container step
// that writes it keeps it for them.
func TestDeployStepsFromAWorkspace(t *testing.T) {
	t.Parallel()
	p := mustParse(t, wsDeploySrc)
	inputs, err := p.ResolveInputs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if shared, steps := p.Workspace("deploy", "build"); !shared || !cmp.Equal(steps, []string{"render", "manifests", "chart"}) {
		t.Fatalf("workspace users: %v %v", shared, steps)
	}
	render, err := p.StepSpec(StepRef{"deploy", "render"}, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ws := render.Container.Volumes[0].EmptyDir.Workspace; ws == nil || ws.Remove {
		t.Fatalf("the writer's workspace: %+v (it must stay for the deploy steps)", ws)
	}
	k, err := p.StepSpec(StepRef{"deploy", "manifests"}, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&protocol.DeployWorkspace{Name: "build", WrittenBy: []string{"render"}}, k.Kubernetes.Workspace); diff != "" {
		t.Fatalf("kubernetes workspace (-want +got):\n%s", diff)
	}
	if !cmp.Equal(k.Kubernetes.Files, []string{"k8s/deployment.yaml", "k8s/extra"}) || len(k.Kubernetes.Manifests) != 1 ||
		!strings.Contains(k.Kubernetes.Manifests[0], `tag: "1.0"`) {
		t.Fatalf("kubernetes spec: files %q, manifests %q", k.Kubernetes.Files, k.Kubernetes.Manifests)
	}
	h, err := p.StepSpec(StepRef{"deploy", "chart"}, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&protocol.DeployWorkspace{Name: "build", Remove: true, WrittenBy: []string{"render", "manifests"}}, h.Helm.Workspace); diff != "" {
		t.Fatalf("helm workspace (-want +got):\n%s", diff)
	}
	if h.Helm.ChartPath != "charts/web" || h.Helm.Chart != "" {
		t.Fatalf("helm spec: %+v", h.Helm)
	}
	// With the key the manager sets, the tasks pass the task checks.
	k.Kubernetes.Workspace.Key, h.Helm.Workspace.Key = "abc", "abc"
	if err := k.CheckPayload(); err != nil {
		t.Fatal(err)
	}
	if err := h.CheckPayload(); err != nil {
		t.Fatal(err)
	}
}

// TestDeployWorkspaceParseErrors: each mistake in a deploy step's
// workspace says what to write.
func TestDeployWorkspaceParseErrors(t *testing.T) {
	t.Parallel()
	writer := "      - name: render\n        container: {image: x, script: y, volumes: [{name: build, mount_path: /ws, empty_dir: {}}]}\n"
	src := func(steps string) string {
		return "name: p\ninputs: {f: {default: a}}\nstages:\n  - name: deploy\n    steps:\n" + steps
	}
	kube := func(fields string) string {
		return "      - name: web\n        kubernetes: {namespace: web, " + fields + "}\n"
	}
	helm := func(fields string) string {
		return "      - name: web\n        helm: {release: web, namespace: web, " + fields + "}\n"
	}
	tests := []struct{ name, src, want string }{
		{"files without workspace", src(writer + kube("files: [a.yaml]")), "kubernetes.workspace: kubernetes files are paths in a workspace: name it"},
		{"workspace without files", src(writer + kube("workspace: build")), "kubernetes.files: a kubernetes step with a workspace needs files"},
		{"neither", src(writer + kube("")), "needs manifests (a list of Kubernetes objects), or files from a workspace"},
		{"empty files", src(writer + kube("workspace: build, files: []")), "expected a list of paths in the workspace"},
		{"absolute file", src(writer + kube("workspace: build, files: [/ws/a.yaml]")), "relative to the workspace"},
		{"escaping file", src(writer + kube("workspace: build, files: [../a.yaml]")), `must not contain a ".." element`},
		{"expression in a file", src(writer + kube("workspace: build, files: ['${{ inputs.f }}.yaml']")), "paths in a workspace take no expressions"},
		{"no such empty_dir", src(writer + kube("workspace: cache, files: [a.yaml]")), `kubernetes.workspace: "cache" is not an empty_dir of an earlier container step of stage deploy`},
		{"writer after", src(kube("workspace: build, files: [a.yaml]") + strings.Replace(writer, "render", "later", 1)), `"build" is not an empty_dir of an earlier container step`},
		{"bad name", src(writer + kube("workspace: 'a/b', files: [a.yaml]")), `"a/b": the name of an empty_dir volume`},
		{"in a parallel group", src(writer + "      - parallel:\n    " + strings.ReplaceAll(kube("workspace: build, files: [a.yaml]"), "\n  ", "\n      ")), "a step of a parallel group cannot read a workspace"},
		{"chart path without workspace", src(writer + helm("chart_path: charts/web")), "helm.workspace: helm chart_path is a path in a workspace: name it"},
		{"workspace without chart path", src(writer + helm("workspace: build")), "helm.chart_path: a helm step with a workspace needs chart_path"},
		{"chart path and chart", src(writer + helm("workspace: build, chart_path: charts/web, chart: web, repo: 'https://c.example.com'")), "leave out chart, repo and version"},
		{"chart path escapes", src(writer + helm("workspace: build, chart_path: ../web")), `must not contain a ".." element`},
		{"chart path expression", src(writer + helm("workspace: build, chart_path: 'charts/${{ inputs.f }}'")), "takes no expressions"},
		{"helm no such empty_dir", src(writer + helm("workspace: cache, chart_path: web")), `helm.workspace: "cache" is not an empty_dir`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.src))
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}
