package pipeline

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// FuzzParse: any input gives a pipeline or an *Error, never a panic; an
// accepted pipeline can plan a whole run and render every step.
func FuzzParse(f *testing.F) {
	if src, err := os.ReadFile("testdata/deploy-web.yaml"); err == nil {
		f.Add(string(src))
	}
	f.Add(planSrc)
	f.Add(kubeSrc)
	f.Add(helmSrc)
	f.Add(wsDeploySrc)
	f.Add(verifySrc)
	f.Add("name: p\nstages: [{name: s, steps: [{name: a, container: {image: i, volumes: [{name: w, mount_path: /w, empty_dir: {}}]}}, {parallel: [{name: b, kubernetes: {namespace: n, workspace: w, files: ['./a', '..', k8s]}}]}, {name: c, helm: {release: r, namespace: n, workspace: w, chart_path: x.tgz, chart: y}}]}]}\n")
	f.Add("name: p\nstages: [{name: s, steps: [{name: a, helm: {release: r, namespace: n, chart: 'oci://r/c', values: {a: .inf, b: [1, ~, 2020-01-01, !!binary aGk=], c: '${{ inputs.x }}'}}}]}]\n")
	f.Add("name: p\nstages:\n  - name: s\n    steps:\n      - {name: a, shell: 'echo ${{ inputs.x }}'}\n")
	f.Add("name: &a p\nstages: *a\n")
	f.Add("name: p\nstages:\n  - name: s\n    steps:\n      - {name: a, container: {image: i, command: [id, '${{ inputs.x }}'], volumes: [{name: w, mount_path: /w, empty_dir: {size_mib: 1}}]}}\n" +
		"      - {name: b, container: {image: i, script: ls, security_context: {run_as_user: 1, add_capability: [chown]}, volumes: [{name: w, mount_path: /w, empty_dir: {size_mib: 1}}, {name: e, mount_path: /e, efs: {filesystem_id: fs-12345678}}]}}\n")
	f.Add("name: p\nstages: [{name: s, steps: [{parallel: [{name: a, http: {url: 'http://x'}}]}]}]\n")
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Parse([]byte(src))
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %T %v: want an *Error with problems", err, err)
			}
			return
		}
		given := map[string]string{}
		for _, in := range p.Inputs {
			given[in.Name] = "v"
		}
		inputs, err := p.ResolveInputs(given)
		if err != nil {
			t.Fatalf("ResolveInputs of every declared input: %v", err)
		}
		outs := Outputs{}
		st := State{Steps: map[StepRef]StepStatus{}}
		for i := 0; ; i++ {
			if i > len(p.Steps())+1 {
				t.Fatal("the run never ends")
			}
			d := p.Plan(st)
			for _, s := range d.Skip {
				st.Steps[s] = StepSkipped
			}
			if d.Done {
				break
			}
			for _, ref := range d.Start {
				_, step := p.Step(ref)
				o := map[string]string{}
				for _, k := range step.Outputs {
					o[k] = "x"
				}
				outs[ref] = o
				// Every reference was checked by Parse, so rendering succeeds.
				spec, err := p.StepSpec(ref, inputs, outs)
				if err != nil {
					t.Fatalf("StepSpec(%s): %v", ref, err)
				}
				if spec.Kubernetes != nil {
					// A manifest is one document, whatever the values.
					for i, m := range spec.Kubernetes.Manifests {
						if docs, err := textDocuments(m); err != nil || len(docs) != 1 {
							t.Fatalf("StepSpec(%s): manifest %d is %d documents (%v):\n%s", ref, i, len(docs), err, m)
						}
					}
				}
				for _, ws := range []*protocol.DeployWorkspace{kubeWorkspace(spec), helmWorkspace(spec)} {
					// A deploy step reads a workspace an earlier step wrote.
					if ws != nil && len(ws.WrittenBy) == 0 {
						t.Fatalf("StepSpec(%s): workspace %+v that no earlier step uses", ref, ws)
					}
				}
				if spec.Helm != nil && spec.Helm.Values != nil {
					// The values are one JSON object, whatever the inputs.
					var m map[string]any
					if err := json.Unmarshal(spec.Helm.Values, &m); err != nil {
						t.Fatalf("StepSpec(%s): values %s: %v", ref, spec.Helm.Values, err)
					}
				}
				st.Steps[ref] = StepSucceeded
			}
		}
	})
}

// FuzzExpand: expanding with a value that names its reference either
// fails on a malformed expression or gives a text in which no expression
// is left unexpanded, and Refs agrees with Expand.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"", "a ${{ inputs.x }} b", "$${{ inputs.x }}", "${{ stages.a.steps.b.outputs.c }}", "${{", "${{ }}", "$$${{inputs.a}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var seen []Ref
		out, err := Expand(s, func(r Ref) (string, error) {
			seen = append(seen, r)
			return "<" + strings.ReplaceAll(r.String(), "$", "") + ">", nil
		})
		refs, rerr := Refs(s)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Expand error %v, Refs error %v", err, rerr)
		}
		if err != nil {
			return
		}
		if len(refs) != len(seen) {
			t.Fatalf("Refs found %d references, Expand %d", len(refs), len(seen))
		}
		for _, r := range refs {
			if _, err := parseRef(strings.TrimPrefix(r.String(), "")); err != nil {
				t.Fatalf("Refs gave %v, which does not parse: %v", r, err)
			}
		}
		if len(out) > MaxExpandedValue {
			t.Fatalf("output of %d bytes, over MaxExpandedValue", len(out))
		}
		if len(out) > len(s)+len(seen)*200 {
			t.Fatalf("output of %d bytes from %d", len(out), len(s))
		}
	})
}

func kubeWorkspace(s protocol.TaskSpec) *protocol.DeployWorkspace {
	if s.Kubernetes == nil {
		return nil
	}
	return s.Kubernetes.Workspace
}

func helmWorkspace(s protocol.TaskSpec) *protocol.DeployWorkspace {
	if s.Helm == nil {
		return nil
	}
	return s.Helm.Workspace
}
