package pipeline

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

const verifySrc = `name: canary
inputs:
  version: {default: "2.0"}
stages:
  - name: deploy
    infrastructure: prod-cluster
    environment: prod
    steps:
      - name: watch
        verify:
          provider: {type: prometheus, url: "http://prometheus:9090"}
          duration: 2m
          interval: 10s
          min_points: 4
          metrics:
            - name: error_rate
              query: sum(rate(errors{version="${{ inputs.version }}"}[1m]))
              threshold: "< 0.01"
            - name: latency
              query: max(latency{version="${{ inputs.version }}"})
              baseline: max(latency{version="stable"})
              tolerance: 0.1
      - name: watch-prom
        connector: prom
        verify:
          metrics:
            - {name: up, query: min(up), threshold: ">= 1"}
`

func TestVerifyStepSpec(t *testing.T) {
	t.Parallel()
	p := mustParse(t, verifySrc)
	inputs, err := p.ResolveInputs(map[string]string{"version": "2.1"})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := p.StepSpec(StepRef{"deploy", "watch"}, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.TaskSpec{Type: protocol.TaskVerify, TimeoutMS: (2*60 + 20 + 120) * 1000, Verify: &protocol.VerifySpec{
		Provider: &protocol.MetricsProvider{Type: protocol.ProviderPrometheus, URL: "http://prometheus:9090"},
		Metrics: []protocol.VerifyMetric{
			{Name: "error_rate", Query: `sum(rate(errors{version="2.1"}[1m]))`, Threshold: &protocol.Threshold{Op: "<", Value: 0.01}},
			{Name: "latency", Query: `max(latency{version="2.1"})`, Baseline: `max(latency{version="stable"})`, Tolerance: 0.1},
		},
		DurationMS: 120000, IntervalMS: 10000, MinPoints: 4}}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Fatalf("spec (-want +got):\n%s", diff)
	}
	if err := spec.CheckPayload(); err != nil {
		t.Fatal(err)
	}
	// The provider from a connector: the step's own, never the stage's
	// cluster; defaults filled in by CheckPayload.
	spec, err = p.StepSpec(StepRef{"deploy", "watch-prom"}, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.CheckPayload(); err != nil || spec.Connector != "prom" || spec.Verify.Provider != nil ||
		spec.Verify.DurationMS != protocol.DefaultVerifyDurationMS || spec.TimeoutMS != (5*60+60+120)*1000 {
		t.Fatalf("%v %+v %+v", err, spec, spec.Verify)
	}
}

func TestVerifyStepErrors(t *testing.T) {
	t.Parallel()
	step := func(body string) string {
		return "name: p\nstages:\n  - name: s\n    steps:\n      - name: v\n" + body
	}
	prov := "        verify:\n          provider: {type: prometheus, url: \"http://p:9090\"}\n"
	cases := map[string]string{
		step("        verify:\n          metrics: [{name: e, query: up, threshold: \"< 1\"}]\n"):                                                                         "needs a provider: connector: NAME",
		step("        connector: prom\n" + prov + "          metrics: [{name: e, query: up, threshold: \"< 1\"}]\n"):                                                     "not both",
		step(prov + "          metrics: [{name: e, query: up, threshold: 0.01}]\n"):                                                                                      `write the threshold as quoted text: threshold: "< 0.01"`,
		step(prov + "          metrics: [{name: e, query: up, threshold: \"0.01\"}]\n"):                                                                                  "write an operator and a number",
		step(prov + "          metrics: [{name: e, query: up}]\n"):                                                                                                       "a threshold",
		step(prov + "          metrics: [{name: e, query: up, tolerance: 0.1, threshold: \"<1\"}]\n"):                                                                    "applies to a baseline",
		step(prov + "          metrics: [{name: e, query: up, threshold: \"<1\"}, {name: e, query: up, threshold: \"<1\"}]\n"):                                           "comes earlier",
		step(prov + "          duration: 5\n          metrics: [{name: e, query: up, threshold: \"<1\"}]\n"):                                                             "not a duration: write e.g. 30s",
		step(prov + "          duration: 10s\n          interval: 30s\n          metrics: [{name: e, query: up, threshold: \"<1\"}]\n"):                                  "longer than its duration",
		step("        verify:\n          provider: {type: prometheus, url: \"http://${{ inputs.x }}\"}\n          metrics: [{name: e, query: up, threshold: \"<1\"}]\n"): "takes no expressions",
		step("        verify:\n          provider: {type: datadog, url: \"http://p\"}\n          metrics: [{name: e, query: up, threshold: \"<1\"}]\n"):                  `provider type "datadog"`,
		step(prov + "          metrics: []\n"): "expected a list of metrics",
		step(prov + "          metrics: [{name: e, query: up, threshold: \"<1\"}]\n        timeout: 1m\n"): "ends the verification before its duration 5m0s",
		step(prov + "          metrics: [{name: e, query: up, threshold: \"<1\"}]\n        env: {A: b}\n"): "takes no env or secrets",
		step(prov + "          metrics: [{name: e, query: up, threshold: \"<1\"}]\n        shell: echo\n"): "one of shell, http, container, kubernetes, helm or verify",
	}
	for src, want := range cases {
		_, err := Parse([]byte(src))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\ngot %v\nwant %q", src, err, want)
		}
	}
}

// TestVerifyDocExample: the canary pipeline of docs/deployments.md's
// "Verifying a deployment" parses, and its verify step's payload passes.
func TestVerifyDocExample(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/deployments.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(b), "### A canary verified against its baseline")
	_, block, _ := strings.Cut(sec, "```yaml\n")
	src, _, _ := strings.Cut(block, "```")
	p := mustParse(t, "name: doc\n"+src)
	inputs, err := p.ResolveInputs(map[string]string{"version": "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := p.StepSpec(StepRef{"deploy", "verify"}, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.CheckPayload(); err != nil || spec.Type != protocol.TaskVerify || len(spec.Verify.Metrics) != 2 || spec.Connector != "prometheus-prod" {
		t.Fatalf("%v %+v", err, spec)
	}
	if st := p.Stages[0].Items[3].Steps[0]; st.Name != "abort" || st.When != WhenFailure {
		t.Fatalf("the abort step: %+v", st)
	}
}
