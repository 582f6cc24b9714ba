// Package engine runs pipelines. It starts runs of stored pipelines and
// advances them (package pipeline's planner decides, the store records),
// creates the task of each step that starts, cancels runs, records the
// deployments of deployment stages within the account's deployment
// limits, and starts runs from signed webhook deliveries. It serves the
// API of pipelines, runs, deployments, limits and webhooks (Routes) and
// advances unfinished runs in its loop (Run).
//
// It submits step tasks through the dispatch side: a step's spec goes
// through the checks of a submitted task (Tasks.PrepareTask), the task is
// created in the store and published as events.TaskQueued, which the
// dispatch side offers to delegates. It follows their ends on the same
// events stream (events.TaskEnded) and publishes events.RunAdvanced.
//
// It may import api, events, metrics, pipeline, protocol, access and
// store; never the manager, the delegate, the CLI, the executors or the
// web UI. What it needs of the rest (task checks, scopes, secrets,
// principals) is an interface declared here.
package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/metrics"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Store is what the engine needs of the database (*store.Store).
type Store interface {
	// Pipelines.
	ApplyPipelineSuspending(ctx context.Context, p store.Pipeline, suspend string, now time.Time) (store.Pipeline, bool, string, error)
	GetPipeline(ctx context.Context, acct, org, project, name string) (store.Pipeline, error)
	ListPipelines(ctx context.Context, acct string) ([]store.Pipeline, error)
	DeletePipeline(ctx context.Context, acct, org, project, name string) error

	// Runs.
	CreateRun(ctx context.Context, r store.Run) (store.Run, error)
	GetRun(ctx context.Context, acct, id string) (store.Run, error)
	ListRuns(ctx context.Context, acct string, f store.RunFilter) ([]store.Run, error)
	AdvanceRun(ctx context.Context, acct, id string, decide func(store.Run) (store.RunChange, error)) (store.Run, error)
	UnfinishedRuns(ctx context.Context) ([]store.RunRef, error)
	RunOfTask(ctx context.Context, taskID string) (store.RunRef, error)
	RunOfDelivery(ctx context.Context, webhookID, delivery string) (store.Run, error)

	// The steps' tasks.
	CreateTask(ctx context.Context, t store.Task) error
	GetTask(ctx context.Context, acct, id string) (store.Task, error)
	FinishTask(ctx context.Context, acct, id string, r store.Result, now time.Time) (store.Task, error)

	// Deployments and limits.
	BeginDeployment(ctx context.Context, d store.Deployment, defaults store.DeploymentLimits) (store.Deployment, error)
	EndDeployment(ctx context.Context, acct, id string, end store.DeploymentEnd, now time.Time) (store.Deployment, bool, error)
	GetDeployment(ctx context.Context, acct, id string) (store.Deployment, error)
	ListDeployments(ctx context.Context, f store.DeploymentFilter) ([]store.Deployment, error)
	CurrentDeployments(ctx context.Context, f store.CurrentFilter) ([]store.CurrentDeployment, error)
	PreviousDeployment(ctx context.Context, d store.Deployment) (store.Deployment, error)
	DeploymentUsage(ctx context.Context, acct string, defaults store.DeploymentLimits, now time.Time) (store.DeploymentUsage, error)
	SetDeploymentLimits(ctx context.Context, acct string, perHour, perDay *int, reset bool, now time.Time) (store.StoredLimits, error)

	// Webhooks.
	SetWebhook(ctx context.Context, h store.Webhook, secret string, rotate bool, now time.Time) (store.Webhook, error)
	WebhookOf(ctx context.Context, acct, org, project, pipeline string) (store.Webhook, error)
	WebhookByID(ctx context.Context, id string) (store.Webhook, []byte, error)
	DeleteWebhook(ctx context.Context, acct, org, project, pipeline string) error
	RememberDelivery(ctx context.Context, webhookID, delivery string, expires time.Time, max int, now time.Time) error
}

// Tasks is what the engine needs of the dispatch side.
type Tasks interface {
	// PrepareTask checks and normalizes the final spec of a step's task
	// as it does a submitted task's (its type, scope, connector, and its
	// secret references for the principal policy returns, called only
	// when there are any) and returns what those references are bound to;
	// an error says why the step cannot run.
	PrepareTask(ctx context.Context, acct string, spec *protocol.TaskSpec,
		policy func(context.Context) (*access.Policy, error)) ([]store.SecretBinding, error)
	// EndTask follows up a task the engine ended in the store (the
	// running step of a cancelled run): its delegate is told to stop it,
	// and its end is published.
	EndTask(ctx context.Context, t store.Task)
}

