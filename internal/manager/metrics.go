package manager

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/metrics"
	"github.com/legate-dev/legate/internal/protocol"
)

// managerMetrics are one manager's Prometheus metrics, in a registry of
// its own (tests run several managers in one process): the API's errors
// and the process here, the task path's in dispatch, the pipelines' in
// the engine. See docs/metrics.md.
type managerMetrics struct {
	reg       *metrics.Registry
	apiErrors *metrics.CounterVec
}

func newMetrics() *managerMetrics {
	mt := &managerMetrics{reg: metrics.NewRegistry()}
	mt.apiErrors = mt.reg.NewCounterVec(metrics.Opts{
		Name: "legate_manager_api_errors_total",
		Help: "Error answers of the API, by protocol error code.",
	}, "code")
	mt.reg.AddProcessMetrics()
	return mt
}

// handler serves the metrics in the Prometheus text format. A collector
// that fails (the store does not answer within 5 s) is logged and left
// out; the rest is served.
func (mt *managerMetrics) handler(log *slog.Logger) http.Handler {
	return mt.reg.Handler(log, 5*time.Second)
}

// handleReady answers 200 when the store answers and the manager is not
// shutting down, 503 with the reason otherwise.
func (m *Manager) handleReady(w http.ResponseWriter, r *http.Request) {
	select {
	case <-m.dispatch.Stopping():
		api.WriteJSON(w, http.StatusServiceUnavailable, protocol.HealthStatus{Status: "not ready", Reason: "shutting down"})
		return
	default:
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := m.st.Ping(ctx); err != nil {
		m.log.Warn("readiness: store does not answer", "err", err)
		api.WriteJSON(w, http.StatusServiceUnavailable, protocol.HealthStatus{Status: "not ready", Reason: "store does not answer"})
		return
	}
	api.WriteJSON(w, http.StatusOK, protocol.HealthStatus{Status: "ready"})
}

// countErrors gives every request a response writer that counts the
// error codes api.WriteError writes.
func (mt *managerMetrics) countErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&countingWriter{ResponseWriter: w, mt: mt}, r)
	})
}

type countingWriter struct {
	http.ResponseWriter
	mt *managerMetrics
}

func (c *countingWriter) RecordAPIError(code protocol.Code) {
	c.mt.apiErrors.With(string(code)).Inc()
}

// Flush and Unwrap keep streaming answers and WebSocket upgrades working
// through the wrapper.
func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
