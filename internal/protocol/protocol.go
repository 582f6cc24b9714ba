// Package protocol is the single source of truth for the wire types shared by
// the legate manager, its delegates and the CLI: request and response bodies,
// event and heartbeat frames, task objects, and the append-only list of error
// codes; and the rules both sides apply to them, such as selector matching
// (MissingSelectors) and scope (Covers). It depends on the standard library
// only.
//
// Version history (the version only goes up). Peers of different versions
// work together: a manager accepts delegates and CLIs of every version from
// MinVersion on, older or newer than its own (a client from a later
// release included), and tells them its own version in the registration
// answer and in a HeaderProtocolVersion header on every response. Each side
// then uses only what the lower of the two versions has: a manager does not
// send an older delegate what its version lacks, and a newer client does
// not ask an older manager for it.
//
//	1 (2026-11-22): register, session refresh, WebSocket events and heartbeats,
//	  long-poll fallback, acquire with lease epoch, numbered log chunks,
//	  idempotent results, deregister.
//	2 (2026-11-22): scope (orgs, projects), capabilities with allow and deny
//	  lists (task_available events name the task's capabilities; delegates
//	  report validation results), connectors, resource thresholds in
//	  heartbeats, delegate-fault results, task explanations, fresh-start
//	  reconciliation of a restarted delegate's tasks.
//	3 (2026-11-22): delegate configurations: the registration answer carries
//	  the configuration that applies to the delegate, a configuration_changed
//	  event tells it to fetch it again (GET PathDelegateConfiguration), it
//	  reports each run (POST PathDelegateConfigurationResult) and says in its
//	  heartbeats while a configuration script runs (it takes no task then);
//	  registrations carry DELEGATE_DESCRIPTION. Older delegates ignore all of
//	  it and still work (MinVersion stays 1).
//	4 (2026-11-23): security hardening: every delegate call is checked
//	  against the scope of the delegate's token, an instance identity is
//	  bound to the token that registered it (identity_conflict), per-route
//	  body limits, API keys as objects; the manager's version header is on
//	  every response, refusals included. Older delegates still work.
//	  Delegate listings leave out instances that deregistered unless asked
//	  (?all=true; status "deregistered"), and DELETE PathDelegates/{name}
//	  removes a delegate group that is not connected and runs no task.
//	  Users and roles (admin API only): users, service accounts, groups,
//	  roles and bindings (PathUsers, PathGroups, PathRoles, PathBindings),
//	  sign-in sessions (PathSessions), API keys owned by a user or service
//	  account, every admin route checked against the caller's roles (403
//	  forbidden names the missing permission), and the code rate_limited.
//	  Delegate approval: tokens that require it
//	  (CreateTokenRequest.RequireApproval), delegates listed with their
//	  Approval, POST PathDelegates/{name}/approve and /reject, the code
//	  delegate_rejected (a rejected delegate stops) and the assignment
//	  rule pending_approval; the audit log (GET PathAudit). Install
//	  manifests (admin API): POST PathManifests with a ManifestRequest
//	  answers the text of one install artifact (legate manifest KIND).
//	  Secrets: stored secrets at account, org and project scope
//	  (PathSecrets); tasks reference them as ${secrets.NAME}, which the
//	  manager resolves only into the acquire answer, whose Mask lists the
//	  values it put there for the delegate to mask (a delegate that
//	  predates Mask masks only SecretEnv values).
//	  Deployments (admin API only): GET PathDeployments lists the
//	  deployments of pipeline runs; GET PathLimits shows an account's
//	  deployment limits and their usage, PUT PathLimits sets them; a run
//	  over a limit is refused with the code deployment_limit.
//	  Step outputs: a shell task gets in $LEGATE_OUTPUT (OutputEnv) the
//	  path of a file to which it may write KEY=VALUE lines; the delegate
//	  sends them, masked, in ResultRequest.Outputs. An older delegate
//	  sends none.
//	  Pipelines (admin API only): PathPipelines (apply, list, get, delete,
//	  run) and PathRuns (list, get, cancel).
//	  Webhooks: POST/DELETE PathPipelines/{name}/webhook enables
//	  (EnableWebhookRequest → WebhookSecret) or disables a pipeline's
//	  webhook, Pipeline.Webhook says whether it has one; POST
//	  PathHooks/{id} (no credentials) starts a run: a delivery is signed
//	  with HeaderLegateSignature256 over HeaderLegateTimestamp,
//	  HeaderLegateDelivery and the body, accepted once per delivery ID
//	  (Run.Delivery) and within a window of its timestamp; a body-only
//	  HeaderHubSignature256 (the form of earlier managers) is refused.
//	  Task containers: tasks of type container (TaskSpec.Container, a
//	  ContainerSpec); a delegate registers its
//	  RegisterRequest.ContainerRuntime and Platform, and one without a
//	  runtime is not offered container tasks (rule no_container_runtime).
//	  A pipeline step's empty_dir may carry a Workspace, which only the
//	  manager sets (a submitted task that sets it is refused), as the
//	  Workspace of a kubernetes or helm step that reads its files or
//	  chart from one (KubernetesSpec.Files, HelmSpec.ChartPath). An older
//	  delegate registers without a runtime and gets no container task.
//	  Upgrades (upgrade.go): RegisterRequest.Upgrade and Slot,
//	  Delegate.Upgrade, UpgradeState and WantedVersion, the watcher's
//	  PathUpgradeCheck and PathReleases, PUT PathDelegates/{name}/upgrade
//	  (UpgradePolicyRequest: pin, hold, release, ring), rings with a soak
//	  time (Delegate.UpgradeRing, UpgradeWaiting),
//	  ManifestRequest.Upgrade, and the code delegate_expired.
//	  Delegates at scale: a delegate listing takes a limit, a page cursor
//	  and filters (DelegateQuery; DelegateList.Next), and a heartbeat may
//	  carry the delegate's performance figures (Heartbeat.Perf, shown as
//	  Delegate.Perf). Older delegates send none; an older manager ignores
//	  both.
//	5 (2026-11-26): fewer round trips per task: over its
//	  WebSocket a delegate may report a task started (FrameStarted) and its
//	  result (FrameResult), and claim several offered tasks at once
//	  (FrameAcquire), each frame numbered (Frame.Req) and answered by an
//	  EventAck with the same number: ok, or the error the HTTP call would
//	  give. A manager answers a numbered frame of a kind it does not know
//	  with the code unknown_frame. A delegate sends these frames only to a
//	  manager of version WSReportsVersion or later (the version header of
//	  the WebSocket's upgrade answer), and falls back to the HTTP calls on
//	  a timeout, a closed connection or unknown_frame. Older delegates and
//	  managers keep to the HTTP calls.
//	  The registration answer may carry Logs (LogLimits): how much of a
//	  task's output the manager stores (its head and tail) and how much
//	  output one upload of log frames may carry (at most MaxLogUpload); a
//	  delegate gathers a fast task's output past the head into uploads
//	  that large only when it got them, else sends at most 1 MiB each.
//	  A delegate registers the task types it runs
//	  (RegisterRequest.TaskTypes) and is offered no task of another type
//	  (rule task_type); one that registers none (an older delegate) is
//	  taken to run shell, http and container tasks, so it is never
//	  offered a kubernetes task. Kubernetes connectors carry a CA and the
//	  name of the stored secret with their token (Connector.CAPEM,
//	  TokenSecret); an older manager ignores them.
package protocol

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Version is the protocol version spoken by this build. A manager of this
// build answers with it; it accepts every client version that Supported
// accepts, newer ones included.
const Version = 5

// MinVersion is the oldest protocol version a manager of this build
// accepts; an older client is refused with CodeVersion.
const MinVersion = 1

// MaskVersion is the first version whose delegates mask the values an
// acquire answer lists in AcquireResponse.Mask (the stored secrets the
// manager resolved into the spec). Older delegates are not handed tasks
// that use stored secrets: they would print the values unmasked.
const MaskVersion = 4

// WSReportsVersion is the first version whose managers take started,
// result and acquire frames over the WebSocket (FrameStarted, FrameResult,
// FrameAcquire).
const WSReportsVersion = 5

// Supported reports whether a manager of this build serves a client that
// speaks protocol version v: any version from MinVersion on, newer than
// Version included (the client then uses only what Version has).
func Supported(v int) bool { return v >= MinVersion }

