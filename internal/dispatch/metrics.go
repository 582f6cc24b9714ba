package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/legate-dev/legate/internal/metrics"
	"github.com/legate-dev/legate/internal/protocol"
)

// dispatchMetrics are the task path's Prometheus metrics, in the
// manager's registry (tests run several managers in one process, each
// with a registry of its own). See docs/metrics.md.
type dispatchMetrics struct {
	pickup     *metrics.Histogram
	heartbeats *metrics.Counter
	apiErrors  *metrics.CounterVec // the manager's (Config.APIErrors)
	stale      *metrics.CounterVec
	scope      *metrics.CounterVec
	widened    *metrics.Counter
}

// Kinds of stale reports, the "kind" label of legate_manager_stale_reports_total.
const (
	staleResult  = "result"
	staleLog     = "log"
	staleStarted = "started"
)

func newMetrics(m *Service, r *metrics.Registry, apiErrors *metrics.CounterVec) *dispatchMetrics {
	mt := &dispatchMetrics{apiErrors: apiErrors}
	mt.pickup = r.NewHistogram(metrics.Opts{
		Name: "legate_manager_pickup_latency_seconds",
		Help: "Time from a task being queued (or requeued) to its delegate reporting the task started.",
	}, []float64{.001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300})
	mt.heartbeats = r.NewCounter(metrics.Opts{
		Name: "legate_manager_heartbeats_received_total",
		Help: "Delegate heartbeats received, over WebSocket and HTTP; rate() gives heartbeats per second.",
	})
	mt.stale = r.NewCounterVec(metrics.Opts{
		Name: "legate_manager_stale_reports_total",
		Help: "Delegate reports refused because the delegate no longer holds the task at that lease epoch, by kind: result, log, started.",
	}, "kind")
	for _, k := range []string{staleResult, staleLog, staleStarted} {
		mt.stale.With(k)
	}
	mt.scope = r.NewCounterVec(metrics.Opts{
		Name: "legate_manager_scope_refusals_total",
		Help: "Delegate calls refused because the task or configuration they name is outside the scope of the delegate's token, by call: acquire, started, logs, result, heartbeat, register, capabilities, configuration_result.",
	}, "call")
	for _, c := range scopeCalls {
		mt.scope.With(c)
	}
	mt.widened = r.NewCounter(metrics.Opts{
		Name: "legate_manager_offers_widened_total",
		Help: "Tasks offered to more delegates because the best-ranked one (the delegate that last succeeded for the task's connector, else an allowlisted or the least loaded one) did not acquire it within the offer window.",
	})
	r.Collect(m.collectDelegates, metrics.Desc{
		Opts: metrics.Opts{
			Name: "legate_manager_delegates_connected",
			Help: "Delegate instances connected to this manager process, by connection kind: websocket, polling, or unknown (between a dropped WebSocket and the first poll).",
		},
		Type:   metrics.TypeGauge,
		Labels: []string{"connection"},
	})
	r.Collect(m.collectQueue, metrics.Desc{
		Opts: metrics.Opts{
			Name: "legate_manager_queue_depth",
			Help: "Tasks queued, waiting for a delegate, in every account of the store.",
		},
		Type: metrics.TypeGauge,
	}, metrics.Desc{
		Opts: metrics.Opts{
			Name: "legate_manager_queue_oldest_age_seconds",
			Help: "How long the longest-waiting queued task has waited since it was queued or requeued; 0 when none waits.",
		},
		Type: metrics.TypeGauge,
	})
	return mt
}

// taskStarted observes the pickup latency of a task whose start was just
// recorded, queued at queued (zero for a repeated report: not observed).
func (mt *dispatchMetrics) taskStarted(queued, now time.Time) {
	if queued.IsZero() {
		return
	}
	mt.pickup.Observe(max(now.Sub(queued), 0).Seconds())
}

func (mt *dispatchMetrics) staleReport(kind string) { mt.stale.With(kind).Inc() }

func (mt *dispatchMetrics) scopeRefused(call string) { mt.scope.With(call).Inc() }

// collectDelegates counts the delegates connected to this manager by
// connection kind, from the hub at scrape time.
func (m *Service) collectDelegates(_ context.Context, s *metrics.Scrape) error {
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
		s.Add("legate_manager_delegates_connected", float64(n), kind)
	}
	return nil
}

// collectQueue reads the queue depth and the age of the oldest queued
// task from the store at scrape time (one indexed query).
func (m *Service) collectQueue(ctx context.Context, s *metrics.Scrape) error {
	depth, oldest, err := m.st.QueueStats(ctx)
	if err != nil {
		return fmt.Errorf("read queue depth: %w", err)
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(m.cfg.Now().Sub(oldest), 0).Seconds()
	}
	s.Add("legate_manager_queue_depth", float64(depth))
	s.Add("legate_manager_queue_oldest_age_seconds", age)
	return nil
}
