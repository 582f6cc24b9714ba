package protocol

// "What runs where" and rollbacks (since v4, with the deployments API).
const (
	// PathDeploymentsCurrent answers, per service and environment, the
	// deployment that runs now and the one before (GET
	// CurrentDeployments; query service, environment).
	PathDeploymentsCurrent = PathDeployments + "/current"
	// PathDeploymentsRollback re-deploys the previous good version of a
	// service in an environment through the same pipeline (POST
	// RollbackRequest; answers the new Run, 201).
	PathDeploymentsRollback = PathDeployments + "/rollback"
	// PathDeployments + "/{id}" gets one deployment with its records.

	// TriggerRollback is the Trigger of a run a rollback started.
	TriggerRollback = "rollback"
)

// A Deployment's Records are what its deploy steps reported they
// deployed (OutputDeployRecord), in the order the steps ran; RollbackOf
// is the deployment it rolls back (its run was started by a rollback).

// CurrentDeployment is what runs in one environment of one service (of
// one pipeline scope): the last succeeded deployment, and the succeeded
// one before it with another version (nil when none).
type CurrentDeployment struct {
	Service     string      `json:"service"`
	Environment string      `json:"environment"`
	Org         string      `json:"org,omitempty"`
	Project     string      `json:"project,omitempty"`
	Current     Deployment  `json:"current"`
	Previous    *Deployment `json:"previous,omitempty"`
}

// CurrentDeployments answers GET PathDeploymentsCurrent, ordered by
// service, environment and scope.
type CurrentDeployments struct {
	Current []CurrentDeployment `json:"current"`
}

// RollbackRequest asks for a rollback of Service in Environment: a new
// run of the pipeline of its current deployment with the inputs of the
// run of To (a succeeded deployment of that service and environment), or
// of the previous one when To is empty. Org and Project choose the
// pipeline scope when the service is deployed from several.
type RollbackRequest struct {
	Service     string `json:"service"`
	Environment string `json:"environment"`
	Org         string `json:"org,omitempty"`
	Project     string `json:"project,omitempty"`
	To          string `json:"to,omitempty"`
}