// API paths. Delegate endpoints authenticate with a session credential,
// admin endpoints with an API key; both as "Authorization: Bearer <secret>".
const (
	PathRegister   = "/api/v1/delegate/register"
	PathSession    = "/api/v1/delegate/session"
	PathWebSocket  = "/api/v1/delegate/ws"
	PathEvents     = "/api/v1/delegate/events"
	PathHeartbeat  = "/api/v1/delegate/heartbeat"
	PathDeregister = "/api/v1/delegate/deregister"
	// PathDelegateTask is followed by "/{id}/acquire", "/started", "/logs" or "/result".
	PathDelegateTask = "/api/v1/delegate/tasks"

	// PathCapabilities receives capability validation results.
	PathCapabilities = "/api/v1/delegate/capabilities"

	// PathDelegateConfiguration answers (GET) the configuration that
	// applies to the calling delegate; PathDelegateConfigurationResult
	// receives (POST) the outcome of running it. Since v3.
	PathDelegateConfiguration       = "/api/v1/delegate/configuration"
	PathDelegateConfigurationResult = "/api/v1/delegate/configuration/result"

	// PathDelegateInitSecrets answers (POST, with the delegate token as
	// at registration) the stored secrets a delegate's INIT_SCRIPT uses,
	// among those its token gives (InitSecretsRequest). Since v5.
	PathDelegateInitSecrets = "/api/v1/delegate/init-secrets"

	// PathConfigurations is the admin API of delegate configurations
	// (+ "/{name}"). Since v3.
	PathConfigurations = "/api/v1/configurations"

	PathOrgs       = "/api/v1/orgs"       // + "/{org}/projects"
	PathConnectors = "/api/v1/connectors" // + "/{name}"
	PathProjects   = "/api/v1/projects"   // listing, ?org=ORG
	// Task explanations are served at PathTasks + "/{id}/explain"; one
	// delegate's details at PathDelegates + "/{name}" (DELETE removes the
	// delegate). A listing of PathDelegates leaves out the instances that
	// deregistered unless QueryAll is "true".
	PathTokens    = "/api/v1/tokens"
	PathDelegates = "/api/v1/delegates"
	PathTasks     = "/api/v1/tasks"
	PathWhoAmI    = "/api/v1/whoami"
	PathHealth    = "/healthz"

	// PathAPIKeys is the admin API of API keys: create (POST), list (GET),
	// and revoke (POST + "/{name}/revoke"). Since v4.
	PathAPIKeys = "/api/v1/apikeys"

	// Users and roles (since v4). PathUsers holds users and
	// service accounts (+ "/{name}"); PathGroups groups (+ "/{name}",
	// + "/{name}/members", + "/{name}/members/{member}"); PathRoles custom
	// and built-in roles (+ "/{name}"); PathBindings bindings (DELETE
	// names the binding in the query: role, subject_kind, subject, org,
	// project); PathSessions sign-in sessions (POST signs in, DELETE
	// revokes the session of the request).
	PathUsers    = "/api/v1/users"
	PathGroups   = "/api/v1/groups"
	PathRoles    = "/api/v1/roles"
	PathBindings = "/api/v1/bindings"
	PathSessions = "/api/v1/sessions"
	// PathSignInLinks makes a one-time sign-in link of the web UI for the
	// user of the request (POST; legate ui). Since v4.
	PathSignInLinks = "/api/v1/signin-links"

	// PathAudit lists the audit log (GET; newest first; query
	// parameters since, user, resource, limit and the cursor after).
	// Approvals are POST PathDelegates + "/{name}/approve" and
	// "/{name}/reject". Since v4.
	PathAudit = "/api/v1/audit"

	// PathSecrets is the admin API of stored secrets (since v4):
	// create (POST), list names (GET), and + "/{name}" with the scope in
	// the query (?org=&project=) get metadata (GET), update the value
	// (PATCH), delete (DELETE). No route returns a value.
	PathSecrets = "/api/v1/secrets"

	// PathDeployments lists deployments (GET; newest first; query
	// parameters service, environment, since (RFC 3339), limit and the
	// cursor page, from a listing's Next). Since v4.
	PathDeployments = "/api/v1/deployments"
	// PathLimits is the account's deployment limits: GET shows them with
	// their usage (DeploymentLimits), PUT sets them (SetLimitsRequest).
	// Since v4.
	PathLimits = "/api/v1/limits"
	// PathPipelines is the admin API of pipelines (since v4):
	// apply (POST ApplyPipelineRequest), list (GET), and + "/{name}" with
	// the scope in the query (?org=&project=) get (GET) and delete
	// (DELETE); + "/{name}/runs" starts a run (POST RunPipelineRequest).
	PathPipelines = "/api/v1/pipelines"
	// PathPipelinesDryRun checks an apply (POST ApplyPipelineRequest) and
	// answers what it would do, storing nothing. A route of its own, not a
	// field of the apply: a manager older than dry runs answers it 404
	// instead of storing the file. Since v4.
	PathPipelinesDryRun = PathPipelines + "/dry-run"
	// PathRuns lists pipeline runs (GET; ?pipeline=, limit); + "/{id}"
	// gets one with its steps, + "/{id}/cancel" cancels it (POST). Since
	// v4.
	PathRuns = "/api/v1/runs"
	// PathHooks + "/{id}" is a pipeline's webhook (POST, no credentials:
	// the delivery is signed, HeaderLegateSignature256). Since v4.
	PathHooks = "/api/v1/hooks"
)

// Webhook headers, as GitHub sends them.
const (
	// HeaderHubSignature256 is GitHub's signature of a delivery: "sha256="
	// and the hex HMAC-SHA256 of the raw body alone. It signs no time and
	// no ID, so a delivery that carries only it is refused (a captured one
	// could be sent again).
	HeaderHubSignature256 = "X-Hub-Signature-256"
	// HeaderLegateDelivery names a delivery (signed; accepted once);
	// HeaderGitHubDelivery is GitHub's, no longer read.
	HeaderGitHubDelivery = "X-GitHub-Delivery"
	HeaderLegateDelivery = "X-Legate-Delivery"
	// HeaderGitHubEvent names the event; "ping" (sent when a webhook is
	// added on GitHub) is answered without starting a run.
	HeaderGitHubEvent = "X-GitHub-Event"
	// HeaderLegateTimestamp is when a delivery was signed, in Unix
	// seconds; HeaderLegateSignature256 is "sha256=" and the hex
	// HMAC-SHA256, keyed with the webhook's secret, of the timestamp, ".",
	// the delivery ID (HeaderLegateDelivery), "." and the raw body.
	HeaderLegateTimestamp    = "X-Legate-Timestamp"
	HeaderLegateSignature256 = "X-Legate-Signature-256"
)

// QueryAll is the query parameter of a delegate listing that includes
// the instances that deregistered ("true").
const QueryAll = "all"

// HeaderProtocolVersion carries the sender's protocol version on every
// request, and the manager's on every response.
const HeaderProtocolVersion = "Legate-Protocol-Version"

// HeaderAccountID carries the account ID of a registration, next to its
// token as "Authorization: Bearer TOKEN", so that the manager checks the
// credentials before it reads the body. Such a registration may carry a
// larger body (a long list of tasks a re-registering delegate still runs)
// than one whose credentials are only in its body. Since v4; the body
// still carries both, for older managers.
const HeaderAccountID = "Legate-Account-Id"

// Task types.
const (
	TaskShell = "shell"
	TaskHTTP  = "http"
	// TaskContainer runs a ContainerSpec with the delegate's container
	// runtime. Since v4.
	TaskContainer = "container"
)

// Task statuses. Terminal statuses never change again.
const (
	StatusQueued      = "queued"
	StatusRunning     = "running"
	StatusSucceeded   = "succeeded"
	StatusFailed      = "failed"
	StatusTimedOut    = "timed_out"
	StatusNotAssigned = "not_assigned"
	StatusCancelled   = "cancelled"
)

// Terminal reports whether a task in status s will never change again.
func Terminal(s string) bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusTimedOut, StatusNotAssigned, StatusCancelled:
		return true
	}
	return false
}

// ValidStatus reports whether s is a known task status.
func ValidStatus(s string) bool {
	return s == StatusQueued || s == StatusRunning || Terminal(s)
}

// Delegate connection kinds and statuses as the manager reports them.
const (
	ConnWebSocket = "websocket"
	ConnPolling   = "polling"

	DelegateConnected    = "connected"
	DelegateDisconnected = "disconnected"
	// DelegateDeregistered: the instance stopped cleanly and said so. It
	// is listed only on request, until the manager prunes it.
	DelegateDeregistered = "deregistered"
)

// ---------------------------------------------------------------------------
// Registration and sessions

// RegisterRequest is sent once when a delegate starts (and again if its
// session is lost). The raw token is sent only here.
type RegisterRequest struct {
	// ProtocolVersion is the delegate's (0: not said; served as MinVersion).
	ProtocolVersion int      `json:"protocol_version"`
	AccountID       string   `json:"account_id"`
	Token           string   `json:"token"`
	Name            string   `json:"name"`
	Hostname        string   `json:"hostname"`
	IP              string   `json:"ip"`
	Tags            []string `json:"tags,omitempty"`
	Version         string   `json:"version"`
	// Type is the delegate type (SHELL, DOCKER, KUBERNETES, ECS, ...).
	Type string `json:"type,omitempty"`
	// DeployMode is DEPLOY_MODE from the seeds (informational).
	DeployMode string `json:"deploy_mode,omitempty"`
	// Capacity is the number of tasks the delegate runs at once; 0 means unlimited.
	Capacity int `json:"capacity,omitempty"`
	// IdentityByHostname marks Kubernetes-style delegates identified by
	// hostname alone (a rescheduled pod with a new IP is the same instance).
	IdentityByHostname bool `json:"identity_by_hostname,omitempty"`
	// Running lists tasks the delegate still runs from a previous session.
	Running []RunningTask `json:"running,omitempty"`
	// FreshStart is true on the first registration of a delegate process:
	// tasks the manager believes this instance runs that are not in
	// Running were lost with the previous process and are reconciled at
	// once (run elsewhere or failed) instead of waiting for their lease.
	// Since v2.
	FreshStart bool `json:"fresh_start,omitempty"`
	// Description is DELEGATE_DESCRIPTION, shown in listings. Since v3.
	Description string `json:"description,omitempty"`
	// ContainerRuntime names the container runtime the delegate runs
	// container tasks with ("podman", "docker"); empty: it has none and is
	// not offered container tasks. Since v4.
	ContainerRuntime string `json:"container_runtime,omitempty"`
	// ContainerReason says why the delegate has no container runtime
	// (when it has none), such as "Fargate has no container runtime";
	// task explain shows it. Since v4; empty from older delegates.
	ContainerReason string `json:"container_reason,omitempty"`
	// Platform is where the delegate runs: PlatformFargate, PlatformEC2 or
	// empty (a plain host). Since v4.
	Platform string `json:"platform,omitempty"`
	// Upgrade is UpgradeAuto or UpgradeOff when a watcher runs the
	// delegate (AUTO_UPGRADE=false: off), UpgradeManual otherwise. Since
	// v4.
	Upgrade string `json:"upgrade,omitempty"`
	// Slot, set by a watcher (the version the process runs), tells apart
	// the processes of one delegate on one host while it switches
	// versions: it is part of the instance identity. Since v4.
	Slot string `json:"slot,omitempty"`
	// TaskIsolation is how the delegate keeps its tasks apart; nil from
	// an older delegate.
	TaskIsolation *TaskIsolation `json:"task_isolation,omitempty"`
	// TaskTypes are the task types the delegate runs (at most
	// MaxTaskTypes); it is offered no task of another type (rule
	// task_type). Since v5: an older delegate sends none and is taken to
	// run the types there were before kubernetes (RunsTaskType); an older
	// manager ignores the field.
	TaskTypes []string `json:"task_types,omitempty"`
	// ProcessID is random and the same for every registration of one
	// delegate process (at most MaxProcessID bytes): it tells a restart
	// (a new process) from two live processes that share one identity.
	// Empty from an older delegate. Since v5.
	ProcessID string `json:"process_id,omitempty"`
}

// MaxProcessID bounds RegisterRequest.ProcessID.
const MaxProcessID = 64

// MaxTaskTypes bounds RegisterRequest.TaskTypes; a manager keeps the
// first that many.
const MaxTaskTypes = 32

// RunsTaskType reports whether a delegate that registered types runs
// tasks of type typ. nil types is a delegate that did not say (older than
// the field): it runs shell, http and container tasks, the types before
// kubernetes, and would fail any other as "unknown task type".
func RunsTaskType(types []string, typ string) bool {
	if types == nil {
		return typ == TaskShell || typ == TaskHTTP || typ == TaskContainer
	}
	for _, t := range types {
		if t == typ {
			return true
		}
	}
	return false
}

