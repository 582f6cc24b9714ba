package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/legate-dev/legate/internal/protocol"
)

// Helm is a helm step: a chart installed or upgraded as a release, and
// waited for, on a delegate with helm and credentials for the cluster
// (protocol.HelmSpec).
type Helm struct {
	// Release, Namespace and Version may hold expressions (checked once
	// expanded, as the task is).
	Release, Namespace, Version string
	// Repo and Chart say where the chart is: a repository's URL and a
	// chart's name in it, or (Repo empty) an oci:// reference or a chart
	// archive's URL.
	Repo, Chart string
	// Values is the release's values, parsed: a mapping whose scalar
	// values may hold expressions, put into the parsed mapping, never into
	// text (as a kubernetes step's manifests). Nil: none.
	Values *yaml.Node
	// Timeout bounds helm's wait (and a rollback's); 0: the default.
	Timeout time.Duration
	// Rollback is protocol.RollbackAuto or RollbackNone.
	Rollback string
	// Workspace names the stage's shared empty_dir an earlier container
	// step writes the chart to; ChartPath is the chart's directory or
	// .tgz archive in it (in place of Repo and Chart).
	Workspace, ChartPath string
}

// helm reads a step's helm section.
func (ps *parser) helm(n *yaml.Node, path string) *Helm {
	h := &Helm{Rollback: protocol.RollbackNone}
	ps.fields(n, path, map[string]func(*yaml.Node){
		"release":   func(v *yaml.Node) { h.Release = ps.str(v, path+".release") },
		"namespace": func(v *yaml.Node) { h.Namespace = ps.str(v, path+".namespace") },
		"repo":      func(v *yaml.Node) { h.Repo = ps.str(v, path+".repo") },
		"chart":     func(v *yaml.Node) { h.Chart = ps.str(v, path+".chart") },
		"version":   func(v *yaml.Node) { h.Version = ps.str(v, path+".version") },
		"workspace": func(v *yaml.Node) { h.Workspace = ps.workspaceName(v, path+".workspace") },
		"chart_path": func(v *yaml.Node) {
			h.ChartPath = ps.str(v, path+".chart_path")
			if strings.Contains(h.ChartPath, exprOpen) {
				ps.add(v, path+".chart_path", "a path in a workspace takes no expressions: write the path the earlier step writes the chart to")
			} else if err := protocol.CheckWorkspacePath("chart_path", h.ChartPath); err != nil {
				ps.add(v, path+".chart_path", "%v", err)
			}
		},
		"values": func(v *yaml.Node) { h.Values = ps.helmValues(v, path+".values") },
		"timeout": func(v *yaml.Node) {
			h.Timeout = ps.timeout(v, path+".timeout")
			if h.Timeout > protocol.MaxHelmTimeoutMS*time.Millisecond {
				ps.add(v, path+".timeout", "at most %s", time.Duration(protocol.MaxHelmTimeoutMS)*time.Millisecond)
			}
		},
		"rollback": func(v *yaml.Node) {
			switch h.Rollback = ps.str(v, path+".rollback"); h.Rollback {
			case protocol.RollbackAuto, protocol.RollbackNone:
			default:
				ps.add(v, path+".rollback", "%q: write auto (roll a failed upgrade back to the revision deployed before; uninstall a failed first install) or none", h.Rollback)
			}
		},
	})
	if n.Kind != yaml.MappingNode {
		return h
	}
	ps.helmNames(n, path, h)
	switch {
	case h.Workspace != "" || h.ChartPath != "":
		ps.helmChartPath(n, path, h)
		return h
	case h.Chart == "":
		ps.add(n, path+".chart", "a helm step needs a chart: a name with repo: (the chart repository's URL), an oci:// reference, the https:// URL of a chart archive, or chart_path: in a workspace")
		return h
	}
	// The chart's source has no expressions: check it as the task is.
	if strings.Contains(h.Repo+h.Chart, exprOpen) {
		ps.add(n, path+".chart", "repo and chart take no expressions: the chart's source is fixed; give its version or values from inputs")
		return h
	}
	version := h.Version
	if strings.Contains(version, exprOpen) {
		version = ""
	}
	check := protocol.HelmSpec{Release: "r", Namespace: "n", Repo: h.Repo, Chart: h.Chart, Version: version}
	if err := check.Validate(); err != nil {
		ps.add(n, path+".chart", "%v", err)
	}
	return h
}

// helmChartPath checks a helm step whose chart is in a workspace.
func (ps *parser) helmChartPath(n *yaml.Node, path string, h *Helm) {
	switch {
	case h.Workspace == "":
		ps.add(n, path+".workspace", "helm chart_path is a path in a workspace: name it (workspace: build, the empty_dir an earlier container step of this stage writes the chart to)")
	case h.ChartPath == "":
		ps.add(n, path+".chart_path", "a helm step with a workspace needs chart_path: the chart's directory or .tgz archive in it (chart_path: charts/web)")
	case h.Chart != "" || h.Repo != "" || h.Version != "":
		ps.add(n, path+".chart_path", "chart_path takes the chart from the workspace: leave out chart, repo and version (the chart's own Chart.yaml says its version)")
	}
}

