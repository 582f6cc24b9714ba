package pipeline

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/legate-dev/legate/internal/protocol"
)

// Kubernetes is a kubernetes step: manifests applied into a namespace and
// their rollout waited for, on a delegate with credentials for the
// cluster (protocol.KubernetesSpec).
type Kubernetes struct {
	// Namespace may hold expressions (checked once expanded).
	Namespace string
	// Manifests are the documents to apply, parsed: mappings whose scalar
	// values may hold expressions. A value is put into the parsed
	// document, never into its text, so it cannot add keys or documents
	// whatever it holds (a newline, ": ", "---").
	Manifests []*yaml.Node
	// Timeout bounds the rollout (and a rollback's); 0: the default.
	Timeout time.Duration
	// Rollback is protocol.RollbackAuto or RollbackNone.
	Rollback string
	// Strategy, Action, Canary and BlueGreen: see protocol.KubernetesSpec
	// ("" strategy: rolling).
	Strategy, Action string
	Canary           *protocol.KubeCanary
	BlueGreen        *protocol.KubeBlueGreen
	// Workspace names the stage's shared empty_dir that Files are in: an
	// earlier container step of the stage writes them. Files are paths in
	// it (a file, or a directory of *.yaml, *.yml and *.json), applied as
	// they are: no expression in them is expanded.
	Workspace string
	Files     []string
}

// kubernetes reads a step's kubernetes section.
func (ps *parser) kubernetes(n *yaml.Node, path string) *Kubernetes {
	k := &Kubernetes{Rollback: protocol.RollbackNone}
	given := false
	ps.fields(n, path, map[string]func(*yaml.Node){
		"namespace": func(v *yaml.Node) { k.Namespace = ps.str(v, path+".namespace") },
		"manifests": func(v *yaml.Node) {
			given = true
			k.Manifests = ps.manifests(v, path+".manifests")
		},
		"timeout": func(v *yaml.Node) {
			k.Timeout = ps.timeout(v, path+".timeout")
			if k.Timeout > protocol.MaxKubernetesTimeoutMS*time.Millisecond {
				ps.add(v, path+".timeout", "at most %s", time.Duration(protocol.MaxKubernetesTimeoutMS)*time.Millisecond)
			}
		},
		"rollback": func(v *yaml.Node) {
			switch k.Rollback = ps.str(v, path+".rollback"); k.Rollback {
			case protocol.RollbackAuto, protocol.RollbackNone:
			default:
				ps.add(v, path+".rollback", "%q: write auto (undo a failed deploy: workloads back to their revision from before, a new canary or colour removed) or none", k.Rollback)
			}
		},
		"strategy": func(v *yaml.Node) {
			switch k.Strategy = ps.str(v, path+".strategy"); k.Strategy {
			case protocol.StrategyRolling, protocol.StrategyCanary, protocol.StrategyBlueGreen:
			default:
				ps.add(v, path+".strategy", "%q: write rolling (the workloads' own rolling update, the default), canary or blue-green", k.Strategy)
				k.Strategy = ""
			}
		},
		"action": func(v *yaml.Node) { k.Action = ps.str(v, path+".action") },
		"canary": func(v *yaml.Node) {
			k.Canary = &protocol.KubeCanary{}
			ps.fields(v, path+".canary", map[string]func(*yaml.Node){
				"percent": func(v *yaml.Node) { k.Canary.Percent = ps.integer(v, path+".canary.percent", 1, 100) },
				"replicas": func(v *yaml.Node) {
					k.Canary.Replicas = ps.integer(v, path+".canary.replicas", 1, protocol.MaxKubeCanaryReplicas)
				},
			})
		},
		"workspace": func(v *yaml.Node) { k.Workspace = ps.workspaceName(v, path+".workspace") },
		"files": func(v *yaml.Node) {
			given = true
			k.Files = ps.workspacePaths(v, path+".files")
		},
		"blue_green": func(v *yaml.Node) {
			k.BlueGreen = &protocol.KubeBlueGreen{}
			ps.fields(v, path+".blue_green", map[string]func(*yaml.Node){
				"service": func(v *yaml.Node) { k.BlueGreen.Service = ps.str(v, path+".blue_green.service") },
			})
		},
	})
	if n.Kind != yaml.MappingNode {
		return k
	}
	ps.kubernetesStrategy(n, path, k)
	switch {
	case k.Namespace == "":
		ps.add(n, path+".namespace", "a kubernetes step needs the namespace it deploys to")
	case !strings.Contains(k.Namespace, exprOpen):
		if err := protocol.CheckKubernetesName("namespace", k.Namespace); err != nil {
			ps.add(n, path+".namespace", "%v", err)
		}
	}
	switch {
	case !given && k.Workspace == "":
		ps.add(n, path+".manifests", "a kubernetes step needs manifests (a list of Kubernetes objects), or files from a workspace (workspace: build, files: [k8s/deployment.yaml])")
	case k.Workspace != "" && k.Files == nil:
		ps.add(n, path+".files", "a kubernetes step with a workspace needs files: the paths in it of the manifests to apply (files: [k8s/deployment.yaml], or a directory)")
	case k.Workspace == "" && k.Files != nil:
		ps.add(n, path+".workspace", "kubernetes files are paths in a workspace: name it (workspace: build, the empty_dir an earlier container step of this stage writes them to)")
	}
	return k
}

