package pipeline

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const planSrc = `
name: p
stages:
  - name: a
    steps:
      - name: one
        shell: x
      - parallel:
          - {name: p1, shell: x}
          - {name: p2, shell: x}
          - {name: pf, shell: x, when: failure}
      - {name: onfail, shell: x, when: failure}
      - {name: always, shell: x, when: always}
  - name: b
    steps:
      - {name: two, shell: x}
`

func TestPlan(t *testing.T) {
	p := mustParse(t, planSrc)
	r := func(stage, step string) StepRef { return StepRef{stage, step} }
	type steps = map[StepRef]StepStatus
	for _, tc := range []struct {
		name  string
		state State
		want  Decision
	}{
		{"start", State{}, Decision{Start: []StepRef{r("a", "one")}, Status: RunRunning}},
		{"first running", State{Steps: steps{r("a", "one"): StepRunning}}, Decision{Status: RunRunning}},
		{"group starts together, failure member skipped",
			State{Steps: steps{r("a", "one"): StepSucceeded}},
			Decision{Start: []StepRef{r("a", "p1"), r("a", "p2")}, Skip: []StepRef{r("a", "pf")}, Status: RunRunning}},
		{"group waits for all members",
			State{Steps: steps{r("a", "one"): StepSucceeded, r("a", "p1"): StepFailed, r("a", "p2"): StepRunning, r("a", "pf"): StepSkipped}},
			Decision{Status: RunRunning}},
		{"a failure runs the failure and always steps",
			State{Steps: steps{r("a", "one"): StepSucceeded, r("a", "p1"): StepFailed, r("a", "p2"): StepSucceeded, r("a", "pf"): StepSkipped}},
			Decision{Start: []StepRef{r("a", "onfail")}, Status: RunRunning}},
		{"after the failure step, always; later success steps skipped",
			State{Steps: steps{r("a", "one"): StepSucceeded, r("a", "p1"): StepFailed, r("a", "p2"): StepSucceeded, r("a", "pf"): StepSkipped, r("a", "onfail"): StepSucceeded}},
			Decision{Start: []StepRef{r("a", "always")}, Status: RunRunning}},
		{"failed run ends failed",
			State{Steps: steps{r("a", "one"): StepFailed, r("a", "p1"): StepSkipped, r("a", "p2"): StepSkipped, r("a", "pf"): StepSkipped, r("a", "onfail"): StepSucceeded, r("a", "always"): StepSucceeded}},
			Decision{Skip: []StepRef{r("b", "two")}, Done: true, Status: RunFailed}},
		{"first step failed: the whole group is skipped and the walk goes on",
			State{Steps: steps{r("a", "one"): StepFailed}},
			Decision{Start: []StepRef{r("a", "pf")}, Skip: []StepRef{r("a", "p1"), r("a", "p2")}, Status: RunRunning}},
		{"success path skips failure steps and reaches stage b",
			State{Steps: steps{r("a", "one"): StepSucceeded, r("a", "p1"): StepSucceeded, r("a", "p2"): StepSucceeded, r("a", "pf"): StepSkipped}},
			Decision{Start: []StepRef{r("a", "always")}, Skip: []StepRef{r("a", "onfail")}, Status: RunRunning}},
		{"succeeded",
			State{Steps: steps{r("a", "one"): StepSucceeded, r("a", "p1"): StepSucceeded, r("a", "p2"): StepSucceeded, r("a", "pf"): StepSkipped, r("a", "onfail"): StepSkipped, r("a", "always"): StepSucceeded, r("b", "two"): StepSucceeded}},
			Decision{Done: true, Status: RunSucceeded}},
		{"cancelled while running: skip the rest, wait for the running",
			State{Cancelled: true, Steps: steps{r("a", "one"): StepSucceeded, r("a", "p1"): StepRunning, r("a", "p2"): StepSucceeded, r("a", "pf"): StepSkipped}},
			Decision{Skip: []StepRef{r("a", "onfail"), r("a", "always"), r("b", "two")}, Status: RunRunning}},
		{"cancelled, nothing running: over",
			State{Cancelled: true, Steps: steps{r("a", "one"): StepSucceeded, r("a", "p1"): StepFailed}},
			Decision{Skip: []StepRef{r("a", "p2"), r("a", "pf"), r("a", "onfail"), r("a", "always"), r("b", "two")}, Done: true, Status: RunCancelled}},
		{"cancelled before the start", State{Cancelled: true},
			Decision{Skip: p.Steps(), Done: true, Status: RunCancelled}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := p.Plan(tc.state)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanRunsToTheEnd drives whole runs through the planner: every step
// ends as outcome says, and the run must end with the expected status after
// starting each step at most once.
func TestPlanRunsToTheEnd(t *testing.T) {
	p := mustParse(t, planSrc)
	for _, tc := range []struct {
		name    string
		fail    map[string]bool
		want    RunStatus
		started []string
	}{
		{"all succeed", nil, RunSucceeded, []string{"one", "p1", "p2", "always", "two"}},
		{"p2 fails", map[string]bool{"p2": true}, RunFailed, []string{"one", "p1", "p2", "onfail", "always"}},
		{"one fails", map[string]bool{"one": true}, RunFailed, []string{"one", "pf", "onfail", "always"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := State{Steps: map[StepRef]StepStatus{}}
			var started []string
			for i := 0; ; i++ {
				if i > 100 {
					t.Fatal("the run never ends")
				}
				d := p.Plan(st)
				for _, s := range d.Skip {
					st.Steps[s] = StepSkipped
				}
				if d.Done {
					if d.Status != tc.want {
						t.Errorf("status %s, want %s", d.Status, tc.want)
					}
					break
				}
				if len(d.Start) == 0 {
					t.Fatalf("nothing to start and not done: %+v", st)
				}
				for _, s := range d.Start {
					if st.Steps[s] != "" {
						t.Fatalf("%s started twice", s)
					}
					started = append(started, s.Step)
					st.Steps[s] = StepSucceeded
					if tc.fail[s.Step] {
						st.Steps[s] = StepFailed
					}
				}
			}
			if diff := cmp.Diff(tc.started, started); diff != "" {
				t.Errorf("started (-want +got):\n%s", diff)
			}
		})
	}
}
