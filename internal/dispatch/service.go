// Package dispatch is the delegate hub and the task path: delegate
// registration and sessions, the delegate API (WebSocket, long poll,
// heartbeats, acquire, started, logs, result, capabilities,
// configuration), the queue and the offers over internal/assign, leases
// and failover, the sweep, flush and prune loops, the log bus and
// followed logs, delegate tokens, approval, delegate configurations, the
// delegates and tasks admin API, and the metrics of all these. What it
// needs of the other services (scopes, secrets, upgrades, identity's
// housekeeping, the web UI's watches) are interfaces declared here; internal/manager builds it
// and wires them.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/assign"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/duplicate"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/logbus"
	"github.com/legate-dev/legate/internal/metrics"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
	"github.com/legate-dev/legate/internal/unresponsive"
)

// Store is what dispatch needs of the store (*store.Store satisfies it).
type Store interface {
	AppendLogs(ctx context.Context, taskID string, epoch int64, chunks []protocol.LogChunk, cap store.LogCap) error
	ClaimTask(ctx context.Context, c store.Claim, now time.Time) (store.Task, error)
	CompleteTask(ctx context.Context, id string, epoch int64, r store.Result, now time.Time) (store.Task, error)
	ConfigurationResults(ctx context.Context, accountID string) (map[string]store.ConfigurationResult, error)
	ConfigurationResultsOf(ctx context.Context, ids []string) (map[string]store.ConfigurationResult, error)
	CreateConfiguration(ctx context.Context, c store.Configuration) (store.Configuration, error)
	CreateConnector(ctx context.Context, c store.Connector) error
	CreateOrg(ctx context.Context, o store.Org) error
	CreateProject(ctx context.Context, p store.Project) error
	CreateTask(ctx context.Context, t store.Task) error
	CreateToken(ctx context.Context, t store.Token) error
	DeleteConfiguration(ctx context.Context, accountID, name string) error
	DeleteConnector(ctx context.Context, accountID, name string) error
	DeleteDelegate(ctx context.Context, accountID, name string, connectedSince time.Time) ([]store.Instance, error)
	DeleteOrg(ctx context.Context, accountID, name string) error
	DeleteProject(ctx context.Context, accountID, org, name string) error
	DeregisterInstance(ctx context.Context, id string, now time.Time) error
	ExpireLeases(ctx context.Context, now time.Time) ([]store.LeaseOutcome, error)
	ExtendLeases(ctx context.Context, ext []store.LeaseExtension) error
	FinishQueuedTask(ctx context.Context, accountID, id string, r store.Result, now time.Time) (store.Task, error)
	FinishTask(ctx context.Context, accountID, id string, r store.Result, now time.Time) (store.Task, error)
	GetAccount(ctx context.Context, id string) (store.Account, error)
	GetConfiguration(ctx context.Context, accountID, name string) (store.Configuration, error)
	GetConnector(ctx context.Context, accountID, name string) (store.Connector, error)
	GetInstance(ctx context.Context, id string) (store.Instance, error)
	GetOrg(ctx context.Context, accountID, name string) (store.Org, error)
	GetProject(ctx context.Context, accountID, org, name string) (store.Project, error)
	GetTask(ctx context.Context, accountID, id string) (store.Task, error)
	InstanceApproval(ctx context.Context, id string) (string, error)
	ListConfigurations(ctx context.Context, accountID string) ([]store.Configuration, error)
	// SecretValues returns the values of names at org/project (closest
	// scope first) and the names found nowhere.
	SecretValues(ctx context.Context, acct, org, project string, names []string) (map[string]string, []string, error)
	ListConnectors(ctx context.Context, accountID string) ([]store.Connector, error)
	ListInstancePage(ctx context.Context, q store.InstanceQuery) ([]store.Instance, error)
	ListInstances(ctx context.Context, accountID string) ([]store.Instance, error)
	ListOrgs(ctx context.Context, accountID string) ([]store.Org, error)
	ListProjects(ctx context.Context, accountID, org string) ([]store.Project, error)
	ListTasks(ctx context.Context, f store.TaskFilter) ([]store.Task, error)
	ListTokens(ctx context.Context, accountID string) ([]store.Token, error)
	LiveCapabilities(ctx context.Context, accountID string, now time.Time) ([]store.CapabilityResult, error)
	NextLeaseExpiry(ctx context.Context) (at time.Time, ok bool, err error)
	PruneInstances(ctx context.Context, before time.Time, limit int) ([]string, error)
	QueueStats(ctx context.Context) (depth int, oldest time.Time, err error)
	QueuedPage(ctx context.Context, after *store.Task, limit int) ([]store.Task, error)
	QueuedPastDeadline(ctx context.Context, now time.Time, limit int) ([]store.Task, error)
	ReadLogs(ctx context.Context, taskID string, after store.LogCursor, limit int) ([]store.StoredChunk, error)
	RecordCapabilities(ctx context.Context, rs []store.CapabilityResult) error
	RecordConfigurationResult(ctx context.Context, r store.ConfigurationResult) error
	RequeueTask(ctx context.Context, id string, epoch int64, instanceID, reason string, lastSeq int64, now time.Time) (t store.Task, requeued bool, err error)
	RevokeToken(ctx context.Context, accountID, name string, now time.Time) (store.Token, error)
	RunningTasksOf(ctx context.Context, instanceID string) ([]store.Task, error)
	SetApproval(ctx context.Context, accountID, name, state, by string, now time.Time) ([]store.Instance, error)
	Shared() bool
	ShortenLeases(ctx context.Context, cuts []store.LeaseCut) error
	StartTask(ctx context.Context, id string, epoch int64, holder store.Holder, now time.Time) (queuedAt time.Time, err error)
	TaskHolder(ctx context.Context, accountID, id string) (store.TaskHolding, error)
	TasksHeldBy(ctx context.Context, instanceID string, ids []string) (map[string]store.HeldTask, error)
	TimeoutRunning(ctx context.Context, now time.Time, grace time.Duration) ([]store.Task, error)
	TokenByHash(ctx context.Context, accountID, hash string) (store.Token, error)
	TokenByID(ctx context.Context, id string) (store.Token, error)
	TouchInstances(ctx context.Context, touches []store.InstanceTouch) (missing []string, err error)
	UpdateConfiguration(ctx context.Context, accountID, name string, u store.ConfigurationUpdate, now time.Time) (store.Configuration, error)
	UpsertInstance(ctx context.Context, in store.Instance) (store.Instance, error)
}

