// Package delegate is the agent loop of a legate delegate: it registers
// with the manager, heartbeats, receives task events over a WebSocket (or
// long-polls for them when the WebSocket is unavailable), acquires tasks,
// runs them with the executors, streams masked output and reports results.
package delegate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/backoff"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/executor"
	"github.com/legate-dev/legate/internal/executor/containers"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/transport"
)

// Options configures an Agent. Zero values mean the documented defaults.
type Options struct {
	// Config is the delegate's configuration (from the environment and flags).
	Config config.Delegate
	// WorkDir holds per-task directories; "" = the current directory.
	WorkDir string
	// Grace bounds how long running tasks may finish after a stop request
	// before they are cancelled; 0 = 5m.
	Grace time.Duration
	// Version is reported to the manager.
	Version string
	// Logger; nil = slog.Default().
	Logger *slog.Logger
	// HTTPClient for every call to the manager (API and WebSocket); nil =
	// built from Config.Proxy and Config.TLS by package transport.
	HTTPClient *http.Client
	// TaskHTTPClient for everything else: http tasks and capability
	// checks; nil = built from Config.Proxy and Config.TLS.
	TaskHTTPClient *http.Client
	// IP overrides the detected IP address.
	IP string
	// Environ is the delegate's environment as it was started ("K=V"),
	// including the credentials it took out of its process environment
	// (package envguard); nil = os.Environ(). TaskEnv and the credentials
	// masked in task output derive from it.
	Environ []string
	// TaskEnv is the base environment of task processes; nil = Environ
	// without the delegate's credentials and with proxy URLs stripped of
	// theirs (unless Config.Proxy.CredentialsToTasks).
	TaskEnv []string
	// MaskValues are masked in the output of every task and delegate
	// script, besides each task's secrets and the delegate's own
	// credentials (its token, its proxy's passwords, and the API and
	// master keys found in Environ): such as the API key of the manager
	// that `legate dev` runs. Nil = none.
	MaskValues []string
	// ForceStop, when closed, cancels running tasks at once (second signal).
	ForceStop <-chan struct{}
	// PerfInterval is how often the performance line is logged; 0 = 1m,
	// negative = never.
	PerfInterval time.Duration
	// HTTPAddr is where Run serves /healthz, /readyz and /metrics, such as
	// ":3460"; "" = no server (agents in tests and benchmarks).
	HTTPAddr string
	// ScriptTimeout bounds INIT_SCRIPT and each configuration script;
	// 0 = DefaultScriptTimeout (10m).
	ScriptTimeout time.Duration
	// TaskIsolation is how every process of a task is ended with it:
	// "auto" ("" too), "cgroup" or "tree" (LEGATE_TASK_ISOLATION; see
	// executor.Isolator and docs/task-processes.md).
	TaskIsolation string
	// TaskSandbox is whether shell tasks run in namespaces of their own:
	// "auto" ("" too: when the host allows it), "namespaces" (required)
	// or "off" (LEGATE_TASK_SANDBOX; see executor.Sandbox).
	TaskSandbox string
	// TaskUIDs, "FIRST-LAST", is the range of users a root delegate runs
	// sandboxed tasks as, one per running task (LEGATE_TASK_UIDS); ""
	// runs them as the delegate's user.
	TaskUIDs string
	// AllowMixedScopes lets tasks of different scopes run at the same time
	// without a sandbox, as Config.AllowMixedScopes
	// (LEGATE_ALLOW_MIXED_SCOPES=true) does; by default such a delegate
	// runs tasks of one scope at a time.
	AllowMixedScopes bool
	// Registered, when not nil, is called once by Run, when the first
	// registration succeeded: the manager lists the delegate from then
	// on (legate dev prints its banner then). Nil = nothing is called.
	Registered func()
}

