package manager

import (
	"net/http"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/webui"
)

// routes is the API: every endpoint, who may call it, the body it may send.
func (m *Manager) routes() []api.Route {
	task := protocol.PathTasks + "/{id}"
	dtask := protocol.PathDelegateTask + "/{id}"
	rts := []api.Route{
		// Probes and metrics.
		{Method: "GET", Pattern: protocol.PathHealth, Public: handleHealth},
		{Method: "GET", Pattern: protocol.PathReady, Public: m.handleReady},
		{Method: "GET", Pattern: protocol.PathMetrics, Public: m.metrics.handler(m.log).ServeHTTP},

		// Delegate API.
		{Method: "POST", Pattern: protocol.PathRegister, Body: api.BodyRegister, CredBody: api.BodyDelegateState, CredCheck: m.registrationHeaders, Public: m.handleRegister},
		{Method: "POST", Pattern: protocol.PathSession, Delegate: m.delegateAuth(m.handleSession)},
		{Method: "GET", Pattern: protocol.PathWebSocket, Stream: true, Delegate: m.delegateAuth(m.handleWebSocket)},
		{Method: "GET", Pattern: protocol.PathEvents, Stream: true, Delegate: m.delegateAuth(m.handleEvents)},
		{Method: "POST", Pattern: protocol.PathHeartbeat, Body: api.BodyDelegateState, Delegate: m.delegateAuth(m.handleHeartbeat)},
		{Method: "POST", Pattern: protocol.PathDeregister, Delegate: m.delegateAuth(m.handleDeregister)},
		{Method: "POST", Pattern: dtask + "/acquire", Delegate: m.delegateAuth(m.handleAcquire)},
		{Method: "POST", Pattern: dtask + "/started", Body: api.BodyTiny, Delegate: m.delegateAuth(m.handleStarted)},
		{Method: "POST", Pattern: dtask + "/logs", Body: api.BodyLogs, Delegate: m.delegateAuth(m.handleLogs)},
		{Method: "POST", Pattern: dtask + "/result", Body: api.BodyDelegateState, Delegate: m.delegateAuth(m.handleResult)},
		{Method: "POST", Pattern: protocol.PathCapabilities, Body: api.BodyReport, Delegate: m.delegateAuth(m.handleCapabilities)},
		{Method: "GET", Pattern: protocol.PathDelegateConfiguration, Delegate: m.delegateAuth(m.handleDelegateConfiguration)},
		{Method: "POST", Pattern: protocol.PathDelegateConfigurationResult, Body: api.BodyReport, Delegate: m.delegateAuth(m.handleConfigurationResult)},

		// Admin API. Each route's rule: the permission and where its scope
		// comes from (access.go).
		{Method: "GET", Pattern: protocol.PathWhoAmI, Admin: m.handleWhoAmI, Rule: api.Rule{Self: true}},
		{Method: "POST", Pattern: protocol.PathTokens, Body: api.BodySmall, Admin: m.handleCreateToken, Rule: api.Rule{Perm: access.DelegateEdit, Scope: api.AtBody}, Audit: "token.create"},
		{Method: "GET", Pattern: protocol.PathTokens, Admin: m.handleListTokens, Rule: api.Rule{Perm: access.TokenView, List: true}},
		{Method: "POST", Pattern: protocol.PathTokens + "/{name}/revoke", Admin: m.handleRevokeToken, Rule: api.Rule{Perm: access.TokenDelete, Scope: m.atToken()}, Audit: "token.revoke"},
		{Method: "GET", Pattern: protocol.PathDelegates, Admin: m.handleListDelegates, Rule: api.Rule{Perm: access.DelegateView, List: true}},
		{Method: "GET", Pattern: protocol.PathDelegates + "/{name}", Admin: m.handleDescribeDelegate, Rule: api.Rule{Perm: access.DelegateView, Scope: m.atDelegate()}},
		{Method: "POST", Pattern: protocol.PathDelegates + "/{name}/approve", Admin: m.handleApproveDelegate, Rule: api.Rule{Perm: access.DelegateEdit, Scope: m.atDelegate()}, Audit: "delegate.approve"},
		{Method: "POST", Pattern: protocol.PathDelegates + "/{name}/reject", Admin: m.handleRejectDelegate, Rule: api.Rule{Perm: access.DelegateEdit, Scope: m.atDelegate()}, Audit: "delegate.reject"},
		{Method: "DELETE", Pattern: protocol.PathDelegates + "/{name}", Admin: m.handleDeleteDelegate, Rule: api.Rule{Perm: access.DelegateDelete, Scope: m.atDelegate()}, Audit: "delegate.delete"},
		{Method: "POST", Pattern: protocol.PathTasks, Body: api.BodyLarge, Admin: m.handleSubmitTask, Rule: api.Rule{Perm: access.TaskRun, Scope: api.AtBody, Also: m.taskUses}},
		{Method: "GET", Pattern: protocol.PathTasks, Admin: m.handleListTasks, Rule: api.Rule{Perm: access.TaskView, List: true}},
		{Method: "GET", Pattern: task, Admin: m.handleGetTask, Rule: api.Rule{Perm: access.TaskView, Scope: m.atTask()}},
		{Method: "POST", Pattern: task + "/cancel", Admin: m.handleCancelTask, Rule: api.Rule{Perm: access.TaskCancel, Scope: m.atTask()}, Audit: "task.cancel"},
		{Method: "GET", Pattern: task + "/logs", Stream: true, Admin: m.handleTaskLogs, Rule: api.Rule{Perm: access.TaskView, Scope: m.atTask()}},
		{Method: "GET", Pattern: task + "/explain", Admin: m.handleExplainTask, Rule: api.Rule{Perm: access.TaskView, Scope: m.atTask()}},
		{Method: "POST", Pattern: protocol.PathOrgs, Body: api.BodySmall, Admin: m.handleCreateOrg, Rule: api.Rule{Perm: access.OrgEdit, Scope: api.AtAccount}, Audit: "org.create"},
		{Method: "GET", Pattern: protocol.PathOrgs, Admin: m.handleListOrgs, Rule: api.Rule{Perm: access.OrgView, List: true}},
		{Method: "DELETE", Pattern: protocol.PathOrgs + "/{org}", Admin: m.handleDeleteOrg, Rule: api.Rule{Perm: access.OrgDelete, Scope: api.AtAccount}, Audit: "org.delete"},
		{Method: "POST", Pattern: protocol.PathOrgs + "/{org}/projects", Body: api.BodySmall, Admin: m.handleCreateProject, Rule: api.Rule{Perm: access.OrgEdit, Scope: api.AtOrgPath}, Audit: "project.create"},
		{Method: "GET", Pattern: protocol.PathProjects, Admin: m.handleListProjects, Rule: api.Rule{Perm: access.OrgView, List: true}},
		{Method: "DELETE", Pattern: protocol.PathOrgs + "/{org}/projects/{name}", Admin: m.handleDeleteProject, Rule: api.Rule{Perm: access.OrgDelete, Scope: api.AtOrgPath}, Audit: "project.delete"},
		{Method: "POST", Pattern: protocol.PathConnectors, Body: api.BodySmall, Admin: m.handleCreateConnector, Rule: api.Rule{Perm: access.ConnectorEdit, Scope: api.AtAccount}, Audit: "connector.create"},
		{Method: "GET", Pattern: protocol.PathConnectors, Admin: m.handleListConnectors, Rule: api.Rule{Perm: access.ConnectorView, List: true}},
		{Method: "GET", Pattern: protocol.PathConnectors + "/{name}", Admin: m.handleGetConnector, Rule: api.Rule{Perm: access.ConnectorView, Scope: api.Anywhere}},
		{Method: "DELETE", Pattern: protocol.PathConnectors + "/{name}", Admin: m.handleDeleteConnector, Rule: api.Rule{Perm: access.ConnectorDelete, Scope: api.AtAccount}, Audit: "connector.delete"},
		{Method: "POST", Pattern: protocol.PathConfigurations, Body: api.BodyConfiguration, Admin: m.handleCreateConfiguration, Rule: api.Rule{Perm: access.ConfigurationEdit, Scope: api.AtBody}, Audit: "configuration.create"},
		{Method: "GET", Pattern: protocol.PathConfigurations, Admin: m.handleListConfigurations, Rule: api.Rule{Perm: access.ConfigurationView, List: true}},
		{Method: "GET", Pattern: protocol.PathConfigurations + "/{name}", Admin: m.handleGetConfiguration, Rule: api.Rule{Perm: access.ConfigurationView, Scope: m.atConfiguration()}},
		{Method: "PATCH", Pattern: protocol.PathConfigurations + "/{name}", Body: api.BodyConfiguration, Admin: m.handleUpdateConfiguration, Rule: api.Rule{Perm: access.ConfigurationEdit, Scope: m.atConfiguration()}, Audit: "configuration.update"},
		{Method: "DELETE", Pattern: protocol.PathConfigurations + "/{name}", Admin: m.handleDeleteConfiguration, Rule: api.Rule{Perm: access.ConfigurationDelete, Scope: m.atConfiguration()}, Audit: "configuration.delete"},
		{Method: "POST", Pattern: protocol.PathAPIKeys, Body: api.BodySmall, Admin: m.handleCreateAPIKey, Rule: api.Rule{Self: true}, Audit: "apikey.create"},
		{Method: "GET", Pattern: protocol.PathAPIKeys, Admin: m.handleListAPIKeys, Rule: api.Rule{Self: true}},
		{Method: "POST", Pattern: protocol.PathAPIKeys + "/{name}/revoke", Body: api.BodyTiny, Admin: m.handleRevokeAPIKey, Rule: api.Rule{Self: true}, Audit: "apikey.revoke"},

		// Users and roles.
		{Method: "POST", Pattern: protocol.PathSessions, Body: api.BodySmall, Public: m.handleCreateSession},
		{Method: "DELETE", Pattern: protocol.PathSessions, Admin: m.handleDeleteSession, Rule: api.Rule{Self: true}, Audit: "session.delete"},
		{Method: "POST", Pattern: protocol.PathSignInLinks, Admin: m.handleCreateSignInLink, Rule: api.Rule{Self: true}, Audit: "signin_link.create"},
		{Method: "POST", Pattern: protocol.PathUsers, Body: api.BodySmall, Admin: m.handleCreateUser, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "user.create"},
		{Method: "GET", Pattern: protocol.PathUsers, Admin: m.handleListUsers, Rule: api.Rule{Perm: access.UserView, List: true}},
		{Method: "GET", Pattern: protocol.PathUsers + "/{name}", Admin: m.handleGetUser, Rule: api.Rule{Perm: access.UserView, Scope: api.Anywhere}},
		{Method: "PATCH", Pattern: protocol.PathUsers + "/{name}", Body: api.BodySmall, Admin: m.handleUpdateUser, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "user.update"},
		{Method: "DELETE", Pattern: protocol.PathUsers + "/{name}", Admin: m.handleDeleteUser, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "user.delete"},
		{Method: "POST", Pattern: protocol.PathGroups, Body: api.BodySmall, Admin: m.handleCreateGroup, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "group.create"},
		{Method: "GET", Pattern: protocol.PathGroups, Admin: m.handleListGroups, Rule: api.Rule{Perm: access.UserView, List: true}},
		{Method: "DELETE", Pattern: protocol.PathGroups + "/{name}", Admin: m.handleDeleteGroup, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "group.delete"},
		{Method: "POST", Pattern: protocol.PathGroups + "/{name}/members", Body: api.BodySmall, Admin: m.handleAddGroupMember, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "group.add_member"},
		{Method: "DELETE", Pattern: protocol.PathGroups + "/{name}/members/{member}", Admin: m.handleRemoveGroupMember, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "group.remove_member"},
		{Method: "POST", Pattern: protocol.PathRoles, Body: api.BodySmall, Admin: m.handleCreateRole, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "role.create"},
		{Method: "GET", Pattern: protocol.PathRoles, Admin: m.handleListRoles, Rule: api.Rule{Perm: access.UserView, List: true}},
		{Method: "GET", Pattern: protocol.PathRoles + "/{name}", Admin: m.handleGetRole, Rule: api.Rule{Perm: access.UserView, Scope: api.Anywhere}},
		{Method: "DELETE", Pattern: protocol.PathRoles + "/{name}", Admin: m.handleDeleteRole, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "role.delete"},
		{Method: "POST", Pattern: protocol.PathBindings, Body: api.BodySmall, Admin: m.handleCreateBinding, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtBody}, Audit: "binding.create"},
		{Method: "GET", Pattern: protocol.PathBindings, Admin: m.handleListBindings, Rule: api.Rule{Perm: access.UserView, List: true}},
		{Method: "GET", Pattern: protocol.PathAudit, Admin: m.handleListAudit, Rule: api.Rule{Perm: access.AuditView, Scope: api.AtAccount}},
		{Method: "DELETE", Pattern: protocol.PathBindings, Admin: m.handleDeleteBinding, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtQuery}, Audit: "binding.delete"},
		// Deployments and the account's deployment limits. Setting limits
		// needs user:manage at the account: whoever holds it may grant
		// itself any role, so it already is the account's administrator.
		{Method: "GET", Pattern: protocol.PathDeployments, Admin: m.handleListDeployments, Rule: api.Rule{Perm: access.PipelineView, List: true}},
		{Method: "GET", Pattern: protocol.PathLimits, Admin: m.handleGetLimits, Rule: api.Rule{Perm: access.PipelineView, List: true}},
		{Method: "PUT", Pattern: protocol.PathLimits, Body: api.BodyTiny, Admin: m.handleSetLimits, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "limits.update"},
		// Pipelines and their runs (pipelines_api.go). Running one also
		// needs what submitting each of its steps as a task would.
		{Method: "POST", Pattern: protocol.PathPipelines, Body: api.BodyPipeline, Admin: m.handleApplyPipeline, Rule: api.Rule{Perm: access.PipelineEdit, Scope: api.AtBody}, Audit: "pipeline.apply"},
		{Method: "GET", Pattern: protocol.PathPipelines, Admin: m.handleListPipelines, Rule: api.Rule{Perm: access.PipelineView, List: true}},
		{Method: "GET", Pattern: protocol.PathPipelines + "/{name}", Admin: m.handleGetPipeline, Rule: api.Rule{Perm: access.PipelineView, Scope: api.AtQuery}},
		{Method: "DELETE", Pattern: protocol.PathPipelines + "/{name}", Admin: m.handleDeletePipeline, Rule: api.Rule{Perm: access.PipelineEdit, Scope: api.AtQuery}, Audit: "pipeline.delete"},
		{Method: "POST", Pattern: protocol.PathPipelines + "/{name}/runs", Body: api.BodyPipeline, Admin: m.handleRunPipeline, Rule: api.Rule{Perm: access.PipelineExecute, Scope: api.AtQuery, Also: m.pipelineUses}, Audit: "pipeline.run"},
		{Method: "GET", Pattern: protocol.PathRuns, Admin: m.handleListRuns, Rule: api.Rule{Perm: access.PipelineView, List: true}},
		{Method: "GET", Pattern: protocol.PathRuns + "/{id}", Admin: m.handleGetRun, Rule: api.Rule{Perm: access.PipelineView, Scope: m.atRun()}},
		{Method: "POST", Pattern: protocol.PathPipelines + "/{name}/webhook", Body: api.BodyTiny, Admin: m.handleEnableWebhook, Rule: api.Rule{Perm: access.PipelineEdit, Scope: api.AtQuery}, Audit: "pipeline.webhook_enable"},
		{Method: "DELETE", Pattern: protocol.PathPipelines + "/{name}/webhook", Admin: m.handleDisableWebhook, Rule: api.Rule{Perm: access.PipelineEdit, Scope: api.AtQuery}, Audit: "pipeline.webhook_disable"},
		// A pipeline's webhook (webhooks.go): no credentials, the body is
		// signed with the webhook's secret; it acts as who enabled it.
		{Method: "POST", Pattern: protocol.PathHooks + "/{id}", Body: bodyWebhook, Public: m.handleHook},
		{Method: "POST", Pattern: protocol.PathRuns + "/{id}/cancel", Admin: m.handleCancelRun, Rule: api.Rule{Perm: access.PipelineExecute, Scope: m.atRun()}, Audit: "run.cancel"},
		{Method: "POST", Pattern: protocol.PathManifests, Body: bodyManifest, Admin: m.handleManifest, Rule: api.Rule{Perm: access.DelegateEdit, Scope: api.AtBody}, Audit: "manifest.generate"},
	}
	// The services' routes.
	rts = append(rts, m.upgrades.Routes()...) // watchers, and the groups' upgrade policy
	rts = append(rts, m.secrets.Routes()...)
	return rts
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
	h := m.metrics.countErrors(m.server.WriteDeadline(api.VersionCheck(mux)))
	// The web UI has the paths the API leaves ("/", "/delegates", ...);
	// it calls the API in-process.
	mux.Handle("/", webui.New(webui.Config{API: h, Backend: uiBackend{m}, Stopping: m.stopping,
		WriteTimeout: m.cfg.WriteTimeout, Liveness: m.window(), Version: m.cfg.Version, Logger: m.log, Now: m.cfg.Now,
		DelegateUpdateEvery: m.cfg.UIDelegateUpdateEvery, NewDelegateHintAfter: m.cfg.UINewDelegateHintAfter}))
	return h
}
