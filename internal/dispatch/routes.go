package dispatch

import (
	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
)

// Routes returns the delegate API and the admin API of delegates,
// tokens, tasks, orgs, projects, connectors, configurations and
// manifests: every endpoint, who may call it, the body it may send.
func (m *Service) Routes() []api.Route {
	task := protocol.PathTasks + "/{id}"
	dtask := protocol.PathDelegateTask + "/{id}"
	return []api.Route{
		// Delegate API.
		{Method: "POST", Pattern: protocol.PathRegister, Body: api.BodyRegister, CredBody: api.BodyDelegateState, CredCheck: m.registrationHeaders, Public: m.handleRegister, Admit: true},
		{Method: "POST", Pattern: protocol.PathSession, Delegate: m.delegateAuth(m.handleSession)},
		{Method: "GET", Pattern: protocol.PathWebSocket, Stream: true, Admit: true, Delegate: m.delegateAuth(m.handleWebSocket)},
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
		{Method: "POST", Pattern: protocol.PathDelegateInitSecrets, Body: api.BodySmall, Public: m.handleInitSecrets},

		// Admin API. Each route's rule: the permission and where its scope
		// comes from (access.go).
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
		{Method: "POST", Pattern: protocol.PathConfigurations, Body: api.BodyConfiguration, Admin: m.handleCreateConfiguration, Rule: api.Rule{Perm: access.ConfigurationEdit, Scope: api.AtBody}, Audit: "configuration.create"},
		{Method: "GET", Pattern: protocol.PathConfigurations, Admin: m.handleListConfigurations, Rule: api.Rule{Perm: access.ConfigurationView, List: true}},
		{Method: "GET", Pattern: protocol.PathConfigurations + "/{name}", Admin: m.handleGetConfiguration, Rule: api.Rule{Perm: access.ConfigurationView, Scope: m.atConfiguration()}},
		{Method: "PATCH", Pattern: protocol.PathConfigurations + "/{name}", Body: api.BodyConfiguration, Admin: m.handleUpdateConfiguration, Rule: api.Rule{Perm: access.ConfigurationEdit, Scope: m.atConfiguration()}, Audit: "configuration.update"},
		{Method: "DELETE", Pattern: protocol.PathConfigurations + "/{name}", Admin: m.handleDeleteConfiguration, Rule: api.Rule{Perm: access.ConfigurationDelete, Scope: m.atConfiguration()}, Audit: "configuration.delete"},

		{Method: "POST", Pattern: protocol.PathManifests, Body: bodyManifest, Admin: m.handleManifest, Rule: api.Rule{Perm: access.DelegateEdit, Scope: api.AtBody}, Audit: "manifest.generate"},
	}
}