// RegisterResponse answers a successful registration.
type RegisterResponse struct {
	// ProtocolVersion is the manager's: a newer delegate uses only what
	// this version has.
	ProtocolVersion  int       `json:"protocol_version"`
	InstanceID       string    `json:"instance_id"`
	Session          string    `json:"session"`
	SessionExpiresAt time.Time `json:"session_expires_at"`
	// HeartbeatIntervalMS is how often the delegate must heartbeat.
	HeartbeatIntervalMS int64 `json:"heartbeat_interval_ms"`
	// MissedHeartbeats is how many intervals may pass before the manager
	// considers the delegate disconnected.
	MissedHeartbeats int `json:"missed_heartbeats"`
	// Configuration is the delegate configuration that applies to this
	// delegate, nil when none does. The delegate runs it before it takes
	// tasks. Since v3.
	Configuration *AppliedConfiguration `json:"configuration,omitempty"`
	// Logs says how the manager stores output and how much one upload
	// may carry; nil from an older manager (which takes at most 1 MiB of
	// output per upload).
	Logs *LogLimits `json:"logs,omitempty"`
	// RefusedFrom, when set, is the manager version (vMAJOR.MINOR) from
	// which the delegate's version will be refused at registration: it
	// is one minor version from expiry, and logs a warning that says so.
	// Since v5.
	RefusedFrom string `json:"refused_from,omitempty"`
}

// LogLimits is how a manager stores task output: the first HeadBytes and
// the last TailBytes of each attempt (what lies between is counted, not
// kept), and the most output (the chunks' data) one upload of log frames
// may carry, MaxUploadBytes (at most MaxLogUpload).
type LogLimits struct {
	HeadBytes      int64 `json:"head_bytes"`
	TailBytes      int64 `json:"tail_bytes"`
	MaxUploadBytes int64 `json:"max_upload_bytes"`
}

// MaxLogUpload is the most output one upload of log frames may carry when
// the manager says so (LogLimits): a task that writes fast has its output
// gathered into uploads this large, of which the manager stores only
// what its cap keeps.
const MaxLogUpload = 16 << 20

// SessionResponse answers a session refresh.
type SessionResponse struct {
	Session          string    `json:"session"`
	SessionExpiresAt time.Time `json:"session_expires_at"`
}

// ---------------------------------------------------------------------------
// Events and heartbeats

// Event kinds sent from the manager to a delegate.
const (
	EventTaskAvailable = "task_available"
	EventAbort         = "abort"
	EventTokenRevoked  = "token_revoked"
	EventHeartbeatAck  = "heartbeat_ack"
	// EventReconnect asks the delegate to reconnect (the manager shuts down).
	EventReconnect = "reconnect"
	// EventConfigurationChanged tells the delegate that the configuration
	// that applies to it changed (updated, or another one applies now, or
	// none): it fetches it with GET PathDelegateConfiguration. Since v3.
	EventConfigurationChanged = "configuration_changed"
	// EventAck answers a numbered frame (Frame.Req) of the delegate's:
	// Event.Req is the frame's number, Event.Error nil when it was
	// applied. Since v5.
	EventAck = "ack"
)

// Event is a notification from the manager. It never carries task payloads.
type Event struct {
	Kind   string `json:"kind"`
	TaskID string `json:"task_id,omitempty"`
	// Seq numbers heartbeat acknowledgements (the heartbeat's own Seq).
	Seq int64 `json:"seq,omitempty"`
	// Abort lists running tasks the delegate must stop (in heartbeat acks).
	Abort  []string `json:"abort,omitempty"`
	Reason string   `json:"reason,omitempty"`
	// Capabilities of the available task, which the delegate validates
	// before acquiring it (criteria only; never payloads). Since v2.
	Capabilities []string `json:"capabilities,omitempty"`
	// Rank is the available task's place in the queue (QueueRank: the
	// smaller goes first): a delegate that holds several offers it had no
	// free slot for takes them in this order. 0 from older managers.
	Rank int64 `json:"rank,omitempty"`
	// Req, Error and Acquired make up an EventAck (since v5): the number
	// of the frame it answers, the error the HTTP call would have answered
	// (nil: ok), and one answer per task of a FrameAcquire, in the frame's
	// order. The ack of a FrameResult carries no task (managers of the
	// first v5 builds sent the task as the result call answers it, under
	// "task"; no delegate reads it, and its JSON was a tenth of a busy
	// manager's CPU).
	Req      int64           `json:"req,omitempty"`
	Error    *Error          `json:"error,omitempty"`
	Acquired []AcquireAnswer `json:"acquired,omitempty"`
}

// AcquireAnswer is the answer to one task of a FrameAcquire: the lease and
// payload, or the error a single acquire of the task would have answered.
// Since v5.
type AcquireAnswer struct {
	TaskID   string           `json:"task_id"`
	Acquired *AcquireResponse `json:"acquired,omitempty"`
	Error    *Error           `json:"error,omitempty"`
}

// EventsResponse answers a long poll: zero or more events.
type EventsResponse struct {
	Events []Event `json:"events"`
}

// RunningTask names a task a delegate is running and the lease it holds.
type RunningTask struct {
	ID    string `json:"id"`
	Epoch int64  `json:"epoch"`
}

// Heartbeat is sent by a delegate every heartbeat interval, over the
// WebSocket (as a Frame) or over HTTP.
type Heartbeat struct {
	Seq      int64         `json:"seq"`
	Running  []RunningTask `json:"running"`
	Capacity int           `json:"capacity,omitempty"`
	Draining bool          `json:"draining,omitempty"`
	// OverThreshold, when not empty, says why the delegate does not take
	// tasks now (e.g. "cpu 93% > DELEGATE_CPU_THRESHOLD 80%"). Since v2.
	OverThreshold string `json:"over_threshold,omitempty"`
	// Configuring, when not empty, names the configuration whose script the
	// delegate runs now ("NAME vVERSION"); it takes no task meanwhile.
	// Since v3.
	Configuring string `json:"configuring,omitempty"`
	// Perf is what the delegate measures of itself and its host, sampled
	// once per heartbeat. Since v4; absent from older
	// delegates.
	Perf *DelegatePerf `json:"perf,omitempty"`
}

// DelegatePerf is a delegate's performance figures, as its heartbeat
// reports them. A figure it cannot measure (no /proc) is left out (nil).
type DelegatePerf struct {
	// CPUPercent is the busy share of all the host's CPUs since the last
	// heartbeat; ProcessCPUPercent the delegate process's share.
	CPUPercent        *float64 `json:"cpu_percent,omitempty"`
	ProcessCPUPercent *float64 `json:"process_cpu_percent,omitempty"`
	// MemoryPercent is the host's memory in use (1 - MemAvailable/MemTotal).
	MemoryPercent *float64 `json:"memory_percent,omitempty"`
	// RSSBytes is the delegate process's resident memory.
	RSSBytes *int64 `json:"rss_bytes,omitempty"`
	// TasksRun counts the tasks it ran to an end since it started;
	// TasksFailed those of them that did not succeed (failed, timed out).
	TasksRun    int64 `json:"tasks_run"`
	TasksFailed int64 `json:"tasks_failed"`
	// AcquireMS is how long its last task acquisition took (the claim's
	// round trip), in milliseconds; 0 before the first.
	AcquireMS float64 `json:"acquire_ms,omitempty"`
}

// HeartbeatResponse answers an HTTP heartbeat; over the WebSocket the same
// content arrives as an EventHeartbeatAck.
type HeartbeatResponse struct {
	Seq   int64    `json:"seq"`
	Abort []string `json:"abort,omitempty"`
}

// Frame kinds sent from a delegate over the WebSocket.
const (
	FrameHeartbeat = "heartbeat"
	// FrameStarted carries what POST .../started does (TaskID, Started).
	// Since v5.
	FrameStarted = "started"
	// FrameResult carries what POST .../result does (TaskID, Result).
	// Since v5.
	FrameResult = "result"
	// FrameAcquire claims the tasks of TaskIDs (at most MaxAcquireBatch),
	// each as POST .../acquire would. Since v5.
	FrameAcquire = "acquire"
)

// MaxAcquireBatch bounds the tasks of one FrameAcquire.
const MaxAcquireBatch = 64

// Frame is one message from delegate to manager on the WebSocket.
type Frame struct {
	Kind      string     `json:"kind"`
	Heartbeat *Heartbeat `json:"heartbeat,omitempty"`
	// Req numbers a frame that the manager acknowledges (EventAck with the
	// same Req); unique among the delegate's unanswered frames. Since v5.
	Req     int64           `json:"req,omitempty"`
	TaskID  string          `json:"task_id,omitempty"`
	Started *StartedRequest `json:"started,omitempty"`
	Result  *ResultRequest  `json:"result,omitempty"`
	TaskIDs []string        `json:"task_ids,omitempty"`
}

// ---------------------------------------------------------------------------
// Tasks

// HTTPSpec is the payload of an http task.
type HTTPSpec struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	// ExpectStatus is the status that counts as success; 0 means any 2xx.
	ExpectStatus int `json:"expect_status,omitempty"`
}

// ShellSpec is the payload of a shell task.
type ShellSpec struct {
	Script string `json:"script"`
}

