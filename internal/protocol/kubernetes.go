package protocol

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// TaskKubernetes applies Kubernetes manifests and waits for their rollout
// (a KubernetesSpec), on the delegate, in a child process of its own.
const TaskKubernetes = "kubernetes"

// KubernetesSpec is the payload of a kubernetes task
// (TaskSpec.Kubernetes): the documents to apply with server-side apply
// into one namespace, how long their rollout may take, and whether a
// failed rollout is rolled back. The delegate's credentials (its
// ServiceAccount in a pod, else its kubeconfig) decide what it may touch.
type KubernetesSpec struct {
	// Namespace is where every namespaced document goes; a document that
	// names another namespace is refused. Required.
	Namespace string `json:"namespace"`
	// Manifests are the documents to apply, in order: each entry is YAML
	// or JSON text holding one document or several separated by "---".
	Manifests []string `json:"manifests"`
	// TimeoutMS bounds the wait for the rollout of the workloads applied
	// (Deployments, StatefulSets, DaemonSets), and that of a rollback,
	// each; 0 means DefaultKubernetesTimeoutMS. The task's own timeout
	// (TaskSpec.TimeoutMS) bounds the whole task.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Rollback is what happens when a rollout fails: RollbackAuto rolls
	// each Deployment the task changed back to the revision it had before;
	// RollbackNone ("" too) leaves the cluster as the failed rollout left
	// it.
	Rollback string `json:"rollback,omitempty"`
	// Strategy is how workloads are rolled out: "" or StrategyRolling
	// (their own rolling update), StrategyCanary (a canary Deployment
	// beside each stable one, then promoted or aborted) or
	// StrategyBlueGreen (each Deployment in two colours, the Service
	// switched between them). Canary and blue-green take Deployments
	// only.
	Strategy string `json:"strategy,omitempty"`
	// Action is the step of a canary (CanaryStart, CanaryPromote,
	// CanaryAbort) or a blue-green (BlueGreenDeploy, BlueGreenSwitch,
	// BlueGreenSwapBack); a rolling deploy has none.
	Action string `json:"action,omitempty"`
	// Canary is the canary's share of the replicas (for CanaryStart).
	Canary *KubeCanary `json:"canary,omitempty"`
	// BlueGreen names the Service a blue-green switches.
	BlueGreen *KubeBlueGreen `json:"blue_green,omitempty"`
	// Cluster, when set, is the API server the task deploys to and the
	// credentials it uses there, in place of the delegate's own.
	Cluster *KubeCluster `json:"cluster,omitempty"`
	// Files are manifests read from Workspace (paths in it: a file, or a
	// directory whose *.yaml, *.yml and *.json files are read in name
	// order), applied after Manifests as they are. Since v4.
	Files []string `json:"files,omitempty"`
	// Workspace is the stage workspace Files are in; set by the manager
	// alone (see DeployWorkspace).
	Workspace *DeployWorkspace `json:"workspace,omitempty"`
}

// Values of KubernetesSpec.Rollback, Strategy and Action.
const (
	RollbackAuto      = "auto"
	RollbackNone      = "none"
	StrategyRolling   = "rolling"
	StrategyCanary    = "canary"
	StrategyBlueGreen = "blue-green"

	CanaryStart   = "start"
	CanaryPromote = "promote"
	CanaryAbort   = "abort"

	BlueGreenDeploy   = "deploy"
	BlueGreenSwitch   = "switch"
	BlueGreenSwapBack = "swap-back"
)

// KubeCanary is a canary's share of each Deployment's replicas: Percent
// of them (rounded up, at least 1) or a number of Replicas; one of the
// two.
type KubeCanary struct {
	Percent  int `json:"percent,omitempty"`
	Replicas int `json:"replicas,omitempty"`
}

// KubeBlueGreen is the Service whose selector a blue-green switches
// between the colours (label legate.dev/color).
type KubeBlueGreen struct {
	Service string `json:"service"`
}

// MaxKubeCanaryReplicas bounds KubeCanary.Replicas.
const MaxKubeCanaryReplicas = 1000

// Limits of a kubernetes task's payload.
const (
	// MaxKubernetesManifests bounds the entries of Manifests.
	MaxKubernetesManifests = 100
	// MaxKubernetesManifestBytes bounds the text of all Manifests: 1 MiB
	// (a Kubernetes object is at most 1.5 MiB in etcd).
	MaxKubernetesManifestBytes = 1 << 20
	// DefaultKubernetesTimeoutMS is the rollout timeout when TimeoutMS is
	// 0: 10 minutes, Kubernetes' own progress deadline.
	DefaultKubernetesTimeoutMS = 10 * 60 * 1000
	// MaxKubernetesTimeoutMS bounds TimeoutMS: 24 hours.
	MaxKubernetesTimeoutMS = 24 * 60 * 60 * 1000
)

// Deploy outputs: a kubernetes task's Outputs (ResultRequest.Outputs)
// carry under OutputDeployStatus how the deploy ended: DeploySucceeded,
// DeployFailed, or DeployRolledBack when a failed rollout was rolled back
// (the task then ends failed, its error saying so).
const (
	OutputDeployStatus = "deploy_status"
	DeploySucceeded    = "succeeded"
	DeployFailed       = "failed"
	DeployRolledBack   = "rolled_back"
)

