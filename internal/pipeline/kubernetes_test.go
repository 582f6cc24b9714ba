package pipeline

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

const kubeSrc = `name: ship
inputs:
  image: {default: "web:1"}
  replicas: {default: "2"}
  env: {default: prod}
stages:
  - name: deploy
    steps:
      - name: web
        kubernetes:
          namespace: web-${{ inputs.env }}
          timeout: 2m
          rollback: auto
          manifests:
            - apiVersion: apps/v1
              kind: Deployment
              metadata: {name: web, labels: {app: web}}
              spec:
                replicas: ${{ inputs.replicas }}
                selector: {matchLabels: {app: web}}
                template:
                  metadata: {labels: {app: web}, annotations: {note: "image ${{ inputs.image }}", quoted: "${{ inputs.replicas }}"}}
                  spec:
                    containers:
                      - {name: web, image: "${{ inputs.image }}"}
            - |
              apiVersion: v1
              kind: ConfigMap
              metadata: {name: conf}
              data:
                image: ${{ inputs.image }}
              ---
              apiVersion: v1
              kind: Service
              metadata: {name: web}
        outputs: [deploy_status]
`

func TestKubernetesStepSpec(t *testing.T) {
	t.Parallel()
	p := mustParse(t, kubeSrc)
	ref := StepRef{"deploy", "web"}
	inputs, err := p.ResolveInputs(map[string]string{"replicas": "3"})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := p.StepSpec(ref, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.TaskSpec{Type: protocol.TaskKubernetes, TimeoutMS: (5 * 60 * 1000), Kubernetes: &protocol.KubernetesSpec{
		Namespace: "web-prod", Rollback: "auto", TimeoutMS: 120000,
		Manifests: []string{
			`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
    replicas: 3
    selector: {matchLabels: {app: web}}
    template:
        metadata: {labels: {app: web}, annotations: {note: "image web:1", quoted: "3"}}
        spec:
            containers:
                - {name: web, image: "web:1"}
`,
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf}\ndata:\n    image: web:1\n",
			"apiVersion: v1\nkind: Service\nmetadata: {name: web}\n",
		}}}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Fatalf("spec (-want +got):\n%s", diff)
	}
	if err := spec.CheckPayload(); err != nil {
		t.Fatalf("the manager refuses the step's task: %v", err)
	}
	// The pipeline's own documents are untouched by a render.
	again, err := p.StepSpec(ref, map[string]string{"image": "web:2", "replicas": "x", "env": "dev"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(again.Kubernetes.Manifests[0], "replicas: x\n") || !strings.Contains(again.Kubernetes.Manifests[0], `image: "web:2"`) {
		t.Fatalf("second render:\n%s", again.Kubernetes.Manifests[0])
	}
}

// TestKubernetesInjection: a value that would add keys or documents to
// YAML text (a newline, ": ", "---") stays one scalar value: it is put
// into the parsed document, never into its text.
func TestKubernetesInjection(t *testing.T) {
	t.Parallel()
	p := mustParse(t, kubeSrc)
	evil := "web:1\n    securityContext: {privileged: true}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: x}"
	spec, err := p.StepSpec(StepRef{"deploy", "web"}, map[string]string{"image": evil, "replicas": "1\nextra: 1", "env": "prod"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range spec.Kubernetes.Manifests {
		docs, err := textDocuments(m)
		if err != nil || len(docs) != 1 {
			t.Fatalf("manifest %d is %d documents (%v):\n%s", i, len(docs), err, m)
		}
		if strings.Contains(m, "\nsecurityContext") || strings.Contains(m, "\n    securityContext") || strings.Contains(m, "\nextra:") {
			t.Fatalf("manifest %d gained keys:\n%s", i, m)
		}
	}
	docs, _ := textDocuments(spec.Kubernetes.Manifests[0])
	var d struct {
		Spec struct {
			Replicas any `yaml:"replicas"`
			Template struct {
				Spec struct {
					Containers []map[string]any `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := docs[0].Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas != "1\nextra: 1" || len(d.Spec.Template.Spec.Containers[0]) != 2 || d.Spec.Template.Spec.Containers[0]["image"] != evil {
		t.Fatalf("values not kept as they were: %+v", d)
	}
	// A namespace from a value is checked as the task is: no way out of it.
	spec, err = p.StepSpec(StepRef{"deploy", "web"}, map[string]string{"env": "x\nkube-system", "image": "i", "replicas": "1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.CheckPayload(); err == nil || !strings.Contains(err.Error(), "kubernetes namespace") {
		t.Fatalf("namespace %q passes: %v", spec.Kubernetes.Namespace, err)
	}
}

func TestKubernetesParseErrors(t *testing.T) {
	t.Parallel()
	step := func(body string) string {
		return "name: p\ninputs: {x: {default: a}}\nstages:\n  - name: s\n    steps:\n      - name: k\n" + body
	}
	tests := []struct{ name, src, want string }{
		{"no namespace", step("        kubernetes: {manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), "a kubernetes step needs the namespace"},
		{"bad namespace", step("        kubernetes: {namespace: Web, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), `namespace "Web" is invalid`},
		{"no manifests", step("        kubernetes: {namespace: web}\n"), "needs manifests"},
		{"no name", step("        kubernetes: {namespace: web, manifests: [{apiVersion: v1, kind: ConfigMap}]}\n"), "needs metadata.name"},
		{"a list", step("        kubernetes: {namespace: web, manifests: [[1]]}\n"), "a Kubernetes object is a mapping"},
		{"bad text", step("        kubernetes: {namespace: web, manifests: ['a: [']}\n"), "the manifest text is not valid YAML"},
		{"expression in a key", step("        kubernetes: {namespace: web, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {'${{ inputs.x }}': v}}]}\n"), "an expression in a key"},
		{"secret", step("        kubernetes: {namespace: web, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {p: '${secrets.DB}'}}]}\n"), "stored secrets"},
		{"unknown input", step("        kubernetes: {namespace: web, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {p: '${{ inputs.y }}'}}]}\n"), `no input named "y"`},
		{"rollback", step("        kubernetes: {namespace: web, rollback: yes, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), `"yes": write auto`},
		{"env", step("        env: {A: b}\n        kubernetes: {namespace: web, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), "takes no env or secrets"},
		{"unknown strategy", step("        kubernetes: {namespace: web, strategy: recreate, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), `"recreate": write rolling (the workloads' own rolling update, the default), canary or blue-green`},
		{"canary without action", step("        kubernetes: {namespace: web, strategy: canary, canary: {percent: 10}, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), `kubernetes.action: a canary step needs an action: start`},
		{"canary start without share", step("        kubernetes: {namespace: web, strategy: canary, action: start, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), "needs canary: {percent: P} or {replicas: N}"},
		{"canary percent", step("        kubernetes: {namespace: web, strategy: canary, action: start, canary: {percent: 150}, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), "kubernetes.canary.percent: 150 is out of range: 1 to 100"},
		{"canary both", step("        kubernetes: {namespace: web, strategy: canary, action: start, canary: {percent: 5, replicas: 1}, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), "one of percent (1-100) or replicas"},
		{"action without strategy", step("        kubernetes: {namespace: web, action: promote, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), "a rolling deploy takes none: write strategy: canary or blue-green"},
		{"blue-green without service", step("        kubernetes: {namespace: web, strategy: blue-green, action: deploy, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), "needs blue_green: {service: NAME}"},
		{"blue-green action", step("        kubernetes: {namespace: web, strategy: blue-green, action: promote, blue_green: {service: web}, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), `blue-green action "promote" is invalid: use deploy`},
		{"blue_green unknown field", step("        kubernetes: {namespace: web, strategy: blue-green, action: deploy, blue_green: {svc: web}, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), "unknown field; known fields here: service"},
		{"two kinds", step("        shell: echo\n        kubernetes: {namespace: web, manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"), "one of shell, http, container, kubernetes, helm or verify"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.src))
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestKubernetesStrategySpec: a canary's and a blue-green's fields reach
// the task's payload.
func TestKubernetesStrategySpec(t *testing.T) {
	t.Parallel()
	src := `name: p
stages:
  - name: s
    steps:
      - name: start
        kubernetes:
          namespace: web
          strategy: canary
          action: start
          canary: {percent: 20}
          rollback: auto
          manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]
      - name: bg
        kubernetes:
          namespace: web
          strategy: blue-green
          action: swap-back
          blue_green: {service: web}
          manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]
`
	p, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	items := p.Stages[0].Items
	for i, want := range []protocol.KubernetesSpec{
		{Strategy: "canary", Action: "start", Canary: &protocol.KubeCanary{Percent: 20}, Rollback: "auto"},
		{Strategy: "blue-green", Action: "swap-back", BlueGreen: &protocol.KubeBlueGreen{Service: "web"}, Rollback: "none"},
	} {
		got, err := kubernetesSpec(items[i].Steps[0].Kubernetes)
		if err != nil {
			t.Fatal(err)
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got.Namespace, got.Manifests = "", nil
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Fatalf("step %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestDeploymentsDocExamples: the pipelines docs/deployments.md shows
// (its yaml blocks that start with inputs:) parse, and their kubernetes
// steps' payloads validate.
func TestDeploymentsDocExamples(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/deployments.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
		src, _, _ := strings.Cut(block, "```")
		if !strings.HasPrefix(src, "inputs:") {
			continue
		}
		n++
		p, err := Parse([]byte("name: doc\n" + src))
		if err != nil {
			t.Fatalf("example %d: %v\n%s", n, err, src)
		}
		for _, it := range p.Stages[0].Items {
			for _, st := range it.Steps {
				if st.Kubernetes == nil {
					continue
				}
				spec, err := kubernetesSpec(st.Kubernetes)
				if err == nil && st.Kubernetes.Workspace != "" {
					// The manager names the workspace's volume.
					spec.Workspace = &protocol.DeployWorkspace{Name: st.Kubernetes.Workspace, Key: "k"}
				}
				if err == nil {
					err = spec.Validate()
				}
				if err != nil {
					t.Fatalf("example %d, step %s: %v", n, st.Name, err)
				}
			}
		}
	}
	if n < 3 {
		t.Fatalf("found %d examples, want the kubernetes step's, the canary's and the blue-green's", n)
	}
}