// Scopes is what the engine needs to know of orgs and projects.
type Scopes interface {
	// CheckScope says why an org (and project) cannot hold a pipeline:
	// one does not exist, or a project is given without its org.
	CheckScope(ctx context.Context, acct, org, project string) error
	// ApplyConnectorCluster puts into spec the cluster of the Kubernetes
	// connector it names (nothing for another connector), so that the
	// checks before a run see the secret that holds its token.
	ApplyConnectorCluster(ctx context.Context, acct string, spec *protocol.TaskSpec) error
}

// Secrets is what the engine needs of stored secrets.
type Secrets interface {
	// SecretNeeds returns what running spec needs for its secret
	// references: secret:access on each at the scope it resolves to.
	SecretNeeds(ctx context.Context, acct string, spec protocol.TaskSpec) ([]api.Need, error)
	// SealError explains err to an operator (which key the database
	// needs) when it comes from a sealed value that does not open; nil
	// for any other error.
	SealError(err error) error
}

// Principals is what webhooks need of users and service accounts.
type Principals interface {
	// PolicyOf returns the policy the principal of this kind and ID has
	// now, and whether it is disabled; a nil policy when it no longer
	// exists. Kind protocol.OwnerAccount is the account itself.
	PolicyOf(ctx context.Context, acct, kind, id string) (pol *access.Policy, disabled bool, err error)
}

