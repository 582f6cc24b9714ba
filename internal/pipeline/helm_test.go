package pipeline

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

const helmSrc = `name: ship
inputs:
  tag: {default: "1.0"}
  replicas: {default: "2"}
  chart: {default: "0.1.0"}
  env: {default: prod}
stages:
  - name: deploy
    steps:
      - name: web
        helm:
          release: web-${{ inputs.env }}
          namespace: web
          repo: https://charts.example.com
          chart: web
          version: ${{ inputs.chart }}
          timeout: 2m
          rollback: auto
          values:
            replicas: ${{ inputs.replicas }}
            image: {repository: registry.example.com/web, tag: "${{ inputs.tag }}"}
            hosts: [a.example.com, "${{ inputs.env }}.example.com"]
            debug: false
        outputs: [deploy_status, deploy_record]
`

func TestHelmStepSpec(t *testing.T) {
	t.Parallel()
	p := mustParse(t, helmSrc)
	ref := StepRef{"deploy", "web"}
	inputs, err := p.ResolveInputs(map[string]string{"replicas": "3"})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := p.StepSpec(ref, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.TaskSpec{Type: protocol.TaskHelm, TimeoutMS: 5 * 60 * 1000, Helm: &protocol.HelmSpec{
		Release: "web-prod", Namespace: "web", Repo: "https://charts.example.com", Chart: "web", Version: "0.1.0",
		Rollback: "auto", TimeoutMS: 120000,
		Values: json.RawMessage(`{"debug":false,"hosts":["a.example.com","prod.example.com"],"image":{"repository":"registry.example.com/web","tag":"1.0"},"replicas":3}`)}}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Fatalf("spec (-want +got):\n%s", diff)
	}
	if err := spec.CheckPayload(); err != nil {
		t.Fatalf("the manager refuses the step's task: %v", err)
	}
	// The pipeline's own values are untouched by a render.
	again, err := p.StepSpec(ref, map[string]string{"tag": "2.0", "replicas": "x", "chart": "0.2.0", "env": "dev"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(again.Helm.Values); !strings.Contains(got, `"replicas":"x"`) || !strings.Contains(got, `"tag":"2.0"`) || again.Helm.Version != "0.2.0" {
		t.Fatalf("second render: %s %s", got, again.Helm.Version)
	}
}

// TestHelmInjection: a value that would add keys to YAML text stays one
// value of the mapping; a version or release from a value that would read
// as an option of helm's is refused as the task is checked.
func TestHelmInjection(t *testing.T) {
	t.Parallel()
	p := mustParse(t, helmSrc)
	evil := "1.0\nsecurityContext: {privileged: true}"
	spec, err := p.StepSpec(StepRef{"deploy", "web"}, map[string]string{"tag": evil, "replicas": "1\nextra: 1", "chart": "0.1.0", "env": "prod"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(spec.Helm.Values, &v); err != nil {
		t.Fatal(err)
	}
	if len(v) != 4 || v["replicas"] != "1\nextra: 1" || v["image"].(map[string]any)["tag"] != evil {
		t.Fatalf("values gained keys or lost theirs: %v", v)
	}
	for _, in := range []map[string]string{
		{"chart": "--post-renderer=/bin/sh", "env": "prod", "tag": "1", "replicas": "1"},
		{"chart": "0.1.0", "env": "x --kubeconfig=/etc/x", "tag": "1", "replicas": "1"},
	} {
		spec, err := p.StepSpec(StepRef{"deploy", "web"}, in, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := spec.CheckPayload(); err == nil {
			t.Fatalf("inputs %v pass: %+v", in, spec.Helm)
		}
	}
}

func TestHelmParseErrors(t *testing.T) {
	t.Parallel()
	step := func(body string) string {
		return "name: p\ninputs: {x: {default: a}}\nstages:\n  - name: s\n    steps:\n      - name: k\n" + body
	}
	tests := []struct{ name, src, want string }{
		{"no release", step("        helm: {namespace: web, repo: 'https://c', chart: web}\n"), "a helm step needs the release's name (release: web)"},
		{"bad release", step("        helm: {release: Web, namespace: web, repo: 'https://c', chart: web}\n"), `helm release "Web" is invalid`},
		{"no namespace", step("        helm: {release: web, repo: 'https://c', chart: web}\n"), "a helm step needs the namespace of its release"},
		{"bad namespace", step("        helm: {release: web, namespace: Web, repo: 'https://c', chart: web}\n"), `namespace "Web" is invalid`},
		{"no chart", step("        helm: {release: web, namespace: web}\n"), "a helm step needs a chart: a name with repo:"},
		{"local chart", step("        helm: {release: web, namespace: web, chart: ./web}\n"), "give repo with the chart's name, an oci:// reference"},
		{"chart expression", step("        helm: {release: web, namespace: web, chart: 'oci://r/${{ inputs.x }}'}\n"), "repo and chart take no expressions"},
		{"archive version", step("        helm: {release: web, namespace: web, chart: 'https://c/web-1.tgz', version: '1'}\n"), "version does not apply to a chart archive's URL"},
		{"values a list", step("        helm: {release: web, namespace: web, repo: 'https://c', chart: web, values: [1]}\n"), "expected a mapping of the chart's values"},
		{"expression in a key", step("        helm: {release: web, namespace: web, repo: 'https://c', chart: web, values: {'${{ inputs.x }}': v}}\n"), "an expression in a key"},
		{"number key", step("        helm: {release: web, namespace: web, repo: 'https://c', chart: web, values: {1: v}}\n"), "a key of values is text"},
		{"secret", step("        helm: {release: web, namespace: web, repo: 'https://c', chart: web, values: {p: '${secrets.DB}'}}\n"), "stored secrets (${secrets.NAME}) are not resolved in helm values"},
		{"unknown input", step("        helm: {release: web, namespace: web, repo: 'https://c', chart: web, values: {p: '${{ inputs.y }}'}}\n"), `no input named "y"`},
		{"rollback", step("        helm: {release: web, namespace: web, repo: 'https://c', chart: web, rollback: yes}\n"), `"yes": write auto`},
		{"env", step("        env: {A: b}\n        helm: {release: web, namespace: web, repo: 'https://c', chart: web}\n"), "a helm step takes no env or secrets"},
		{"two kinds", step("        shell: echo\n        helm: {release: web, namespace: web, repo: 'https://c', chart: web}\n"), "one of shell, http, container, kubernetes, helm or verify"},
		{"unknown field", step("        helm: {release: web, namespace: web, repo: 'https://c', chart: web, set: {a: b}}\n"), "unknown field; known fields here: chart, chart_path, namespace, release, repo, rollback, timeout, values, version, workspace"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.src))
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestHelmDocExample: the example of docs/deployments.md's helm section
// parses and renders to a task the manager accepts.
func TestHelmDocExample(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/deployments.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n## The helm step\n")
	_, block, _ := strings.Cut(section, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	p := mustParse(t, "name: doc\n"+block)
	inputs, err := p.ResolveInputs(map[string]string{"tag": "1.0"})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := p.StepSpec(StepRef{"deploy", "web"}, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.CheckPayload(); err != nil || spec.Helm.Version != "1.4.2" || !strings.Contains(string(spec.Helm.Values), `"tag":"1.0"`) {
		t.Fatalf("the documented step: %v %+v", err, spec.Helm)
	}
}