// TaskSpec is what a user submits.
type TaskSpec struct {
	Type  string     `json:"type"`
	Shell *ShellSpec `json:"shell,omitempty"`
	HTTP  *HTTPSpec  `json:"http,omitempty"`
	// Container is the payload of a container task (see ContainerSpec;
	// Env and SecretEnv are passed into the container). Since v4.
	Container *ContainerSpec `json:"container,omitempty"`
	// Kubernetes is the payload of a kubernetes task (see KubernetesSpec).
	// Since v5.
	Kubernetes *KubernetesSpec `json:"kubernetes,omitempty"`
	// Helm is the payload of a helm task (see HelmSpec). Since v5.
	Helm *HelmSpec `json:"helm,omitempty"`
	// Verify is the payload of a verify task (see VerifySpec). Since v5.
	Verify    *VerifySpec       `json:"verify,omitempty"`
	Selectors []string          `json:"selectors,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	// SecretEnv values are passed to the task's environment and masked in
	// its output; the API never returns them.
	SecretEnv map[string]string `json:"secret_env,omitempty"`
	// TimeoutMS bounds execution; 0 means the manager's default.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// QueueTimeoutMS bounds how long the task may wait for a delegate;
	// 0 means the manager's default.
	QueueTimeoutMS int64 `json:"queue_timeout_ms,omitempty"`
	// Retries is how many more times the task may run after a delegate is
	// lost while running it.
	Retries int `json:"retries,omitempty"`
	// Org and Project set the task's scope; empty means account level. Since v2.
	Org     string `json:"org,omitempty"`
	Project string `json:"project,omitempty"`
	// Capabilities the delegate must have: "http://…" or "https://…" (any
	// HTTP answer counts), "tcp://host:port", "binary:NAME". Since v2.
	Capabilities []string `json:"capabilities,omitempty"`
	// Connector names a connector whose selectors (unless the task has its
	// own) and URL (as a capability) the task inherits. Since v2.
	Connector string `json:"connector,omitempty"`
	// Priority orders the queue (PriorityMin to PriorityMax; 0 means
	// PriorityNormal): see PriorityAgingStep.
	Priority int `json:"priority,omitempty"`
}

// Limits of a TaskSpec: the manager refuses values outside them (400,
// naming the field) and the CLI checks its flags against them first.
const (
	// MaxTaskTimeoutMS bounds TimeoutMS and QueueTimeoutMS: 7 days.
	MaxTaskTimeoutMS = 7 * 24 * 60 * 60 * 1000
	// MaxTaskRetries bounds Retries.
	MaxTaskRetries = 100
)

// HTTPResult is what an http task records.
type HTTPResult struct {
	Status      int    `json:"status"`
	BodyExcerpt string `json:"body_excerpt,omitempty"`
	// BodyTruncated is true when the body was longer than the excerpt.
	BodyTruncated bool `json:"body_truncated,omitempty"`
}

// Task is the task object returned by the API.
type Task struct {
	ID               string            `json:"id"`
	AccountID        string            `json:"account_id"`
	Type             string            `json:"type"`
	Status           string            `json:"status"`
	ExitCode         *int              `json:"exit_code"`
	Error            string            `json:"error"`
	Selectors        []string          `json:"selectors"`
	Env              map[string]string `json:"env,omitempty"`
	SecretEnvNames   []string          `json:"secret_env_names,omitempty"`
	Shell            *ShellSpec        `json:"shell,omitempty"`
	HTTP             *HTTPSpec         `json:"http,omitempty"`
	Container        *ContainerSpec    `json:"container,omitempty"`
	Kubernetes       *KubernetesSpec   `json:"kubernetes,omitempty"`
	Helm             *HelmSpec         `json:"helm,omitempty"`
	Verify           *VerifySpec       `json:"verify,omitempty"`
	HTTPResult       *HTTPResult       `json:"http_result,omitempty"`
	TimeoutMS        int64             `json:"timeout_ms"`
	QueueTimeoutMS   int64             `json:"queue_timeout_ms"`
	Retries          int               `json:"retries"`
	Attempts         int               `json:"attempts"`
	Org              string            `json:"org,omitempty"`
	Project          string            `json:"project,omitempty"`
	Capabilities     []string          `json:"capabilities,omitempty"`
	Connector        string            `json:"connector,omitempty"`
	Priority         int               `json:"priority"`
	DelegateName     string            `json:"delegate_name"`
	DelegateHostname string            `json:"delegate_hostname"`
	InstanceID       string            `json:"instance_id,omitempty"`
	// CreatedBy is who submitted the task: a principal's kind and name
	// ("user alice", "service_account ci"); empty for older tasks.
	CreatedBy  string     `json:"created_by,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	AcquiredAt *time.Time `json:"acquired_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// TaskList is the answer of a task listing: GET PathTasks, newest first,
// with the query parameters status, delegate (a delegate's name or
// hostname: the tasks it ran or runs), limit (1-1000, default 100) and
// page, the cursor of the next page: a listing's Next. Next is set when
// the listing is full (a next page may hold more). delegate, page and
// Next since v4.
type TaskList struct {
	Tasks []Task `json:"tasks"`
	Next  string `json:"next,omitempty"`
}

// AcquireRequest claims a task for a delegate.
type AcquireRequest struct {
	// Nothing yet: the session says who claims. Kept for forward compatibility.
}

// AcquireResponse is the winner's payload: the whole spec (with secret
// values) and the lease.
type AcquireResponse struct {
	TaskID string   `json:"task_id"`
	Epoch  int64    `json:"epoch"`
	Spec   TaskSpec `json:"spec"`
	// DeadlineMS is the execution timeout the delegate enforces.
	TimeoutMS int64 `json:"timeout_ms"`
	// Mask lists the values of the stored secrets the manager put into
	// Spec in place of ${secrets.NAME} references; the delegate masks them
	// in the output as it masks SecretEnv values. Since v4.
	Mask []string `json:"mask,omitempty"`
}

// StartedRequest reports that the task's process started.
type StartedRequest struct {
	Epoch int64 `json:"epoch"`
}

// LogChunk is one numbered piece of a task's output. Seq starts at 1 and
// has no gaps within one attempt.
type LogChunk struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	Data string    `json:"data"`
	// Attempt is filled in by the manager when it serves logs.
	Attempt int `json:"attempt,omitempty"`
}

// LogsRequest carries log chunks from a delegate.
type LogsRequest struct {
	Epoch  int64      `json:"epoch"`
	Chunks []LogChunk `json:"chunks"`
}

// ResultRequest reports a task's outcome. Sending it twice is harmless.
type ResultRequest struct {
	Epoch      int64       `json:"epoch"`
	Status     string      `json:"status"`
	ExitCode   *int        `json:"exit_code,omitempty"`
	Error      string      `json:"error,omitempty"`
	HTTPResult *HTTPResult `json:"http_result,omitempty"`
	// LastSeq is the number of the last log chunk sent, so the manager
	// knows when the log is complete.
	LastSeq int64 `json:"last_seq"`
	// DelegateFault marks a failure caused by the delegate, not by the task
	// itself (a capability lost, an executor error): the manager denies this
	// delegate the task and runs it elsewhere if it has retries left. Since v2.
	DelegateFault bool `json:"delegate_fault,omitempty"`
	// Outputs are the KEY=VALUE lines a shell task wrote to the file named
	// by $LEGATE_OUTPUT (OutputEnv), masked; within MaxOutputs and
	// MaxOutputBytes. Since v4.
	Outputs map[string]string `json:"outputs,omitempty"`
}

// Step outputs: a shell task finds in the environment variable OutputEnv
// the path of an empty file; the KEY=VALUE lines it writes there (KEY of
// letters, digits and '_', not starting with a digit; the last line of a
// key wins) are its outputs, which pipelines pass to later steps.
const (
	OutputEnv = "LEGATE_OUTPUT"
	// MaxOutputs bounds the number of outputs of one task.
	MaxOutputs = 100
	// MaxOutputBytes bounds the output file of one task (keys and values).
	MaxOutputBytes = 64 << 10
)

// CapabilityResult is the outcome of validating one capability.
type CapabilityResult struct {
	Criteria string `json:"criteria"`
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
}

// CapabilityReport carries validation results from a delegate. TaskID, when
// set, is the task that prompted the validation.
type CapabilityReport struct {
	TaskID  string             `json:"task_id,omitempty"`
	Results []CapabilityResult `json:"results"`
}

// LogStreamLine is one line of the NDJSON log stream served to the CLI:
// either a chunk or, last, the final task.
type LogStreamLine struct {
	Chunk *LogChunk `json:"chunk,omitempty"`
	Task  *Task     `json:"task,omitempty"`
}

// ---------------------------------------------------------------------------
// Tokens and delegates (admin API)

// CreateTokenRequest creates a delegate token, at account level or, with
// Org (and Project), at that level.
type CreateTokenRequest struct {
	Name    string `json:"name"`
	Org     string `json:"org,omitempty"`
	Project string `json:"project,omitempty"`
	// RequireApproval: delegates that register with the token wait,
	// listed as pending, until an administrator approves them. Since v4.
	RequireApproval bool `json:"require_approval,omitempty"`
	// InitSecrets names the stored secrets (at the token's scope) the
	// INIT_SCRIPT of its delegates may use as ${secrets.NAME}; who
	// creates the token needs secret:access on each. At most
	// MaxInitSecrets. Since v5.
	InitSecrets []string `json:"init_secrets,omitempty"`
	// Uses is how many delegate processes may register with the token,
	// 1 to MaxTokenUses; 0 = unlimited. A re-registration of a process
	// (a new session, a reconnect) takes none. Since v5.
	Uses int `json:"uses,omitempty"`
}

// MaxTokenUses bounds CreateTokenRequest.Uses.
const MaxTokenUses = 1_000_000

// CheckTokenUses checks CreateTokenRequest.Uses.
func CheckTokenUses(n int) error {
	if n < 0 || n > MaxTokenUses {
		return fmt.Errorf("uses %d: give 1 to %d uses, or none for a token without a limit", n, MaxTokenUses)
	}
	return nil
}

// MaxInitSecrets bounds CreateTokenRequest.InitSecrets and
// InitSecretsRequest.Names.
const MaxInitSecrets = 32

// InitSecretsRequest asks for the values of the stored secrets a
// delegate's INIT_SCRIPT references, before it registers: the account and
// token are checked as at registration.
type InitSecretsRequest struct {
	AccountID string   `json:"account_id"`
	Token     string   `json:"token"`
	Names     []string `json:"names"`
}

// InitSecretsResponse carries the values, by name.
type InitSecretsResponse struct {
	Secrets map[string]string `json:"secrets"`
}