// Scopes is what the task path needs of the account's orgs, projects and
// connectors (package scopes).
type Scopes interface {
	CheckScope(ctx context.Context, acct, org, project string) error
	ResolveTask(ctx context.Context, acct string, spec *protocol.TaskSpec) error
	// FillConnectorProvider gives a verify task the provider of the
	// connector it names, before its payload is checked.
	FillConnectorProvider(ctx context.Context, acct string, spec *protocol.TaskSpec) error
}

// Secrets is what the task path needs of stored secrets: the check of a
// task's secret references when it is created (package secrets).
type Secrets interface {
	// Bind checks the secret references of the final spec of a task about
	// to be created for the principal policy returns (called only when
	// there are references) and returns the exact secret each resolved
	// to, for the task to keep. A refusal's error has an HTTPStatus
	// method (400 or 403).
	Bind(ctx context.Context, acct string, spec protocol.TaskSpec, policy func(context.Context) (*access.Policy, error)) ([]store.SecretBinding, error)
	// SealError explains err to an operator (which key the database
	// needs) when it comes from a sealed value that does not open; nil
	// for any other error.
	SealError(err error) error
}

// Upgrades is what registration and the delegate listings need of the
// upgrade policy (package upgrades).
type Upgrades interface {
	// RefuseExpired answers a registration of a version past its support
	// and returns true; org and project are its token's scope.
	RefuseExpired(w http.ResponseWriter, r *http.Request, req protocol.RegisterRequest, org, project string) bool
	// RefusedFrom is the manager version that will refuse version v when it is the next minor ("": none).
	RefusedFrom(v string) string
	// View fills in the upgrade fields of an account's delegates.
	View(ctx context.Context, acct string, ds, plan []protocol.Delegate) error
	// PageView does it for one page of a listing.
	PageView(ctx context.Context, acct string, ds []protocol.Delegate) error
}

// Housekeeping is what the flush and prune loops do for the identity
// service: record API keys' last use, prune the audit log.
type Housekeeping interface {
	FlushAPIKeyUse(ctx context.Context)
	PruneAudit(ctx context.Context, now time.Time) int
}

// Watchers says whether anyone watches an account's delegates (the web
// UI's Delegates page): alone, the sweep looks only at those accounts.
type Watchers interface {
	Watched(acct string) bool
}

