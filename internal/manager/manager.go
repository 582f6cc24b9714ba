// Package manager is legate's control plane: the HTTP API for users and
// delegates, the WebSocket hub that notifies delegates, the long-poll
// fallback, the scheduler that offers queued tasks to eligible delegates,
// liveness tracking, lease and timeout enforcement, and the log store's
// live fan-out.
package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/assign"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
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
	// APIKeyCacheTTL is how long a manager trusts an API key it has seen
	// without reading it again: the bound on how long a revocation takes
	// to reach a manager that missed its broadcast; 0 = 5s.
	APIKeyCacheTTL time.Duration
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
	if c.SweepInterval <= 0 {
		c.SweepInterval = min(max(c.HeartbeatInterval/10, 100*time.Millisecond), 500*time.Millisecond)
	}
	if c.OfferFanout <= 0 {
		c.OfferFanout = 3
	}
	if c.Version == "" {
		c.Version = "dev"
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
	cfg        Config
	id         string // this manager process, in broadcasts to the others
	st         *store.Store
	log        *slog.Logger
	sessionKey []byte
	hub        *hub
	logs       *logBus
	started    time.Time

	// stopping is closed when shutdown begins; long polls and WebSockets
	// end on it so the HTTP server can drain.
	stopping chan struct{}
	stopOnce sync.Once
	wsWG     sync.WaitGroup
	tokens   tokenCache
	apiKeys  apiKeyCache
	// listenUp is set once the listener of other managers' broadcasts is up.
	listenUp atomic.Bool
	// caps holds every delegate's allow and deny list entries.
	caps *assign.Capabilities
	// unrunnable remembers since when a queued task had no delegate that
	// could ever take it (sweep loop only).
	unrunnable map[string]time.Time
	metrics    *managerMetrics
	// queue indexes the queued tasks (queue.go).
	queue *queue
}

// New creates a manager over an open store.
func New(ctx context.Context, st *store.Store, cfg Config) (*Manager, error) {
	cfg.defaults()
	// Secrets at rest: what an older version kept in clear is sealed
	// first (one pass per database), then the session key is opened (made
	// on a new database). A database sealed with another key stops here.
	sealed, err := st.SealInClear(ctx)
	if err != nil {
		return nil, fmt.Errorf("seal secrets at rest: %w", keyError(err))
	}
	if sealed.Changed() {
		cfg.Logger.Info("sealed the secrets an older version kept in clear in the database",
			"session_key", sealed.SessionKey, "tasks", sealed.Sealed, "ended_tasks_dropped", sealed.Dropped)
	}
	kb, err := st.SessionKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("load session key: %w", keyError(err))
	}
	m := &Manager{
		cfg:        cfg,
		id:         newID("m_"),
		st:         st,
		log:        cfg.Logger,
		sessionKey: kb,
		hub:        newHub(),
		logs:       newLogBus(),
		started:    cfg.Now(),
		stopping:   make(chan struct{}),
	}
	m.tokens.entries = map[string]tokenEntry{}
	m.caps = assign.NewCapabilities()
	m.unrunnable = map[string]time.Time{}
	m.metrics = newMetrics(m)
	m.queue = newQueue()
	if err := m.loadCapabilities(ctx); err != nil {
		return nil, fmt.Errorf("load capability lists: %w", err)
	}
	if err := m.resyncQueue(ctx); err != nil {
		return nil, fmt.Errorf("load the queue: %w", err)
	}
	return m, nil
}

// window is how long a delegate stays connected without contact.
func (m *Manager) window() time.Duration {
	return time.Duration(m.cfg.MissedHeartbeats) * m.cfg.HeartbeatInterval
}

// leaseDuration is how long a task lease lasts without a heartbeat.
func (m *Manager) leaseDuration() time.Duration { return m.window() }