// Token describes a delegate token. Value is set only when it is created.
type Token struct {
	Name      string     `json:"name"`
	Value     string     `json:"value,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Status    string     `json:"status"`
	Org       string     `json:"org,omitempty"`
	Project   string     `json:"project,omitempty"`
	// RequireApproval: see CreateTokenRequest. Since v4.
	RequireApproval bool `json:"require_approval,omitempty"`
	// InitSecrets: see CreateTokenRequest. Since v5.
	InitSecrets []string `json:"init_secrets,omitempty"`
	// Uses: see CreateTokenRequest; UsesLeft is how many remain (nil: a
	// token without a limit). Since v5.
	Uses     int  `json:"uses,omitempty"`
	UsesLeft *int `json:"uses_left,omitempty"`
}

// Token statuses.
const (
	TokenActive  = "active"
	TokenRevoked = "revoked"
)

// TokenList answers a token listing.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// Delegate is one delegate instance as the admin API shows it.
type Delegate struct {
	InstanceID    string     `json:"instance_id"`
	Name          string     `json:"name"`
	Hostname      string     `json:"hostname"`
	IP            string     `json:"ip"`
	Tags          []string   `json:"tags"`
	Version       string     `json:"version"`
	Type          string     `json:"type"`
	TokenName     string     `json:"token_name"`
	Status        string     `json:"status"`
	Connection    string     `json:"connection"`
	LastHeartbeat *time.Time `json:"last_heartbeat"`
	RunningTasks  int        `json:"running_tasks"`
	Capacity      int        `json:"capacity"`
	Draining      bool       `json:"draining,omitempty"`
	RegisteredAt  time.Time  `json:"registered_at"`
	Org           string     `json:"org,omitempty"`
	Project       string     `json:"project,omitempty"`
	OverThreshold string     `json:"over_threshold,omitempty"`
	// Perf is the performance figures of the instance's last heartbeat,
	// when it is connected to this manager and reports them. Since v4.
	Perf *DelegatePerf `json:"perf,omitempty"`
	// Description is the delegate's DELEGATE_DESCRIPTION. Since v3.
	Description string `json:"description,omitempty"`
	// Configuration names the delegate configuration the instance last
	// ran (see DelegateDetail.ConfigurationResult). Since v3.
	Configuration string `json:"configuration,omitempty"`
	// Configuring names the configuration whose script runs now ("NAME
	// vVERSION"); the instance takes no task meanwhile. Since v3.
	Configuring string `json:"configuring,omitempty"`
	// Approval is ApprovalPending, ApprovalApproved or ApprovalRejected
	// for a delegate whose token requires approval; empty otherwise. Since
	// v4.
	Approval string `json:"approval,omitempty"`
	// Upgrade is how the instance is upgraded (UpgradeAuto, UpgradeOff,
	// "" manual); UpgradeState where it stands (UpgradeCurrent, ...,
	// UpgradeFailed + ": " + reason); WantedVersion the version its group
	// wants ("" when held back). Since v4.
	Upgrade       string `json:"upgrade,omitempty"`
	UpgradeState  string `json:"upgrade_state,omitempty"`
	WantedVersion string `json:"wanted_version,omitempty"`
	// UpgradeRing is its group's ring; UpgradeWaiting, when its ring
	// waits for an earlier one, says for what. Since v4.
	UpgradeRing    string `json:"upgrade_ring,omitempty"`
	UpgradeWaiting string `json:"upgrade_waiting,omitempty"`
	// TaskIsolation is what the instance reported at registration about
	// how it keeps its tasks apart; nil: an older delegate reported none.
	TaskIsolation *TaskIsolation `json:"task_isolation,omitempty"`
	// TaskTypes are the task types the instance registered that it runs;
	// nil: an older delegate, which runs shell, http and container tasks
	// (RunsTaskType). Since v5.
	TaskTypes []string `json:"task_types,omitempty"`
	// ContainerRuntime is the container runtime the instance registered
	// ("podman", "docker", "docker-api", "kubernetes"; empty: none, and
	// ContainerReason says why when it said).
	ContainerRuntime string `json:"container_runtime,omitempty"`
	ContainerReason  string `json:"container_reason,omitempty"`
	// DuplicateIdentity, when not empty, says that two live processes
	// registered with this instance's identity (name and hostname, as in
	// two clusters with the same spec), which one keeps it and which one
	// is refused; shown while the refused one still tries. Since v5.
	DuplicateIdentity string `json:"duplicate_identity,omitempty"`
	// RefusedFrom is the manager version (vMAJOR.MINOR) from which the
	// instance's version will be refused at registration, when that is
	// the next minor version ("": not that close to expiry). Since v5.
	RefusedFrom string `json:"refused_from,omitempty"`
	// Unresponsive, when set, says that the manager holding the instance's
	// event channel offers it no task: it keeps its heartbeat but ignored
	// the offers it was sent, or claimed a task and never started it. Its
	// Status stays connected (it is). Since v5.
	Unresponsive *DelegateUnresponsive `json:"unresponsive,omitempty"`
}

// DelegateUnresponsive is what a delegate marked unresponsive ignored.
type DelegateUnresponsive struct {
	// Since is when it was marked; RetryAt when it is offered work again
	// (on probation) if nothing clears the mark before.
	Since   time.Time `json:"since"`
	RetryAt time.Time `json:"retry_at"`
	// Reason says it in one sentence.
	Reason string `json:"reason"`
	// IgnoredOffers is how many offers of tasks that stayed queued it left
	// unclaimed, the oldest at IgnoredSince, while its heartbeats reported
	// free capacity.
	IgnoredOffers int        `json:"ignored_offers,omitempty"`
	IgnoredSince  *time.Time `json:"ignored_since,omitempty"`
	// UnstartedTask is a task it claimed at ClaimedAt and never started
	// (offered elsewhere since).
	UnstartedTask string     `json:"unstarted_task,omitempty"`
	ClaimedAt     *time.Time `json:"claimed_at,omitempty"`
}

// Approval states of a delegate registered with a token that requires
// approval.
const (
	// ApprovalPending: offered no task and no configuration until approved.
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	// ApprovalRejected: refused at its next call (CodeDelegateRejected).
	ApprovalRejected = "rejected"
)

// AuditEvent is one record of the audit log: who changed what, when, at
// which scope, from which address, and how it ended. It never holds a
// secret value, a token or a key.
type AuditEvent struct {
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	// PrincipalKind is PrincipalUser, PrincipalServiceAccount, OwnerAccount
	// (a key acting as its whole account) or "" when no one was
	// identified (a failed sign-in names the user it tried in Principal).
	PrincipalKind string `json:"principal_kind,omitempty"`
	Principal     string `json:"principal,omitempty"`
	// Credential is how the caller signed in: "api_key" (CredentialName
	// is the key's name) or "session" (its ID); "password" for a sign-in.
	Credential     string `json:"credential,omitempty"`
	CredentialName string `json:"credential_name,omitempty"`
	// Action is RESOURCE.VERB, e.g. token.create, delegate.approve.
	Action       string `json:"action"`
	ResourceType string `json:"resource_type"`
	Resource     string `json:"resource,omitempty"`
	Org          string `json:"org,omitempty"`
	Project      string `json:"project,omitempty"`
	// Address is the client's address as the manager's socket saw it.
	Address string `json:"address,omitempty"`
	// Outcome is AuditSuccess, AuditDenied (permission) or AuditFailed;
	// Status the HTTP status of the answer.
	Outcome string `json:"outcome"`
	Status  int    `json:"status,omitempty"`
	// Detail says more: the error message of a failure, the decision's
	// subject (which instances were approved).
	Detail string `json:"detail,omitempty"`
}

// Audit outcomes.
const (
	AuditSuccess = "success"
	AuditDenied  = "denied"
	AuditFailed  = "failed"
)

// AuditList answers GET PathAudit. Next, when set, is the cursor of the
// following page (query parameter after).
type AuditList struct {
	Events []AuditEvent `json:"events"`
	Next   string       `json:"next,omitempty"`
}

// ApprovalAnswer answers POST PathDelegates/{name}/approve and /reject.
type ApprovalAnswer struct {
	Name     string `json:"name"`
	Approval string `json:"approval"`
	// Instances are the instances of the delegate the decision applies
	// to now; replicas that register later with the same name and token
	// get the same decision.
	Instances []Delegate `json:"instances"`
}

// CapabilityEntry is one allowlist or deny-list entry of a delegate.
type CapabilityEntry struct {
	Criteria   string    `json:"criteria"`
	ExpiresAt  time.Time `json:"expires_at"`
	TimeLeftMS int64     `json:"time_left_ms"`
	Error      string    `json:"error,omitempty"`
}

// DelegateDetail describes one delegate instance with its capability lists.
type DelegateDetail struct {
	Delegate
	Allowlist []CapabilityEntry `json:"allowlist"`
	Denylist  []CapabilityEntry `json:"denylist"`
	// ConfigurationApplies is the configuration that applies to the
	// instance now (name and version), nil when none does. Since v3.
	ConfigurationApplies *ConfigurationRef `json:"configuration_applies,omitempty"`
	// ConfigurationResult is the outcome of the last configuration run
	// the instance reported. Since v3.
	ConfigurationResult *ConfigurationResult `json:"configuration_result,omitempty"`
}

// DelegateDetails answers a describe: every instance with that name.
type DelegateDetails struct {
	Name      string           `json:"name"`
	Instances []DelegateDetail `json:"instances"`
}

// Org is an organization of an account.
type Org struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// OrgList answers an org listing.
type OrgList struct {
	Orgs []Org `json:"orgs"`
}

// CreateOrgRequest creates an organization.
type CreateOrgRequest struct {
	Name string `json:"name"`
}

// Project is a project of an organization.
type Project struct {
	Org       string    `json:"org"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// ProjectList answers a project listing.
type ProjectList struct {
	Projects []Project `json:"projects"`
}

// CreateProjectRequest creates a project in the org of the URL.
type CreateProjectRequest struct {
	Name string `json:"name"`
}

// Connector is a named third-party endpoint. Tasks that use it inherit its
// selectors and its URL as a capability.
type Connector struct {
	Name      string   `json:"name"`
	URL       string   `json:"url"`
	Type      string   `json:"type,omitempty"`
	Selectors []string `json:"selectors"`
	// CAPEM and TokenSecret belong to a Kubernetes connector (Type
	// ConnectorKubernetes, URL its API server): the PEM of the CA that
	// signs the API server's certificate (empty: the delegate's system
	// roots) and the name of the stored secret holding the bearer token.
	// The token itself is never shown. Since v5; an older manager ignores
	// them (its kubernetes connectors are labels).
	CAPEM       string `json:"ca_pem,omitempty"`
	TokenSecret string `json:"token_secret,omitempty"`
	// Username and PasswordSecret are a verification provider's basic
	// auth (Type ProviderPrometheus, whose TokenSecret is the stored
	// secret of a bearer token instead): the user name and the name of
	// the stored secret that holds the password.
	Username       string `json:"username,omitempty"`
	PasswordSecret string `json:"password_secret,omitempty"`
	// LastSuccessDelegate is the delegate (name/hostname) that last
	// succeeded for the connector; it is tried first.
	LastSuccessDelegate string    `json:"last_success_delegate,omitempty"`
	CreatedAt           time.Time `json:"created_at"`
}

// ConnectorList answers a connector listing.
type ConnectorList struct {
	Connectors []Connector `json:"connectors"`
}

// CreateConnectorRequest creates a connector.
type CreateConnectorRequest struct {
	Name      string   `json:"name"`
	URL       string   `json:"url"`
	Type      string   `json:"type,omitempty"`
	Selectors []string `json:"selectors,omitempty"`
	// CAPEM and TokenSecret: see Connector (required TokenSecret for
	// Type ConnectorKubernetes, optional for ProviderPrometheus,
	// refused for other types); Username and PasswordSecret: see
	// Connector (ProviderPrometheus only, not with TokenSecret).
	CAPEM          string `json:"ca_pem,omitempty"`
	TokenSecret    string `json:"token_secret,omitempty"`
	Username       string `json:"username,omitempty"`
	PasswordSecret string `json:"password_secret,omitempty"`
}

// ---------------------------------------------------------------------------
// Delegate configurations (since v3)

// Limits of delegate configurations.
const (
	// MaxConfigurationScript bounds a configuration's script (bytes).
	MaxConfigurationScript = 64 << 10
	// MaxConfigurationSelectors bounds a configuration's selectors.
	MaxConfigurationSelectors = 32
	// ConfigurationOutputExcerpt bounds the output excerpt a delegate
	// reports: the head and the tail, half each, and a marker between.
	ConfigurationOutputExcerpt = 4 << 10
	// ConfigurationTimeoutMS bounds one run of a configuration script.
	ConfigurationTimeoutMS = 10 * 60 * 1000
)

// Configuration is a delegate configuration: a script that the delegates
// whose scope covers its scope and whose selectors include all of
// Selectors run when they start and again whenever it changes. When
// several configurations apply to a delegate, the one with the most
// selectors wins; among those, the one whose scope is closest to the
// delegate's own (the widest); among those, the first by name.
type Configuration struct {
	Name      string   `json:"name"`
	Script    string   `json:"script"`
	Selectors []string `json:"selectors"`
	// Org and Project are the configuration's scope, like a token's: empty
	// means account level. Since v4.
	Org     string `json:"org,omitempty"`
	Project string `json:"project,omitempty"`
	// Version starts at 1 and goes up with every update.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Notice, in the answer of a create or update only, explains why the
	// configuration reaches none of the registered delegates that match
	// its selectors: their tokens' scope is one it does not cover.
	Notice string `json:"notice,omitempty"`
}

// ConfigurationList answers a configuration listing.
type ConfigurationList struct {
	Configurations []Configuration `json:"configurations"`
}

// CreateConfigurationRequest creates a configuration, at account level or,
// with Org (and Project), at that level. Since v4 for Org and Project.
type CreateConfigurationRequest struct {
	Name      string   `json:"name"`
	Script    string   `json:"script"`
	Selectors []string `json:"selectors,omitempty"`
	Org       string   `json:"org,omitempty"`
	Project   string   `json:"project,omitempty"`
}

// Deployment statuses.
const (
	DeploymentRunning   = "running"
	DeploymentSucceeded = "succeeded"
	DeploymentFailed    = "failed"
	DeploymentCancelled = "cancelled"
)

// Deployment is one run of a deployment stage of a pipeline.
type Deployment struct {
	ID string `json:"id"`
	// Org and Project are the pipeline's scope; both empty for the account.
	Org         string `json:"org,omitempty"`
	Project     string `json:"project,omitempty"`
	Service     string `json:"service"`
	Environment string `json:"environment"`
	// Version is the run's version input; empty when it has none.
	Version  string `json:"version,omitempty"`
	Pipeline string `json:"pipeline"`
	RunID    string `json:"run_id"`
	Stage    string `json:"stage"`
	// TriggeredBy is who started the run: "user:ana",
	// "service_account:ci", "webhook:deploy".
	TriggeredBy string     `json:"triggered_by"`
	Status      string     `json:"status"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	// Records and RollbackOf: see deployments.go.
	Records    []DeployRecord `json:"records,omitempty"`
	RollbackOf string         `json:"rollback_of,omitempty"`
	// Reason says why it failed or was rolled back, when known (the
	// metric a verification failed on). Verifications are what its
	// verify steps saw and decided, in the order the steps ran; only a
	// single deployment's answer carries them.
	Reason        string                   `json:"reason,omitempty"`
	Verifications []DeploymentVerification `json:"verifications,omitempty"`
}

// DeploymentList answers a deployment listing. Next, when not empty, is
// the page parameter of the next (older) page.
type DeploymentList struct {
	Deployments []Deployment `json:"deployments"`
	Next        string       `json:"next,omitempty"`
}

// LimitUsage is one deployment limit and how much of it is used.
type LimitUsage struct {
	// Limit is the most deployments that may start within the window; 0
	// means unlimited.
	Limit int `json:"limit"`
	// Used counts the deployments started within the window up to now.
	Used int `json:"used"`
	// NextFree, when the window is full, is when its next slot frees up.
	NextFree *time.Time `json:"next_free,omitempty"`
}

// DeploymentLimits answers GET PathLimits: the account's limits (its own
// or the manager's defaults) and their usage now.
type DeploymentLimits struct {
	PerHour LimitUsage `json:"per_hour"`
	PerDay  LimitUsage `json:"per_day"`
	// DefaultPerHour and DefaultPerDay are the manager's defaults (0:
	// unlimited); Custom says whether the account set its own limits.
	DefaultPerHour int  `json:"default_per_hour"`
	DefaultPerDay  int  `json:"default_per_day"`
	Custom         bool `json:"custom"`
	// Now is the manager's clock when it answered.
	Now time.Time `json:"now"`
}

// SetLimitsRequest changes an account's deployment limits: a nil field
// keeps that limit; 0 makes it unlimited; Reset first returns both to the
// manager's defaults.
type SetLimitsRequest struct {
	PerHour *int `json:"per_hour,omitempty"`
	PerDay  *int `json:"per_day,omitempty"`
	Reset   bool `json:"reset,omitempty"`
}

// MaxDeploymentLimit bounds a limit an account may set.
const MaxDeploymentLimit = 1_000_000

// MaxSecretValue bounds a stored secret's value, in bytes.
const MaxSecretValue = 64 << 10

// Secret is a stored secret as the API shows it: never its value.
type Secret struct {
	Name string `json:"name"`
	// Org and Project are its scope; both empty for the account.
	Org       string    `json:"org,omitempty"`
	Project   string    `json:"project,omitempty"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretList answers a secret listing: names and scopes only.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}

// CreateSecretRequest stores a secret. Value is text (UTF-8, no NUL byte),
// at most MaxSecretValue bytes.
type CreateSecretRequest struct {
	Name    string `json:"name"`
	Org     string `json:"org,omitempty"`
	Project string `json:"project,omitempty"`
	Value   string `json:"value"`
}

// UpdateSecretRequest replaces a secret's value (the scope is in the
// query of the URL).
type UpdateSecretRequest struct {
	Value string `json:"value"`
}

// UpdateConfigurationRequest changes a configuration; nil fields are kept.
// Any change bumps the version.
type UpdateConfigurationRequest struct {
	Script    *string   `json:"script,omitempty"`
	Selectors *[]string `json:"selectors,omitempty"`
}

// ConfigurationRef names one version of a configuration.
type ConfigurationRef struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
}