// Agent is one running delegate. Create it with New and run it once with
// Run.
//
// Lock order. The agent's locks nest in one order only; a lock may be
// taken while holding those before it in this list, never the reverse:
//
//  1. regMu: one registration at a time; held across the call to the
//     manager, it takes mu and config.mu (and leaf locks) inside.
//  2. mu: the agent's task bookkeeping; offeredWith takes config.mu inside
//     (reading config.busy under mu, so that an offer deferred while a
//     configuration runs is never missed by retryDeferred).
//  3. config.mu (configState).
//
// Every other lock is a leaf, held only around its own fields and never
// while taking another: wsMu, conn.mu, kill.mu, the wsConn and shipper
// locks, caps.mu, load.mu and the metrics' locks. No lock is held while
// calling the manager except regMu and a wsConn's (which only writes one
// frame to its WebSocket).
type Agent struct {
	opts     Options
	cfg      config.Delegate
	log      *slog.Logger
	clients  []*client.Client
	cur      atomic.Int32 // index of the manager URL in use
	hostname string
	ip       string
	// processID is sent with every registration of this process: the
	// manager tells a restart from a second live process by it.
	processID string

	mu         sync.Mutex
	instanceID string
	interval   time.Duration
	sessionExp time.Time
	tasks      map[string]*runningTask
	// deferred holds offers refused for want of a free slot; they are
	// tried again as soon as a slot frees (the manager may offer the next
	// task while the previous one's result is still in flight), those
	// first the manager's queue would take first.
	deferred map[string]deferredOffer
	draining bool

	session atomic.Value // string: the current session credential
	hbSeq   atomic.Int64
	wsMu    sync.Mutex
	ws      wsSender // nil when the WebSocket is down
	// calls waits for the acknowledgements of numbered WebSocket frames.
	calls wsCalls
	// claims gathers claims into acquire frames.
	claims acquireBatch
	conn   connState
	regMu  sync.Mutex
	regGen atomic.Int64
	// notBefore (Unix nanoseconds) is when a manager that turned the
	// WebSocket away with Retry-After may be asked again: the long poll
	// that stands in for the WebSocket waits for it too, or a fleet
	// turned away would poll all at once instead.
	notBefore atomic.Int64
	// logLimits is how the manager stores output and how much one upload
	// may carry, nil when it did not say (an older manager).
	logLimits atomic.Pointer[protocol.LogLimits]
	// gatherSlot is held by the task whose output gathers into large
	// uploads (shipper): one at a time.
	gatherSlot chan struct{}
	fatal      chan error
	fatalOne   sync.Once
	// wg joins the loops Run starts; taskWG joins every task (and every
	// delivery of a result kept from an earlier run): Run waits for both.
	wg     sync.WaitGroup
	taskWG sync.WaitGroup
	// kill cancels running tasks and configuration scripts at once (grace
	// period over, second stop request, or a fatal error).
	kill   killSwitch
	caps   *capabilityChecker
	load   *loadMonitor
	config *configState
	spool  spool
	// stopDelivery ends result delivery loops when the delegate stops;
	// undelivered results stay in the spool for the next start.
	stopDelivery chan struct{}
	// stopping is closed when the delegate starts to stop: a process
	// refused its identity stops waiting for it.
	stopping     chan struct{}
	stoppingOnce sync.Once
	// spooled are the results an earlier run of this delegate kept on disk;
	// their tasks count as running at the first registration.
	spooled []spooledResult
	perf    perfStats // counters of the performance line (perf.go)
	hbPerf  hbPerf    // the heartbeat's performance figures (perf.go)
	// metrics and the address of the health and metrics server.
	metrics  *agentMetrics
	httpAddr atomic.Value // string
	// ownSecrets are the delegate's credentials, masked in every task's
	// output (credentials.go).
	ownSecrets []string
	// isolation is the task isolation mode; iso ends task processes (set
	// by Run; nil runs tasks without it).
	isolation executor.Isolation
	iso       *executor.Isolator
	// sandbox and uids are the sandbox asked for; isoReport is what the
	// delegate reports of it at registration; gate, when not nil, runs
	// tasks of one scope at a time (no sandbox). Set by Run.
	sandbox   executor.Sandbox
	uids      executor.UIDRange
	isoReport *protocol.TaskIsolation
	gate      *scopeGate
	// containers runs container tasks (nil: no runtime); platform is
	// where the delegate runs ("fargate", "ec2" or ""). Set by Run.
	containers *containers.Runtime
	// containerReason is why it has none (registered, shown by task
	// explain).
	containerReason string
	platform        string
	// once is the one-shot delegate's progress (Config.Once).
	once *onceState
	// swept is closed once the containers an earlier run left are
	// removed: container tasks wait for it (the sweep would remove theirs
	// too), the delegate's registration does not. Set by Run.
	swept chan struct{}
}

