package delegate

import (
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/metrics"
	"github.com/legate-dev/legate/internal/protocol"
)

// Reasons an offer is rejected, the "reason" label of
// legate_delegate_tasks_rejected_total.
const (
	rejectCapacity   = "capacity"   // every slot busy (DELEGATE_TASK_CAPACITY)
	rejectThreshold  = "threshold"  // over DELEGATE_CPU_THRESHOLD / DELEGATE_MEMORY_THRESHOLD
	rejectCapability = "capability" // a capability the task needs failed here
	rejectDraining   = "draining"   // stopping: no new tasks
	rejectAcquire    = "acquire"    // the manager refused the claim, or it could not be made
)

// agentMetrics are one agent's Prometheus metrics, in a registry of its own
// (several agents may run in one process). Every series carries the
// delegate's name as the "delegate" label. See docs/metrics.md.
type agentMetrics struct {
	reg *metrics.Registry

	taskSeconds *metrics.HistogramVec
	executing   *metrics.GaugeVec
	completed   *metrics.CounterVec
	failed      *metrics.CounterVec
	timedOut    *metrics.CounterVec
	cancelled   *metrics.CounterVec
	rejected    *metrics.CounterVec
	stale       *metrics.CounterVec
	connected   *metrics.Gauge
	reconnects  *metrics.Counter
	fallbacks   *metrics.Counter
	wsReports   *metrics.CounterVec
	procOnce    sync.Once // the process series are added once (Run may be called again)

	mu   sync.Mutex
	link link
}

// link is what the agent knows about its connection to the manager.
type link struct {
	registered bool // registered, and not stopped
	wsUp       bool // the WebSocket is open
	// pollOK: the last long poll succeeded since the WebSocket was last up
	// (polling is confirmed to work).
	pollOK   bool
	draining bool
	// connectedOnce: connected at least once (later connections are
	// reconnects).
	connectedOnce bool
	connected     bool
	// lastAck is when a heartbeat was last acknowledged (or the agent
	// registered, or started).
	lastAck time.Time
}

func newMetrics(name string, now time.Time) *agentMetrics {
	m := &agentMetrics{reg: metrics.NewRegistry()}
	m.link.lastAck = now
	r := m.reg
	del := metrics.Labels{"delegate": name}
	m.taskSeconds = r.NewHistogramVec(metrics.Opts{
		Name:        "legate_delegate_task_duration_seconds",
		Help:        "How long tasks ran on this delegate, from process start to end, by task type.",
		ConstLabels: del,
	}, []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}, "type")
	m.executing = r.NewGaugeVec(metrics.Opts{
		Name:        "legate_delegate_tasks_executing",
		Help:        "Tasks executing on this delegate now, by task type.",
		ConstLabels: del,
	}, "type")
	m.completed = r.NewCounterVec(metrics.Opts{
		Name:        "legate_delegate_tasks_completed_total",
		Help:        "Tasks that ended succeeded on this delegate, by task type.",
		ConstLabels: del,
	}, "type")
	m.failed = r.NewCounterVec(metrics.Opts{
		Name:        "legate_delegate_tasks_failed_total",
		Help:        "Tasks that ended failed on this delegate, by task type.",
		ConstLabels: del,
	}, "type")
	m.timedOut = r.NewCounterVec(metrics.Opts{
		Name:        "legate_delegate_tasks_timed_out_total",
		Help:        "Tasks that ended timed out on this delegate, by task type.",
		ConstLabels: del,
	}, "type")
	m.cancelled = r.NewCounterVec(metrics.Opts{
		Name:        "legate_delegate_tasks_cancelled_total",
		Help:        "Tasks that ended cancelled (aborted by the manager, or stopped with the delegate), by task type.",
		ConstLabels: del,
	}, "type")
	m.rejected = r.NewCounterVec(metrics.Opts{
		Name:        "legate_delegate_tasks_rejected_total",
		Help:        "Task offers this delegate refused or could not acquire, by reason: capacity, threshold, capability, draining, acquire.",
		ConstLabels: del,
	}, "reason")
	m.stale = r.NewCounterVec(metrics.Opts{
		Name:        "legate_delegate_stale_reports_total",
		Help:        "Reports the manager refused because this delegate no longer held the task (stale lease), by kind: result, log.",
		ConstLabels: del,
	}, "kind")
	m.connected = r.NewGauge(metrics.Opts{
		Name:        "legate_delegate_connected",
		Help:        "1 while the delegate is registered and its event channel (WebSocket, or confirmed polling) is up, else 0.",
		ConstLabels: del,
	})
	m.reconnects = r.NewCounter(metrics.Opts{
		Name:        "legate_delegate_reconnects_total",
		Help:        "Times the delegate was connected again after losing its connection to the manager.",
		ConstLabels: del,
	})
	m.wsReports = r.NewCounterVec(metrics.Opts{
		Name:        "legate_delegate_ws_reports_total",
		Help:        "Reports (started, result, acquire) sent over the WebSocket, by kind and outcome: acked (the manager answered), http (made over HTTP after a timeout, a closed connection or a refusal).",
		ConstLabels: del,
	}, "kind", "outcome")
	m.fallbacks = r.NewCounter(metrics.Opts{
		Name:        "legate_delegate_polling_fallbacks_total",
		Help:        "Times the delegate fell back to long polling because the WebSocket was unavailable.",
		ConstLabels: del,
	})
	r.NewGaugeFunc(metrics.Opts{
		Name:        "legate_delegate_heartbeat_age_seconds",
		Help:        "Seconds since the manager last acknowledged a heartbeat (or since registration or start, before the first).",
		ConstLabels: del,
	}, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return time.Since(m.link.lastAck).Seconds()
	})
	// Known label values start at 0, so rates and alerts see them at once.
	for _, reason := range []string{rejectCapacity, rejectThreshold, rejectCapability, rejectDraining, rejectAcquire} {
		m.rejected.With(reason)
	}
	for _, kind := range []string{"result", "log"} {
		m.stale.With(kind)
	}
	return m
}

