package manager

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/webui"
)

// route is one endpoint of the API. routes() is the only place endpoints
// are declared: Handler builds the router from it, and docs/security.md
// has one row per route with the same caller and body limit (a test
// compares the two).
type route struct {
	method  string
	pattern string // the path as http.ServeMux matches it, with {wildcards}
	// body is the largest request body the route reads, in bytes; a
	// larger one is refused with 413, before it is read when its length is
	// declared. 0 means the route reads no body: one sent anyway is
	// discarded after the answer (or the connection closed, past 256 KiB).
	body int64
	// credBody, when not 0, is the larger body limit of a request without
	// a session or API key whose delegate credentials come in its headers
	// (a registration: protocol.HeaderAccountID and the token as a
	// bearer), which are checked before the body is read.
	credBody int64
	// stream marks answers that last as long as the handler wants (the
	// WebSocket, the long poll, a followed log): they get WriteTimeout
	// for each write instead of for the whole answer.
	stream bool
	// Exactly one handler is set, and which one says who may call:
	// public (no credentials), delegate (a delegate session) or admin
	// (an API key of the account).
	public   http.HandlerFunc
	delegate delegateHandler
	admin    adminHandler
	// rule is what an admin route needs (access.go): every admin route
	// has one, and docs/security.md's permission column says it.
	rule rule
	// audit is the action an admin route records in the audit log
	// (audit.go), RESOURCE.VERB; every route that changes something has
	// one (a test checks), and only those.
	audit string
}

// callerKind says who may call a route.
type callerKind string

const (
	accessNone     callerKind = "no credentials"
	accessDelegate callerKind = "delegate session"
	accessAPIKey   callerKind = "API key"
)

func (rt route) access() callerKind {
	switch {
	case rt.delegate != nil:
		return accessDelegate
	case rt.admin != nil:
		return accessAPIKey
	}
	return accessNone
}

// Body limits. Each is the largest honest request of its routes with room
// to spare; what is larger is refused unread (413).
const (
	// bodyTiny: an epoch.
	bodyTiny = 1 << 10
	// bodySmall: names, scopes, one URL.
	bodySmall = 16 << 10
	// bodyRegister: the registration is read before the caller is known
	// (its token is in the body). Name (63), hostname (253), description
	// (1 KiB), 100 tags and the token take well under 16 KiB; the rest
	// carries the tasks a re-registering delegate still runs, about 40
	// bytes each: some 1,200 of them.
	bodyRegister = 64 << 10
	// bodyReport: a configuration result (a 4 KiB output excerpt), a
	// capability report (at most 20 capabilities per task, each a URL).
	bodyReport = 256 << 10
	// bodyDelegateState: a heartbeat lists every running task (some
	// 25,000 at 40 bytes); a result carries an error text and an HTTP
	// body excerpt (4 KiB).
	bodyDelegateState = 1 << 20
	// bodyConfiguration: a configuration script is at most 64 KiB, which
	// JSON escaping can make six times larger.
	bodyConfiguration = 512 << 10
	// bodyLarge: a task's script is at most 1 MiB (six times that once
	// escaped, in the worst case, plus its environment).
	bodyLarge = 8 << 20
	// bodyLogs: one upload of log frames carries at most
	// protocol.MaxLogUpload of output, with a frame header of a few bytes
	// per chunk (a delegate sends 256 KiB chunks); a JSON upload at most
	// 1 MiB (output kept on disk by a restarted delegate), escaped as a
	// script in bodyLarge.
	bodyLogs = protocol.MaxLogUpload + 1<<20
	// bodyPipeline: a pipeline's source is at most 256 KiB (JSON may
	// escape it to several times that); a run's inputs are bounded by it.
	bodyPipeline = 2 << 20
	// bodyMax is the largest of the limits above.
	bodyMax = bodyLogs
)