// AppliedConfiguration is what a delegate runs: the configuration that
// applies to it, as the registration answer and GET
// PathDelegateConfiguration carry it.
type AppliedConfiguration struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	Script  string `json:"script"`
	// Secrets are the values of the stored secrets the script references
	// as ${secrets.NAME}, resolved at the configuration's scope (a name
	// found nowhere is left out). The delegate gives them to the script
	// in its environment, never in the script file, and masks them in
	// its output. Since v5.
	Secrets map[string]string `json:"secrets,omitempty"`
}

// DelegateConfigurationResponse answers GET PathDelegateConfiguration.
type DelegateConfigurationResponse struct {
	// Configuration is nil when no configuration applies to the delegate.
	Configuration *AppliedConfiguration `json:"configuration,omitempty"`
}

// ConfigurationResult is the outcome of one run of a configuration script
// on one delegate instance.
type ConfigurationResult struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	// ExitCode is the script's exit code; nil when it did not exit by
	// itself (it timed out, or could not start).
	ExitCode *int `json:"exit_code"`
	// Error is one line, empty on success.
	Error string `json:"error,omitempty"`
	// Output is an excerpt of the output: at most ConfigurationOutputExcerpt
	// bytes of its head and tail, and a marker where bytes were left out.
	Output string `json:"output"`
	// OutputBytes is the size of the whole output.
	OutputBytes int64     `json:"output_bytes"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	// OutputWithheld is true when the manager left Output out because
	// the caller may not view the configuration that printed it
	// (configuration:view at its scope). Admin API only.
	OutputWithheld bool `json:"output_withheld,omitempty"`
}

// Exclusion rules, in the order DESIGN §5 applies them.
const (
	RuleDisconnected     = "disconnected"
	RuleDraining         = "draining"
	RuleScope            = "scope"
	RuleSelectors        = "selectors"
	RuleTaskDenied       = "task_denied"
	RuleCapabilityDenied = "capability_denied"
	RuleCapacity         = "capacity"
	RuleThreshold        = "threshold"
	// RuleConfiguring: the delegate runs its configuration script. Since v3.
	RuleConfiguring = "configuring"
	// RulePendingApproval: the delegate waits for an administrator's
	// approval (its token requires it). Since v4.
	RulePendingApproval = "pending_approval"
	// RuleNoContainerRuntime: a container task, and the delegate has no
	// container runtime. Since v4.
	RuleNoContainerRuntime = "no_container_runtime"
	// RuleTaskType: the delegate does not run tasks of the task's type
	// (RegisterRequest.TaskTypes). Since v5.
	RuleTaskType = "task_type"
	// RuleUnresponsive: the delegate keeps its heartbeat but ignored the
	// offers it was sent, or claimed a task and never started it
	// (Delegate.Unresponsive says which). Since v5.
	RuleUnresponsive = "unresponsive"
)

// Reason is one rule that excludes a delegate from a task.
type Reason struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// DelegateVerdict says whether one delegate may run a task, and why not.
type DelegateVerdict struct {
	InstanceID  string   `json:"instance_id"`
	Name        string   `json:"name"`
	Hostname    string   `json:"hostname"`
	Eligible    bool     `json:"eligible"`
	Allowlisted bool     `json:"allowlisted,omitempty"`
	Reasons     []Reason `json:"reasons"`
}

// Explanation says, per delegate, why a task runs where it runs or waits.
type Explanation struct {
	TaskID    string            `json:"task_id"`
	Status    string            `json:"status"`
	Summary   string            `json:"summary"`
	Delegates []DelegateVerdict `json:"delegates"`
	// Outlook says, for a queued task no delegate can run now, what
	// becomes of it: "no known delegate can run this: it ends not_assigned
	// within …", or "waiting up to the queue timeout (…) for delegate …,
	// which is not connected". Empty otherwise.
	Outlook string `json:"outlook,omitempty"`
}

// DeletedDelegate answers the deletion of a delegate group.
type DeletedDelegate struct {
	Name string `json:"name"`
	// Instances are the instances removed.
	Instances []Delegate `json:"instances"`
}

// DelegateList answers a delegate listing.
type DelegateList struct {
	Delegates []Delegate `json:"delegates"`
	// Next, when set, is the DelegateQuery.Page of the next page (a
	// listing with a limit that left delegates out). Since v4.
	Next string `json:"next,omitempty"`
}

// WhoAmI answers who makes the request: the account, the user or service
// account, the API key (or sign-in session) and the bindings that apply.
type WhoAmI struct {
	AccountID string `json:"account_id"`
	Version   string `json:"version"`
	// PrincipalKind is PrincipalUser, PrincipalServiceAccount, or
	// OwnerAccount for a key that acts as its whole account.
	PrincipalKind string `json:"principal_kind,omitempty"`
	Principal     string `json:"principal,omitempty"`
	// APIKey names the key of the request; empty for a sign-in session.
	APIKey   string    `json:"api_key,omitempty"`
	Session  bool      `json:"session,omitempty"`
	Bindings []Binding `json:"bindings,omitempty"`
	// PublicURL is the URL the manager says delegates reach it at (its
	// --public-url) and DelegateImage the image its install specs name
	// (its --delegate-image, empty when none is set): the defaults of
	// PathManifests.
	PublicURL     string `json:"public_url,omitempty"`
	DelegateImage string `json:"delegate_image,omitempty"`
}

// Principal kinds: users sign in with a password; service accounts are
// for automation and only have API keys.
const (
	PrincipalUser           = "user"
	PrincipalServiceAccount = "service_account"
	// SubjectGroup is the subject kind of a binding to a group.
	SubjectGroup = "group"
)

// CreateUserRequest creates a user or a service account (Kind; a user by
// default). Password is optional for users (without one, a user signs in
// only with API keys an administrator creates for it) and refused for
// service accounts.
type CreateUserRequest struct {
	Name     string `json:"name"`
	Kind     string `json:"kind,omitempty"`
	Display  string `json:"display,omitempty"`
	Password string `json:"password,omitempty"`
}

// UpdateUserRequest changes a user: nil fields stay as they are.
type UpdateUserRequest struct {
	Disabled *bool   `json:"disabled,omitempty"`
	Password *string `json:"password,omitempty"`
}

// User describes a user or service account (never its password).
type User struct {
	Name        string    `json:"name"`
	Kind        string    `json:"kind"`
	Display     string    `json:"display,omitempty"`
	Disabled    bool      `json:"disabled"`
	HasPassword bool      `json:"has_password"`
	CreatedAt   time.Time `json:"created_at"`
	Groups      []string  `json:"groups,omitempty"`
	// Bindings are the bindings of the user itself (not its groups').
	Bindings []Binding `json:"bindings,omitempty"`
}

// UserList answers a listing of users and service accounts, by name.
type UserList struct {
	Users []User `json:"users"`
}

// CreateGroupRequest creates a group.
type CreateGroupRequest struct {
	Name string `json:"name"`
}

// GroupMemberRequest adds a user or service account to a group.
type GroupMemberRequest struct {
	Member string `json:"member"`
}

// Group describes a group and its members (by name).
type Group struct {
	Name      string    `json:"name"`
	Members   []string  `json:"members"`
	CreatedAt time.Time `json:"created_at"`
}

// GroupList answers a listing of groups, by name.
type GroupList struct {
	Groups []Group `json:"groups"`
}

// CreateRoleRequest creates a custom role. Permissions are
// "resource:action" strings ("resource:*" for every action).
type CreateRoleRequest struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Permissions []string `json:"permissions"`
}

// UpdateRoleRequest changes a custom role in place: nil fields stay as
// they are; Permissions, when given, is the role's whole new list.
// AddPermissions and RemovePermissions instead edit the current list in
// the manager's own write (so concurrent edits do not undo each other);
// they cannot be given with Permissions.
type UpdateRoleRequest struct {
	Description       *string   `json:"description,omitempty"`
	Permissions       *[]string `json:"permissions,omitempty"`
	AddPermissions    []string  `json:"add_permissions,omitempty"`
	RemovePermissions []string  `json:"remove_permissions,omitempty"`
}

// Role describes a built-in or custom role.
type Role struct {
	Name        string    `json:"name"`
	Builtin     bool      `json:"builtin"`
	Description string    `json:"description,omitempty"`
	Permissions []string  `json:"permissions"`
	CreatedAt   time.Time `json:"created_at,omitzero"`
}

// RoleList answers a listing of roles: built-in ones first, then custom
// ones by name.
type RoleList struct {
	Roles []Role `json:"roles"`
}

// Binding grants a role to a subject (SubjectKind PrincipalUser,
// PrincipalServiceAccount or SubjectGroup; Subject its name) at a scope
// (Org and Project empty for the account) and beneath.
type Binding struct {
	Role        string    `json:"role"`
	SubjectKind string    `json:"subject_kind"`
	Subject     string    `json:"subject"`
	Org         string    `json:"org,omitempty"`
	Project     string    `json:"project,omitempty"`
	CreatedAt   time.Time `json:"created_at,omitzero"`
}

// BindingList answers a listing of bindings.
type BindingList struct {
	Bindings []Binding `json:"bindings"`
}

// CreateSessionRequest signs a user in: with a user name and password,
// or with the token of a one-time sign-in link (Link; then the other
// fields are ignored).
type CreateSessionRequest struct {
	AccountID string `json:"account_id,omitempty"`
	User      string `json:"user"`
	Password  string `json:"password"`
	Link      string `json:"link,omitempty"`
}

// SignInLink answers PathSignInLinks: the web UI's path that signs the
// user in once (PathUISignIn with the token in the query), until
// ExpiresAt. The client puts the manager's URL in front of Path.
type SignInLink struct {
	Path      string    `json:"path"`
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PathUISignIn is the web UI's page that trades a sign-in link's token
// (query parameter "token") for a session.
const PathUISignIn = "/signin/link"

// Session answers a sign-in: a token to send as "Authorization: Bearer"
// until ExpiresAt, or until DELETE PathSessions revokes it.
type Session struct {
	Token     string    `json:"token"`
	AccountID string    `json:"account_id"`
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ---------------------------------------------------------------------------
// API keys (admin API, since v4)

// CreateAPIKeyRequest creates an API key. Names follow the rules of token
// names.
type CreateAPIKeyRequest struct {
	Name string `json:"name"`
	// Owner names the user or service account the key acts for; empty
	// for the caller itself. A key for another principal needs
	// user:manage.
	Owner string `json:"owner,omitempty"`
}

// RevokeAPIKeyRequest revokes an API key. The body is optional.
type RevokeAPIKeyRequest struct {
	// Force revokes the key even when it is the account's last active
	// one, which locks the account out of the API until a manager start
	// writes a new key to DATA/admin.env.
	Force bool `json:"force,omitempty"`
}

// API key owner kinds. Every key belongs to its account today; keys of
// users and service accounts come with users and roles.
const (
	OwnerAccount = "account"
	// Keys of users and service accounts have the owner kind
	// PrincipalUser or PrincipalServiceAccount.
)

// APIKey describes an admin API key. Value is set only in the answer that
// creates it: the manager stores only a hash.
type APIKey struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	// Status is TokenActive or TokenRevoked.
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	// CreatedBy names the key that created this one; empty for a key the
	// manager created itself (the first one, in DATA/admin.env).
	CreatedBy string `json:"created_by,omitempty"`
	// LastUsedAt is when the key last authenticated a request, recorded at
	// most once a minute per key (so it may lag by about a minute); nil
	// when it never did.
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	// RevokedBy names the key that revoked this one.
	RevokedBy string `json:"revoked_by,omitempty"`
	// OwnerKind and OwnerID say whom the key acts for: OwnerAccount and
	// the account ID today.
	OwnerKind string `json:"owner_kind"`
	OwnerID   string `json:"owner_id"`
	// Owner names the user or service account that owns the key.
	Owner string `json:"owner,omitempty"`
	// Current is true for the key that made the request.
	Current bool `json:"current,omitempty"`
}

// APIKeyList answers an API key listing, oldest first.
type APIKeyList struct {
	APIKeys []APIKey `json:"api_keys"`
}

// ---------------------------------------------------------------------------
// Errors

// Code is a machine-readable error code. The list is append-only: codes are
// never renumbered, renamed or reused.
type Code string

// Error codes.
const (
	CodeBadRequest      Code = "bad_request"
	CodeUnauthenticated Code = "unauthenticated"
	CodeTokenRevoked    Code = "token_revoked"
	CodeForbidden       Code = "forbidden"
	CodeNotFound        Code = "not_found"
	CodeConflict        Code = "conflict"
	CodeAlreadyClaimed  Code = "already_claimed"
	CodeStaleLease      Code = "stale_lease"
	CodeNoCapacity      Code = "no_capacity"
	CodeNotEligible     Code = "not_eligible"
	CodeSessionExpired  Code = "session_expired"
	CodeVersion         Code = "unsupported_version"
	CodeInternal        Code = "internal"
	CodeUnavailable     Code = "unavailable"
	CodeTaskTerminal    Code = "task_terminal"
	// CodeAPIKeyRevoked: the request's API key was revoked. Since v4.
	CodeAPIKeyRevoked Code = "api_key_revoked"
	// CodeIdentityConflict: a registration matches an instance (name,
	// hostname, IP) that is bound to another delegate token that is still
	// valid. Since v4.
	CodeIdentityConflict Code = "identity_conflict"
	// CodeRateLimited: too many attempts (sign-ins with a wrong password);
	// retry after the answer's Retry-After. Since v4.
	CodeRateLimited Code = "rate_limited"
	// CodeDelegateRejected: an administrator rejected the delegate (legate
	// delegates reject); it must stop, not retry. Since v4.
	CodeDelegateRejected Code = "delegate_rejected"
	// CodeDeploymentLimit: a pipeline run would exceed one of the
	// account's deployment limits; the message names the limit, the
	// usage and when the next slot frees up. Since v4.
	CodeDeploymentLimit Code = "deployment_limit"
	// CodeDelegateExpired: the delegate's version is older than the
	// manager accepts (the previous minor version on); the message names
	// the version to install. Since v4.
	CodeDelegateExpired Code = "delegate_expired"
	// CodeUnknownFrame: the manager does not know the kind of a numbered
	// WebSocket frame (the delegate is newer): the delegate makes the
	// HTTP call instead. Since v5.
	CodeUnknownFrame Code = "unknown_frame"
	// CodeDuplicateIdentity: another live delegate process holds the
	// identity (name, hostname) this one registers with, and registered
	// first; the message names both. The process may retry (it takes
	// over when the other one stops) but should say so loudly. Since v5.
	CodeDuplicateIdentity Code = "duplicate_identity"
	// CodeTokenUsedUp: the delegate token was created with a number of
	// uses (token create --uses N) and every one was taken: it registers
	// no new delegate process. Create another token. Since v5.
	CodeTokenUsedUp Code = "token_used_up"
	// CodeOverloaded: the manager serves as many registrations and
	// event-channel openings at once as it admits; the answer (503)
	// carries Retry-After, spread over the clients already waiting: the
	// client waits that long (plus a little jitter) before it tries
	// again. Since v5.
	CodeOverloaded Code = "overloaded"
)

// Recoverable reports whether an error with this code may succeed if
// retried with backoff. This switch is the one table that decides; codes
// not listed are recoverable.
func (c Code) Recoverable() bool {
	switch c {
	case CodeBadRequest, CodeUnauthenticated, CodeTokenRevoked, CodeForbidden,
		CodeNotFound, CodeConflict, CodeAlreadyClaimed, CodeStaleLease,
		CodeNotEligible, CodeVersion, CodeTaskTerminal, CodeAPIKeyRevoked, CodeIdentityConflict,
		CodeDelegateRejected, CodeDeploymentLimit, CodeDelegateExpired, CodeUnknownFrame, CodeTokenUsedUp:
		return false
	case CodeSessionExpired: // re-register, then retry
		return true
	case CodeRateLimited: // after Retry-After
		return true
	}
	return true
}

// Error is the body of every non-2xx answer.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Status is the HTTP status; filled in by the client, not sent.
	Status int `json:"-"`
	// RetryAfter is the answer's Retry-After (0: none); filled in by the
	// client, not sent.
	RetryAfter time.Duration `json:"-"`
}

// ParseRetryAfter reads a Retry-After header given in seconds (the form
// legate's managers send); 0 when absent or not a number of seconds.
func ParseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (%s, HTTP %d)", e.Message, e.Code, e.Status)
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.Code)
}

// ErrorBody wraps an Error for JSON.
type ErrorBody struct {
	Error Error `json:"error"`
}

// DecodeError parses an error body; when the body is not one (a proxy's
// page, an empty body) it returns an Error with the raw text (cut to 200
// bytes) and CodeUnavailable for a 5xx, 408 or 429 status, which is worth
// a retry, or CodeBadRequest for any other status.
func DecodeError(status int, body []byte) *Error {
	var eb ErrorBody
	if err := json.Unmarshal(body, &eb); err == nil && eb.Error.Code != "" {
		e := eb.Error
		e.Status = status
		if e.Message == "" {
			e.Message = fmt.Sprintf("HTTP %d", status)
		}
		return &e
	}
	code := CodeBadRequest
	if status >= 500 || status == 408 || status == 429 {
		code = CodeUnavailable // a proxy or an overloaded server: worth a retry
	}
	msg := string(body)
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = fmt.Sprintf("HTTP %d", status)
	}
	return &Error{Code: code, Message: msg, Status: status}
}

// ApplyPipelineRequest stores a pipeline: its YAML source, at account
// level or, with Org (and Project), at that level. The pipeline's name is
// the source's name field.
type ApplyPipelineRequest struct {
	Source  string `json:"source"`
	Org     string `json:"org,omitempty"`
	Project string `json:"project,omitempty"`
	// DryRun makes every check of an apply and answers what it would do
	// (Pipeline.Plan, Changes) without storing anything. Clients use
	// PathPipelinesDryRun instead: a manager that does not know this field
	// ignores it and stores the file.
	DryRun bool `json:"dry_run,omitempty"`
}

// Plans of an apply (Pipeline.Plan).
const (
	PlanCreated   = "created"
	PlanChanged   = "changed"
	PlanUnchanged = "unchanged"
)

// Pipeline is a stored pipeline definition.
type Pipeline struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Org         string `json:"org,omitempty"`
	Project     string `json:"project,omitempty"`
	// Version is 1 when created and goes up with each apply that changes
	// the source.
	Version int64 `json:"version"`
	// Source is the YAML as applied (empty in listings).
	Source    string    `json:"source,omitempty"`
	UpdatedBy string    `json:"updated_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Changed, in an apply's answer, says whether the apply changed
	// anything (false: the same source was stored already).
	Changed bool `json:"changed,omitempty"`
	// Webhook is its webhook, nil for none (not in listings).
	Webhook *PipelineWebhook `json:"webhook,omitempty"`
	// Plan, in an apply's answer, is PlanCreated, PlanChanged or
	// PlanUnchanged; Changes says briefly what a changed one changes
	// ("stage deploy: steps added smoke"). DryRun marks the answer of a
	// dry run: nothing was stored, Version is the one an apply would store.
	Plan    string   `json:"plan,omitempty"`
	Changes []string `json:"changes,omitempty"`
	DryRun  bool     `json:"dry_run,omitempty"`
	// Inputs are the inputs its definition declares, in its order (not
	// in listings): what a form that runs it asks for.
	Inputs []PipelineInput `json:"inputs,omitempty"`
}