// addValidating adds the gauge of capability checks in progress, read
// from the performance line's counter g.
func (m *agentMetrics) addValidating(name string, g *gauge) {
	m.reg.NewGaugeFunc(metrics.Opts{
		Name:        "legate_delegate_tasks_validating",
		Help:        "Capability checks of offered tasks in progress on this delegate now (the performance line's max_validating is their most at once).",
		ConstLabels: metrics.Labels{"delegate": name},
	}, func() float64 { return float64(g.cur.Load()) })
}

// addProcessCollectors adds the Go runtime and process metrics; only an
// agent that serves /metrics pays for them.
func (m *agentMetrics) addProcessCollectors() { m.procOnce.Do(m.reg.AddProcessMetrics) }

// wsReport counts a report sent over the WebSocket: acknowledged, or made
// over HTTP after all.
func (m *agentMetrics) wsReport(kind string, acked bool) {
	outcome := "http"
	if acked {
		outcome = "acked"
	}
	m.wsReports.With(kind, outcome).Inc()
}

// taskStarted counts a task executing until taskFinished.
func (m *agentMetrics) taskStarted(typ string) { m.executing.With(typ).Inc() }

// taskFinished records a task's run time and outcome.
func (m *agentMetrics) taskFinished(typ, status string, took time.Duration) {
	m.executing.With(typ).Dec()
	m.taskSeconds.With(typ).Observe(took.Seconds())
	switch status {
	case protocol.StatusSucceeded:
		m.completed.With(typ).Inc()
	case protocol.StatusFailed:
		m.failed.With(typ).Inc()
	case protocol.StatusTimedOut:
		m.timedOut.With(typ).Inc()
	case protocol.StatusCancelled:
		m.cancelled.With(typ).Inc()
	}
}

func (m *agentMetrics) rejectedOffer(reason string) { m.rejected.With(reason).Inc() }

func (m *agentMetrics) staleReport(kind string) { m.stale.With(kind).Inc() }

func (m *agentMetrics) fellBackToPolling() { m.fallbacks.Inc() }

// update changes the link state and recomputes connected (and counts a
// reconnect when it comes back).
func (m *agentMetrics) update(f func(l *link)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(&m.link)
	l := &m.link
	now := l.registered && (l.wsUp || l.pollOK)
	if now && !l.connected {
		if l.connectedOnce {
			m.reconnects.Inc()
		}
		l.connectedOnce = true
	}
	l.connected = now
	if now {
		m.connected.Set(1)
	} else {
		m.connected.Set(0)
	}
}

func (m *agentMetrics) registered() {
	m.update(func(l *link) { l.registered, l.lastAck = true, time.Now() })
}

func (m *agentMetrics) stopped() { m.update(func(l *link) { l.registered = false }) }

func (m *agentMetrics) setDraining() { m.update(func(l *link) { l.draining = true }) }

// webSocket records the WebSocket opening or closing. While it is open the
// delegate does not poll, so polling must be confirmed again after it.
func (m *agentMetrics) webSocket(up bool) {
	m.update(func(l *link) { l.wsUp, l.pollOK = up, false })
}

// polled records the outcome of a long poll.
func (m *agentMetrics) polled(ok bool) { m.update(func(l *link) { l.pollOK = ok }) }

// pollConfirmed reports whether the last poll succeeded; until one does,
// the delegate polls without waiting, to learn at once that polling works.
func (m *agentMetrics) pollConfirmed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.link.pollOK
}

func (m *agentMetrics) heartbeatAcked() {
	m.mu.Lock()
	m.link.lastAck = time.Now()
	m.mu.Unlock()
}

// readiness says whether the delegate is ready for work and, if not, why.
func (m *agentMetrics) readiness() (bool, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.link
	switch {
	case !l.registered:
		return false, "not registered with the manager"
	case l.draining:
		return false, "draining: stopping, taking no new tasks"
	case !l.connected:
		return false, "no event channel to the manager (WebSocket down, polling not confirmed)"
	}
	return true, ""
}
