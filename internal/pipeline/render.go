package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/legate-dev/legate/internal/protocol"
)

// MaxInputValueLen bounds the value of one input given to a run.
const MaxInputValueLen = 64 << 10

// PlaceholderInputs is every declared input at its default, or empty: what
// a check of the pipeline's own text (before any run gives inputs) expands
// the expressions with.
func (p *Pipeline) PlaceholderInputs() map[string]string {
	out := make(map[string]string, len(p.Inputs))
	for _, in := range p.Inputs {
		out[in.Name] = ""
		if in.Default != nil {
			out[in.Name] = *in.Default
		}
	}
	return out
}

// ResolveInputs checks the inputs a run is given against the pipeline's:
// each given name must be declared, each required input given; defaults
// fill the rest. The result has every declared input.
func (p *Pipeline) ResolveInputs(given map[string]string) (map[string]string, error) {
	declared := map[string]bool{}
	out := make(map[string]string, len(p.Inputs))
	var missing []string
	for _, in := range p.Inputs {
		declared[in.Name] = true
		v, ok := given[in.Name]
		switch {
		case ok:
			out[in.Name] = v
		case in.Default != nil:
			out[in.Name] = *in.Default
		default:
			missing = append(missing, in.Name)
		}
	}
	var unknown []string
	for k, v := range given {
		if !declared[k] {
			unknown = append(unknown, k)
		}
		if len(v) > MaxInputValueLen {
			return nil, fmt.Errorf("input %s has %d bytes: at most %d", k, len(v), MaxInputValueLen)
		}
	}
	slices.Sort(unknown)
	if len(unknown) > 0 {
		names := make([]string, len(p.Inputs))
		for i, in := range p.Inputs {
			names[i] = in.Name
		}
		known := "it declares none"
		if len(names) > 0 {
			known = "it declares " + strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("pipeline %s has no input named %s (%s)", p.Name, strings.Join(unknown, ", "), known)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("pipeline %s needs the input %s: give it with --input %s=VALUE", p.Name, strings.Join(missing, ", "), missing[0])
	}
	return out, nil
}

// literal escapes the secret references in a value that comes from a
// run's inputs or a step's outputs, so that the manager passes them on as
// text: only the pipeline's own text may reference stored secrets (those
// are what running it is checked against).
func literal(v string) string {
	return strings.ReplaceAll(v, "${secrets.", "$${secrets.")
}

// cloneContainer copies a container section deeply enough for StepSpec
// to change it.
func cloneContainer(c *protocol.ContainerSpec) *protocol.ContainerSpec {
	out := *c
	out.Command = slices.Clone(c.Command)
	if c.Resources != nil {
		r := *c.Resources
		out.Resources = &r
	}
	if sc := c.SecurityContext; sc != nil {
		cp := *sc
		cp.AddCapability = slices.Clone(sc.AddCapability)
		cp.DropCapability = slices.Clone(sc.DropCapability)
		out.SecurityContext = &cp
	}
	out.Volumes = slices.Clone(c.Volumes)
	for i := range out.Volumes {
		v := &out.Volumes[i]
		if v.EmptyDir != nil {
			e := *v.EmptyDir
			v.EmptyDir = &e
		}
		if v.HostPath != nil {
			h := *v.HostPath
			v.HostPath = &h
		}
		if v.EFS != nil {
			e := *v.EFS
			v.EFS = &e
		}
	}
	return &out
}

// Outputs holds the outputs of the steps that have ended, by step.
type Outputs map[StepRef]map[string]string

// StepSpec is the task spec of step ref, its expressions replaced by the
// run's inputs (as ResolveInputs returned them) and the outputs of earlier
// steps. An output the step did not write is an error that names it (the
// step then fails without running). Scope (Org, Project) is the caller's
// to set. Stored secrets are referenced in Env as ${secrets.NAME}, which
// the manager resolves and masks as for any task.
func (p *Pipeline) StepSpec(ref StepRef, inputs map[string]string, outputs Outputs) (protocol.TaskSpec, error) {
	return p.stepSpec(ref, inputs, outputs, false)
}

// PreviewSpec is the task spec of step ref before the run starts: its
// inputs in, and every output of an earlier step empty (they are not known
// yet). What it shows is checked when a run starts, so that a caller is
// refused before anything runs; the step's final spec (StepSpec) is
// checked again when its task is created.
func (p *Pipeline) PreviewSpec(ref StepRef, inputs map[string]string) (protocol.TaskSpec, error) {
	return p.stepSpec(ref, inputs, nil, true)
}

// refValue is the value of a reference in a step's texts: an input's,
// or a step's output (empty when noOutputs and the step has not run).
func refValue(inputs map[string]string, outputs Outputs, noOutputs bool) func(Ref) (string, error) {
	return func(r Ref) (string, error) {
		if r.Input != "" {
			v, ok := inputs[r.Input]
			if !ok {
				return "", fmt.Errorf("input %s has no value", r.Input)
			}
			return literal(v), nil
		}
		v, ok := outputs[r.Step][r.Key]
		if !ok && !noOutputs {
			return "", fmt.Errorf("step %s did not write the output %s (it writes KEY=VALUE lines to $%s)", r.Step, r.Key, OutputEnv)
		}
		return literal(v), nil
	}
}

// cloneStep copies a step deeply enough that expanding its expressions
// changes nothing of the pipeline's.
func cloneStep(step *Step) Step {
	s := *step
	s.Env = maps.Clone(step.Env)
	if step.HTTP != nil {
		h := *step.HTTP
		h.Headers = maps.Clone(step.HTTP.Headers)
		s.HTTP = &h
	}
	if step.Container != nil {
		s.Container = cloneContainer(step.Container)
	}
	if step.Kubernetes != nil {
		k := *step.Kubernetes
		k.Manifests = make([]*yaml.Node, len(step.Kubernetes.Manifests))
		for i, d := range step.Kubernetes.Manifests {
			k.Manifests[i] = cloneNode(d)
		}
		s.Kubernetes = &k
	}
	if step.Helm != nil {
		s.Helm = cloneHelm(step.Helm)
	}
	if step.Verify != nil {
		s.Verify = cloneVerify(step.Verify)
	}
	return s
}

func (p *Pipeline) stepSpec(ref StepRef, inputs map[string]string, outputs Outputs, noOutputs bool) (protocol.TaskSpec, error) {
	stage, step := p.Step(ref)
	if step == nil {
		return protocol.TaskSpec{}, fmt.Errorf("pipeline %s has no step %s", p.Name, ref)
	}
	s := cloneStep(step)
	value := refValue(inputs, outputs, noOutputs)
	// Every field counts towards MaxExpandedTask, expressions or not.
	room := MaxExpandedTask
	for _, f := range stepTexts(&s) {
		v, err := expand(f.text, value, room)
		if err != nil {
			return protocol.TaskSpec{}, fmt.Errorf("step %s, %s: %w", ref, f.name, err)
		}
		room -= len(v)
		f.set(&s, v)
	}
	spec := protocol.TaskSpec{
		Type:      s.Type,
		Selectors: slices.Clone(s.DelegateSelectors),
		Env:       s.Env,
		TimeoutMS: s.Timeout.Milliseconds(),
		Retries:   s.Retries,
		Connector: s.Connector,
	}
	if spec.Connector == "" && s.Type != protocol.TaskVerify {
		// A verify step's connector is its provider: never the stage's
		// cluster.
		spec.Connector = stage.Infrastructure
	}
	switch s.Type {
	case "shell":
		spec.Shell = &protocol.ShellSpec{Script: s.Shell}
	case "http":
		spec.HTTP = &protocol.HTTPSpec{Method: s.HTTP.Method, URL: s.HTTP.URL, Headers: s.HTTP.Headers, Body: s.HTTP.Body, ExpectStatus: s.HTTP.ExpectStatus}
	case protocol.TaskKubernetes:
		k, err := kubernetesSpec(s.Kubernetes)
		if err != nil {
			return protocol.TaskSpec{}, fmt.Errorf("step %s: %w", ref, err)
		}
		spec.Kubernetes = k
		k.Workspace = p.deployWorkspace(ref, s.Kubernetes.Workspace)
		if s.Timeout == 0 {
			// Room for the rollout, a rollback's and the applies.
			rollout := s.Kubernetes.Timeout
			if rollout == 0 {
				rollout = protocol.DefaultKubernetesTimeoutMS * time.Millisecond
			}
			spec.TimeoutMS = (2*rollout + time.Minute).Milliseconds()
		}
	case protocol.TaskHelm:
		if err := setHelmSpec(&spec, s.Helm, s.Timeout); err != nil {
			return protocol.TaskSpec{}, fmt.Errorf("step %s: %w", ref, err)
		}
		spec.Helm.Workspace = p.deployWorkspace(ref, s.Helm.Workspace)
	case protocol.TaskVerify:
		setVerifySpec(&spec, s.Verify, s.Timeout)
	case protocol.TaskContainer:
		spec.Container = s.Container
		for i := range spec.Container.Volumes {
			v := &spec.Container.Volumes[i]
			if v.EmptyDir == nil {
				continue
			}
			if shared, steps := p.Workspace(ref.Stage, v.Name); shared {
				// The manager sets the key and whether this step creates it.
				v.EmptyDir.Workspace = &protocol.Workspace{Remove: steps[len(steps)-1] == ref.Step}
			}
		}
	}
	if len(s.Secrets) > 0 && spec.Env == nil {
		spec.Env = map[string]string{}
	}
	for k, name := range s.Secrets {
		spec.Env[k] = "${secrets." + name + "}"
	}
	return spec, nil
}