// PipelineWebhook is a pipeline's webhook as a get shows it: never its
// secret.
type PipelineWebhook struct {
	// Path is its URL's path on the manager: PathHooks + "/" + its ID.
	Path string `json:"path"`
	// EnabledBy is who enabled it or last rotated its secret: the runs it
	// starts act with that principal's permissions.
	EnabledBy string    `json:"enabled_by"`
	CreatedAt time.Time `json:"created_at"`
	RotatedAt time.Time `json:"rotated_at"`
	// EnabledVersion is the pipeline's version when it was enabled or
	// last rotated.
	EnabledVersion int64 `json:"enabled_version,omitempty"`
	// Suspended, when set, says why an edit of the pipeline suspended it
	// (deliveries are refused until an enable --rotate); SuspendedAt is
	// when.
	Suspended   string     `json:"suspended,omitempty"`
	SuspendedAt *time.Time `json:"suspended_at,omitempty"`
}

// EnableWebhookRequest enables a pipeline's webhook. Rotate replaces the
// secret of one that exists (its URL stays); without it, a pipeline that
// has a webhook is a conflict.
type EnableWebhookRequest struct {
	Rotate bool `json:"rotate,omitempty"`
}

// WebhookSecret answers an enable: the webhook and its secret, which no
// other answer ever shows again.
type WebhookSecret struct {
	PipelineWebhook
	Secret string `json:"secret"`
}