// kubernetesStrategy checks a step's strategy fields together, as the
// task's payload will be.
func (ps *parser) kubernetesStrategy(n *yaml.Node, path string, k *Kubernetes) {
	if k.Strategy == "" && k.Action == "" && k.Canary == nil && k.BlueGreen == nil {
		return
	}
	probe := protocol.KubernetesSpec{Namespace: "probe", Manifests: []string{"probe: {}"}, Strategy: k.Strategy, Action: k.Action, Canary: k.Canary, BlueGreen: k.BlueGreen}
	err := probe.Validate()
	switch {
	case err == nil:
	case k.Strategy == "" && k.Action != "":
		ps.add(n, path+".action", "a rolling deploy takes none: write strategy: canary or blue-green with it")
	case k.Strategy == "" || k.Strategy == protocol.StrategyRolling:
		ps.add(n, path, "%s: write strategy: canary (with canary:) or blue-green (with blue_green:)", err)
	case k.Action == "":
		ps.add(n, path+".action", "a %s step needs an action: %s", k.Strategy, map[string]string{
			protocol.StrategyCanary:    "start (a canary beside the stable Deployment), promote (roll out to the stable one, delete the canary) or abort (delete the canary)",
			protocol.StrategyBlueGreen: "deploy (the idle colour, then switch to it), switch or swap-back (to the other colour, which must be ready)",
		}[k.Strategy])
	default:
		ps.add(n, path, "%v", err)
	}
}

// manifests reads a list of documents: each item a mapping (an object
// written in the pipeline) or a text of one or more YAML documents.
func (ps *parser) manifests(n *yaml.Node, path string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		ps.add(n, path, "expected a list of Kubernetes objects, found %s", kindName(n))
		return nil
	}
	var out []*yaml.Node
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		docs := []*yaml.Node{item}
		if item.Kind == yaml.ScalarNode && item.Tag != "!!null" {
			var err error
			if docs, err = textDocuments(item.Value); err != nil {
				ps.add(item, ip, "%v", err)
				continue
			}
		}
		for j, d := range docs {
			dp := ip
			if len(docs) > 1 {
				dp = fmt.Sprintf("%s (document %d)", ip, j)
			}
			if ps.manifest(item, d, dp) {
				out = append(out, d)
			}
		}
	}
	if len(out) > protocol.MaxKubernetesManifests {
		ps.add(n, path, "%d documents: at most %d", len(out), protocol.MaxKubernetesManifests)
	}
	return out
}

// textDocuments parses a manifest given as text.
func textDocuments(s string) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(s))
	var out []*yaml.Node
	for {
		var d yaml.Node
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the manifest text is not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if len(d.Content) == 0 || d.Content[0].Tag == "!!null" {
			continue
		}
		if len(out) == protocol.MaxKubernetesManifests {
			return nil, fmt.Errorf("more than %d documents", protocol.MaxKubernetesManifests)
		}
		out = append(out, d.Content[0])
	}
	if len(out) == 0 {
		return nil, errors.New("the manifest text holds no document")
	}
	return out, nil
}

// manifest checks one document (at the line of at): a mapping with
// apiVersion, kind and metadata.name; no anchors; expressions only in
// scalar values, never in keys; no stored secrets.
func (ps *parser) manifest(at, d *yaml.Node, path string) bool {
	if d.Kind != yaml.MappingNode {
		ps.add(at, path, "a Kubernetes object is a mapping (apiVersion:, kind:, metadata:), found %s", kindName(d))
		return false
	}
	if msg := manifestNodes(d); msg != "" {
		ps.add(at, path, "%s", msg)
		return false
	}
	get := func(m *yaml.Node, key string) *yaml.Node {
		for i := 0; m != nil && m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		return nil
	}
	for _, key := range []string{"apiVersion", "kind"} {
		if v := get(d, key); v == nil || v.Kind != yaml.ScalarNode || v.Value == "" {
			ps.add(at, path, "a Kubernetes object needs %s", key)
			return false
		}
	}
	if v := get(get(d, "metadata"), "name"); v == nil || v.Kind != yaml.ScalarNode || v.Value == "" {
		ps.add(at, path, "a Kubernetes object needs metadata.name")
		return false
	}
	return true
}

