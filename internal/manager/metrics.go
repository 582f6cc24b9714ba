package manager

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// metrics are one manager's Prometheus metrics, in a registry of its own
// (tests run several managers in one process). See docs/metrics.md.
type metrics struct {
	reg        *prometheus.Registry
	pickup     prometheus.Histogram
	heartbeats prometheus.Counter
	apiErrors  *prometheus.CounterVec
	stale      *prometheus.CounterVec
}

// Kinds of stale reports, the "kind" label of legate_manager_stale_reports_total.
const (
	staleResult  = "result"
	staleLog     = "log"
	staleStarted = "started"
)

func newMetrics(m *Manager) *metrics {
	mt := &metrics{reg: prometheus.NewRegistry()}
	mt.pickup = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "legate_manager_pickup_latency_seconds",
		Help:    "Time from a task being queued (or requeued) to its delegate reporting the task started.",
		Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	})
	mt.heartbeats = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "legate_manager_heartbeats_received_total",
		Help: "Delegate heartbeats received, over WebSocket and HTTP; rate() gives heartbeats per second.",
	})
	mt.apiErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "legate_manager_api_errors_total",
		Help: "Error answers of the API, by protocol error code.",
	}, []string{"code"})
	mt.stale = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "legate_manager_stale_reports_total",
		Help: "Delegate reports refused because the delegate no longer holds the task at that lease epoch, by kind: result, log, started.",
	}, []string{"kind"})
	for _, k := range []string{staleResult, staleLog, staleStarted} {
		mt.stale.WithLabelValues(k)
	}
	mt.reg.MustRegister(mt.pickup, mt.heartbeats, mt.apiErrors, mt.stale,
		&delegatesCollector{m: m}, &queueCollector{st: m.st, now: m.cfg.Now, log: m.log},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return mt
}

// handler serves the metrics in the Prometheus text format. A collector
// that fails (the store does not answer) is logged and left out; the rest
// is served.
func (mt *metrics) handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(mt.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// taskStarted observes the pickup latency of a task whose start report
// was just accepted (t is the task as it was before the report).
func (mt *metrics) taskStarted(t store.Task, epoch int64, now time.Time) {
	if t.StartedAt != nil || t.Epoch != epoch || t.QueueDeadline.IsZero() {
		return // a repeated report
	}
	queued := t.QueueDeadline.Add(-time.Duration(t.QueueTimeoutMS) * time.Millisecond)
	mt.pickup.Observe(max(now.Sub(queued), 0).Seconds())
}

func (mt *metrics) staleReport(kind string) { mt.stale.WithLabelValues(kind).Inc() }

// delegatesCollector counts the delegates connected to this manager by
// connection kind, from the hub at scrape time.
type delegatesCollector struct{ m *Manager }

var delegatesDesc = prometheus.NewDesc("legate_manager_delegates_connected",
	"Delegate instances connected to this manager process, by connection kind: websocket, polling, or unknown (between a dropped WebSocket and the first poll).",
	[]string{"connection"}, nil)

func (c *delegatesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- delegatesDesc }

func (c *delegatesCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	now := m.cfg.Now()
	counts := map[string]int{protocol.ConnWebSocket: 0, protocol.ConnPolling: 0, "unknown": 0}
	for _, d := range m.hub.all() {
		if now.Sub(time.Unix(0, d.lastSeen.Load())) > m.window() {
			continue
		}
		d.mu.Lock()
		gone, kind := d.gone, d.connection
		d.mu.Unlock()
		if gone {
			continue
		}
		if kind != protocol.ConnWebSocket && kind != protocol.ConnPolling {
			kind = "unknown"
		}
		counts[kind]++
	}
	for kind, n := range counts {
		ch <- prometheus.MustNewConstMetric(delegatesDesc, prometheus.GaugeValue, float64(n), kind)
	}
}

// queueCollector reads the queue depth and the age of the oldest queued
// task from the store at scrape time (one indexed query).
type queueCollector struct {
	st  *store.Store
	now func() time.Time
	log *slog.Logger
}

var (
	queueDepthDesc = prometheus.NewDesc("legate_manager_queue_depth",
		"Tasks queued, waiting for a delegate, in every account of the store.", nil, nil)
	queueAgeDesc = prometheus.NewDesc("legate_manager_queue_oldest_age_seconds",
		"How long the longest-waiting queued task has waited since it was queued or requeued; 0 when none waits.", nil, nil)
)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- queueAgeDesc
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	depth, oldest, err := c.st.QueueStats(ctx)
	if err != nil {
		c.log.Warn("metrics: read queue depth", "err", err)
		ch <- prometheus.NewInvalidMetric(queueDepthDesc, err)
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(c.now().Sub(oldest), 0).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(depth))
	ch <- prometheus.MustNewConstMetric(queueAgeDesc, prometheus.GaugeValue, age)
}

// handleReady answers 200 when the store answers and the manager is not
// shutting down, 503 with the reason otherwise.
func (m *Manager) handleReady(w http.ResponseWriter, r *http.Request) {
	select {
	case <-m.stopping:
		writeJSON(w, http.StatusServiceUnavailable, protocol.HealthStatus{Status: "not ready", Reason: "shutting down"})
		return
	default:
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := m.st.Ping(ctx); err != nil {
		m.log.Warn("readiness: store does not answer", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, protocol.HealthStatus{Status: "not ready", Reason: "store does not answer"})
		return
	}
	writeJSON(w, http.StatusOK, protocol.HealthStatus{Status: "ready"})
}

// errorRecorder is implemented by the response writer of every API
// request: writeError reports each error code it writes to it.
type errorRecorder interface{ recordAPIError(protocol.Code) }

// countErrors gives every request a response writer that counts the
// error codes writeError writes.
func (mt *metrics) countErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&countingWriter{ResponseWriter: w, mt: mt}, r)
	})
}

type countingWriter struct {
	http.ResponseWriter
	mt *metrics
}

func (c *countingWriter) recordAPIError(code protocol.Code) {
	c.mt.apiErrors.WithLabelValues(string(code)).Inc()
}

// Flush and Unwrap keep streaming answers and WebSocket upgrades working
// through the wrapper.
func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
