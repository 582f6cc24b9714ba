package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// startHTTP starts the health and metrics server on Options.HTTPAddr (none
// when it is empty). The returned stop function shuts it down.
func (a *Agent) startHTTP(ctx context.Context) (stop func(), err error) {
	if a.opts.HTTPAddr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", a.opts.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("health and metrics server (DELEGATE_HTTP_PORT; 0 turns it off): %w", err)
	}
	a.metrics.addProcessCollectors()
	a.httpAddr.Store(ln.Addr().String())
	// Probes and scrapes are small GETs answered at once: a client that
	// is slow to send, slow to read or silent is dropped.
	srv := &http.Server{
		Handler:           a.httpHandler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("health and metrics server stopped", "err", err)
		}
	}()
	a.log.Info("health and metrics server listening", "addr", ln.Addr().String(),
		"paths", protocol.PathHealth+" "+protocol.PathReady+" "+protocol.PathMetrics)
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}

// HTTPAddr is the address the health and metrics server listens on, once
// Run has started it ("" before, or when it is off).
func (a *Agent) HTTPAddr() string {
	s, _ := a.httpAddr.Load().(string)
	return s
}

func (a *Agent) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+protocol.PathHealth, func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusOK, protocol.HealthStatus{Status: "ok"})
	})
	mux.HandleFunc("GET "+protocol.PathReady, func(w http.ResponseWriter, r *http.Request) {
		if ok, why := a.metrics.readiness(); !ok {
			writeStatus(w, http.StatusServiceUnavailable, protocol.HealthStatus{Status: "not ready", Reason: why})
			return
		}
		writeStatus(w, http.StatusOK, protocol.HealthStatus{Status: "ready"})
	})
	mux.Handle("GET "+protocol.PathMetrics, a.metrics.reg.Handler(a.log, 10*time.Second))
	return mux
}

func writeStatus(w http.ResponseWriter, code int, s protocol.HealthStatus) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(s)
}
