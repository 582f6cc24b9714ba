package delegate

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

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

// metrics are one agent's Prometheus metrics, in a registry of its own
// (several agents may run in one process). Every series carries the
// delegate's name as the "delegate" label. See docs/metrics.md.
type metrics struct {
	reg *prometheus.Registry

	taskSeconds *prometheus.HistogramVec
	executing   *prometheus.GaugeVec
	completed   *prometheus.CounterVec
	failed      *prometheus.CounterVec
	timedOut    *prometheus.CounterVec
	cancelled   *prometheus.CounterVec
	rejected    *prometheus.CounterVec
	stale       *prometheus.CounterVec
	connected   prometheus.Gauge
	reconnects  prometheus.Counter
	fallbacks   prometheus.Counter

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

func newMetrics(name string, now time.Time) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.link.lastAck = now
	r := prometheus.WrapRegistererWith(prometheus.Labels{"delegate": name}, m.reg)
	byType := []string{"type"}
	m.taskSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "legate_delegate_task_duration_seconds",
		Help:    "How long tasks ran on this delegate, from process start to end, by task type.",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	}, byType)
	m.executing = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "legate_delegate_tasks_executing",
		Help: "Tasks executing on this delegate now, by task type.",
	}, byType)
	m.completed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "legate_delegate_tasks_completed_total",
		Help: "Tasks that ended succeeded on this delegate, by task type.",
	}, byType)
	m.failed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "legate_delegate_tasks_failed_total",
		Help: "Tasks that ended failed on this delegate, by task type.",
	}, byType)
	m.timedOut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "legate_delegate_tasks_timed_out_total",
		Help: "Tasks that ended timed out on this delegate, by task type.",
	}, byType)
	m.cancelled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "legate_delegate_tasks_cancelled_total",
		Help: "Tasks that ended cancelled (aborted by the manager, or stopped with the delegate), by task type.",
	}, byType)
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "legate_delegate_tasks_rejected_total",
		Help: "Task offers this delegate refused or could not acquire, by reason: capacity, threshold, capability, draining, acquire.",
	}, []string{"reason"})
	m.stale = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "legate_delegate_stale_reports_total",
		Help: "Reports the manager refused because this delegate no longer held the task (stale lease), by kind: result, log.",
	}, []string{"kind"})
	m.connected = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "legate_delegate_connected",
		Help: "1 while the delegate is registered and its event channel (WebSocket, or confirmed polling) is up, else 0.",
	})
	m.reconnects = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "legate_delegate_reconnects_total",
		Help: "Times the delegate was connected again after losing its connection to the manager.",
	})
	m.fallbacks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "legate_delegate_polling_fallbacks_total",
		Help: "Times the delegate fell back to long polling because the WebSocket was unavailable.",
	})
	hbAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "legate_delegate_heartbeat_age_seconds",
		Help: "Seconds since the manager last acknowledged a heartbeat (or since registration or start, before the first).",
	}, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return time.Since(m.link.lastAck).Seconds()
	})
	r.MustRegister(m.taskSeconds, m.executing, m.completed, m.failed, m.timedOut, m.cancelled,
		m.rejected, m.stale, m.connected, m.reconnects, m.fallbacks, hbAge)
	// Known label values start at 0, so rates and alerts see them at once.
	for _, reason := range []string{rejectCapacity, rejectThreshold, rejectCapability, rejectDraining, rejectAcquire} {
		m.rejected.WithLabelValues(reason)
	}
	for _, kind := range []string{"result", "log"} {
		m.stale.WithLabelValues(kind)
	}
	return m
}

// addProcessCollectors adds the Go runtime and process metrics; only an
// agent that serves /metrics pays for them.
func (m *metrics) addProcessCollectors() {
	_ = m.reg.Register(collectors.NewGoCollector())
	_ = m.reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// taskStarted counts a task executing until taskFinished.
func (m *metrics) taskStarted(typ string) { m.executing.WithLabelValues(typ).Inc() }

// taskFinished records a task's run time and outcome.
func (m *metrics) taskFinished(typ, status string, took time.Duration) {
	m.executing.WithLabelValues(typ).Dec()
	m.taskSeconds.WithLabelValues(typ).Observe(took.Seconds())
	switch status {
	case protocol.StatusSucceeded:
		m.completed.WithLabelValues(typ).Inc()
	case protocol.StatusFailed:
		m.failed.WithLabelValues(typ).Inc()
	case protocol.StatusTimedOut:
		m.timedOut.WithLabelValues(typ).Inc()
	case protocol.StatusCancelled:
		m.cancelled.WithLabelValues(typ).Inc()
	}
}

func (m *metrics) rejectedOffer(reason string) { m.rejected.WithLabelValues(reason).Inc() }

func (m *metrics) staleReport(kind string) { m.stale.WithLabelValues(kind).Inc() }

func (m *metrics) fellBackToPolling() { m.fallbacks.Inc() }

// update changes the link state and recomputes connected (and counts a
// reconnect when it comes back).
func (m *metrics) update(f func(l *link)) {
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

func (m *metrics) registered() {
	m.update(func(l *link) { l.registered, l.lastAck = true, time.Now() })
}

func (m *metrics) stopped() { m.update(func(l *link) { l.registered = false }) }

func (m *metrics) setDraining() { m.update(func(l *link) { l.draining = true }) }

// webSocket records the WebSocket opening or closing. While it is open the
// delegate does not poll, so polling must be confirmed again after it.
func (m *metrics) webSocket(up bool) {
	m.update(func(l *link) { l.wsUp, l.pollOK = up, false })
}

// polled records the outcome of a long poll.
func (m *metrics) polled(ok bool) { m.update(func(l *link) { l.pollOK = ok }) }

// pollConfirmed reports whether the last poll succeeded; until one does,
// the delegate polls without waiting, to learn at once that polling works.
func (m *metrics) pollConfirmed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.link.pollOK
}

func (m *metrics) heartbeatAcked() {
	m.mu.Lock()
	m.link.lastAck = time.Now()
	m.mu.Unlock()
}

// readiness says whether the delegate is ready for work and, if not, why.
func (m *metrics) readiness() (bool, string) {
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