// Handler returns the HTTP handler of the whole API.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+protocol.PathHealth, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET "+protocol.PathReady, m.handleReady)
	mux.Handle("GET "+protocol.PathMetrics, m.metrics.handler(m.log))
	// Delegate API.
	mux.HandleFunc("POST "+protocol.PathRegister, m.handleRegister)
	mux.HandleFunc("POST "+protocol.PathSession, m.delegateAuth(m.handleSession))
	mux.HandleFunc("GET "+protocol.PathWebSocket, m.delegateAuth(m.handleWebSocket))
	mux.HandleFunc("GET "+protocol.PathEvents, m.delegateAuth(m.handleEvents))
	mux.HandleFunc("POST "+protocol.PathHeartbeat, m.delegateAuth(m.handleHeartbeat))
	mux.HandleFunc("POST "+protocol.PathDeregister, m.delegateAuth(m.handleDeregister))
	mux.HandleFunc("POST "+protocol.PathDelegateTask+"/{id}/acquire", m.delegateAuth(m.handleAcquire))
	mux.HandleFunc("POST "+protocol.PathDelegateTask+"/{id}/started", m.delegateAuth(m.handleStarted))
	mux.HandleFunc("POST "+protocol.PathDelegateTask+"/{id}/logs", m.delegateAuth(m.handleLogs))
	mux.HandleFunc("POST "+protocol.PathDelegateTask+"/{id}/result", m.delegateAuth(m.handleResult))
	mux.HandleFunc("POST "+protocol.PathCapabilities, m.delegateAuth(m.handleCapabilities))
	mux.HandleFunc("GET "+protocol.PathDelegateConfiguration, m.delegateAuth(m.handleDelegateConfiguration))
	mux.HandleFunc("POST "+protocol.PathDelegateConfigurationResult, m.delegateAuth(m.handleConfigurationResult))
	// Admin API.
	mux.HandleFunc("GET "+protocol.PathWhoAmI, m.adminAuth(m.handleWhoAmI))
	mux.HandleFunc("POST "+protocol.PathTokens, m.adminAuth(m.handleCreateToken))
	mux.HandleFunc("GET "+protocol.PathTokens, m.adminAuth(m.handleListTokens))
	mux.HandleFunc("POST "+protocol.PathTokens+"/{name}/revoke", m.adminAuth(m.handleRevokeToken))
	mux.HandleFunc("GET "+protocol.PathDelegates, m.adminAuth(m.handleListDelegates))
	mux.HandleFunc("POST "+protocol.PathTasks, m.adminAuth(m.handleSubmitTask))
	mux.HandleFunc("GET "+protocol.PathTasks, m.adminAuth(m.handleListTasks))
	mux.HandleFunc("GET "+protocol.PathTasks+"/{id}", m.adminAuth(m.handleGetTask))
	mux.HandleFunc("POST "+protocol.PathTasks+"/{id}/cancel", m.adminAuth(m.handleCancelTask))
	mux.HandleFunc("GET "+protocol.PathTasks+"/{id}/logs", m.adminAuth(m.handleTaskLogs))
	mux.HandleFunc("GET "+protocol.PathTasks+"/{id}/explain", m.adminAuth(m.handleExplainTask))
	mux.HandleFunc("GET "+protocol.PathDelegates+"/{name}", m.adminAuth(m.handleDescribeDelegate))
	mux.HandleFunc("POST "+protocol.PathOrgs, m.adminAuth(m.handleCreateOrg))
	mux.HandleFunc("GET "+protocol.PathOrgs, m.adminAuth(m.handleListOrgs))
	mux.HandleFunc("DELETE "+protocol.PathOrgs+"/{org}", m.adminAuth(m.handleDeleteOrg))
	mux.HandleFunc("POST "+protocol.PathOrgs+"/{org}/projects", m.adminAuth(m.handleCreateProject))
	mux.HandleFunc("GET "+protocol.PathProjects, m.adminAuth(m.handleListProjects))
	mux.HandleFunc("DELETE "+protocol.PathOrgs+"/{org}/projects/{name}", m.adminAuth(m.handleDeleteProject))
	mux.HandleFunc("POST "+protocol.PathConnectors, m.adminAuth(m.handleCreateConnector))
	mux.HandleFunc("GET "+protocol.PathConnectors, m.adminAuth(m.handleListConnectors))
	mux.HandleFunc("GET "+protocol.PathConnectors+"/{name}", m.adminAuth(m.handleGetConnector))
	mux.HandleFunc("DELETE "+protocol.PathConnectors+"/{name}", m.adminAuth(m.handleDeleteConnector))
	mux.HandleFunc("POST "+protocol.PathConfigurations, m.adminAuth(m.handleCreateConfiguration))
	mux.HandleFunc("GET "+protocol.PathConfigurations, m.adminAuth(m.handleListConfigurations))
	mux.HandleFunc("GET "+protocol.PathConfigurations+"/{name}", m.adminAuth(m.handleGetConfiguration))
	mux.HandleFunc("PATCH "+protocol.PathConfigurations+"/{name}", m.adminAuth(m.handleUpdateConfiguration))
	mux.HandleFunc("DELETE "+protocol.PathConfigurations+"/{name}", m.adminAuth(m.handleDeleteConfiguration))
	mux.HandleFunc("POST "+protocol.PathAPIKeys, m.adminAuth(m.handleCreateAPIKey))
	mux.HandleFunc("GET "+protocol.PathAPIKeys, m.adminAuth(m.handleListAPIKeys))
	mux.HandleFunc("POST "+protocol.PathAPIKeys+"/{name}/revoke", m.adminAuth(m.handleRevokeAPIKey))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, protocol.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path)
	})
	return m.metrics.countErrors(versionCheck(mux))
}

// versionCheck refuses clients that speak a protocol this manager does not.
func versionCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(protocol.HeaderProtocolVersion); v != "" {
			var n int
			if _, err := fmt.Sscanf(v, "%d", &n); err != nil || n < protocol.MinVersion {
				writeError(w, http.StatusBadRequest, protocol.CodeVersion,
					"protocol version %q is not supported (this manager speaks %d..%d); upgrade the client", v, protocol.MinVersion, protocol.Version)
				return
			}
		}
		w.Header().Set(protocol.HeaderProtocolVersion, fmt.Sprint(protocol.Version))
		next.ServeHTTP(w, r)
	})
}

// Run serves the API on ln and runs the background loops until ctx ends,
// then shuts down: WebSockets get a close frame, long polls return, and
// in-flight requests finish (bounded by 10s).
func (m *Manager) Run(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           m.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(m.beginStop)

	loopCtx, cancelLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); m.flushLoop(loopCtx) }()
	go func() { defer wg.Done(); m.sweepLoop(loopCtx) }()
	go func() { defer wg.Done(); m.listenLoop(loopCtx) }()

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	m.log.Info("manager listening", "addr", ln.Addr().String(), "heartbeat_interval", m.cfg.HeartbeatInterval)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	m.beginStop()
	shCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shCtx); err != nil {
		m.log.Warn("http shutdown", "err", err)
	}
	m.wsWG.Wait()
	cancelLoops()
	wg.Wait()
	// Record the last liveness so a restart knows when delegates were seen.
	m.flush(context.WithoutCancel(ctx))
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	m.log.Info("manager stopped")
	return nil
}

func (m *Manager) beginStop() {
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

func (m *Manager) tokenRevoked(ctx context.Context, tokenID string) (bool, error) {
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

func (m *Manager) markTokenRevoked(tokenID string) {
	m.tokens.mu.Lock()
	m.tokens.entries[tokenID] = tokenEntry{revoked: true, at: m.cfg.Now()}
	m.tokens.mu.Unlock()
}