// routes is the API: every endpoint, who may call it, the body it may send.
func (m *Manager) routes() []route {
	task := protocol.PathTasks + "/{id}"
	dtask := protocol.PathDelegateTask + "/{id}"
	return []route{
		// Probes and metrics.
		{method: "GET", pattern: protocol.PathHealth, public: handleHealth},
		{method: "GET", pattern: protocol.PathReady, public: m.handleReady},
		{method: "GET", pattern: protocol.PathMetrics, public: m.metrics.handler(m.log).ServeHTTP},

		// Delegate API.
		{method: "POST", pattern: protocol.PathRegister, body: bodyRegister, credBody: bodyDelegateState, public: m.handleRegister},
		{method: "POST", pattern: protocol.PathSession, delegate: m.handleSession},
		{method: "GET", pattern: protocol.PathWebSocket, stream: true, delegate: m.handleWebSocket},
		{method: "GET", pattern: protocol.PathEvents, stream: true, delegate: m.handleEvents},
		{method: "POST", pattern: protocol.PathHeartbeat, body: bodyDelegateState, delegate: m.handleHeartbeat},
		{method: "POST", pattern: protocol.PathDeregister, delegate: m.handleDeregister},
		{method: "POST", pattern: dtask + "/acquire", delegate: m.handleAcquire},
		{method: "POST", pattern: dtask + "/started", body: bodyTiny, delegate: m.handleStarted},
		{method: "POST", pattern: dtask + "/logs", body: bodyLogs, delegate: m.handleLogs},
		{method: "POST", pattern: dtask + "/result", body: bodyDelegateState, delegate: m.handleResult},
		{method: "POST", pattern: protocol.PathCapabilities, body: bodyReport, delegate: m.handleCapabilities},
		{method: "GET", pattern: protocol.PathDelegateConfiguration, delegate: m.handleDelegateConfiguration},
		{method: "POST", pattern: protocol.PathDelegateConfigurationResult, body: bodyReport, delegate: m.handleConfigurationResult},
		// Watchers (upgrades.go): the delegate token in the headers is the
		// credential, checked by the handler before anything is read.
		{method: "POST", pattern: protocol.PathUpgradeCheck, body: bodySmall, public: m.handleUpgradeCheck},
		{method: "GET", pattern: protocol.PathReleases + "/{version}/{os}/{arch}", stream: true, public: m.handleReleaseBinary},
		{method: "GET", pattern: protocol.PathReleases + "/{version}/{os}/{arch}/signature", public: m.handleReleaseSignature},

		// Admin API. Each route's rule: the permission and where its scope
		// comes from (access.go).
		{method: "GET", pattern: protocol.PathWhoAmI, admin: m.handleWhoAmI, rule: rule{self: true}},
		{method: "POST", pattern: protocol.PathTokens, body: bodySmall, admin: m.handleCreateToken, rule: rule{perm: access.DelegateEdit, scope: atBody}, audit: "token.create"},
		{method: "GET", pattern: protocol.PathTokens, admin: m.handleListTokens, rule: rule{perm: access.TokenView, list: true}},
		{method: "POST", pattern: protocol.PathTokens + "/{name}/revoke", admin: m.handleRevokeToken, rule: rule{perm: access.TokenDelete, scope: atToken}, audit: "token.revoke"},
		{method: "GET", pattern: protocol.PathDelegates, admin: m.handleListDelegates, rule: rule{perm: access.DelegateView, list: true}},
		{method: "GET", pattern: protocol.PathDelegates + "/{name}", admin: m.handleDescribeDelegate, rule: rule{perm: access.DelegateView, scope: atDelegate}},
		{method: "POST", pattern: protocol.PathDelegates + "/{name}/approve", admin: m.handleApproveDelegate, rule: rule{perm: access.DelegateEdit, scope: atDelegate}, audit: "delegate.approve"},
		{method: "POST", pattern: protocol.PathDelegates + "/{name}/reject", admin: m.handleRejectDelegate, rule: rule{perm: access.DelegateEdit, scope: atDelegate}, audit: "delegate.reject"},
		// A group's upgrade policy: the version it wants is the account
		// administrator's call (user:manage at the account, as for limits).
		{method: "PUT", pattern: protocol.PathDelegates + "/{name}/upgrade", body: bodyTiny, admin: m.handleSetUpgradePolicy, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "delegate.upgrade_policy"},
		{method: "DELETE", pattern: protocol.PathDelegates + "/{name}", admin: m.handleDeleteDelegate, rule: rule{perm: access.DelegateDelete, scope: atDelegate}, audit: "delegate.delete"},
		{method: "POST", pattern: protocol.PathTasks, body: bodyLarge, admin: m.handleSubmitTask, rule: rule{perm: access.TaskRun, scope: atBody, also: taskUses}},
		{method: "GET", pattern: protocol.PathTasks, admin: m.handleListTasks, rule: rule{perm: access.TaskView, list: true}},
		{method: "GET", pattern: task, admin: m.handleGetTask, rule: rule{perm: access.TaskView, scope: atTask}},
		{method: "POST", pattern: task + "/cancel", admin: m.handleCancelTask, rule: rule{perm: access.TaskCancel, scope: atTask}, audit: "task.cancel"},
		{method: "GET", pattern: task + "/logs", stream: true, admin: m.handleTaskLogs, rule: rule{perm: access.TaskView, scope: atTask}},
		{method: "GET", pattern: task + "/explain", admin: m.handleExplainTask, rule: rule{perm: access.TaskView, scope: atTask}},
		{method: "POST", pattern: protocol.PathOrgs, body: bodySmall, admin: m.handleCreateOrg, rule: rule{perm: access.OrgEdit, scope: atAccount}, audit: "org.create"},
		{method: "GET", pattern: protocol.PathOrgs, admin: m.handleListOrgs, rule: rule{perm: access.OrgView, list: true}},
		{method: "DELETE", pattern: protocol.PathOrgs + "/{org}", admin: m.handleDeleteOrg, rule: rule{perm: access.OrgDelete, scope: atAccount}, audit: "org.delete"},
		{method: "POST", pattern: protocol.PathOrgs + "/{org}/projects", body: bodySmall, admin: m.handleCreateProject, rule: rule{perm: access.OrgEdit, scope: atOrgPath}, audit: "project.create"},
		{method: "GET", pattern: protocol.PathProjects, admin: m.handleListProjects, rule: rule{perm: access.OrgView, list: true}},
		{method: "DELETE", pattern: protocol.PathOrgs + "/{org}/projects/{name}", admin: m.handleDeleteProject, rule: rule{perm: access.OrgDelete, scope: atOrgPath}, audit: "project.delete"},
		{method: "POST", pattern: protocol.PathConnectors, body: bodySmall, admin: m.handleCreateConnector, rule: rule{perm: access.ConnectorEdit, scope: atAccount}, audit: "connector.create"},
		{method: "GET", pattern: protocol.PathConnectors, admin: m.handleListConnectors, rule: rule{perm: access.ConnectorView, list: true}},
		{method: "GET", pattern: protocol.PathConnectors + "/{name}", admin: m.handleGetConnector, rule: rule{perm: access.ConnectorView, scope: anywhere}},
		{method: "DELETE", pattern: protocol.PathConnectors + "/{name}", admin: m.handleDeleteConnector, rule: rule{perm: access.ConnectorDelete, scope: atAccount}, audit: "connector.delete"},
		{method: "POST", pattern: protocol.PathConfigurations, body: bodyConfiguration, admin: m.handleCreateConfiguration, rule: rule{perm: access.ConfigurationEdit, scope: atBody}, audit: "configuration.create"},
		{method: "GET", pattern: protocol.PathConfigurations, admin: m.handleListConfigurations, rule: rule{perm: access.ConfigurationView, list: true}},
		{method: "GET", pattern: protocol.PathConfigurations + "/{name}", admin: m.handleGetConfiguration, rule: rule{perm: access.ConfigurationView, scope: atConfiguration}},
		{method: "PATCH", pattern: protocol.PathConfigurations + "/{name}", body: bodyConfiguration, admin: m.handleUpdateConfiguration, rule: rule{perm: access.ConfigurationEdit, scope: atConfiguration}, audit: "configuration.update"},
		{method: "DELETE", pattern: protocol.PathConfigurations + "/{name}", admin: m.handleDeleteConfiguration, rule: rule{perm: access.ConfigurationDelete, scope: atConfiguration}, audit: "configuration.delete"},
		{method: "POST", pattern: protocol.PathAPIKeys, body: bodySmall, admin: m.handleCreateAPIKey, rule: rule{self: true}, audit: "apikey.create"},
		{method: "GET", pattern: protocol.PathAPIKeys, admin: m.handleListAPIKeys, rule: rule{self: true}},
		{method: "POST", pattern: protocol.PathAPIKeys + "/{name}/revoke", body: bodyTiny, admin: m.handleRevokeAPIKey, rule: rule{self: true}, audit: "apikey.revoke"},

		// Stored secrets: values go in, never out. The scope of a named
		// secret is in the query (?org=&project=).
		{method: "POST", pattern: protocol.PathSecrets, body: bodySecret, admin: m.handleCreateSecret, rule: rule{perm: access.SecretEdit, scope: atBody}, audit: "secret.create"},
		{method: "GET", pattern: protocol.PathSecrets, admin: m.handleListSecrets, rule: rule{perm: access.SecretView, list: true}},
		{method: "GET", pattern: protocol.PathSecrets + "/{name}", admin: m.handleGetSecret, rule: rule{perm: access.SecretView, scope: atQuery}},
		{method: "PATCH", pattern: protocol.PathSecrets + "/{name}", body: bodySecret, admin: m.handleUpdateSecret, rule: rule{perm: access.SecretEdit, scope: atQuery}, audit: "secret.update"},
		{method: "DELETE", pattern: protocol.PathSecrets + "/{name}", admin: m.handleDeleteSecret, rule: rule{perm: access.SecretDelete, scope: atQuery}, audit: "secret.delete"},

		// Users and roles.
		{method: "POST", pattern: protocol.PathSessions, body: bodySmall, public: m.handleCreateSession},
		{method: "DELETE", pattern: protocol.PathSessions, admin: m.handleDeleteSession, rule: rule{self: true}, audit: "session.delete"},
		{method: "POST", pattern: protocol.PathSignInLinks, admin: m.handleCreateSignInLink, rule: rule{self: true}, audit: "signin_link.create"},
		{method: "POST", pattern: protocol.PathUsers, body: bodySmall, admin: m.handleCreateUser, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "user.create"},
		{method: "GET", pattern: protocol.PathUsers, admin: m.handleListUsers, rule: rule{perm: access.UserView, list: true}},
		{method: "GET", pattern: protocol.PathUsers + "/{name}", admin: m.handleGetUser, rule: rule{perm: access.UserView, scope: anywhere}},
		{method: "PATCH", pattern: protocol.PathUsers + "/{name}", body: bodySmall, admin: m.handleUpdateUser, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "user.update"},
		{method: "DELETE", pattern: protocol.PathUsers + "/{name}", admin: m.handleDeleteUser, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "user.delete"},
		{method: "POST", pattern: protocol.PathGroups, body: bodySmall, admin: m.handleCreateGroup, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "group.create"},
		{method: "GET", pattern: protocol.PathGroups, admin: m.handleListGroups, rule: rule{perm: access.UserView, list: true}},
		{method: "DELETE", pattern: protocol.PathGroups + "/{name}", admin: m.handleDeleteGroup, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "group.delete"},
		{method: "POST", pattern: protocol.PathGroups + "/{name}/members", body: bodySmall, admin: m.handleAddGroupMember, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "group.add_member"},
		{method: "DELETE", pattern: protocol.PathGroups + "/{name}/members/{member}", admin: m.handleRemoveGroupMember, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "group.remove_member"},
		{method: "POST", pattern: protocol.PathRoles, body: bodySmall, admin: m.handleCreateRole, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "role.create"},
		{method: "GET", pattern: protocol.PathRoles, admin: m.handleListRoles, rule: rule{perm: access.UserView, list: true}},
		{method: "GET", pattern: protocol.PathRoles + "/{name}", admin: m.handleGetRole, rule: rule{perm: access.UserView, scope: anywhere}},
		{method: "DELETE", pattern: protocol.PathRoles + "/{name}", admin: m.handleDeleteRole, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "role.delete"},
		{method: "POST", pattern: protocol.PathBindings, body: bodySmall, admin: m.handleCreateBinding, rule: rule{perm: access.UserManage, scope: atBody}, audit: "binding.create"},
		{method: "GET", pattern: protocol.PathBindings, admin: m.handleListBindings, rule: rule{perm: access.UserView, list: true}},
		{method: "GET", pattern: protocol.PathAudit, admin: m.handleListAudit, rule: rule{perm: access.AuditView, scope: atAccount}},
		{method: "DELETE", pattern: protocol.PathBindings, admin: m.handleDeleteBinding, rule: rule{perm: access.UserManage, scope: atQuery}, audit: "binding.delete"},
		// Deployments and the account's deployment limits. Setting limits
		// needs user:manage at the account: whoever holds it may grant
		// itself any role, so it already is the account's administrator.
		{method: "GET", pattern: protocol.PathDeployments, admin: m.handleListDeployments, rule: rule{perm: access.PipelineView, list: true}},
		{method: "GET", pattern: protocol.PathLimits, admin: m.handleGetLimits, rule: rule{perm: access.PipelineView, list: true}},
		{method: "PUT", pattern: protocol.PathLimits, body: bodyTiny, admin: m.handleSetLimits, rule: rule{perm: access.UserManage, scope: atAccount}, audit: "limits.update"},
		// Pipelines and their runs (pipelines_api.go). Running one also
		// needs what submitting each of its steps as a task would.
		{method: "POST", pattern: protocol.PathPipelines, body: bodyPipeline, admin: m.handleApplyPipeline, rule: rule{perm: access.PipelineEdit, scope: atBody}, audit: "pipeline.apply"},
		{method: "GET", pattern: protocol.PathPipelines, admin: m.handleListPipelines, rule: rule{perm: access.PipelineView, list: true}},
		{method: "GET", pattern: protocol.PathPipelines + "/{name}", admin: m.handleGetPipeline, rule: rule{perm: access.PipelineView, scope: atQuery}},
		{method: "DELETE", pattern: protocol.PathPipelines + "/{name}", admin: m.handleDeletePipeline, rule: rule{perm: access.PipelineEdit, scope: atQuery}, audit: "pipeline.delete"},
		{method: "POST", pattern: protocol.PathPipelines + "/{name}/runs", body: bodyPipeline, admin: m.handleRunPipeline, rule: rule{perm: access.PipelineExecute, scope: atQuery, also: pipelineUses}, audit: "pipeline.run"},
		{method: "GET", pattern: protocol.PathRuns, admin: m.handleListRuns, rule: rule{perm: access.PipelineView, list: true}},
		{method: "GET", pattern: protocol.PathRuns + "/{id}", admin: m.handleGetRun, rule: rule{perm: access.PipelineView, scope: atRun}},
		{method: "POST", pattern: protocol.PathPipelines + "/{name}/webhook", body: bodyTiny, admin: m.handleEnableWebhook, rule: rule{perm: access.PipelineEdit, scope: atQuery}, audit: "pipeline.webhook_enable"},
		{method: "DELETE", pattern: protocol.PathPipelines + "/{name}/webhook", admin: m.handleDisableWebhook, rule: rule{perm: access.PipelineEdit, scope: atQuery}, audit: "pipeline.webhook_disable"},
		// A pipeline's webhook (webhooks.go): no credentials, the body is
		// signed with the webhook's secret; it acts as who enabled it.
		{method: "POST", pattern: protocol.PathHooks + "/{id}", body: bodyWebhook, public: m.handleHook},
		{method: "POST", pattern: protocol.PathRuns + "/{id}/cancel", admin: m.handleCancelRun, rule: rule{perm: access.PipelineExecute, scope: atRun}, audit: "run.cancel"},
		{method: "POST", pattern: protocol.PathManifests, body: bodyManifest, admin: m.handleManifest, rule: rule{perm: access.DelegateEdit, scope: atBody}, audit: "manifest.generate"},
	}
}

func handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Handler returns the HTTP handler of the whole API.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range m.routes() {
		mux.Handle(rt.method+" "+rt.pattern, m.serveRoute(rt))
	}
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, protocol.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path)
	})
	api := m.metrics.countErrors(m.writeDeadline(versionCheck(mux)))
	// The web UI has the paths the API leaves ("/", "/delegates", ...);
	// it calls the API in-process.
	mux.Handle("/", webui.New(webui.Config{API: api, Backend: uiBackend{m}, Stopping: m.stopping,
		WriteTimeout: m.cfg.WriteTimeout, Liveness: m.window(), Version: m.cfg.Version, Logger: m.log, Now: m.cfg.Now,
		DelegateUpdateEvery: m.cfg.UIDelegateUpdateEvery, NewDelegateHintAfter: m.cfg.UINewDelegateHintAfter}))
	return api
}

// serveRoute applies a route's limits around its handler: the body limit
// and read deadline, the credentials (checked before the body is read),
// and for streaming routes a write deadline per write.
func (m *Manager) serveRoute(rt route) http.Handler {
	var h http.Handler
	switch rt.access() {
	case accessDelegate:
		h = m.delegateAuth(rt.delegate)
	case accessAPIKey:
		h = m.adminAuth(rt)
	default:
		h = rt.public
		if rt.body > 0 {
			h = m.readUnauthenticated(h)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		next, limit := h, rt.body
		if rt.credBody > 0 && bearer(r) != "" {
			// Credentials in the headers: checked first, and once they
			// hold the body is read as an authenticated one.
			if !m.registrationHeaders(w, r) {
				w.Header().Set("Connection", "close")
				return
			}
			next, limit = rt.public, rt.credBody
		}
		if limit > 0 && r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestEntityTooLarge, protocol.CodeBadRequest,
				"request body of %d bytes is larger than the %d bytes %s %s accepts", r.ContentLength, limit, rt.method, rt.pattern)
			return
		}
		// A shallow copy: the server keeps its own *http.Request, whose
		// body tells it after the answer whether the rest of the body is
		// worth reading (at most 256 KiB) or the connection is closed.
		r = r.WithContext(r.Context())
		if limit > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		} else {
			r.Body = http.NoBody
		}
		if r.ContentLength != 0 && limit > 0 {
			// The body must arrive within ReadTimeout; readBody lifts the
			// deadline once it has (a deadline left on the connection
			// would end the request's context while the handler works).
			// The answer gets WriteTimeout on top, so that a body that
			// comes late is still answered, and one that is cut hears why.
			now := time.Now()
			_ = rc.SetReadDeadline(now.Add(m.cfg.ReadTimeout))
			_ = rc.SetWriteDeadline(now.Add(m.cfg.ReadTimeout + m.cfg.WriteTimeout))
		}
		if rt.stream {
			_ = rc.SetWriteDeadline(time.Time{})
			w = &streamWriter{ResponseWriter: w, rc: rc, timeout: m.cfg.WriteTimeout}
		}
		next.ServeHTTP(w, r)
	})
}

