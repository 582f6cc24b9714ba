// Package manager is composition only: it builds legate's control-plane
// services (dispatch, identity, secrets, upgrades, the pipeline engine)
// over one store, events stream and cluster bus, wires what each needs of
// the others through small adapters, concatenates their routes, mounts
// the web UI, and runs their loops (Run) until it shuts them down.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/admit"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/dispatch"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/pipeline/engine"
	"github.com/legate-dev/legate/internal/queue"
	"github.com/legate-dev/legate/internal/retention"
	"github.com/legate-dev/legate/internal/scopes"
	"github.com/legate-dev/legate/internal/secrets"
	"github.com/legate-dev/legate/internal/store"
	"github.com/legate-dev/legate/internal/unresponsive"
	"github.com/legate-dev/legate/internal/upgrades"
)

// Config configures a Manager. Zero values mean the documented defaults.
type Config struct {
	// HeartbeatInterval is how often delegates heartbeat; 0 = 10s.
	HeartbeatInterval time.Duration
	// MissedHeartbeats before a delegate counts as disconnected; 0 = 3.
	MissedHeartbeats int
	// SessionTTL is the lifetime of a delegate session credential; 0 = 1h.
	SessionTTL time.Duration
	// DefaultTaskTimeout applies when a task sets none; 0 = 1h.
	DefaultTaskTimeout time.Duration
	// DefaultQueueTimeout applies when a task sets none; 0 = 5m.
	DefaultQueueTimeout time.Duration
	// LongPollWait is the longest a poll for events is held open; 0 = 25s.
	LongPollWait time.Duration
	// LogCap bounds stored output per task attempt; zero = 4 MiB head and 4 MiB tail.
	LogCap store.LogCap
	// SweepInterval is how often timeouts, leases and the queue are checked;
	// 0 = a tenth of the heartbeat interval, between 100ms and 500ms, so a
	// lost delegate's tasks move on close to the end of its lease.
	SweepInterval time.Duration
	// OfferFanout is how many eligible delegates are told about a new task
	// at once (least loaded first); 0 = 3.
	OfferFanout int
	// PruneDelegatesAfter is how long a delegate instance may be out of
	// contact (silent, or stopped and deregistered) before the manager
	// removes it from the store; 0 = 6h, negative = never. A value under
	// twice the liveness window is raised to it. Every manager of a
	// database prunes, in bounded batches (dispatch/delegates.go).
	PruneDelegatesAfter time.Duration
	// FollowPollInterval is how often a followed task log reads the store
	// for output that reached it through another manager sharing the
	// store and whose notification was lost; 0 = 1s.
	FollowPollInterval time.Duration
	// APIKeyCacheTTL is how long a manager trusts an API key it has seen
	// without reading it again: the bound on how long a revocation takes
	// to reach a manager that missed its broadcast; 0 = 5s.
	APIKeyCacheTTL time.Duration
	// AuditRetention is how long the audit log keeps a record; the prune
	// loop removes older ones. 0 = 90 days, negative = forever.
	AuditRetention time.Duration
	// TaskRetention is how long finished tasks (with their logs) and
	// finished pipeline runs are kept; the retention loop deletes older
	// ones in batches. 0 = 30 days, negative = forever.
	TaskRetention time.Duration

	// DeploymentsPerHour and DeploymentsPerDay are the default deployment
	// limits of every account (an account's administrators may set their
	// own, PathLimits): at most that many deployments may start in any
	// rolling hour and 24 hours. 0 = 40 and 100 (the seeds' numbers);
	// negative = unlimited.
	DeploymentsPerHour int
	DeploymentsPerDay  int
	// RunAdvanceInterval is how often a manager advances every unfinished
	// pipeline run (a run advances at once when one of its tasks ends on
	// this manager; this catches those that ended on a manager that died
	// before advancing). 0 = 30s.
	RunAdvanceInterval time.Duration

	// HTTP server limits (docs/security.md).

	// ReadTimeout bounds how long a request body may take to arrive, from
	// the end of its headers, on every path (API, web UI, unknown paths,
	// and a body the route refused without reading it); a slower body is
	// cut (408, connection closed). 0 = 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds how long a request may take from the end of its
	// headers to the end of its answer, plus ReadTimeout when it has a
	// body. Streaming answers (the WebSocket,
	// long polls, followed task logs) instead get WriteTimeout for each
	// write, so they last as long as they need while a peer that stops
	// reading is dropped. 0 = 60s.
	WriteTimeout time.Duration
	// UIDelegateUpdateEvery is the least time between two renders of a
	// web UI Delegates page's live stream. 0 = 1s.
	UIDelegateUpdateEvery time.Duration
	// UINewDelegateHintAfter is how long the web UI's New delegate page
	// waits for the delegate before it says what to check. 0 = 2m.
	UINewDelegateHintAfter time.Duration
	// IdleTimeout closes a keep-alive connection that carries no request
	// for this long. 0 = 120s (longer than the 90s after which Go clients
	// close their idle connections, so clients close first).
	IdleTimeout time.Duration
	// MaxConnections bounds the connections served at once, so that the
	// manager never runs out of file descriptors. Past it, new
	// connections wait in the listen backlog and the keep-alive
	// connection idle the longest is closed to make room (WebSockets,
	// long polls and requests in flight are never closed for it). 0 =
	// the descriptor limit (RLIMIT_NOFILE) less a quarter of it, at most
	// 1,024, kept for the database, log files and outgoing connections:
	// 64,512 of a limit of 65,536, 384 of 512.
	MaxConnections int
	// UnauthenticatedBodies bounds how many request bodies without
	// credentials (registrations, whose token is in the body) are read at
	// once; a request that finds no slot within a second is answered 503
	// with Retry-After. 0 = 32.
	UnauthenticatedBodies int
	// Admissions bounds how many registrations and event-channel
	// openings (WebSocket handshakes) are served at once; past it a
	// request waits a moment, then is answered 503 with a Retry-After
	// spread over the clients already waiting (package admit), so that a
	// fleet reconnecting at once comes back spread out. 0 =
	// admit.DefaultSlots; negative = no limit (for comparisons).
	Admissions int
	// ReleaseDir holds the release binaries the manager serves to
	// watchers: DIR/VERSION/legate-OS-ARCH with its signature next to it
	// (+ ".sig", legate release sign); "" = none (docs/upgrades.md).
	ReleaseDir string
	// UpgradePollInterval is how often watchers are told to ask which
	// version to run. 0 = 1m.
	UpgradePollInterval time.Duration
	// UpgradeSoak is how long every delegate of a ring must have run the
	// manager's version, with no failed upgrade, before the next ring is
	// offered it. 0 = 24h.
	UpgradeSoak time.Duration
	// TLS, when not nil, makes the manager serve HTTPS and WSS only.
	TLS *tls.Config
	// PublicURL is the URL clients reach the manager at (--public-url).
	// When it is https — the manager behind a TLS-terminating proxy — or
	// the manager serves TLS, the web UI's cookies are Secure and every
	// answer carries Strict-Transport-Security (api.HSTSMaxAge).
	PublicURL string
	// DelegateImage is the image operators published for delegates
	// (--delegate-image): install specs name it unless they ask for
	// another; "" = none, and a container spec must name its image.
	DelegateImage string
	// Version is reported to clients.
	Version string
	// Logger; nil = slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
	if c.MissedHeartbeats <= 0 {
		c.MissedHeartbeats = 3
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = time.Hour
	}
	if c.DefaultTaskTimeout <= 0 {
		c.DefaultTaskTimeout = time.Hour
	}
	if c.DefaultQueueTimeout <= 0 {
		c.DefaultQueueTimeout = 5 * time.Minute
	}
	if c.LongPollWait <= 0 {
		c.LongPollWait = 25 * time.Second
	}
	if c.LogCap.Head <= 0 && c.LogCap.Tail <= 0 {
		c.LogCap = store.LogCap{Head: 4 << 20, Tail: 4 << 20}
	}
	if c.PruneDelegatesAfter == 0 {
		c.PruneDelegatesAfter = 6 * time.Hour
	}
	if window := time.Duration(c.MissedHeartbeats) * c.HeartbeatInterval; c.PruneDelegatesAfter > 0 && c.PruneDelegatesAfter < 2*window {
		c.PruneDelegatesAfter = 2 * window
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = min(max(c.HeartbeatInterval/10, 100*time.Millisecond), 500*time.Millisecond)
	}
	if c.AuditRetention == 0 {
		c.AuditRetention = 90 * 24 * time.Hour
	}
	if c.TaskRetention == 0 {
		c.TaskRetention = 30 * 24 * time.Hour
	}
	if c.FollowPollInterval <= 0 {
		c.FollowPollInterval = time.Second
	}
	if c.DeploymentsPerHour == 0 {
		c.DeploymentsPerHour = 40
	}
	if c.DeploymentsPerDay == 0 {
		c.DeploymentsPerDay = 100
	}
	if c.RunAdvanceInterval <= 0 {
		c.RunAdvanceInterval = 30 * time.Second
	}
	if c.OfferFanout <= 0 {
		c.OfferFanout = 3
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 60 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 120 * time.Second
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = defaultMaxConnections(nofileLimit())
	}
	if c.UnauthenticatedBodies <= 0 {
		c.UnauthenticatedBodies = 32
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.UpgradePollInterval <= 0 {
		c.UpgradePollInterval = time.Minute
	}
	if c.UpgradeSoak <= 0 {
		c.UpgradeSoak = 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Manager serves the legate API. Create it with New and run it with Run.
type Manager struct {
	cfg Config
	st  *store.Store
	log *slog.Logger
	// events is the one stream of what changed (events.go subscribes
	// what the manager does on it; each service subscribes its own).
	events events.Stream
	// bus carries broadcasts to and from the other managers of a shared
	// store (package cluster).
	bus     *cluster.Bus
	metrics *managerMetrics
	// server applies the routes' limits and credentials (api.Server);
	// auditor records audited requests.
	server  *api.Server
	auditor *api.Auditor

	// The services.
	// dispatch is the delegate hub and the task path (package dispatch).
	dispatch *dispatch.Service
	// scopes holds the accounts' orgs, projects and connectors.
	scopes *scopes.Service
	// queue answers the queue signals per selector set.
	queue *queue.Service
	// identity holds users, roles, API keys and sessions, and
	// authenticates admin requests (package identity).
	identity *identity.Service
	// secrets serves stored secrets and checks tasks' references to them.
	secrets *secrets.Service
	// upgrades decides which version each delegate group wants and
	// serves release binaries to watchers.
	upgrades *upgrades.Service
	// engine runs pipelines (package engine).
	engine *engine.Service

	// conns is the connection limit of the running server (set by Run).
	conns atomic.Pointer[connLimit]
	// watch tells the web UI when delegates change (webui.go).
	watch delegateWatch
	// runWatch tells the web UI's run pages when a run advanced.
	runWatch delegateWatch
	// taskWatch tells the web UI's task pages when a task of an account
	// was created, acquired, started, re-queued or ended.
	taskWatch delegateWatch
}

// New creates a manager over an open store: it builds every service and
// wires them.
func New(ctx context.Context, st *store.Store, cfg Config) (*Manager, error) {
	cfg.defaults()
	// Secrets at rest: what an older version kept in clear is sealed
	// first (one pass per database), then the session key is opened (made
	// on a new database). A database sealed with another key stops here.
	sealed, err := st.SealInClear(ctx)
	if err != nil {
		return nil, fmt.Errorf("seal secrets at rest: %w", secrets.KeyError(err))
	}
	if sealed.Changed() {
		cfg.Logger.Info("sealed the secrets an older version kept in clear in the database",
			"session_key", sealed.SessionKey, "tasks", sealed.Sealed, "ended_tasks_dropped", sealed.Dropped)
	}
	kb, err := st.SessionKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("load session key: %w", secrets.KeyError(err))
	}
	m := &Manager{cfg: cfg, st: st, log: cfg.Logger}
	m.metrics = newMetrics()
	m.bus = cluster.New(st, cfg.Logger)
	m.scopes = scopes.New(scopes.Config{Store: st, Now: cfg.Now})
	m.queue = queue.New(st, m.metrics.reg, cfg.Now)
	// Dispatch needs the services built after it (secrets, upgrades,
	// identity): the adapters call them at call time (secrets.go,
	// upgrades.go, identity.go).
	m.dispatch, err = dispatch.New(ctx, dispatch.Config{Store: st, Bus: m.bus, Events: &m.events, Metrics: m.metrics.reg,
		APIErrors: m.metrics.apiErrors, Scopes: m.scopes, Secrets: secretsOf{m}, Upgrades: upgradesOf{m}, Housekeeping: identityOf{m}, Watchers: &m.watch, SessionKey: kb,
		Wedged:            unresponsive.New(cfg.Logger, m.metrics.reg, cfg.HeartbeatInterval, st.LoseUnstarted),
		HeartbeatInterval: cfg.HeartbeatInterval, MissedHeartbeats: cfg.MissedHeartbeats, SessionTTL: cfg.SessionTTL,
		DefaultTaskTimeout: cfg.DefaultTaskTimeout, DefaultQueueTimeout: cfg.DefaultQueueTimeout, LongPollWait: cfg.LongPollWait,
		LogCap: cfg.LogCap, SweepInterval: cfg.SweepInterval, OfferFanout: cfg.OfferFanout,
		PruneDelegatesAfter: cfg.PruneDelegatesAfter, FollowPollInterval: cfg.FollowPollInterval,
		AuditRetention: cfg.AuditRetention, Version: cfg.Version, Log: cfg.Logger, Now: cfg.Now,
		PublicURL: cfg.PublicURL, DelegateImage: cfg.DelegateImage})
	if err != nil {
		return nil, err
	}
	m.handleClusterEvents()
	m.subscribe()
	m.engine = m.newEngine()
	m.auditor = &api.Auditor{Store: st, Now: cfg.Now, Log: cfg.Logger}
	m.identity = identity.New(identity.Config{Store: st, Bus: m.bus, Auditor: m.auditor, CheckScope: m.scopes.CheckScope,
		APIKeyCacheTTL: cfg.APIKeyCacheTTL, AuditRetention: cfg.AuditRetention, Version: cfg.Version,
		PublicURL: cfg.PublicURL, DelegateImage: cfg.DelegateImage, Log: cfg.Logger, Now: cfg.Now})
	m.secrets = secrets.New(secrets.Config{Store: st, Scopes: m.scopes, Log: cfg.Logger, Now: cfg.Now})
	m.upgrades = upgrades.New(upgrades.Config{Store: st, Tokens: m.dispatch, Delegates: m.dispatch, Scopes: m.scopes,
		ReleaseDir: cfg.ReleaseDir, UpgradePollInterval: cfg.UpgradePollInterval, UpgradeSoak: cfg.UpgradeSoak,
		Version: cfg.Version, Log: cfg.Logger, Now: cfg.Now})
	m.server = api.NewServer(api.Config{ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout,
		UnauthenticatedBodies: cfg.UnauthenticatedBodies, Admission: admission(cfg.Admissions), Authenticate: m.identity.Authenticate, Audit: m.auditor, Log: cfg.Logger})
	return m, nil
}

// window is how long a delegate stays connected without contact.
func (m *Manager) window() time.Duration {
	return time.Duration(m.cfg.MissedHeartbeats) * m.cfg.HeartbeatInterval
}

// Run serves the API on ln and runs the background loops until ctx ends,
// then shuts down: WebSockets get a close frame, long polls return, and
// in-flight requests finish (bounded by 10s). ln is a plain TCP listener;
// Run applies Config.MaxConnections and Config.TLS to it.
func (m *Manager) Run(ctx context.Context, ln net.Listener) error {
	limit := newConnLimit(ln, m.cfg.MaxConnections, m.log)
	m.conns.Store(limit)
	ln = limit
	if m.cfg.TLS != nil {
		ln = tls.NewListener(ln, m.cfg.TLS)
	}
	srv := &http.Server{
		Handler:           m.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       m.cfg.IdleTimeout,
		// Body and write deadlines are set per request (api.Server's
		// Deadlines, for every path) and per route: a server-wide
		// ReadTimeout or WriteTimeout would also cut the WebSockets and
		// long polls.
		MaxHeaderBytes: maxHeaderBytes,
		ConnState:      limit.connState,
		ErrorLog:       slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
		BaseContext:    func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}

	loopCtx, cancelLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := m.dispatch.Run(loopCtx); err != nil {
			m.log.Error("dispatch loops", "err", err)
		}
	})
	wg.Go(func() {
		if err := m.bus.Run(loopCtx); err != nil {
			m.log.Error("listen to the other managers", "err", err)
		}
	})
	wg.Go(func() {
		if err := m.engine.Run(loopCtx); err != nil {
			m.log.Error("pipeline engine", "err", err)
		}
	})
	if m.cfg.TaskRetention > 0 {
		rl := &retention.Loop{Store: m.st, Age: m.cfg.TaskRetention, Now: m.cfg.Now, Log: m.log}
		wg.Go(func() {
			if err := rl.Run(loopCtx); err != nil {
				m.log.Error("retention loop", "err", err)
			}
		})
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	m.log.Info("manager listening", "addr", ln.Addr().String(), "tls", m.cfg.TLS != nil, "heartbeat_interval", m.cfg.HeartbeatInterval,
		"max_connections", m.cfg.MaxConnections, "read_timeout", m.cfg.ReadTimeout, "write_timeout", m.cfg.WriteTimeout,
		"idle_timeout", m.cfg.IdleTimeout)

	var serveErr error
	served := false
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		served = true
	}
	m.dispatch.BeginStop()
	shCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shCtx); err != nil {
		// Requests still running after the grace period lose their
		// connections; their handlers end on the errors that follow.
		m.log.Warn("http shutdown: closing the connections of requests still running", "err", err)
		_ = srv.Close()
	}
	if !served {
		<-errc // Serve returns ErrServerClosed once Shutdown has begun
	}
	// Every WebSocket and timer dispatch registered before BeginStop is
	// ordered before this Wait; later ones see it stopping and do not start.
	m.dispatch.Wait()
	cancelLoops()
	wg.Wait()
	// Record the last liveness so a restart knows when delegates were seen.
	m.dispatch.Flush(context.WithoutCancel(ctx))
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	m.log.Info("manager stopped")
	return nil
}

// admission is the admission limit of Config.Admissions (nil: none).
func admission(n int) *admit.Limiter {
	if n < 0 {
		return nil
	}
	return admit.New(admit.Config{Slots: n})
}