// runningTask is a task of a.tasks. Its epoch and cancel do not change:
// acquiring the task replaces its placeholder (epoch 0, no cancel) with a
// new one.
type runningTask struct {
	epoch  int64                   // 0 while the task is being acquired
	cancel context.CancelCauseFunc // nil while the task is being acquired
	// aborted is set when the manager aborted the task (a user cancelled
	// it, or it is no longer this delegate's): the manager's refusals of
	// its output and result are then expected.
	aborted atomic.Bool
}

var (
	// errAborted is the cause of a task the manager aborted.
	errAborted = errors.New("aborted by the manager")
	// errLeaseLost is the cause of a task whose output the manager
	// refused: it no longer assigns the task to this delegate.
	errLeaseLost = errors.New("the manager no longer assigns the task to this delegate")
	// errStopping is the cause of the tasks the delegate kills as it stops.
	errStopping = errors.New("delegate stopping")
)

// New checks the options and prepares an agent.
func New(opts Options) (*Agent, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	isolation, sandbox, uids, err := taskSettings(opts)
	if err != nil {
		return nil, err
	}
	if opts.Grace <= 0 {
		opts.Grace = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.WorkDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
		opts.WorkDir = wd
	}
	a := &Agent{
		opts:     opts,
		cfg:      opts.Config.Effective(),
		log:      opts.Logger,
		tasks:    map[string]*runningTask{},
		deferred: map[string]deferredOffer{},
		fatal:    make(chan error, 1),
		stopping: make(chan struct{}),
		metrics:  newMetrics(opts.Config.Name, time.Now()),

		isolation: isolation,
		sandbox:   sandbox,
		uids:      uids,
		once:      newOnceState(opts.Config.Once),
	}
	if opts.HTTPClient == nil || opts.TaskHTTPClient == nil {
		cl, err := transport.ForDelegate(transport.Options{
			Proxy: opts.Config.Proxy, TLS: opts.Config.TLS, WorkDir: opts.WorkDir,
			ManagerURLs: opts.Config.ManagerURLs, Logger: opts.Logger,
		})
		if err != nil {
			return nil, err
		}
		if opts.HTTPClient == nil {
			opts.HTTPClient = cl.Manager
		}
		if opts.TaskHTTPClient == nil {
			opts.TaskHTTPClient = cl.Tasks
		}
		a.opts = opts
	}
	for _, u := range opts.Config.ManagerURLs {
		c, err := client.New(u, opts.HTTPClient)
		if err != nil {
			return nil, fmt.Errorf("manager URL %q: %w", u, err)
		}
		a.clients = append(a.clients, c)
	}
	a.processID = rand.Text()
	a.hostname = opts.Config.Hostname
	if a.hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("detect hostname (set DELEGATE_HOSTNAME): %w", err)
		}
		a.hostname = h
	}
	a.ip = opts.IP
	if a.ip == "" {
		a.ip = opts.Config.IP
	}
	if a.ip == "" {
		a.ip = detectIP(opts.Config.ManagerURLs[0])
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	if opts.TaskEnv == nil {
		a.opts.TaskEnv = taskEnv(environ, opts.Config.Proxy.CredentialsToTasks)
	}
	a.ownSecrets = ownSecrets(opts.Config, environ, opts.MaskValues)
	a.conn.init()
	a.config = newConfigState()
	a.caps = newCapabilityChecker(opts.TaskHTTPClient)
	a.caps.validating = &a.perf.validating
	a.metrics.addValidating(opts.Config.Name, &a.perf.validating)
	a.spool = spool{dir: filepath.Join(opts.WorkDir, "spool")}
	a.gatherSlot = make(chan struct{}, 1)
	a.stopDelivery = make(chan struct{})
	a.load = &loadMonitor{cpuLimit: opts.Config.CPUThreshold, memLimit: opts.Config.MemoryThreshold}
	a.load.sample() // the first CPU sample only sets the baseline
	return a, nil
}

