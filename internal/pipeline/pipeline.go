// Package pipeline is the pipeline model of legate: a pipeline definition
// read from YAML (Parse), checked as a whole (names, references), the
// expressions that connect inputs and step outputs to later steps (Expand),
// the task spec of one step (StepSpec), and a pure planner (Plan) that says,
// from a run's state, which steps start next and when the run is over.
//
// It does no I/O: no HTTP, no SQL, no clock. The engine (package
// pipeline/engine) stores definitions and runs, creates one task per step
// and calls Plan whenever a step ends.
//
// A pipeline file:
//
//	name: deploy-web
//	description: build and ship the web front end
//	inputs:
//	  version: "1.0"            # a default; {} or {description: …} without default means required
//	  region: {default: eu, description: where to deploy}
//	triggers:                   # how a webhook delivery's JSON payload gives inputs
//	  webhook: {inputs: {version: release.tag_name}}
//	stages:
//	  - name: build
//	    infrastructure: build-farm   # connector: its delegates are preferred for every step
//	    steps:
//	      - name: compile
//	        shell: |
//	          make VERSION="$VERSION"
//	          echo "artifact=web-$VERSION.tgz" >> "$LEGATE_OUTPUT"
//	        env: {VERSION: "${{ inputs.version }}"}
//	        outputs: [artifact]
//	        delegateSelectors: [builder]
//	        timeout: 10m
//	        retries: 1
//	  - name: deploy
//	    environment: prod     # environment and/or service make it a deployment stage
//	    service: web
//	    steps:
//	      - parallel:
//	          - name: eu
//	            shell: ./ship "$A" eu
//	            env: {A: "${{ stages.build.steps.compile.outputs.artifact }}"}
//	          - name: us
//	            http: {method: POST, url: "https://deploy.example/us", body: "${{ inputs.version }}"}
//	            secrets: {TOKEN: deploy_token}   # env TOKEN = the stored secret deploy_token
//	      - name: rollback
//	        when: failure           # success (default), failure or always
//	        shell: ./rollback
//
// Steps of a stage run in order; a parallel group's steps start together
// and the group ends when all of them have ended. Stages run in order. A
// step runs when its `when` matches the run so far: success while no step
// has failed, failure once one has, always in either case; otherwise it is
// skipped. A run fails when any step failed (a `when: failure` step that
// repairs things does not turn the run green), and is cancelled when it is
// cancelled: no further step starts then, not even `when: always` ones.
package pipeline