// Config configures a Service.
type Config struct {
	Store      Store
	Tasks      Tasks
	Scopes     Scopes
	Secrets    Secrets
	Principals Principals
	// Events is the one stream of what changed: the engine publishes
	// TaskQueued and RunAdvanced on it and follows TaskEnded. nil = a
	// stream of its own.
	Events *events.Stream
	// Metrics is the registry the engine's metrics join; nil = one of
	// its own.
	Metrics *metrics.Registry
	// DeploymentsPerHour and DeploymentsPerDay are the default
	// deployment limits of every account (0 or negative = unlimited; the
	// manager applies its defaults before).
	DeploymentsPerHour int
	DeploymentsPerDay  int
	// RunAdvanceInterval is how often Run advances every unfinished run;
	// 0 = 30s.
	RunAdvanceInterval time.Duration
	// Log; nil = slog.Default().
	Log *slog.Logger
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Service is the pipeline engine. Create it with New; Run advances the
// unfinished runs, Routes serves its API.
type Service struct {
	cfg        Config
	st         Store
	tasks      Tasks
	scopes     Scopes
	secrets    Secrets
	principals Principals
	events     *events.Stream
	log        *slog.Logger
	now        func() time.Time
	// notes collects the step tasks that ended, for Run.
	notes *runNotes
	// refusals counts deployments refused over a limit, by limit;
	// badSignatures webhook deliveries refused for their signature,
	// replays those refused as sent again.
	refusals      *metrics.CounterVec
	badSignatures *metrics.Counter
	replays       *metrics.Counter
}

// New creates the engine and subscribes it to the ends of step tasks.
func New(cfg Config) *Service {
	if cfg.RunAdvanceInterval <= 0 {
		cfg.RunAdvanceInterval = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Events == nil {
		cfg.Events = &events.Stream{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewRegistry()
	}
	svc := &Service{cfg: cfg, st: cfg.Store, tasks: cfg.Tasks, scopes: cfg.Scopes, secrets: cfg.Secrets, principals: cfg.Principals,
		events: cfg.Events, log: cfg.Log, now: cfg.Now, notes: newRunNotes()}
	svc.refusals = cfg.Metrics.NewCounterVec(metrics.Opts{
		Name: "legate_deployments_refused_total",
		Help: "Deployments refused because the account reached a deployment limit, by limit: hour, day.",
	}, "limit")
	for _, l := range []string{"hour", "day"} {
		svc.refusals.With(l)
	}
	svc.badSignatures = cfg.Metrics.NewCounter(metrics.Opts{
		Name: "legate_webhook_bad_signatures_total",
		Help: "Pipeline webhook deliveries refused because their signature headers were missing, malformed or did not match the delivery.",
	})
	svc.replays = cfg.Metrics.NewCounter(metrics.Opts{
		Name: "legate_webhook_replays_total",
		Help: "Pipeline webhook deliveries refused as sent again: a delivery ID accepted before, or signed outside the replay window.",
	})
	// The run of a step task that ended here advances at once (Run; the
	// manager where a step ended advances its run).
	cfg.Events.Subscribe(func(_ context.Context, e events.Event) {
		if !e.Remote && isStepTask(e.TaskID) {
			svc.notes.note(e.TaskID)
		}
	}, events.TaskEnded)
	return svc
}

// Routes returns the engine's API. It uses svc only once a route is
// served, so the route table of a nil Service can be listed.
func (svc *Service) Routes() []api.Route {
	return []api.Route{
		// Deployments and the account's deployment limits. Setting limits
		// needs user:manage at the account: whoever holds it may grant
		// itself any role, so it already is the account's administrator.
		{Method: "GET", Pattern: protocol.PathDeployments, Admin: svc.handleListDeployments, Rule: api.Rule{Perm: access.PipelineView, List: true}},
		{Method: "GET", Pattern: protocol.PathDeployments + "/{id}", Admin: svc.handleGetDeployment, Rule: api.Rule{Perm: access.PipelineView, Scope: svc.atDeployment()}},
		{Method: "GET", Pattern: protocol.PathDeploymentsCurrent, Admin: svc.handleCurrentDeployments, Rule: api.Rule{Perm: access.PipelineView, List: true}},
		// A rollback is a run of the pipeline: the handler checks what
		// running it needs at the pipeline's scope once it knows which.
		{Method: "POST", Pattern: protocol.PathDeploymentsRollback, Body: api.BodyTiny, Admin: svc.handleRollback, Rule: api.Rule{Perm: access.PipelineExecute, Scope: api.Anywhere}, Audit: "deployment.rollback"},
		{Method: "GET", Pattern: protocol.PathLimits, Admin: svc.handleGetLimits, Rule: api.Rule{Perm: access.PipelineView, List: true}},
		{Method: "PUT", Pattern: protocol.PathLimits, Body: api.BodyTiny, Admin: svc.handleSetLimits, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "limits.update"},
		// Pipelines and their runs (pipelines_api.go). Running one also
		// needs what submitting each of its steps as a task would.
		{Method: "POST", Pattern: protocol.PathPipelines, Body: api.BodyPipeline, Admin: svc.handleApplyPipeline, Rule: api.Rule{Perm: access.PipelineEdit, Scope: api.AtBody}, Audit: "pipeline.apply"},
		// A dry run has a route of its own, so that a manager that does
		// not know it refuses it rather than storing the file.
		{Method: "POST", Pattern: protocol.PathPipelinesDryRun, Body: api.BodyPipeline, Admin: svc.handleDryRunPipeline, Rule: api.Rule{Perm: access.PipelineEdit, Scope: api.AtBody}, Audit: "pipeline.dry_run"},
		{Method: "GET", Pattern: protocol.PathPipelines, Admin: svc.handleListPipelines, Rule: api.Rule{Perm: access.PipelineView, List: true}},
		{Method: "GET", Pattern: protocol.PathPipelines + "/{name}", Admin: svc.handleGetPipeline, Rule: api.Rule{Perm: access.PipelineView, Scope: api.AtQuery}},
		{Method: "DELETE", Pattern: protocol.PathPipelines + "/{name}", Admin: svc.handleDeletePipeline, Rule: api.Rule{Perm: access.PipelineEdit, Scope: api.AtQuery}, Audit: "pipeline.delete"},
		{Method: "POST", Pattern: protocol.PathPipelines + "/{name}/runs", Body: api.BodyPipeline, Admin: svc.handleRunPipeline, Rule: api.Rule{Perm: access.PipelineExecute, Scope: api.AtQuery, Also: svc.pipelineUses}, Audit: "pipeline.run"},
		{Method: "GET", Pattern: protocol.PathRuns, Admin: svc.handleListRuns, Rule: api.Rule{Perm: access.PipelineView, List: true}},
		{Method: "GET", Pattern: protocol.PathRuns + "/{id}", Admin: svc.handleGetRun, Rule: api.Rule{Perm: access.PipelineView, Scope: svc.atRun()}},
		{Method: "POST", Pattern: protocol.PathPipelines + "/{name}/webhook", Body: api.BodyTiny, Admin: svc.handleEnableWebhook, Rule: api.Rule{Perm: access.PipelineEdit, Scope: api.AtQuery}, Audit: "pipeline.webhook_enable"},
		{Method: "DELETE", Pattern: protocol.PathPipelines + "/{name}/webhook", Admin: svc.handleDisableWebhook, Rule: api.Rule{Perm: access.PipelineEdit, Scope: api.AtQuery}, Audit: "pipeline.webhook_disable"},
		// A pipeline's webhook (webhooks.go): no credentials, the body is
		// signed with the webhook's secret; it acts as who enabled it.
		{Method: "POST", Pattern: protocol.PathHooks + "/{id}", Body: bodyWebhook, Public: svc.handleHook},
		{Method: "POST", Pattern: protocol.PathRuns + "/{id}/cancel", Admin: svc.handleCancelRun, Rule: api.Rule{Perm: access.PipelineExecute, Scope: svc.atRun()}, Audit: "run.cancel"},
		{Method: "POST", Pattern: protocol.PathRuns + "/{id}/rerun", Body: api.BodyPipeline, Admin: svc.handleRerun, Rule: api.Rule{Perm: access.PipelineExecute, Scope: svc.atRunPipeline(), Also: svc.rerunUses}, Audit: "run.rerun"},
	}
}