// Config configures a Service. The manager fills it from its own Config,
// after its defaults: no field has a default here.
type Config struct {
	Store  Store
	Bus    *cluster.Bus
	Events *events.Stream
	// Metrics is the registry dispatch adds its metrics to.
	Metrics *metrics.Registry
	// APIErrors is legate_manager_api_errors_total, which the manager
	// counts for the HTTP answers and dispatch for the WebSocket's.
	APIErrors *metrics.CounterVec

	Scopes       Scopes
	Secrets      Secrets
	Upgrades     Upgrades
	Housekeeping Housekeeping
	Watchers     Watchers
	Wedged       *unresponsive.Tracker // the delegates that ignore offers (nil: none found)
	// SessionKey signs delegate session credentials.
	SessionKey []byte

	// The manager's Config values (manager.Config says what each is).
	HeartbeatInterval   time.Duration
	MissedHeartbeats    int
	SessionTTL          time.Duration
	DefaultTaskTimeout  time.Duration
	DefaultQueueTimeout time.Duration
	LongPollWait        time.Duration
	LogCap              store.LogCap
	SweepInterval       time.Duration
	OfferFanout         int
	PruneDelegatesAfter time.Duration
	FollowPollInterval  time.Duration
	AuditRetention      time.Duration
	Version             string
	// PublicURL and DelegateImage are the defaults of install specs.
	PublicURL, DelegateImage string

	Log *slog.Logger
	Now func() time.Time
}

// Service is the delegate hub and the task path. Create it with New,
// serve its Routes and run its loops with Run.
type Service struct {
	cfg        Config
	st         Store
	log        *slog.Logger
	sessionKey []byte
	hub        *hub
	logs       *logbus.Bus
	// procs tells restarts from two live processes of one identity.
	procs   duplicate.Tracker
	started time.Time

	// stopping is closed when shutdown begins; long polls and WebSockets
	// end on it so the HTTP server can drain.
	stopping chan struct{}
	stopOnce sync.Once
	// flushMu orders lease writes: a flush's extensions and the shortened
	// leases of a delegate whose connection closed (failover.go).
	flushMu sync.Mutex
	// sweepWake (cap 1) has the sweep loop look again at when the next
	// lease ends: one was shortened.
	sweepWake chan struct{}
	// bg counts the work that outlives the request that started it (a
	// WebSocket, whose connection the HTTP server no longer tracks once
	// hijacked; an offer's widening timer): the manager's shutdown waits
	// for it (Wait).
	bg     sync.WaitGroup
	bgMu   sync.Mutex // orders bg.Add (enter) and the close of stopping
	tokens tokenCache
	// events is the one stream of what changed (events.go subscribes
	// what dispatch does on it).
	events *events.Stream
	// bus carries broadcasts to and from the other managers of a shared
	// store (package cluster).
	bus *cluster.Bus
	// caps holds every delegate's allow and deny list entries.
	caps *assign.Capabilities
	// unrunnable remembers since when a queued task had no delegate that
	// could ever take it (sweep loop only).
	unrunnable map[string]time.Time
	metrics    *dispatchMetrics
	// queue indexes the queued tasks (queue.go).
	queue *queue
	// secrets checks tasks' references to stored secrets.
	scopes  Scopes
	secrets Secrets
	// upgrades decides which version each delegate group wants.
	upgrades Upgrades
	// identity records API key uses and prunes the audit log.
	identity Housekeeping
	// watch says which accounts' delegates someone watches; seen is what
	// the sweep loop saw of them last (observe.go).
	watch    Watchers
	seen     map[string]seenDelegate
	seenPass uint64
}

// New creates the service: it registers its cluster kinds and event
// subscriptions, and loads the capability lists and the queue.
func New(ctx context.Context, cfg Config) (*Service, error) {
	m := &Service{
		cfg:        cfg,
		st:         cfg.Store,
		log:        cfg.Log,
		sessionKey: cfg.SessionKey,
		hub:        newHub(),
		logs:       logbus.New(),
		started:    cfg.Now(),
		stopping:   make(chan struct{}),
		sweepWake:  make(chan struct{}, 1),
		events:     cfg.Events,
		bus:        cfg.Bus,
		scopes:     cfg.Scopes,
		secrets:    cfg.Secrets,
		upgrades:   cfg.Upgrades,
		identity:   cfg.Housekeeping,
		watch:      cfg.Watchers,
	}
	m.tokens.entries = map[string]tokenEntry{}
	m.caps = assign.NewCapabilities()
	m.unrunnable = map[string]time.Time{}
	m.metrics = newMetrics(m, cfg.Metrics, cfg.APIErrors)
	m.queue = newQueue()
	m.handleClusterEvents()
	m.subscribe()
	if err := m.loadCapabilities(ctx); err != nil {
		return nil, fmt.Errorf("load capability lists: %w", err)
	}
	if err := m.resyncQueue(ctx); err != nil {
		return nil, fmt.Errorf("load the queue: %w", err)
	}
	return m, nil
}

// window is how long a delegate stays connected without contact.
func (m *Service) window() time.Duration {
	return time.Duration(m.cfg.MissedHeartbeats) * m.cfg.HeartbeatInterval
}

