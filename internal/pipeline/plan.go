package pipeline

// StepStatus is where a step of a run stands, as the planner sees it. A
// step not in State.Steps has not started.
type StepStatus string

// The values of StepStatus.
const (
	StepRunning   StepStatus = "running"   // its task was created and has not ended
	StepSucceeded StepStatus = "succeeded" // its task succeeded
	StepFailed    StepStatus = "failed"    // its task ended otherwise (failed, timed out, not assigned, cancelled), or it could not start
	StepSkipped   StepStatus = "skipped"   // its `when` did not match, or the run was cancelled first
)

// RunStatus is where a run stands.
type RunStatus string

// The values of RunStatus.
const (
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// State is what the planner needs of a run.
type State struct {
	Steps map[StepRef]StepStatus
	// Cancelled: the run was cancelled; no step starts any more.
	Cancelled bool
}

// Decision is what to do next. Start and Skip may both be empty while
// steps are running; the caller records Start and Skip, and calls Plan
// again when a step ends.
type Decision struct {
	// Start: steps to start now (create their tasks), in pipeline order.
	Start []StepRef
	// Skip: steps that will not run, to record as skipped.
	Skip []StepRef
	// Done: the run is over with Status (RunRunning while not done).
	Done   bool
	Status RunStatus
}

func (w When) runs(failed bool) bool {
	switch w {
	case WhenFailure:
		return failed
	case WhenAlways:
		return true
	}
	return !failed
}

// Plan decides what a run does next. It is pure: the same state gives the
// same decision, so deciding twice (a manager restart, two managers)
// starts nothing twice as long as the caller records starts atomically.
//
// Items run in order: an item (a step or a parallel group) starts when
// every earlier item has ended; its steps whose `when` does not match the
// run so far (failed or not) are skipped; a group whose steps are all
// skipped ends at once. A cancelled run starts nothing, skips every step
// not started and is over when no step is running.
func (p *Pipeline) Plan(st State) Decision {
	d := Decision{Status: RunRunning}
	failed, running := false, false
	for _, stage := range p.Stages {
		for _, it := range stage.Items {
			busy := false
			for _, s := range it.Steps {
				ref := StepRef{stage.Name, s.Name}
				switch st.Steps[ref] {
				case StepRunning:
					busy, running = true, true
				case "":
					if !st.Cancelled && s.When.runs(failed) {
						d.Start = append(d.Start, ref)
						busy = true
					} else {
						d.Skip = append(d.Skip, ref)
					}
				}
			}
			if busy && !st.Cancelled {
				return d
			}
			for _, s := range it.Steps {
				if st.Steps[StepRef{stage.Name, s.Name}] == StepFailed {
					failed = true
				}
			}
		}
	}
	if running {
		return d
	}
	d.Done = true
	switch {
	case st.Cancelled:
		d.Status = RunCancelled
	case failed:
		d.Status = RunFailed
	default:
		d.Status = RunSucceeded
	}
	return d
}