import (
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Limits of a definition: Parse refuses more.
const (
	// MaxSourceBytes bounds a pipeline file.
	MaxSourceBytes = 256 << 10
	// MaxStages bounds the stages of a pipeline.
	MaxStages = 64
	// MaxStepsPerStage bounds the steps of a stage (counting each step of a
	// parallel group).
	MaxStepsPerStage = 128
	// MaxInputs bounds the inputs of a pipeline.
	MaxInputs = 64
	// MaxNameLen bounds names of pipelines, stages, steps, inputs and outputs.
	MaxNameLen = 63
	// MaxTimeout bounds a step's timeout (the task limit: 7 days).
	MaxTimeout = 7 * 24 * time.Hour
	// MaxRetries bounds a step's retries (the task limit).
	MaxRetries = 100
)

// When says under which condition a step runs.
type When string

// The values of When.
const (
	// WhenSuccess runs the step while no step of the run has failed (the default).
	WhenSuccess When = "success"
	// WhenFailure runs the step only once a step of the run has failed.
	WhenFailure When = "failure"
	// WhenAlways runs the step in either case.
	WhenAlways When = "always"
)

// Pipeline is a parsed and validated definition.
type Pipeline struct {
	Name        string
	Description string
	// Priority is the priority of its step tasks (protocol.ParsePriority;
	// 0: normal) unless a run gives its own.
	Priority int
	Inputs   []Input
	Triggers Triggers
	Stages   []Stage
}

// Input is a named value given when a run starts.
type Input struct {
	Name        string
	Description string
	// Default is used when the run does not give the input; nil means the
	// input is required.
	Default *string
}

// Stage is a group of steps that run in order.
type Stage struct {
	Name string
	// Infrastructure names a connector: the target environment of a
	// deployment or the build farm of a build. Steps without their own
	// connector use it (its selectors unless they have their own, its URL
	// as a capability, so the delegate that succeeded there is tried first).
	Infrastructure string
	// Environment and Service make the stage a deployment stage.
	Environment string
	Service     string
	Items       []Item
}

// Deployment reports whether the stage deploys (has an environment or a
// service).
func (s *Stage) Deployment() bool { return s.Environment != "" || s.Service != "" }

// Item is one entry of a stage's steps: a single step, or a parallel group.
type Item struct {
	Parallel bool
	Steps    []Step
}

// Step is one task of a pipeline.
type Step struct {
	Name string
	// Type is "shell", "http" or "container"; exactly one of Shell, HTTP
	// and Container is set.
	Type  string
	Shell string
	HTTP  *HTTP
	// Container is a container step's section, with the task spec's
	// fields (protocol.ContainerSpec). An empty_dir that more than one step
	// of a stage names is the stage's shared workspace (Workspace).
	Container *protocol.ContainerSpec
	// Kubernetes is a kubernetes step's section (see Kubernetes): its
	// manifests applied and their rollout waited for.
	Kubernetes *Kubernetes
	// Helm is a helm step's section (see Helm): a chart installed or
	// upgraded as a release.
	Helm *Helm
	// Verify is a verify step's section (see Verify): metrics watched on
	// a Prometheus.
	Verify *Verify
	// Connector names a connector the step uses; empty means the stage's
	// infrastructure connector, if any.
	Connector string
	// DelegateSelectors, when set, are the only delegates the step may run
	// on; they override the connector's selectors.
	DelegateSelectors []string
	// Timeout bounds execution; 0 means the manager's default.
	Timeout time.Duration
	// Retries is how many more times the task may run after its delegate
	// is lost while running it.
	Retries int
	// Env is the step's environment (values may hold expressions).
	Env map[string]string
	// Secrets maps an environment variable to the stored secret whose value
	// it gets (masked in the output).
	Secrets map[string]string
	When    When
	// Outputs are the keys the step may write to $LEGATE_OUTPUT that later
	// steps reference.
	Outputs []string
	// UnsafeExpressions lets expressions into text that runs as code (a
	// script, a container's command) and into the scheme and host of an
	// HTTP URL; without it they are refused (checkUnsafe).
	UnsafeExpressions bool
}

// HTTP is the request of an http step.
type HTTP struct {
	Method  string
	URL     string
	Headers map[string]string
	Body    string
	// ExpectStatus is the status that counts as success; 0 means any 2xx.
	ExpectStatus int
}

// StepRef names a step of a pipeline.
type StepRef struct {
	Stage, Step string
}

func (r StepRef) String() string { return r.Stage + "." + r.Step }

// Steps returns every step of the pipeline in order, with its stage.
func (p *Pipeline) Steps() []StepRef {
	var out []StepRef
	for _, st := range p.Stages {
		for _, it := range st.Items {
			for _, s := range it.Steps {
				out = append(out, StepRef{st.Name, s.Name})
			}
		}
	}
	return out
}

// Step returns the step ref names and its stage, or nil.
func (p *Pipeline) Step(ref StepRef) (*Stage, *Step) {
	for i := range p.Stages {
		st := &p.Stages[i]
		if st.Name != ref.Stage {
			continue
		}
		for j := range st.Items {
			for k := range st.Items[j].Steps {
				if st.Items[j].Steps[k].Name == ref.Step {
					return st, &st.Items[j].Steps[k]
				}
			}
		}
	}
	return nil, nil
}