// taskSettings reads how tasks are isolated: LEGATE_TASK_ISOLATION,
// LEGATE_TASK_SANDBOX and LEGATE_TASK_UIDS.
func taskSettings(opts Options) (executor.Isolation, executor.Sandbox, executor.UIDRange, error) {
	isolation, err := executor.ParseIsolation(opts.TaskIsolation)
	if err != nil {
		return "", "", executor.UIDRange{}, fmt.Errorf("LEGATE_TASK_ISOLATION: %w", err)
	}
	sandbox, err := executor.ParseSandbox(opts.TaskSandbox)
	if err != nil {
		return "", "", executor.UIDRange{}, fmt.Errorf("LEGATE_TASK_SANDBOX: %w", err)
	}
	uids, err := executor.ParseUIDRange(opts.TaskUIDs)
	if err != nil {
		return "", "", executor.UIDRange{}, fmt.Errorf("LEGATE_TASK_UIDS: %w", err)
	}
	return isolation, sandbox, uids, nil
}

// detectIP finds the local address used to reach the manager. Dialing UDP
// sends no packet; it only asks the kernel for a route.
func detectIP(managerURL string) string {
	u, err := url.Parse(managerURL)
	if err == nil {
		host := u.Hostname()
		port := u.Port()
		if port == "" {
			port = "443"
		}
		if c, err := net.Dial("udp", net.JoinHostPort(host, port)); err == nil {
			defer c.Close()
			if a, ok := c.LocalAddr().(*net.UDPAddr); ok {
				return a.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

func (a *Agent) client() *client.Client { return a.clients[int(a.cur.Load())%len(a.clients)] }

// rotateManager moves to the next manager URL (several may be configured).
func (a *Agent) rotateManager() {
	if len(a.clients) > 1 {
		a.cur.Add(1)
	}
}

func (a *Agent) fail(err error) {
	a.fatalOne.Do(func() { a.fatal <- err })
}

// Run registers and serves until ctx is cancelled, then drains: it stops
// acquiring, keeps heartbeating, lets running tasks finish within the
// grace period (cancelling them after it, or at once on ForceStop),
// reports them, deregisters and returns nil. It returns an error when the
// delegate cannot go on (refused token, revoked token). Every goroutine
// it started has ended when it returns.
func (a *Agent) Run(ctx context.Context) error {
	// Loops outlive ctx: they keep heartbeating while tasks drain. Tasks
	// run in contexts derived from loopCtx (which drain outlives), each
	// also cancelled by a.kill.
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	defer a.kill.kill(errStopping)
	stopHTTP, err := a.startHTTP(ctx)
	if err != nil {
		return err
	}
	defer stopHTTP()
	defer a.metrics.stopped()
	stopIsolation, err := a.startIsolation()
	if err != nil {
		return err
	}
	defer stopIsolation()
	stopSweep := a.startContainers(ctx)
	defer stopSweep()

	if err := a.runInitScript(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	a.spooled = a.spool.load(func(name string, err error) {
		a.log.Warn("unreadable spooled result", "file", name, "err", err)
	})
	if err := a.register(ctx); err != nil {
		if ctx.Err() != nil {
			return a.onceResult(nil) // stopped before registering: no task ran
		}
		return err
	}
	if a.opts.Registered != nil {
		a.opts.Registered()
	}
	a.redeliver()
	a.wg.Go(func() { a.configLoop(loopCtx) })
	a.wg.Go(func() { a.heartbeatLoop(loopCtx) })
	a.wg.Go(func() { a.eventLoop(loopCtx) })
	a.wg.Go(func() { a.sessionLoop(loopCtx) })
	a.wg.Go(func() { a.perfLoop(loopCtx) })

	outcome, runErr, stop := a.waitOnce(ctx)
	switch {
	case stop:
		a.log.Info("stop requested: draining (no new tasks; running tasks may finish)", "grace", a.opts.Grace, "running", a.runningCount())
	case runErr != nil:
		a.log.Error("delegate cannot continue", "err", runErr)
	case outcome == nil:
		a.log.Info("one-shot: the task ran and was reported; deregistering and exiting")
	}
	a.drain(runErr != nil)
	stopLoops()
	a.wg.Wait()
	if runErr == nil {
		runErr = a.onceResult(outcome)
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := a.client().Deregister(dctx); err != nil {
			a.log.Warn("deregister", "err", err)
		}
		cancel()
		a.log.Info("delegate stopped")
	}
	return runErr
}

// drain waits for running tasks to finish, cancelling them after the grace
// period, on ForceStop, or at once when the delegate cannot continue. It
// returns once every task (and every delivery) has ended.
func (a *Agent) drain(now bool) {
	a.mu.Lock()
	a.draining = true // from now on no task starts: taskWG only goes down
	a.mu.Unlock()
	a.stoppingOnce.Do(func() { close(a.stopping) })
	a.metrics.setDraining()
	a.sendHeartbeat(context.Background())
	done := make(chan struct{})
	var waiter sync.WaitGroup
	waiter.Go(func() { a.taskWG.Wait(); close(done) })
	defer waiter.Wait()
	if !now {
		grace := time.NewTimer(a.opts.Grace)
		defer grace.Stop()
		select {
		case <-done:
			return
		case <-grace.C:
			a.log.Warn("grace period over: cancelling running tasks", "running", a.runningCount())
		case <-a.opts.ForceStop:
			a.log.Warn("second stop request: cancelling running tasks now", "running", a.runningCount())
		}
	}
	a.kill.kill(errStopping)
	select {
	case <-done:
		return
	case <-time.After(30 * time.Second):
	}
	// Results the manager has not taken stay in the spool for the next start.
	close(a.stopDelivery)
	select {
	case <-done:
		a.log.Warn("results not delivered are kept on disk and sent at the next start", "dir", a.spool.dir)
	case <-time.After(5 * time.Second):
		a.log.Error("tasks did not report after cancellation; waiting for them to end", "running", a.runningCount())
	}
}

// redeliver sends results spooled by an earlier run of this delegate.
func (a *Agent) redeliver() {
	for _, r := range a.spooled {
		a.log.Info("delivering a result kept from an earlier run", "task", r.TaskID)
		a.taskWG.Add(1)
		go func() {
			defer a.taskWG.Done()
			log := a.log.With("task", r.TaskID)
			a.deliverSpooledLogs(log, r.TaskID)
			if err := a.deliverResult(log, r.TaskID, r.Result); err != nil {
				log.Warn("manager refused the result kept from an earlier run", "err", err)
			}
		}()
	}
}

func (a *Agent) runningCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.tasks)
}

// register registers (or re-registers) with the manager, retrying with
// jittered backoff while a retry can help.
func (a *Agent) register(ctx context.Context) error {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	return a.registerLocked(ctx)
}

// registerLocked is register with regMu held.
func (a *Agent) registerLocked(ctx context.Context) error {
	b := backoff.Backoff{Min: 250 * time.Millisecond, Max: 30 * time.Second, Full: true}
	dup := backoff.Backoff{Min: 5 * time.Second, Max: time.Minute}
	for {
		req := a.registerRequest()
		resp, err := a.client().Register(ctx, req)
		if err == nil {
			a.session.Store(resp.Session)
			for _, c := range a.clients {
				c.SetSecret(resp.Session)
			}
			a.mu.Lock()
			a.instanceID = resp.InstanceID
			a.interval = time.Duration(resp.HeartbeatIntervalMS) * time.Millisecond
			if a.interval <= 0 {
				a.interval = 10 * time.Second
			}
			a.sessionExp = resp.SessionExpiresAt
			a.mu.Unlock()
			a.logLimits.Store(resp.Logs)
			a.config.offer(resp.Configuration)
			a.regGen.Add(1)
			a.metrics.registered()
			a.log.Info("registered with the manager", "manager", a.client().BaseURL(), "instance", resp.InstanceID,
				"name", a.cfg.Name, "hostname", a.hostname, "heartbeat_interval", a.interval)
			if resp.RefusedFrom != "" {
				a.log.Warn("this delegate's version will be refused by the manager's next minor version: upgrade the delegate before the manager",
					"version", a.opts.Version, "refused_from", resp.RefusedFrom, "manager", a.client().BaseURL())
			}
			return nil
		}
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.Code == protocol.CodeDelegateRejected {
			return fmt.Errorf("rejected by %s: %s", a.client().BaseURL(), pe.Message)
		}
		if errors.As(err, &pe) && !pe.Code.Recoverable() {
			return fmt.Errorf("registration refused by %s: %s (%s)", a.client().BaseURL(), pe.Message, pe.Code)
		}
		if errors.As(err, &pe) && pe.Code == protocol.CodeDuplicateIdentity {
			// Another live process holds this identity: wait, refused,
			// and take over if it stops; never fight it for the identity.
			d := dup.Next()
			select {
			case <-a.stopping:
				return fmt.Errorf("stopping: another delegate process holds this identity: %s", pe.Message)
			default:
			}
			a.log.Error("registration refused: another delegate process runs with this identity", "manager", a.client().BaseURL(),
				"err", pe.Message, "retry_in", d.Round(time.Millisecond))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-a.stopping:
				return fmt.Errorf("stopping: another delegate process holds this identity: %s", pe.Message)
			case <-time.After(d):
			}
			continue
		}
		if req.FreshStart && transport.NeedsOperator(err) {
			// A certificate or proxy credential problem at start is a
			// setting to fix, not a manager to wait for.
			return fmt.Errorf("cannot connect to %s: %w", a.client().BaseURL(), err)
		}
		d := b.After(retryAfter(err))
		a.log.Warn("cannot register yet; retrying", "manager", a.client().BaseURL(), "err", err, "retry_in", d.Round(time.Millisecond))
		a.rotateManager()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// registerRequest is what the delegate tells the manager at registration:
// who it is, what it runs and, on a fresh start, what it still holds.
func (a *Agent) registerRequest() protocol.RegisterRequest {
	req := protocol.RegisterRequest{
		ProtocolVersion:    protocol.Version,
		AccountID:          a.cfg.AccountID,
		Token:              a.cfg.Token,
		Name:               a.cfg.Name,
		Hostname:           a.hostname,
		IP:                 a.ip,
		Tags:               a.cfg.Tags,
		Version:            a.opts.Version,
		Type:               a.cfg.Type,
		DeployMode:         a.cfg.DeployMode,
		Capacity:           a.cfg.Capacity,
		IdentityByHostname: a.cfg.IdentityByHostname,
		Running:            a.runningList(),
		FreshStart:         a.regGen.Load() == 0,
		Description:        a.cfg.Description,
		Platform:           a.platform,
		Upgrade:            a.cfg.UpgradeMode(),
		Slot:               a.cfg.WatcherSlot,
		TaskIsolation:      a.isoReport,
		ProcessID:          a.processID,
	}
	if a.containers != nil {
		req.ContainerRuntime = a.containers.Name
	} else {
		req.ContainerReason = a.containerReason
	}
	req.TaskTypes = executor.TaskTypes(executor.Options{HTTPClient: a.opts.TaskHTTPClient, Isolator: a.iso, Containers: a.taskContainers()})
	if req.FreshStart {
		for _, r := range a.spooled {
			req.Running = append(req.Running, protocol.RunningTask{ID: r.TaskID, Epoch: r.Result.Epoch})
		}
	}
	return req
}

// reauth re-registers after the session was lost, once for all callers
// that noticed at the same time.
func (a *Agent) reauth(ctx context.Context, seenGen int64) {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	if a.regGen.Load() != seenGen {
		return // someone already did, while we waited for the lock
	}
	if err := a.registerLocked(ctx); err != nil && ctx.Err() == nil {
		a.fail(err)
	}
}

// handleCallError decides what a failed manager call means for the agent.
// It returns true when the call may be retried.
// retryAfter is the Retry-After of a manager's answer in err (0: none):
// a manager that turns registrations and WebSocket openings away under
// load says when to come back.
func retryAfter(err error) time.Duration {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.RetryAfter
	}
	return 0
}

func (a *Agent) handleCallError(ctx context.Context, err error, gen int64) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		switch pe.Code {
		case protocol.CodeTokenRevoked:
			a.fail(fmt.Errorf("the delegate token was revoked: %s", pe.Message))
			return false
		case protocol.CodeDelegateRejected:
			a.fail(fmt.Errorf("rejected by the manager: %s", pe.Message))
			return false
		case protocol.CodeSessionExpired, protocol.CodeUnauthenticated:
			a.reauth(ctx, gen)
			return true
		}
		return pe.Code.Recoverable()
	}
	return ctx.Err() == nil
}

func (a *Agent) runningList() []protocol.RunningTask {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]protocol.RunningTask, 0, len(a.tasks))
	for id, t := range a.tasks {
		if t.epoch == 0 {
			continue // still acquiring
		}
		out = append(out, protocol.RunningTask{ID: id, Epoch: t.epoch})
	}
	slices.SortFunc(out, func(x, y protocol.RunningTask) int { return strings.Compare(x.ID, y.ID) })
	return out
}