// writeDeadline gives every answer WriteTimeout from the end of the
// request's headers; serveRoute adds ReadTimeout for a request with a
// body, and lifts it for streaming routes.
func (m *Manager) writeDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(m.cfg.WriteTimeout))
		next.ServeHTTP(w, r)
	})
}

// streamWriter moves the write deadline forward before every write, so a
// stream lasts as long as its handler wants while a peer that stops
// reading is still dropped after WriteTimeout.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *streamWriter) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	return s.ResponseWriter.Write(p)
}

func (s *streamWriter) Flush() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	_ = s.rc.Flush()
}

// Unwrap lets the WebSocket upgrade reach the connection.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *streamWriter) recordAPIError(code protocol.Code) {
	if rec, ok := s.ResponseWriter.(errorRecorder); ok {
		rec.recordAPIError(code)
	}
}

// bodySlotWait is how long a request without credentials waits for a
// slot to read its body before it is answered 503.
const bodySlotWait = time.Second

// readUnauthenticated reads the body of a request that carries no
// credentials (a registration, whose token is in the body) before its
// handler runs, holding one of Config.UnauthenticatedBodies slots while
// it does: however many such requests arrive at once, at most that many
// bodies are in memory. A request that finds no slot within bodySlotWait
// is answered 503 with Retry-After.
func (m *Manager) readUnauthenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if !m.takeBodySlot(r.Context()) {
			if r.Context().Err() != nil {
				return
			}
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, protocol.CodeUnavailable,
				"the manager is reading %d requests without credentials already; retry in a second", cap(m.bodySlots))
			return
		}
		body, ok := readBody(w, r)
		<-m.bodySlots
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func (m *Manager) takeBodySlot(ctx context.Context) bool {
	select {
	case m.bodySlots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(bodySlotWait)
	defer t.Stop()
	select {
	case m.bodySlots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
