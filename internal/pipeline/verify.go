package pipeline

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/legate-dev/legate/internal/protocol"
)

// Verify is a verify step: metrics watched on a Prometheus for a while
// (protocol.VerifySpec), by a delegate next to it. The provider is the
// step's connector (connector: NAME, of type prometheus), or Provider.
type Verify struct {
	// Provider is an inline provider (type and URL, maybe a CA); nil when
	// the step names a connector.
	Provider *protocol.MetricsProvider
	// Metrics' Query and Baseline may hold expressions: their values
	// become PromQL text sent to Prometheus.
	Metrics            []protocol.VerifyMetric
	Duration, Interval time.Duration
	MinPoints          int
}

// verify reads a step's verify section.
func (ps *parser) verify(n *yaml.Node, path string) *Verify {
	v := &Verify{}
	ps.fields(n, path, map[string]func(*yaml.Node){
		"provider":   func(x *yaml.Node) { v.Provider = ps.provider(x, path+".provider") },
		"metrics":    func(x *yaml.Node) { v.Metrics = ps.verifyMetrics(x, path+".metrics") },
		"duration":   func(x *yaml.Node) { v.Duration = ps.verifyDuration(x, path+".duration") },
		"interval":   func(x *yaml.Node) { v.Interval = ps.verifyDuration(x, path+".interval") },
		"min_points": func(x *yaml.Node) { v.MinPoints = ps.integer(x, path+".min_points", 1, protocol.MaxVerifyPoints) },
	})
	if n.Kind != yaml.MappingNode {
		return v
	}
	if len(v.Metrics) == 0 {
		ps.add(n, path+".metrics", "a verify step needs metrics: a list of {name, query, threshold: \"< 0.01\"} or {name, query, baseline, tolerance}")
	}
	// Check durations and counts as the task is (the queries may hold
	// expressions, so the check uses a stand-in).
	check := protocol.VerifySpec{Provider: &protocol.MetricsProvider{Type: protocol.ProviderPrometheus, URL: "http://x"},
		Metrics:    []protocol.VerifyMetric{{Name: "m", Query: "q", Threshold: &protocol.Threshold{Op: "<", Value: 1}}},
		DurationMS: v.Duration.Milliseconds(), IntervalMS: v.Interval.Milliseconds(), MinPoints: v.MinPoints}
	if err := check.Validate(); err != nil {
		ps.add(n, path, "%v", err)
	}
	return v
}

// verifyDuration reads a duration of a verify step: 1s to 24h.
func (ps *parser) verifyDuration(n *yaml.Node, path string) time.Duration {
	txt := ps.str(n, path)
	d, err := time.ParseDuration(txt)
	switch {
	case err != nil:
		ps.add(n, path, "%q is not a duration: write e.g. 30s, 5m or 1h", txt)
	case d < time.Second || d > protocol.MaxVerifyDurationMS*time.Millisecond:
		ps.add(n, path, "%s is out of range: 1s to 24h", txt)
	default:
		return d
	}
	return 0
}

// provider reads an inline provider: type prometheus, url, ca_pem.
func (ps *parser) provider(n *yaml.Node, path string) *protocol.MetricsProvider {
	p := &protocol.MetricsProvider{}
	ps.fields(n, path, map[string]func(*yaml.Node){
		"type":   func(x *yaml.Node) { p.Type = ps.str(x, path+".type") },
		"url":    func(x *yaml.Node) { p.URL = ps.str(x, path+".url") },
		"ca_pem": func(x *yaml.Node) { p.CAPEM = ps.str(x, path+".ca_pem") },
	})
	if n.Kind != yaml.MappingNode {
		return p
	}
	if strings.Contains(p.URL+p.CAPEM, exprOpen) {
		ps.add(n, path, "a provider takes no expressions: write its URL (or name a connector of type prometheus with connector:)")
		return p
	}
	if err := p.Validate(); err != nil {
		ps.add(n, path, "%v", err)
	}
	return p
}

// verifyMetrics reads a verify step's metrics.
func (ps *parser) verifyMetrics(n *yaml.Node, path string) []protocol.VerifyMetric {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		ps.add(n, path, "expected a list of metrics ({name, query, threshold} or {name, query, baseline, tolerance}), found %s", kindName(n))
		return nil
	}
	if len(n.Content) > protocol.MaxVerifyMetrics {
		ps.add(n, path, "%d metrics: at most %d", len(n.Content), protocol.MaxVerifyMetrics)
	}
	out := make([]protocol.VerifyMetric, 0, len(n.Content))
	seen := map[string]bool{}
	for i, c := range n.Content {
		mp := fmt.Sprintf("%s[%d]", path, i)
		m := ps.verifyMetric(c, mp)
		if seen[m.Name] && m.Name != "" {
			ps.add(c, mp+".name", "a metric named %q comes earlier: give each metric its own name", m.Name)
		}
		seen[m.Name] = true
		out = append(out, m)
	}
	return out
}