func (a *Agent) heartbeatInterval() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.interval
}

// sessionLoop refreshes the session credential at half its lifetime.
func (a *Agent) sessionLoop(ctx context.Context) {
	for {
		a.mu.Lock()
		exp := a.sessionExp
		a.mu.Unlock()
		wait := time.Until(exp) / 2
		if wait < time.Second {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		gen := a.regGen.Load()
		resp, err := a.client().RefreshSession(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("refresh session", "err", err)
			if !a.handleCallError(ctx, err, gen) {
				return
			}
			continue
		}
		a.session.Store(resp.Session)
		for _, c := range a.clients {
			c.SetSecret(resp.Session)
		}
		a.mu.Lock()
		a.sessionExp = resp.SessionExpiresAt
		a.mu.Unlock()
	}
}

// heartbeatLoop heartbeats every interval, over the WebSocket when it is
// up and over HTTP otherwise.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.heartbeatInterval()):
		}
		a.sendHeartbeat(ctx)
	}
}

func (a *Agent) heartbeat() protocol.Heartbeat {
	a.mu.Lock()
	draining := a.draining
	a.mu.Unlock()
	over := a.load.sample()
	return protocol.Heartbeat{Seq: a.hbSeq.Add(1), Running: a.runningList(), Capacity: a.cfg.Capacity, Draining: draining,
		OverThreshold: over, Configuring: a.config.busy(), Perf: a.hbPerf.sample(&a.perf)}
}

