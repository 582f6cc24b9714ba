package pipeline

import (
	"errors"
	"strings"
	"testing"
)

// TestParseReportsEveryProblemAtOnce: a file with a structural problem
// (an unknown field, a bad timeout) and a reference problem elsewhere gets
// both in one answer, with their lines. Before, the references were only
// checked once the structure was right: a second apply found them.
func TestParseReportsEveryProblemAtOnce(t *testing.T) {
	src := `name: web
stages:
  - name: build
    steps:
      - name: compile
        shell: make
        timout: 5m
      - name: test
        shell: make test
        timeout: forever
  - name: deploy
    steps:
      - name: rollout
        shell: ./deploy.sh
        env:
          REGION: ${{ inputs.region }}
`
	_, err := Parse([]byte(src))
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("Parse: %v, want an *Error", err)
	}
	got := pe.Error()
	for _, want := range []string{
		"line 7: stages[0].steps[0].timout: unknown field",
		"line 10: stages[0].steps[1].timeout:",
		`line 13: stages[1].steps[0].env.REGION: ${{ inputs.region }}: no input named "region"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\nwant one starting %q", got, want)
		}
	}

	// A reference to a step whose own text is broken is not reported as
	// well: it may only follow from that problem.
	src = `name: web
stages:
  - name: build
    steps:
      - name: compile
        shell: make
        outputs: [VERSION, 1bad]
      - name: show
        shell: echo "$V"
        env:
          V: ${{ stages.build.steps.compile.outputs.VERSION }}
`
	_, err = Parse([]byte(src))
	if !errors.As(err, &pe) || len(pe.Problems) != 1 || !strings.Contains(pe.Problems[0].Field, "outputs") {
		t.Errorf("problems: %v, want only the outputs' problem", err)
	}
}