// manifestNodes says what is wrong in the nodes of a document ("" when
// nothing is).
func manifestNodes(n *yaml.Node) string {
	return docNodes(n, docRules{what: "manifests",
		secrets: "stored secrets (${secrets.NAME}) are not resolved in manifests: the manager does not put secret values into objects it cannot mask; create the Secret in the cluster and reference it"})
}

// docRules are what docNodes refuses in a deploy step's YAML: what names
// it ("manifests"), why stored secrets are refused there, and whether
// every key must be text.
type docRules struct {
	what, secrets string
	textKeys      bool
}

// docNodes says what is wrong in the nodes of YAML a deploy step sends
// to a cluster ("" when nothing is): anchors and aliases, stored secrets,
// expressions in keys, and (textKeys) keys that are not text.
func docNodes(n *yaml.Node, r docRules) string {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return "YAML anchors and aliases (& and *) are not supported in " + r.what
	}
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${secrets.") {
		return r.secrets
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			if r.textKeys && (c.Kind != yaml.ScalarNode || c.ShortTag() != "!!str") {
				return fmt.Sprintf("line %d: a key of %s is text (%q): quote it", c.Line, r.what, c.Value)
			}
			if strings.Contains(c.Value, exprOpen) {
				return fmt.Sprintf("line %d: an expression in a key (%q): expressions go in values only", c.Line, c.Value)
			}
		}
		if msg := docNodes(c, r); msg != "" {
			return msg
		}
	}
	return ""
}

// manifestTexts lists the scalar values of a kubernetes step's manifests
// as texts that may hold expressions; set puts the expanded value into
// the step's own (cloned) document, as a string unless the scalar was an
// unquoted expression alone whose value reads as a number or a boolean
// (replicas: ${{ inputs.replicas }}).
func manifestTexts(k *Kubernetes) []text {
	var out []text
	for d, doc := range k.Manifests {
		var walk func(n *yaml.Node, at []int, field string)
		walk = func(n *yaml.Node, at []int, field string) {
			switch n.Kind {
			case yaml.ScalarNode:
				if !strings.Contains(n.Value, exprOpen) {
					return
				}
				at := append([]int(nil), at...)
				orig, style := n.Value, n.Style
				out = append(out, text{field, orig, func(t *Step, v string) {
					m := t.Kubernetes.Manifests[d]
					for _, i := range at {
						m = m.Content[i]
					}
					m.Value, m.Tag = v, scalarTag(orig, v, style)
				}})
			case yaml.MappingNode:
				for i := 0; i+1 < len(n.Content); i += 2 {
					walk(n.Content[i+1], append(at, i+1), field+"."+n.Content[i].Value)
				}
			case yaml.SequenceNode:
				for i, c := range n.Content {
					walk(c, append(at, i), fmt.Sprintf("%s[%d]", field, i))
				}
			}
		}
		walk(doc, nil, fmt.Sprintf("kubernetes.manifests[%d]", d))
	}
	return out
}

// scalarTag is the tag of a scalar written as orig (with style) once its
// expressions expanded to v: a number or boolean only when orig was one
// unquoted expression and v reads as one; text otherwise.
func scalarTag(orig, v string, style yaml.Style) string {
	refs, _ := Refs(orig)
	trimmed := strings.TrimSpace(orig)
	if style == 0 && len(refs) == 1 && strings.HasPrefix(trimmed, exprOpen) && strings.HasSuffix(trimmed, exprClose) && strings.Count(trimmed, exprOpen) == 1 {
		var probe yaml.Node
		if yaml.Unmarshal([]byte(v), &probe) == nil && len(probe.Content) == 1 && probe.Content[0].Kind == yaml.ScalarNode &&
			probe.Content[0].Style == 0 && probe.Content[0].Value == v {
			switch tag := probe.Content[0].ShortTag(); tag {
			case "!!int", "!!float", "!!bool":
				return tag
			}
		}
	}
	return "!!str"
}

// cloneNode copies a document deeply.
func cloneNode(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, x := range n.Content {
		c.Content[i] = cloneNode(x)
	}
	return &c
}

// kubernetesSpec is the task payload of a kubernetes step once its
// expressions were expanded: each document as YAML text, written from the
// parsed document (a value is a scalar there whatever it holds).
func kubernetesSpec(k *Kubernetes) (*protocol.KubernetesSpec, error) {
	spec := &protocol.KubernetesSpec{Namespace: k.Namespace, Rollback: k.Rollback, TimeoutMS: k.Timeout.Milliseconds(),
		Strategy: k.Strategy, Action: k.Action, Canary: k.Canary, BlueGreen: k.BlueGreen, Files: k.Files}
	for i, d := range k.Manifests {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("kubernetes.manifests[%d]: %w", i, err)
		}
		spec.Manifests = append(spec.Manifests, string(b))
	}
	return spec, nil
}