func (a *Agent) sendHeartbeat(ctx context.Context) {
	hb := a.heartbeat()
	a.wsMu.Lock()
	ws := a.ws
	a.wsMu.Unlock()
	if ws != nil {
		if err := ws.sendHeartbeat(ctx, hb); err == nil {
			return
		}
	}
	gen := a.regGen.Load()
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := a.client().Heartbeat(hctx, hb)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("heartbeat failed", "err", err)
			a.handleCallError(ctx, err, gen)
		}
		return
	}
	a.metrics.heartbeatAcked()
	a.abort(resp.Abort)
}

// abort cancels tasks the manager no longer assigns to this delegate. A
// task still being acquired is left to its acquire, which the manager
// refuses.
func (a *Agent) abort(ids []string) {
	for _, id := range ids {
		a.mu.Lock()
		t := a.tasks[id]
		a.mu.Unlock()
		if t != nil && t.cancel != nil {
			a.log.Info("manager aborted task", "task", id)
			t.aborted.Store(true)
			t.cancel(errAborted)
		}
	}
}

// handleEvent reacts to one event from the manager. ctx is the agent's
// loop context: the tasks it starts run in contexts derived from it.
func (a *Agent) handleEvent(ctx context.Context, ev protocol.Event) {
	switch ev.Kind {
	case protocol.EventTaskAvailable:
		a.offeredWith(ctx, ev.TaskID, deferredOffer{caps: ev.Capabilities, rank: ev.Rank})
	case protocol.EventAbort:
		a.abort([]string{ev.TaskID})
	case protocol.EventHeartbeatAck:
		a.metrics.heartbeatAcked()
		a.abort(ev.Abort)
	case protocol.EventAck:
		a.calls.deliver(ev)
	case protocol.EventTokenRevoked:
		a.fail(fmt.Errorf("the delegate token was revoked (%s); create a new token and restart the delegate", ev.Reason))
	case protocol.EventReconnect:
		a.log.Info("manager asked delegates to reconnect", "reason", ev.Reason)
	case protocol.EventConfigurationChanged:
		a.log.Info("the delegate configuration changed; fetching it")
		a.config.changed()
	default:
		a.log.Debug("ignoring unknown event", "kind", ev.Kind)
	}
}