// verifyMetric reads one metric, and checks it as the task will be, with
// stand-ins for queries that hold expressions.
func (ps *parser) verifyMetric(n *yaml.Node, path string) protocol.VerifyMetric {
	var m protocol.VerifyMetric
	ps.fields(n, path, map[string]func(*yaml.Node){
		"name":  func(x *yaml.Node) { m.Name = ps.str(x, path+".name") },
		"query": func(x *yaml.Node) { m.Query = ps.str(x, path+".query") },
		"threshold": func(x *yaml.Node) {
			if x.Kind != yaml.ScalarNode || x.Tag != "!!str" {
				ps.add(x, path+".threshold", "write the threshold as quoted text: threshold: \"< 0.01\" (an operator <, <=, > or >= and a number)")
				return
			}
			t, err := protocol.ParseThreshold(x.Value)
			if err != nil {
				ps.add(x, path+".threshold", "%v", err)
				return
			}
			m.Threshold = &t
		},
		"baseline":         func(x *yaml.Node) { m.Baseline = ps.str(x, path+".baseline") },
		"tolerance":        func(x *yaml.Node) { m.Tolerance = ps.number(x, path+".tolerance") },
		"higher_is_better": func(x *yaml.Node) { m.HigherIsBetter = ps.boolean(x, path+".higher_is_better") },
	})
	if n.Kind != yaml.MappingNode {
		return m
	}
	check := m
	if strings.Contains(check.Query, exprOpen) {
		check.Query = "q"
	}
	if strings.Contains(check.Baseline, exprOpen) {
		check.Baseline = "q"
	}
	spec := protocol.VerifySpec{Provider: &protocol.MetricsProvider{Type: protocol.ProviderPrometheus, URL: "http://x"}, Metrics: []protocol.VerifyMetric{check}}
	if err := spec.Validate(); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "): "); strings.HasPrefix(msg, "verify metric ") && i >= 0 {
			msg = msg[i+3:]
		}
		ps.add(n, path, "%s", msg)
	}
	return m
}

// verifyTexts lists the texts of a verify step that may hold
// expressions: each metric's query and baseline.
func verifyTexts(v *Verify) []text {
	var out []text
	for i, m := range v.Metrics {
		out = append(out, text{fmt.Sprintf("verify.metrics[%d].query", i), m.Query, func(t *Step, s string) { t.Verify.Metrics[i].Query = s }})
		if m.Baseline != "" {
			out = append(out, text{fmt.Sprintf("verify.metrics[%d].baseline", i), m.Baseline, func(t *Step, s string) { t.Verify.Metrics[i].Baseline = s }})
		}
	}
	return out
}

// cloneVerify copies a verify step's section, its metrics deeply.
func cloneVerify(v *Verify) *Verify {
	c := *v
	c.Metrics = append([]protocol.VerifyMetric(nil), v.Metrics...)
	if v.Provider != nil {
		p := *v.Provider
		c.Provider = &p
	}
	return &c
}

// setVerifySpec puts the payload of a verify step into spec: its provider
// inline, or from the step's connector (filled in by the manager); and,
// when the step has no timeout of its own, a task timeout with room for
// the window, the last queries and the rest.
func setVerifySpec(spec *protocol.TaskSpec, v *Verify, stepTimeout time.Duration) {
	spec.Verify = &protocol.VerifySpec{Provider: v.Provider, Metrics: v.Metrics, DurationMS: v.Duration.Milliseconds(),
		IntervalMS: v.Interval.Milliseconds(), MinPoints: v.MinPoints}
	if stepTimeout == 0 {
		d, i := v.Duration, v.Interval
		if d == 0 {
			d = protocol.DefaultVerifyDurationMS * time.Millisecond
		}
		if i == 0 {
			i = protocol.DefaultVerifyIntervalMS * time.Millisecond
		}
		spec.TimeoutMS = (d + 2*i + 2*time.Minute).Milliseconds()
	}
}

// verifyStep checks what a verify step takes besides its section: a
// provider inline or from its connector (one of them), no env or secrets.
func (ps *parser) verifyStep(n *yaml.Node, path string, s *Step) {
	if s.Verify == nil {
		return
	}
	switch {
	case s.Verify.Provider == nil && s.Connector == "":
		ps.add(n, path+".verify.provider", "a verify step needs a provider: connector: NAME (a connector of type prometheus, with its credentials) or verify.provider: {type: prometheus, url: http://prometheus:9090}")
	case s.Verify.Provider != nil && s.Connector != "":
		ps.add(n, path+".connector", "a verify step takes its provider from connector: or from verify.provider:, not both")
	}
	if len(s.Env) > 0 || len(s.Secrets) > 0 {
		ps.add(n, path, "a verify step takes no env or secrets (it runs no script): a provider's credentials come from its connector")
	}
	d := s.Verify.Duration
	if d == 0 {
		d = protocol.DefaultVerifyDurationMS * time.Millisecond
	}
	if s.Timeout != 0 && s.Timeout <= d {
		ps.add(n, path+".timeout", "the step's timeout %s ends the verification before its duration %s: leave timeout out (the default has room for it) or make it longer", s.Timeout, d)
	}
}
