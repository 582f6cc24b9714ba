package protocol

// PathManifests generates an install manifest (POST a ManifestRequest; the
// answer is the manifest as text/plain). It is the API of `legate manifest`
// and of internal/manifest: the CLI calls it, so the CLI and the API give
// the same output for the same request. Since v4 (added 2026-11-23 with
// the install manifests; no delegate-facing change).
const PathManifests = "/api/v1/manifests"

// ManifestRequest asks for the manifest of one delegate install. The zero
// value of each optional field means its documented default; a field that
// does not apply to Kind must stay zero (it is refused otherwise, so a
// setting is never silently dropped).
type ManifestRequest struct {
	// Kind is one of kubernetes, helm, docker, ecs, fargate, systemd.
	Kind string `json:"kind"`
	// Org and Project are the scope of the delegate the manifest is for
	// (the level of its token). The manager checks the caller's
	// delegate:edit permission there; they are not in the output.
	Org     string `json:"org,omitempty"`
	Project string `json:"project,omitempty"`
	// AccountID is the delegate's account. Over the API the manager sets
	// it to the caller's account; a different value is refused.
	AccountID string `json:"account_id,omitempty"`
	// ManagerURL is the URL delegates reach the manager at
	// (MANAGER_HOST_AND_PORT). Over the API, empty means the manager's
	// public URL (its --public-url).
	ManagerURL string `json:"manager_url"`
	// AllowLoopback accepts a ManagerURL on loopback (localhost,
	// 127.0.0.0/8, ::1), unspecified (0.0.0.0, ::) or link-local: in a
	// container or on another host that address is the delegate's own,
	// so such a URL is refused unless this asks for a trial on the
	// manager's host (the docker kinds then use the host's network).
	AllowLoopback bool `json:"allow_loopback,omitempty"`

	// The token: its value (Token, embedded in the output: treat the
	// output as a secret), or where it lives: TokenSecret names an
	// existing Kubernetes Secret with the key DELEGATE_TOKEN (kubernetes,
	// helm); TokenSecretARN is a Secrets Manager ARN (ecs, fargate).
	// Exactly one of them is set.
	Token          string `json:"token,omitempty"`
	TokenSecret    string `json:"token_secret,omitempty"`
	TokenSecretARN string `json:"token_secret_arn,omitempty"`

	// Name is the delegate's name (DELEGATE_NAME); empty means
	// "legate-delegate". Replicas with one name form one delegate.
	Name string `json:"name,omitempty"`
	// Tags are the delegate's tags (DELEGATE_TAGS).
	Tags []string `json:"tags,omitempty"`
	// Replicas is the number of delegate processes; 0 means 1.
	Replicas int `json:"replicas,omitempty"`
	// Image is the container image (not for systemd); empty means the
	// manager's delegate image (its --delegate-image). With neither, the
	// request is refused: the image must be published first.
	Image string `json:"image,omitempty"`
	// Env is extra environment, after the variables the manifest sets
	// itself (proxy settings, INIT_SCRIPT, thresholds...).
	Env []EnvVar `json:"env,omitempty"`
	// Description is DELEGATE_DESCRIPTION.
	Description string `json:"description,omitempty"`

	// Kubernetes (kind kubernetes, helm).
	// Namespace defaults to "legate-delegate".
	Namespace string `json:"namespace,omitempty"`
	// RBAC is cluster (the default: a ClusterRole over every namespace),
	// namespace (a Role limited to Namespace) or none.
	RBAC string `json:"rbac,omitempty"`
	// Upgrade (every kind) is UpgradeAutomatic (the default) or
	// UpgradeSelfManaged (you change the image or binary). Automatic on
	// kubernetes and helm: an hourly upgrader CronJob asks the manager
	// which version the delegate should run and patches the StatefulSet's
	// image, with a ServiceAccount that may only get and patch that
	// StatefulSet; on docker, ecs, fargate and systemd: legate watcher
	// runs the delegate and upgrades its binary with no downtime. Since
	// v4 (kubernetes only, self-managed by default until the default
	// became automatic in every kind).
	Upgrade string `json:"upgrade,omitempty"`

	// Docker: Compose asks for a compose file instead of docker run.
	Compose bool `json:"compose,omitempty"`

	// ECS and Fargate.
	// Service asks for the service JSON (CreateServiceInput) instead of
	// the task definition.
	Service bool `json:"service,omitempty"`
	// Region is the AWS region of the awslogs log driver (required).
	Region string `json:"region,omitempty"`
	// ExecutionRoleARN is the task execution role: required for Fargate,
	// and for ECS when the token comes from TokenSecretARN.
	ExecutionRoleARN string `json:"execution_role_arn,omitempty"`
	// Cluster is the ECS cluster of the service; empty means
	// "legate-delegate".
	Cluster string `json:"cluster,omitempty"`
	// Subnets and SecurityGroups are the awsvpc network of a Fargate
	// service (at least one subnet); AssignPublicIP gives its tasks a
	// public address (default: none; use a private subnet with NAT).
	Subnets        []string `json:"subnets,omitempty"`
	SecurityGroups []string `json:"security_groups,omitempty"`
	AssignPublicIP bool     `json:"assign_public_ip,omitempty"`

	// CPU and Memory size the delegate. Kubernetes and helm: resource
	// requests as quantities (default "50m", "64Mi"); ECS and Fargate:
	// task CPU units and MiB (default "256" and "512", a valid Fargate
	// pair). Not for docker and systemd.
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`

	// Size is a preset of the delegate's resources: laptop, small,
	// medium or large (docs/install.md has the table and where each
	// number comes from): Kubernetes and Helm requests and limits, ECS
	// and Fargate task CPU and memory, docker --cpus and --memory,
	// systemd CPUQuota and MemoryMax, and the delegate's task capacity.
	// Not with CPU or Memory. Since v4.
	Size string `json:"size,omitempty"`
	// RunAsRoot runs the delegate as root (uid 0) instead of the image's
	// uid 1000, for INIT_SCRIPTs that install packages: Kubernetes and
	// Helm runAsUser 0, docker and compose user 0, ECS and Fargate user
	// "0", systemd User=root. Since v4.
	RunAsRoot bool `json:"run_as_root,omitempty"`
	// Hostname (ecs, fargate task definitions) is the delegate's host
	// name, its identity with the account and name: restarts keep one
	// instance. ECS (bridge) sets the container's hostname; Fargate
	// (awsvpc, where ECS takes no hostname) sets DELEGATE_HOSTNAME.
	// Since v4.
	Hostname string `json:"hostname,omitempty"`

	// Autoscale (kubernetes) is MIN:MAX: the StatefulSet's replicas follow
	// its queue signal within those bounds (docs/elastic.md).
	// AutoscaleWith says by what: AutoscaleLegate (the default: a
	// Deployment running legate autoscaler, whose RBAC may only get and
	// patch that StatefulSet's scale), AutoscaleKEDA (a KEDA ScaledObject
	// with a metrics-api trigger) or AutoscaleHPA (a HorizontalPodAutoscaler
	// on an external metric).
	Autoscale     string `json:"autoscale,omitempty"`
	AutoscaleWith string `json:"autoscale_with,omitempty"`
}

// Autoscalers of ManifestRequest.AutoscaleWith.
const (
	AutoscaleLegate = "legate"
	AutoscaleKEDA   = "keda"
	AutoscaleHPA    = "hpa"
)

// EnvVar is one environment variable of a manifest.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Kubernetes upgrade modes (ManifestRequest.Upgrade).
const (
	UpgradeSelfManaged = "self-managed"
	UpgradeAutomatic   = "auto"
)