// offered tries to acquire a task the manager announced, if there is room.
func (a *Agent) offered(ctx context.Context, id string) { a.offeredWith(ctx, id, deferredOffer{}) }

// deferredOffer is what an offer says besides the task's ID: the
// capabilities to validate first and the task's place in the queue.
type deferredOffer struct {
	caps []string
	rank int64
}

// nextDeferred removes and returns the deferred offer the manager's queue
// would take first (smallest rank, then ID); "" when there is none. The
// caller holds a.mu.
func (a *Agent) nextDeferred() (string, deferredOffer) {
	var id string
	var best deferredOffer
	for did, o := range a.deferred {
		if id == "" || o.rank < best.rank || (o.rank == best.rank && did < id) {
			id, best = did, o
		}
	}
	if id != "" {
		delete(a.deferred, id)
	}
	return id, best
}

// offeredWith is offered for a task that needs capabilities: they are
// validated (unless validated recently) before the task is acquired. The
// task runs in a context derived from ctx, which must outlive it (the
// agent's loop context does: drain waits for every task).
func (a *Agent) offeredWith(ctx context.Context, id string, o deferredOffer) {
	capabilities := o.caps
	if id == "" {
		return
	}
	if reason := a.load.current(); reason != "" {
		a.log.Debug("not taking task: over threshold", "task", id, "reason", reason)
		a.metrics.rejectedOffer(rejectThreshold)
		return
	}
	a.mu.Lock()
	if a.draining || a.tasks[id] != nil || a.once.closed.Load() {
		draining := a.draining
		a.mu.Unlock()
		if draining {
			a.metrics.rejectedOffer(rejectDraining)
		}
		return
	}
	// Read under a.mu: retryDeferred takes a.mu after the run is over, so
	// an offer deferred here is never missed.
	if a.config.busy() != "" || (a.cfg.Capacity > 0 && len(a.tasks) >= a.cfg.Capacity) {
		// Tried again when the configuration ran or a slot frees.
		if len(a.deferred) < 256 {
			a.deferred[id] = o
		}
		a.mu.Unlock()
		a.metrics.rejectedOffer(rejectCapacity)
		return
	}
	delete(a.deferred, id)
	// Placeholder so a second offer of the same task is ignored.
	a.tasks[id] = &runningTask{}
	a.taskWG.Add(1) // not draining: drain has not started waiting
	a.mu.Unlock()
	go a.runTask(ctx, id, capabilities)
}

func taskDir(workDir, id string) string { return filepath.Join(workDir, "tasks", id) }