// helmNames checks a helm step's release and namespace, unless they hold
// expressions (then the task is checked once they are expanded).
func (ps *parser) helmNames(n *yaml.Node, path string, h *Helm) {
	switch {
	case h.Release == "":
		ps.add(n, path+".release", "a helm step needs the release's name (release: web)")
	case !strings.Contains(h.Release, exprOpen):
		check := protocol.HelmSpec{Release: h.Release, Namespace: "n", Chart: "oci://x/y"}
		if err := check.Validate(); err != nil {
			ps.add(n, path+".release", "%v", err)
		}
	}
	switch {
	case h.Namespace == "":
		ps.add(n, path+".namespace", "a helm step needs the namespace of its release")
	case !strings.Contains(h.Namespace, exprOpen):
		if err := protocol.CheckKubernetesName("namespace", h.Namespace); err != nil {
			ps.add(n, path+".namespace", "%v", err)
		}
	}
}

// helmValues reads a helm step's values: a mapping, with text keys
// without expressions, no stored secrets.
func (ps *parser) helmValues(n *yaml.Node, path string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		ps.add(n, path, "expected a mapping of the chart's values (image: {tag: \"1.2\"}), found %s", kindName(n))
		return nil
	}
	if msg := valuesNodes(n); msg != "" {
		ps.add(n, path, "%s", msg)
		return nil
	}
	if _, err := nodeValue(n); err != nil {
		ps.add(n, path, "%v", err)
		return nil
	}
	return n
}

// valuesNodes says what is wrong in the nodes of a helm step's values (""
// when nothing is): as for manifests, and a key must be text.
func valuesNodes(n *yaml.Node) string {
	return docNodes(n, docRules{what: "values", textKeys: true,
		secrets: "stored secrets (${secrets.NAME}) are not resolved in helm values: keep secret values in the cluster's Secrets and give the chart their names"})
}

// helmTexts lists the texts of a helm step that may hold expressions:
// release, namespace, version, and each scalar of its values, whose
// expanded value is put into the step's own (cloned) values as
// manifestTexts does.
func helmTexts(h *Helm) []text {
	out := []text{
		{"helm.release", h.Release, func(t *Step, v string) { t.Helm.Release = v }},
		{"helm.namespace", h.Namespace, func(t *Step, v string) { t.Helm.Namespace = v }},
		{"helm.version", h.Version, func(t *Step, v string) { t.Helm.Version = v }},
	}
	if h.Values == nil {
		return out
	}
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
				m := t.Helm.Values
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
	walk(h.Values, nil, "helm.values")
	return out
}

// cloneHelm copies a helm step's section, its values deeply.
func cloneHelm(h *Helm) *Helm {
	c := *h
	if c.Values != nil {
		c.Values = cloneNode(c.Values)
	}
	return &c
}

// setHelmSpec puts the payload of a helm step into spec, and, when the
// step has no timeout of its own, a task timeout with room for helm's
// wait, a rollback's and the rest.
func setHelmSpec(spec *protocol.TaskSpec, h *Helm, stepTimeout time.Duration) error {
	hs, err := helmSpec(h)
	if err != nil {
		return err
	}
	spec.Helm = hs
	if stepTimeout == 0 {
		wait := h.Timeout
		if wait == 0 {
			wait = protocol.DefaultHelmTimeoutMS * time.Millisecond
		}
		spec.TimeoutMS = (2*wait + time.Minute).Milliseconds()
	}
	return nil
}

// helmSpec is the task payload of a helm step once its expressions were
// expanded: the values as JSON, made from the parsed mapping.
func helmSpec(h *Helm) (*protocol.HelmSpec, error) {
	spec := &protocol.HelmSpec{Release: h.Release, Namespace: h.Namespace, Repo: h.Repo, Chart: h.Chart, Version: h.Version,
		Rollback: h.Rollback, TimeoutMS: h.Timeout.Milliseconds(), ChartPath: h.ChartPath}
	if h.Values == nil {
		return spec, nil
	}
	v, err := nodeValue(h.Values)
	if err != nil {
		return nil, fmt.Errorf("helm.values: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("helm.values: %w", err)
	}
	spec.Values = b
	return spec, nil
}

// nodeValue is a parsed values node as JSON values: mappings with text
// keys, lists, and scalars as YAML reads them.
func nodeValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			v, err := nodeValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := nodeValue(c)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!timestamp", "!!binary":
			return n.Value, nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			// JSON has no infinity: the text it was written as.
			return n.Value, nil
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML", n.Line)
}
