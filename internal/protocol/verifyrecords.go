package protocol

// DeploymentVerification is a verification a deployment keeps: the
// VerifyRecord one of its stage's steps reported (OutputVerifyRecord),
// and the step's name.
type DeploymentVerification struct {
	Step string `json:"step"`
	VerifyRecord
}

// MaxDeploymentVerifications bounds the verifications a deployment keeps
// (the latest of its stage's steps); each is at most MaxVerifyRecordBytes.
const MaxDeploymentVerifications = 8

// MaxDeploymentReasonBytes bounds a deployment's Reason.
const MaxDeploymentReasonBytes = 1024