// leaseDuration is how long a task lease lasts without a heartbeat.
func (m *Service) leaseDuration() time.Duration { return m.window() }

// Run runs the flush, sweep and prune loops until ctx ends.
func (m *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { m.flushLoop(ctx) })
	wg.Go(func() { m.sweepLoop(ctx) })
	wg.Go(func() { m.pruneLoop(ctx) })
	wg.Wait()
	return nil
}

// Stopping is closed when shutdown begins (BeginStop).
func (m *Service) Stopping() <-chan struct{} { return m.stopping }

// BeginStop begins the shutdown: long polls return, WebSockets get a
// close frame, and no new background work starts. The manager calls it
// before the HTTP server's Shutdown.
func (m *Service) BeginStop() { m.beginStop() }

// Wait waits for the background work registered before BeginStop (the
// WebSockets, the offers' widening timers).
func (m *Service) Wait() { m.bg.Wait() }

// Flush records liveness and extends leases now (the manager's shutdown
// does it last, so a restart knows when delegates were seen).
func (m *Service) Flush(ctx context.Context) { m.flush(ctx) }

// enter registers work that outlives its request (see Service.bg) with
// the shutdown, unless the shutdown has begun: then it returns false
// and the work must not start. The work calls m.bg.Done when it ends. An
// Add must happen before Wait: an Add concurrent with Wait is a
// misuse of sync.WaitGroup (the race detector reports it).
func (m *Service) enter() bool {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	select {
	case <-m.stopping:
		return false
	default:
	}
	m.bg.Add(1)
	return true
}

// beginStop closes stopping, under bgMu: an enter either has added to bg
// before, or sees stopping closed.
func (m *Service) beginStop() {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	m.stopOnce.Do(func() { close(m.stopping) })
}

// tokenCache remembers whether tokens are revoked, so authenticating a
// delegate request does not read the database every time.
type tokenCache struct {
	mu      sync.Mutex
	entries map[string]tokenEntry
}

type tokenEntry struct {
	revoked bool
	at      time.Time
}

const tokenCacheTTL = 5 * time.Second

func (m *Service) tokenRevoked(ctx context.Context, tokenID string) (bool, error) {
	now := m.cfg.Now()
	m.tokens.mu.Lock()
	e, ok := m.tokens.entries[tokenID]
	m.tokens.mu.Unlock()
	if ok && (e.revoked || now.Sub(e.at) < tokenCacheTTL) {
		return e.revoked, nil
	}
	t, err := m.st.TokenByID(ctx, tokenID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return true, nil
		}
		return false, err
	}
	revoked := t.RevokedAt != nil
	m.tokens.mu.Lock()
	m.tokens.entries[tokenID] = tokenEntry{revoked: revoked, at: now}
	m.tokens.mu.Unlock()
	return revoked, nil
}

func (m *Service) markTokenRevoked(tokenID string) {
	m.tokens.mu.Lock()
	m.tokens.entries[tokenID] = tokenEntry{revoked: true, at: m.cfg.Now()}
	m.tokens.mu.Unlock()
}

// What the other services call.

// PrepareTask puts a pipeline step's task through the checks of a
// submitted task, its secret references checked for the principal policy
// returns, and returns their bindings (engine.Tasks).
func (m *Service) PrepareTask(ctx context.Context, acct string, spec *protocol.TaskSpec,
	policy func(context.Context) (*access.Policy, error)) ([]store.SecretBinding, error) {
	if err := m.scopes.FillConnectorProvider(ctx, acct, spec); err != nil {
		return nil, err
	}
	if err := m.validateSpec(spec); err != nil {
		return nil, err
	}
	if err := m.scopes.ResolveTask(ctx, acct, spec); err != nil {
		return nil, err
	}
	return m.secrets.Bind(ctx, acct, *spec, policy)
}

// EndTask follows up a task another service ended in the store: its
// delegate is told to stop it, and its end is published (engine.Tasks).
func (m *Service) EndTask(ctx context.Context, t store.Task) { m.afterManagerFinish(ctx, t) }

// DelegateToken finds the valid delegate token of an account; when there
// is none it answers 401 and returns false (upgrades.Tokens).
func (m *Service) DelegateToken(w http.ResponseWriter, r *http.Request, accountID, token string) (store.Token, bool) {
	return m.delegateToken(w, r, accountID, token)
}

// ListDelegates returns every instance of the account that has not
// deregistered, as the API shows it (upgrades.Delegates).
func (m *Service) ListDelegates(ctx context.Context, acct string) ([]protocol.Delegate, error) {
	return m.delegateList(ctx, acct, false)
}
