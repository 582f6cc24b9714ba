package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Deploy steps (kubernetes, helm) report what they did in two outputs of
// their result (ResultRequest.Outputs), beside the task's status:
// OutputDeployStatus (DeploySucceeded, DeployFailed, DeployRolledBack)
// and OutputDeployRecord, a DeployRecord as JSON. The manager keeps the
// record with the deployment of the step's stage. A shell step may write
// deploy_status itself (a rollback script writing rolled_back, say).
const OutputDeployRecord = "deploy_record"

// DeploymentRolledBack is the status of a deployment whose deploy failed
// and was rolled back (by the step's own rollback, or a step of the stage
// that reported DeployRolledBack).
const DeploymentRolledBack = "rolled_back"

// MaxDeployRecordBytes bounds a DeployRecord's JSON (it is an output: the
// outputs' own bound, MaxOutputBytes, holds too).
const MaxDeployRecordBytes = 16 << 10

// DeployRecord is what one deploy step changed in a cluster: the
// workloads it rolled out (their images and revisions) or the Helm
// release it installed. Fields that do not apply are empty.
type DeployRecord struct {
	// Type is the step's task type: TaskKubernetes or "helm".
	Type string `json:"type"`
	// Strategy is the kubernetes step's strategy ("rolling", ...); the
	// action within it when it has several ("canary: promote").
	Strategy string `json:"strategy,omitempty"`
	// Cluster is the API server's URL as the delegate reached it (in-cluster
	// or a connector's); empty when unknown.
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace"`
	// Workloads are the Deployments, StatefulSets and DaemonSets the step
	// applied (for helm: those of the release, when known).
	Workloads []DeployedWorkload `json:"workloads,omitempty"`
	// Release, Chart, ChartVersion, AppVersion and ReleaseRevision
	// describe a Helm release.
	Release         string `json:"release,omitempty"`
	Chart           string `json:"chart,omitempty"`
	ChartVersion    string `json:"chart_version,omitempty"`
	AppVersion      string `json:"app_version,omitempty"`
	ReleaseRevision int    `json:"release_revision,omitempty"`
	// RolledBackTo is the revision the step rolled back to (a workload's
	// or a release's) when it rolled back.
	RolledBackTo string `json:"rolled_back_to,omitempty"`
}

// DeployedWorkload is one workload a deploy step rolled out.
type DeployedWorkload struct {
	// Kind is Deployment, StatefulSet or DaemonSet.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Images are its containers' images, in order.
	Images []string `json:"images,omitempty"`
	// Revision is its revision after the step (a Deployment's
	// deployment.kubernetes.io/revision, a StatefulSet's or DaemonSet's
	// controller revision), empty when unknown.
	Revision string `json:"revision,omitempty"`
}

// ParseDeployRecord decodes an OutputDeployRecord value, refusing one
// over MaxDeployRecordBytes or without a type.
func ParseDeployRecord(s string) (DeployRecord, error) {
	var r DeployRecord
	if len(s) > MaxDeployRecordBytes {
		return r, fmt.Errorf("deploy record is %d bytes: at most %d", len(s), MaxDeployRecordBytes)
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return r, fmt.Errorf("deploy record: %w", err)
	}
	if r.Type == "" {
		return r, errors.New("deploy record has no type")
	}
	return r, nil
}

// KubeCluster is a Kubernetes API server a deploy step reaches with given
// credentials instead of the delegate's own (its ServiceAccount or its
// kubeconfig): what a Kubernetes connector (Connector.Type
// ConnectorKubernetes) puts into a kubernetes or helm task. The token is
// normally a stored secret's reference ("${secrets.NAME}"), bound and
// resolved as every secret of a task is.
type KubeCluster struct {
	// Server is the API server's URL: https://host[:port].
	Server string `json:"server"`
	// CAPEM is the PEM of the CA certificates that sign the server's
	// certificate; empty: the delegate's system roots.
	CAPEM string `json:"ca_pem,omitempty"`
	// Token is the bearer token the step presents.
	Token string `json:"token"`
}

// ConnectorKubernetes is the Connector.Type of a Kubernetes cluster.
const ConnectorKubernetes = "kubernetes"

// MaxKubeCAPEMBytes bounds KubeCluster.CAPEM.
const MaxKubeCAPEMBytes = 64 << 10

// Validate checks a cluster's fields (nil: none given, which is valid).
func (c *KubeCluster) Validate() error {
	if c == nil {
		return nil
	}
	u, err := url.Parse(c.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("kubernetes cluster server %q is invalid: use https://HOST[:PORT] (the API server's URL)", c.Server)
	}
	if len(c.CAPEM) > MaxKubeCAPEMBytes {
		return fmt.Errorf("kubernetes cluster CA is %d bytes: at most %d", len(c.CAPEM), MaxKubeCAPEMBytes)
	}
	if c.CAPEM != "" && !strings.Contains(c.CAPEM, "-----BEGIN CERTIFICATE-----") {
		return errors.New("kubernetes cluster CA is not PEM: give the CA certificate(s) as -----BEGIN CERTIFICATE----- blocks")
	}
	if strings.TrimSpace(c.Token) == "" {
		return errors.New("kubernetes cluster has no token: give a stored secret's reference, ${secrets.NAME}")
	}
	if strings.ContainsAny(c.Token, "\r\n") {
		return errors.New("kubernetes cluster token holds a line break")
	}
	return nil
}
