package protocol

// Re-runs (since the web UI runs pipelines): POST PathRuns + "/{id}/rerun"
// (RerunRequest, optional) starts a new run of the run's pipeline with the
// run's definition (its version) and inputs, some of them replaced by the
// request's; it answers the new Run (201), whose RerunOf names the run.
const (
	// TriggerRerun is the Trigger of a run a re-run started.
	TriggerRerun = "rerun"
)

// RerunRequest replaces some inputs of the run a re-run runs again (the
// others keep the run's values).
type RerunRequest struct {
	Inputs map[string]string `json:"inputs,omitempty"`
}

// PipelineInput is one input a pipeline declares. Inputs are text: the
// definition gives no other type.
type PipelineInput struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Default is the value a run that does not give it gets; nil: the
	// input is required.
	Default *string `json:"default,omitempty"`
}
