package manager

import (
	"net/http"
	"strings"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/webui"
)

// routes is the API: every endpoint, who may call it, the body it may send.
func (m *Manager) routes() []api.Route {
	rs := []api.Route{
		// Probes and metrics.
		{Method: "GET", Pattern: protocol.PathHealth, Public: handleHealth},
		{Method: "GET", Pattern: protocol.PathReady, Public: m.handleReady},
		{Method: "GET", Pattern: protocol.PathMetrics, Public: m.metrics.handler(m.log).ServeHTTP},
	}
	// The delegate API; delegates, tokens, tasks, configurations and
	// manifests.
	rs = append(rs, m.dispatch.Routes()...)
	// Orgs, projects and connectors.
	rs = append(rs, m.scopes.Routes()...)
	// Queue signals per selector set.
	rs = append(rs, m.queue.Routes()...)
	// Whoami, API keys, sign-in sessions and links, users, groups, roles,
	// bindings and the audit log.
	rs = append(rs, m.identity.Routes()...)
	// Pipelines, runs, deployments, limits and webhooks.
	rs = append(rs, m.engine.Routes()...)
	// Watchers, and the groups' upgrade policy.
	rs = append(rs, m.upgrades.Routes()...)
	// Stored secrets: values go in, never out.
	return append(rs, m.secrets.Routes()...)
}

func handleHealth(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Handler returns the HTTP handler of the whole API.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	m.server.Handle(mux, m.routes())
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path)
	})
	h := m.metrics.countErrors(m.server.Deadlines(api.VersionCheck(mux)))
	// The web UI has the paths the API leaves ("/", "/delegates", ...);
	// it calls the API in-process.
	mux.Handle("/", webui.New(webui.Config{API: h, Backend: uiBackend{m}, Stopping: m.dispatch.Stopping(),
		WriteTimeout: m.cfg.WriteTimeout, Liveness: m.window(), Version: m.cfg.Version, Logger: m.log, Now: m.cfg.Now,
		DelegateUpdateEvery: m.cfg.UIDelegateUpdateEvery, NewDelegateHintAfter: m.cfg.UINewDelegateHintAfter,
		SecureCookies: m.httpsClients(), PublicURL: m.cfg.PublicURL, DelegateImage: m.cfg.DelegateImage}))
	if m.httpsClients() {
		return api.StrictTransport(h)
	}
	return h
}

// httpsClients reports whether clients reach the manager over HTTPS: it
// serves TLS, or its public URL is https (a TLS-terminating proxy in
// front).
func (m *Manager) httpsClients() bool {
	return m.cfg.TLS != nil || strings.HasPrefix(strings.ToLower(strings.TrimSpace(m.cfg.PublicURL)), "https://")
}