// WebhookPing answers a delivery of the "ping" event.
type WebhookPing struct {
	Pipeline string `json:"pipeline"`
	Message  string `json:"message"`
}

// PipelineList answers a pipeline listing.
type PipelineList struct {
	Pipelines []Pipeline `json:"pipelines"`
}

// RunPipelineRequest starts a run: the values of the pipeline's inputs
// (the rest take their defaults).
type RunPipelineRequest struct {
	Inputs map[string]string `json:"inputs,omitempty"`
	// Priority is the priority of the run's step tasks (PriorityMin to
	// PriorityMax); 0: the pipeline's, else normal.
	Priority int `json:"priority,omitempty"`
}

// Run statuses. A step has these and, for a step whose task ended
// otherwise, that task's status (timed_out, not_assigned, cancelled), or
// "skipped".
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
	StepSkipped  = "skipped"
)

// Run is one run of a pipeline.
type Run struct {
	ID       string            `json:"id"`
	Org      string            `json:"org,omitempty"`
	Project  string            `json:"project,omitempty"`
	Pipeline string            `json:"pipeline"`
	Version  int64             `json:"version"`
	Inputs   map[string]string `json:"inputs,omitempty"`
	Status   string            `json:"status"`
	// Priority is the priority of the run's step tasks.
	Priority int `json:"priority,omitempty"`
	// CancelRequested: a cancel was asked for; the run ends once its
	// running steps have.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Trigger is how it started ("manual", "webhook"); TriggeredBy who,
	// as a task's created_by says it ("user ana", "service account ci",
	// "webhook:NAME" for the webhook of pipeline NAME).
	Trigger     string `json:"trigger"`
	TriggeredBy string `json:"triggered_by,omitempty"`
	Error       string `json:"error,omitempty"`
	// Delivery is the delivery ID of the webhook call that started it.
	Delivery   string     `json:"delivery,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Steps are the steps that started or were skipped, in that order
	// (not in listings).
	Steps []RunStep `json:"steps,omitempty"`
	// RollbackOf is the deployment a rollback run (Trigger
	// TriggerRollback) re-deploys over.
	RollbackOf string `json:"rollback_of,omitempty"`
	// RerunOf is the run a re-run (Trigger TriggerRerun) runs again.
	RerunOf string `json:"rerun_of,omitempty"`
}

// RunStep is one step of a run.
type RunStep struct {
	Stage string `json:"stage"`
	Step  string `json:"step"`
	// TaskID is the step's task (its output: GET PathTasks/{id}/logs);
	// empty when it had none (skipped, or it could not start: Error).
	TaskID     string            `json:"task_id,omitempty"`
	Status     string            `json:"status"`
	Outputs    map[string]string `json:"outputs,omitempty"`
	Error      string            `json:"error,omitempty"`
	StartedAt  time.Time         `json:"started_at"`
	FinishedAt *time.Time        `json:"finished_at,omitempty"`
	// Order is the step's place in its pipeline's definition (from 0;
	// Steps are in the order the steps started or were skipped).
	Order int `json:"order"`
}

// RunList answers a run listing, newest first.
type RunList struct {
	Runs []Run `json:"runs"`
	// Next, when set, is the page query parameter of the next (older)
	// page. Since v4.
	Next string `json:"next,omitempty"`
}
