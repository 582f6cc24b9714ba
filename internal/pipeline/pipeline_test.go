package pipeline

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func ptr(s string) *string { return &s }

func mustParse(t *testing.T, src string) *Pipeline {
	t.Helper()
	p, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func TestParseExample(t *testing.T) {
	src, err := os.ReadFile("testdata/deploy-web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := mustParse(t, string(src))
	want := &Pipeline{
		Name:        "deploy-web",
		Description: "build and ship the web front end",
		Inputs: []Input{
			{Name: "version", Default: ptr("1.0")},
			{Name: "region", Default: ptr("eu"), Description: "where to deploy"},
			{Name: "ticket"},
		},
		Stages: []Stage{
			{Name: "build", Infrastructure: "build-farm", Items: []Item{{Steps: []Step{{
				Name: "compile", Type: "shell",
				Shell:             "make VERSION=\"$VERSION\"\necho \"artifact=web-$VERSION.tgz\" >> \"$LEGATE_OUTPUT\"\n",
				Env:               map[string]string{"VERSION": "${{ inputs.version }}"},
				Outputs:           []string{"artifact"},
				DelegateSelectors: []string{"builder"},
				Timeout:           10 * time.Minute,
				Retries:           1,
				When:              WhenSuccess,
			}}}}},
			{Name: "deploy", Environment: "prod", Service: "web", Items: []Item{
				{Parallel: true, Steps: []Step{
					{Name: "eu", Type: "shell", Shell: `./ship "$A" eu`, When: WhenSuccess,
						Env: map[string]string{"A": "${{ stages.build.steps.compile.outputs.artifact }}"}},
					{Name: "us", Type: "http", When: WhenSuccess,
						HTTP: &HTTP{Method: "POST", URL: "https://deploy.example/us",
							Headers: map[string]string{"X-Ticket": "${{ inputs.ticket }}"}, Body: "${{inputs.version}}", ExpectStatus: 202},
						Secrets: map[string]string{"TOKEN": "deploy_token"}},
				}},
				{Steps: []Step{{Name: "rollback", Type: "shell", Shell: "./rollback", When: WhenFailure, Connector: "k8s-prod"}}},
			}},
		},
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	if !p.Stages[1].Deployment() || p.Stages[0].Deployment() {
		t.Errorf("Deployment(): build %v, deploy %v; want false, true", p.Stages[0].Deployment(), p.Stages[1].Deployment())
	}
	if diff := cmp.Diff([]StepRef{{"build", "compile"}, {"deploy", "eu"}, {"deploy", "us"}, {"deploy", "rollback"}}, p.Steps()); diff != "" {
		t.Errorf("Steps (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	const head = "name: p\nstages:\n  - name: s\n    steps:\n"
	for _, tc := range []struct {
		name, src string
		want      []string // each a Problem's String()
	}{
		{"empty", "", []string{"the file is empty: a pipeline needs a name and stages"}},
		{"not yaml", "name: [", []string{"line 1: not valid YAML: did not find expected node content"}},
		{"too big", "name: p\n" + strings.Repeat("#", MaxSourceBytes), []string{"the file has 262152 bytes: at most 262144"}},
		{"list at top", "- a\n", []string{`line 1: expected a mapping (key: value lines), found a list`}},
		{"no name no stages", "description: x\n", []string{"line 1: name: a pipeline needs a name", "line 1: stages: a pipeline needs at least one stage"}},
		{"unknown top field", "name: p\nstage: []\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: x\n",
			[]string{"line 2: stage: unknown field; known fields here: description, inputs, name, priority, stages, triggers"}},
		{"bad priority", "name: p\npriority: 11\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: x\n",
			[]string{"line 2: priority: priority 11 is out of range: use 1 (lowest) to 10 (highest), or leave it out for normal (5)"}},
		{"unknown priority", "name: p\npriority: soon\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: x\n",
			[]string{`line 2: priority: priority "soon": use low (2), normal (5), high (8), urgent (10), or a number from 1 to 10`}},
		{"bad pipeline name", "name: a.b\nstages: []\n", []string{
			"line 1: name: pipeline name \"a.b\" is invalid: use 1-63 letters, digits, '_' or '-', starting with a letter or digit",
			"line 2: stages: a pipeline needs at least one stage"}},
		{"aliases", "name: &n p\nstages: []\n", []string{"line 1: YAML anchors and aliases (& and *) are not supported in a pipeline file"}},
		{"unknown step field", head + "      - name: a\n        shel: x\n", []string{
			"line 5: stages[0].steps[0]: a step needs shell: (a script), http: (a request), container: (an image to run), kubernetes: (manifests to deploy), helm: (a chart to install) or verify: (metrics to watch)",
			"line 6: stages[0].steps[0].shel: unknown field; known fields here: connector, container, delegateSelectors, env, helm, http, kubernetes, name, outputs, retries, secrets, shell, timeout, unsafeExpressions, verify, when"}},
		{"duplicate step", head + "      - name: a\n        shell: x\n      - name: a\n        shell: y\n", []string{
			`line 7: stages[0].steps[1].name: a step named "a" comes earlier in this stage: step names must be unique within a stage`}},
		{"duplicate step in group", head + "      - name: a\n        shell: x\n      - parallel:\n          - name: a\n            shell: y\n", []string{
			`line 8: stages[0].steps[1].parallel[0].name: a step named "a" comes earlier in this stage: step names must be unique within a stage`}},
		{"duplicate stage", "name: p\nstages:\n  - name: s\n    steps: [{name: a, shell: x}]\n  - name: s\n    steps: [{name: a, shell: x}]\n", []string{
			`line 5: stages[1].name: a stage named "s" comes earlier: stage names must be unique`}},
		{"field twice", head + "      - name: a\n        shell: x\n        shell: y\n", []string{"line 7: stages[0].steps[0].shell: given twice"}},
		{"bad timeout", head + "      - name: a\n        shell: x\n        timeout: 10\n", []string{
			`line 7: stages[0].steps[0].timeout: "10" is not a duration: write e.g. 90s, 10m or 2h`}},
		{"timeout too long", head + "      - name: a\n        shell: x\n        timeout: 200h\n", []string{
			"line 7: stages[0].steps[0].timeout: 200h is out of range: 1s to 168h0m0s"}},
		{"retries", head + "      - name: a\n        shell: x\n        retries: -1\n", []string{"line 7: stages[0].steps[0].retries: -1 is out of range: 0 to 100"}},
		{"retries text", head + "      - name: a\n        shell: x\n        retries: two\n", []string{`line 7: stages[0].steps[0].retries: expected a whole number, found "two"`}},
		{"when", head + "      - name: a\n        shell: x\n        when: sometimes\n", []string{
			`line 7: stages[0].steps[0].when: "sometimes": write success (the default), failure or always`}},
		{"both types", head + "      - name: a\n        shell: x\n        http: {url: 'http://x'}\n", []string{"line 5: stages[0].steps[0]: a step is one of shell, http, container, kubernetes, helm or verify, not more (a container step's script goes in container.script)"}},
		{"http url", head + "      - name: a\n        http: {url: 'ftp://x'}\n", []string{`line 6: stages[0].steps[0].http.url: "ftp://x" is not an http:// or https:// URL`}},
		{"env name", head + "      - name: a\n        shell: x\n        env: {1X: y}\n", []string{
			`line 7: stages[0].steps[0].env.1X: environment variable name "1X" is invalid: use letters, digits or '_', not starting with a digit`}},
		{"env LEGATE_OUTPUT", head + "      - name: a\n        shell: x\n        env: {LEGATE_OUTPUT: y}\n", []string{
			"line 7: stages[0].steps[0].env.LEGATE_OUTPUT: LEGATE_OUTPUT is set by the delegate (the file for the step's outputs)"}},
		{"secret name", head + "      - name: a\n        shell: x\n        secrets: {T: a-b}\n", []string{
			"line 7: stages[0].steps[0].secrets.T: secret name \"a-b\" is invalid: use only letters, digits and underscores (A-Z, a-z, 0-9, _), as in ${secrets.DB_PASSWORD}"}},
		{"output key", head + "      - name: a\n        shell: x\n        outputs: [a-b, ok, ok]\n", []string{
			`line 7: stages[0].steps[0].outputs[0]: output key "a-b" is invalid: use 1-63 letters, digits or '_', not starting with a digit`,
			`line 7: stages[0].steps[0].outputs[2]: "ok" is listed twice`}},
		{"unknown input", head + "      - name: a\n        shell: echo ${{ inputs.nope }}\n", []string{
			`line 5: stages[0].steps[0].shell: ${{ inputs.nope }}: no input named "nope": declare it under inputs:`}},
		{"malformed expression", head + "      - name: a\n        shell: echo ${{ input.x }}\n", []string{
			`line 5: stages[0].steps[0].shell: malformed expression "${{ input.x }}": write inputs.NAME or stages.STAGE.steps.STEP.outputs.KEY (and $${{ for the literal text ${{)`}},
		{"later step", head + "      - name: a\n        shell: echo ${{ stages.s.steps.b.outputs.k }}\n      - name: b\n        shell: x\n        outputs: [k]\n", []string{
			`line 5: stages[0].steps[0].shell: ${{ stages.s.steps.b.outputs.k }}: no step "b" in stage "s" that ends before this step starts (only earlier steps, not later ones or steps of the same parallel group)`}},
		{"own output", head + "      - name: a\n        shell: echo ${{ stages.s.steps.a.outputs.k }}\n        outputs: [k]\n", []string{
			`line 5: stages[0].steps[0].shell: ${{ stages.s.steps.a.outputs.k }}: a step cannot use its own outputs`}},
		{"same group", head + "      - parallel:\n        - name: a\n          shell: x\n          outputs: [k]\n        - name: b\n          shell: echo ${{ stages.s.steps.a.outputs.k }}\n", []string{
			`line 9: stages[0].steps[0].parallel[1].shell: ${{ stages.s.steps.a.outputs.k }}: no step "a" in stage "s" that ends before this step starts (only earlier steps, not later ones or steps of the same parallel group)`}},
		{"undeclared output", head + "      - name: a\n        shell: x\n      - name: b\n        env: {V: '${{ stages.s.steps.a.outputs.k }}'}\n        shell: x\n", []string{
			`line 7: stages[0].steps[1].env.V: ${{ stages.s.steps.a.outputs.k }}: step s.a does not declare the output "k": add it to its outputs:`}},
		{"unknown stage", head + "      - name: a\n        shell: echo ${{ stages.t.steps.a.outputs.k }}\n", []string{
			`line 5: stages[0].steps[0].shell: ${{ stages.t.steps.a.outputs.k }}: no stage named "t" before this step`}},
		{"no steps", "name: p\nstages:\n  - name: s\n", []string{"line 3: stages[0].steps: a stage needs at least one step"}},
		{"container without image", head + "      - name: a\n        container: {script: id}\n", []string{
			`line 6: stages[0].steps[0].container: container.image: give an image, such as alpine:3.20`}},
		{"container and shell", head + "      - name: a\n        shell: x\n        container: {image: i}\n", []string{
			"line 5: stages[0].steps[0]: a step is one of shell, http, container, kubernetes, helm or verify, not more (a container step's script goes in container.script)"}},
		{"container unknown field", head + "      - name: a\n        container: {image: i, securityContext: {}}\n", []string{
			"line 6: stages[0].steps[0].container.securityContext: unknown field; known fields here: command, image, resources, script, security_context, volumes, working_dir"}},
		{"container bad bool", head + "      - name: a\n        container:\n          image: i\n          security_context: {privileged: yes}\n", []string{
			`line 8: stages[0].steps[0].container.security_context.privileged: expected true or false, found "yes"`}},
		{"container bad volume", head + "      - name: a\n        container:\n          image: i\n          volumes:\n            - {name: w, mount_path: /w, empty_dir: {}}\n            - {name: h, mount_path: /h, host_path: {path: relative}}\n", []string{
			`line 10: stages[0].steps[0].container: container.volumes[1].host_path.path "relative": must be an absolute path`}},
		{"workspace in a parallel group", head + "      - name: a\n        container: {image: i, volumes: [{name: ws, mount_path: /ws, empty_dir: {}}]}\n" +
			"      - parallel:\n        - name: b\n          container: {image: i, volumes: [{name: ws, mount_path: /ws, empty_dir: {}}]}\n", []string{
			`line 8: stages[0].steps[1].parallel[0].container.volumes: the empty_dir "ws" is the stage's shared workspace (other steps of stage s name it too), and a step of a parallel group cannot use it: give the volume another name in this step, or take the step out of the group`}},
		{"workspace sizes differ", head + "      - name: a\n        container: {image: i, volumes: [{name: ws, mount_path: /ws, empty_dir: {size_mib: 100}}]}\n" +
			"      - name: b\n        container: {image: i, volumes: [{name: ws, mount_path: /w, empty_dir: {}}]}\n", []string{
			`line 7: stages[0].steps[1].container.volumes: the empty_dir "ws" is the stage's shared workspace, with size_mib 100 in an earlier step: give it the same size_mib in every step`}},
		{"empty infrastructure", "name: p\nstages:\n  - name: s\n    infrastructure: ''\n    steps: [{name: a, shell: x}]\n", []string{
			"line 4: stages[0].infrastructure: empty: name a connector or leave the field out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.src))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", p)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v, want *Error", err, err)
			}
			var got []string
			for _, pr := range pe.Problems {
				got = append(got, pr.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	values := map[string]string{"inputs.v": "1.2", "stages.b.steps.c.outputs.k": "out", "inputs.e": ""}
	value := func(r Ref) (string, error) {
		v, ok := values[r.String()]
		if !ok {
			return "", errors.New("no value for " + r.String())
		}
		return v, nil
	}
	for _, tc := range []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"${{ inputs.v }}", "1.2", ""},
		{"${{inputs.v}}-${{ stages.b.steps.c.outputs.k }}", "1.2-out", ""},
		{"a${{\tinputs.e }}b", "ab", ""},
		{"$${{ inputs.v }}", "${{ inputs.v }}", ""},
		{"$$${{ inputs.v }}", "$${{ inputs.v }}", ""},
		{"${ inputs.v } $HOME $$", "${ inputs.v } $HOME $$", ""},
		{"${{ inputs.x }}", "", "no value for inputs.x"},
		{"${{ inputs.v", "", `malformed expression "${{ inputs.v": no closing }} (and $${{ for the literal text ${{)`},
		{"${{ inputs }}", "", `malformed expression "${{ inputs }}": write inputs.NAME or stages.STAGE.steps.STEP.outputs.KEY (and $${{ for the literal text ${{)`},
		{"${{ inputs.a.b }}", "", `malformed expression "${{ inputs.a.b }}": write inputs.NAME or stages.STAGE.steps.STEP.outputs.KEY (and $${{ for the literal text ${{)`},
		{"${{ stages.b.steps.c.outputs.1k }}", "", `malformed expression "${{ stages.b.steps.c.outputs.1k }}": output key "1k" is invalid: use 1-63 letters, digits or '_', not starting with a digit (and $${{ for the literal text ${{)`},
		{"${{ inputs.v }} ${{", "", `malformed expression "${{": no closing }} (and $${{ for the literal text ${{)`},
	} {
		got, err := Expand(tc.in, value)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if got != tc.want || gotErr != tc.err {
			t.Errorf("Expand(%q) = %q, %q; want %q, %q", tc.in, got, gotErr, tc.want, tc.err)
		}
	}
}

func TestResolveInputs(t *testing.T) {
	p := &Pipeline{Name: "p", Inputs: []Input{{Name: "a", Default: ptr("1")}, {Name: "b"}}}
	for _, tc := range []struct {
		name  string
		given map[string]string
		want  map[string]string
		err   string
	}{
		{"defaults", map[string]string{"b": "x"}, map[string]string{"a": "1", "b": "x"}, ""},
		{"override", map[string]string{"a": "2", "b": ""}, map[string]string{"a": "2", "b": ""}, ""},
		{"missing", nil, nil, "pipeline p needs the input b: give it with --input b=VALUE"},
		{"unknown", map[string]string{"b": "x", "z": "1", "c": "2"}, nil, "pipeline p has no input named c, z (it declares a, b)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.ResolveInputs(tc.given)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.err {
				t.Fatalf("error %q, want %q", gotErr, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStepSpec(t *testing.T) {
	src, err := os.ReadFile("testdata/deploy-web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := mustParse(t, string(src))
	inputs, err := p.ResolveInputs(map[string]string{"ticket": "T-${secrets.x}"})
	if err != nil {
		t.Fatal(err)
	}
	outs := Outputs{{"build", "compile"}: {"artifact": "web-1.0.tgz"}}
	for _, tc := range []struct {
		ref  StepRef
		outs Outputs
		want protocol.TaskSpec
		err  string
	}{
		{StepRef{"build", "compile"}, nil, protocol.TaskSpec{
			Type: "shell", Shell: &protocol.ShellSpec{Script: p.Stages[0].Items[0].Steps[0].Shell},
			Env: map[string]string{"VERSION": "1.0"}, Selectors: []string{"builder"},
			TimeoutMS: 600000, Retries: 1, Connector: "build-farm"}, ""},
		{StepRef{"deploy", "eu"}, outs, protocol.TaskSpec{
			Type: "shell", Shell: &protocol.ShellSpec{Script: `./ship "$A" eu`},
			Env: map[string]string{"A": "web-1.0.tgz"}}, ""},
		{StepRef{"deploy", "eu"}, Outputs{}, protocol.TaskSpec{},
			"step deploy.eu, env.A: step build.compile did not write the output artifact (it writes KEY=VALUE lines to $LEGATE_OUTPUT)"},
		{StepRef{"deploy", "us"}, outs, protocol.TaskSpec{
			Type: "http", HTTP: &protocol.HTTPSpec{Method: "POST", URL: "https://deploy.example/us",
				// An input's ${secrets. reference stays text: $${secrets. is its escape.
				Headers: map[string]string{"X-Ticket": "T-$${secrets.x}"}, Body: "1.0", ExpectStatus: 202},
			Env: map[string]string{"TOKEN": "${secrets.deploy_token}"}}, ""},
		{StepRef{"deploy", "rollback"}, outs, protocol.TaskSpec{
			Type: "shell", Shell: &protocol.ShellSpec{Script: "./rollback"}, Connector: "k8s-prod"}, ""},
		{StepRef{"deploy", "nope"}, outs, protocol.TaskSpec{}, "pipeline deploy-web has no step deploy.nope"},
	} {
		got, err := p.StepSpec(tc.ref, inputs, tc.outs)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if gotErr != tc.err {
			t.Errorf("%s: error %q, want %q", tc.ref, gotErr, tc.err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.ref, diff)
		}
	}
	// The definition is untouched by rendering.
	if got := p.Stages[1].Items[0].Steps[1].HTTP.Headers["X-Ticket"]; got != "${{ inputs.ticket }}" {
		t.Errorf("StepSpec changed the definition: header %q", got)
	}
}

// TestContainerStepSpec: a container step's task carries its section with
// the expressions of its script and command expanded; an empty_dir that
// several steps of the stage name is the stage's workspace, removed by the
// last of them; one named by a single step is its own.
func TestContainerStepSpec(t *testing.T) {
	src := `name: build
inputs: {ref: main}
stages:
  - name: build
    steps:
      - name: checkout
        unsafeExpressions: true
        container:
          image: localhost/debian-min:bookworm
          command: [git, clone, -b, "${{ inputs.ref }}", /repo, /ws]
          working_dir: /ws
          security_context: {run_as_user: 1000, drop_capability: [cap_chown]}
          volumes:
            - {name: ws, mount_path: /ws, empty_dir: {}}
            - {name: tmp, mount_path: /tmp, empty_dir: {size_mib: 64}}
      - name: test
        unsafeExpressions: true
        container:
          image: localhost/debian-min:bookworm
          script: cd /ws && make test REF=${{ inputs.ref }}
          resources: {cpu: 0.5, memory_mib: 512}
          volumes:
            - {name: ws, mount_path: /ws, empty_dir: {}}
            - {name: src, mount_path: /src, host_path: {path: /srv/src, read_only: true}}
            - {name: cache, mount_path: /cache, efs: {filesystem_id: fs-12345678, transit_encryption: true, iam: true}}
        secrets: {TOKEN: gh_token}
`
	p, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	uid := int64(1000)
	in := map[string]string{"ref": "v1"}
	checkout, err := p.StepSpec(StepRef{"build", "checkout"}, in, Outputs{})
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{
		Image: "localhost/debian-min:bookworm", Command: []string{"git", "clone", "-b", "v1", "/repo", "/ws"}, WorkingDir: "/ws",
		SecurityContext: &protocol.SecurityContext{RunAsUser: &uid, DropCapability: []string{"CHOWN"}},
		Volumes: []protocol.Volume{
			{Name: "ws", MountPath: "/ws", EmptyDir: &protocol.EmptyDirVolume{Workspace: &protocol.Workspace{}}},
			{Name: "tmp", MountPath: "/tmp", EmptyDir: &protocol.EmptyDirVolume{SizeMiB: 64}},
		}}}
	if diff := cmp.Diff(want, checkout); diff != "" {
		t.Errorf("checkout (-want +got):\n%s", diff)
	}
	test, err := p.StepSpec(StepRef{"build", "test"}, in, Outputs{})
	if err != nil {
		t.Fatal(err)
	}
	want = protocol.TaskSpec{Type: protocol.TaskContainer, Env: map[string]string{"TOKEN": "${secrets.gh_token}"},
		Container: &protocol.ContainerSpec{
			Image: "localhost/debian-min:bookworm", Script: "cd /ws && make test REF=v1",
			Resources: &protocol.ContainerResources{CPU: 0.5, MemoryMiB: 512},
			Volumes: []protocol.Volume{
				{Name: "ws", MountPath: "/ws", EmptyDir: &protocol.EmptyDirVolume{Workspace: &protocol.Workspace{Remove: true}}},
				{Name: "src", MountPath: "/src", HostPath: &protocol.HostPathVolume{Path: "/srv/src", ReadOnly: true}},
				{Name: "cache", MountPath: "/cache", EFS: &protocol.EFSVolume{FilesystemID: "fs-12345678", TransitEncryption: true, IAM: true}},
			}}}
	if diff := cmp.Diff(want, test); diff != "" {
		t.Errorf("test (-want +got):\n%s", diff)
	}
	// The definition is unchanged by rendering.
	if _, s := p.Step(StepRef{"build", "checkout"}); s.Container.Command[3] != "${{ inputs.ref }}" || s.Container.Volumes[0].EmptyDir.Workspace != nil {
		t.Errorf("StepSpec changed the definition: %+v", s.Container)
	}
}