// Validate checks a kubernetes task's payload (nil: none) and normalizes
// Rollback ("" → none) and Strategy ("" → rolling). The manifests are text
// here (this package has no YAML); the delegate parses them and refuses
// what is not a Kubernetes object.
func (k *KubernetesSpec) Validate() error {
	if k == nil {
		return errors.New(`a kubernetes task needs a "kubernetes" section with a namespace and manifests`)
	}
	if err := CheckKubernetesName("kubernetes namespace", k.Namespace); err != nil {
		return err
	}
	if err := k.validateFiles(); err != nil {
		return err
	}
	if len(k.Manifests) == 0 && len(k.Files) == 0 {
		return errors.New("a kubernetes task needs at least one manifest")
	}
	if len(k.Manifests) > MaxKubernetesManifests {
		return fmt.Errorf("a kubernetes task has %d manifests: at most %d", len(k.Manifests), MaxKubernetesManifests)
	}
	total := 0
	for i, m := range k.Manifests {
		total += len(m)
		if total > MaxKubernetesManifestBytes {
			return fmt.Errorf("the manifests of a kubernetes task are larger than %d bytes in all", MaxKubernetesManifestBytes)
		}
		if strings.TrimSpace(m) == "" {
			return fmt.Errorf("kubernetes manifest %d is empty", i)
		}
		if err := checkManifestText(m); err != nil {
			return fmt.Errorf("kubernetes manifest %d: %w", i, err)
		}
	}
	if err := k.Cluster.Validate(); err != nil {
		return err
	}
	if k.TimeoutMS < 0 || k.TimeoutMS > MaxKubernetesTimeoutMS {
		return fmt.Errorf("kubernetes timeout_ms must be between 0 (the default, %d) and %d", DefaultKubernetesTimeoutMS, MaxKubernetesTimeoutMS)
	}
	switch k.Rollback {
	case "":
		k.Rollback = RollbackNone
	case RollbackAuto, RollbackNone:
	default:
		return fmt.Errorf("kubernetes rollback %q is invalid: use auto or none", k.Rollback)
	}
	return k.validateStrategy()
}

// validateStrategy checks Strategy, Action, Canary and BlueGreen together.
func (k *KubernetesSpec) validateStrategy() error {
	switch k.Strategy {
	case "":
		k.Strategy = StrategyRolling
		fallthrough
	case StrategyRolling:
		if k.Action != "" || k.Canary != nil || k.BlueGreen != nil {
			return errors.New("kubernetes action, canary and blue_green are for the canary and blue-green strategies: a rolling deploy takes none")
		}
	case StrategyCanary:
		switch k.Action {
		case CanaryStart, CanaryPromote, CanaryAbort:
		default:
			return fmt.Errorf("kubernetes canary action %q is invalid: use start (a canary beside the stable Deployment), promote (roll out to the stable one, delete the canary) or abort (delete the canary)", k.Action)
		}
		if k.BlueGreen != nil {
			return errors.New("kubernetes blue_green is for the blue-green strategy, not canary")
		}
		if k.Canary == nil && k.Action == CanaryStart {
			return errors.New("kubernetes canary start needs canary: {percent: P} or {replicas: N}, the canary's share")
		}
		if c := k.Canary; c != nil {
			if (c.Percent == 0) == (c.Replicas == 0) {
				return errors.New("kubernetes canary needs one of percent (1-100) or replicas, not both or neither")
			}
			if c.Percent < 0 || c.Percent > 100 || c.Replicas < 0 || c.Replicas > MaxKubeCanaryReplicas {
				return fmt.Errorf("kubernetes canary percent must be 1-100 and replicas 1-%d", MaxKubeCanaryReplicas)
			}
		}
	case StrategyBlueGreen:
		switch k.Action {
		case BlueGreenDeploy, BlueGreenSwitch, BlueGreenSwapBack:
		default:
			return fmt.Errorf("kubernetes blue-green action %q is invalid: use deploy (the idle colour, then switch to it), switch or swap-back (to the other colour, which must be ready)", k.Action)
		}
		if k.Canary != nil {
			return errors.New("kubernetes canary is for the canary strategy, not blue-green")
		}
		if k.BlueGreen == nil {
			return errors.New("kubernetes blue-green needs blue_green: {service: NAME}, the Service it switches")
		}
		if err := CheckKubernetesName("kubernetes blue_green service", k.BlueGreen.Service); err != nil {
			return err
		}
	default:
		return fmt.Errorf("kubernetes strategy %q is not supported: use rolling, canary or blue-green", k.Strategy)
	}
	return nil
}

// checkManifestText refuses text that is not valid UTF-8 or holds control
// characters other than tab, newline and carriage return (YAML's own
// rule), so that output quoting a manifest stays printable.
func checkManifestText(s string) error {
	for i, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Errorf("not valid UTF-8 (byte %d)", i)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return fmt.Errorf("contains the control character U+%04X at byte %d", r, i)
		}
	}
	return nil
}

// CheckKubernetesName checks a Kubernetes namespace's name (what names
// it): a DNS label, 1 to 63 lower-case letters, digits and '-', starting
// and ending with a letter or digit.
func CheckKubernetesName(what, s string) error {
	ok := s != "" && len(s) <= 63 && s[0] != '-' && s[len(s)-1] != '-'
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	if !ok {
		return fmt.Errorf("%s %q is invalid: use 1-63 lower-case letters, digits or '-', starting and ending with a letter or digit", what, s)
	}
	return nil
}
