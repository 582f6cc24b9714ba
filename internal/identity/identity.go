// Package identity is who may call the manager's admin API: users,
// service accounts, groups, roles and bindings, API keys (cached, their
// uses recorded off the request path), sign-in sessions and one-time
// sign-in links, the authentication of admin requests with the callers'
// cached policies, the first administrator (Bootstrap, ResetAdmin), and
// the audit log's listing and pruning (package api records it).
//
// The decisions themselves (may this policy do that here?) are package
// access's. identity reads and writes the store through Store, an
// interface of its own, and tells the other managers of a shared store
// what changed through a cluster.Bus. It imports no other service of the
// manager: what it needs of them comes through Config.
package identity

import (
	"context"
	"log/slog"
	"runtime"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Store is what identity needs of the database (*store.Store has it).
type Store interface {
	// Accounts and settings.
	GetAccount(ctx context.Context, id string) (store.Account, error)
	CreateAccount(ctx context.Context, a store.Account) error
	Setting(ctx context.Context, key string) (string, error)
	SettingOrInit(ctx context.Context, key, value string) (string, error)

	// Users and service accounts, groups, roles, bindings.
	CreatePrincipal(ctx context.Context, p store.Principal) error
	GetPrincipal(ctx context.Context, accountID, name string) (store.Principal, error)
	PrincipalByID(ctx context.Context, id string) (store.Principal, error)
	ListPrincipals(ctx context.Context, accountID, kind string) ([]store.Principal, error)
	UpdatePrincipal(ctx context.Context, accountID, name string, disabled bool, passwordHash *string) (store.Principal, error)
	SetPassword(ctx context.Context, accountID, name, hash, keepSession string, now time.Time) (store.Principal, error)
	DeletePrincipal(ctx context.Context, accountID, name string, now time.Time) (store.Principal, error)
	CreateGroup(ctx context.Context, g store.Group) error
	GetGroup(ctx context.Context, accountID, name string) (store.Group, error)
	ListGroups(ctx context.Context, accountID string) ([]store.Group, error)
	DeleteGroup(ctx context.Context, accountID, name string) error
	SetGroupMember(ctx context.Context, groupID, principalID string, member bool) error
	GroupsOf(ctx context.Context, principalID string) ([]string, error)
	CreateRole(ctx context.Context, r store.Role) error
	ListRoles(ctx context.Context, accountID string) ([]store.Role, error)
	UpdateRole(ctx context.Context, accountID, name string, c store.RoleChange) (was, now store.Role, err error)
	DeleteRole(ctx context.Context, accountID, name string) error
	CreateBinding(ctx context.Context, b store.Binding) error
	DeleteBinding(ctx context.Context, b store.Binding) error
	ListBindings(ctx context.Context, accountID string, subjects ...string) ([]store.Binding, error)

	// API keys, sign-in sessions and links.
	CreateAPIKey(ctx context.Context, k store.APIKey) error
	APIKeyByHash(ctx context.Context, hash string) (store.APIKey, error)
	ListAPIKeys(ctx context.Context, accountID string) ([]store.APIKey, error)
	RevokeAPIKey(ctx context.Context, accountID, name, revokedBy string, now time.Time, allowLast bool) (store.APIKey, error)
	TouchAPIKeys(ctx context.Context, used map[string]time.Time) error
	CreateWebSession(ctx context.Context, ws store.WebSession) error
	WebSessionByHash(ctx context.Context, hash string) (store.WebSession, error)
	RevokeWebSession(ctx context.Context, id string, now time.Time) error
	CreateSignInLink(ctx context.Context, l store.SignInLink) error
	UseSignInLink(ctx context.Context, hash string, now time.Time) (store.SignInLink, error)

	// The audit log.
	ListAuditEvents(ctx context.Context, f store.AuditFilter) ([]store.AuditEvent, error)
	PruneAuditEvents(ctx context.Context, before time.Time, limit int) (int, error)

	// Broadcasts outside a running manager (ResetAdmin).
	Shared() bool
	Broadcast(ctx context.Context, payload string) error
}

// Config configures a Service. The manager passes on its own settings.
type Config struct {
	Store Store
	// Bus carries the broadcasts of API keys revoked and of access
	// changed to and from the other managers of a shared store.
	Bus *cluster.Bus
	// Auditor records the sign-ins, which no admin route's audit covers.
	Auditor *api.Auditor
	// CheckScope verifies that an org (and project) exist, for a binding's
	// scope: orgs and projects are the manager's.
	CheckScope func(ctx context.Context, acct, org, project string) error
	// APIKeyCacheTTL is how long an API key (and a caller's policy) is
	// trusted without reading it again; 0 = 5s.
	APIKeyCacheTTL time.Duration
	// AuditRetention is how long the audit log keeps a record (PruneAudit);
	// 0 = 90 days, negative = forever.
	AuditRetention time.Duration
	// PasswordHashes bounds how many passwords are hashed at once (each
	// hash takes 19 MiB while it runs); 0 = hashesPerCPU per CPU
	// (passwords.go).
	PasswordHashes int
	// Version, PublicURL and DelegateImage are what whoami reports of
	// the manager.
	Version, PublicURL, DelegateImage string
	// Log; nil = slog.Default().
	Log *slog.Logger
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Service serves the identity routes and authenticates admin requests.
// Create it with New.
type Service struct {
	cfg     Config
	st      Store
	log     *slog.Logger
	bus     *cluster.Bus
	auditor *api.Auditor
	// apiKeys caches the API keys seen and their uses (apikeys.go).
	apiKeys apiKeyCache
	// policies caches the callers' roles and bindings (authenticate.go).
	policies policyCache
	// signIns paces sign-in attempts (sessions.go).
	signIns signInLimiter
	// hashSlots holds one entry per password being hashed (passwords.go).
	hashSlots chan struct{}
	// verify checks a password against its hash: access.VerifyPassword
	// (a test makes it wait, to hold hashes running).
	verify func(hash, pw string) bool
}

// New returns the service over cfg.Store and registers, on cfg.Bus, the
// other managers' broadcasts it applies.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AuditRetention == 0 {
		cfg.AuditRetention = 90 * 24 * time.Hour
	}
	if cfg.PasswordHashes <= 0 {
		cfg.PasswordHashes = hashesPerCPU * runtime.GOMAXPROCS(0)
	}
	s := &Service{cfg: cfg, st: cfg.Store, log: cfg.Log, bus: cfg.Bus, auditor: cfg.Auditor,
		hashSlots: make(chan struct{}, cfg.PasswordHashes), verify: access.VerifyPassword}
	s.bus.Handle(cluster.APIKeyRevoke, func(ctx context.Context, ev cluster.Event) {
		s.apiKeys.invalidate(ev.APIKey)
	})
	s.bus.Handle(cluster.Access, func(ctx context.Context, ev cluster.Event) {
		s.policies.clear()
	})
	return s
}

// Routes are the identity's admin API: whoami, API keys, sign-in
// sessions and links, users, groups, roles, bindings and the audit log.
func (s *Service) Routes() []api.Route {
	return []api.Route{
		{Method: "GET", Pattern: protocol.PathWhoAmI, Admin: s.handleWhoAmI, Rule: api.Rule{Self: true}},
		{Method: "POST", Pattern: protocol.PathAPIKeys, Body: api.BodySmall, Admin: s.handleCreateAPIKey, Rule: api.Rule{Self: true}, Audit: "apikey.create"},
		{Method: "GET", Pattern: protocol.PathAPIKeys, Admin: s.handleListAPIKeys, Rule: api.Rule{Self: true}},
		{Method: "POST", Pattern: protocol.PathAPIKeys + "/{name}/revoke", Body: api.BodyTiny, Admin: s.handleRevokeAPIKey, Rule: api.Rule{Self: true}, Audit: "apikey.revoke"},

		// Users and roles.
		{Method: "POST", Pattern: protocol.PathSessions, Body: api.BodySmall, Public: s.handleCreateSession},
		{Method: "DELETE", Pattern: protocol.PathSessions, Admin: s.handleDeleteSession, Rule: api.Rule{Self: true}, Audit: "session.delete"},
		{Method: "POST", Pattern: protocol.PathSignInLinks, Admin: s.handleCreateSignInLink, Rule: api.Rule{Self: true}, Audit: "signin_link.create"},
		{Method: "POST", Pattern: protocol.PathUsers, Body: api.BodySmall, Admin: s.handleCreateUser, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "user.create"},
		{Method: "GET", Pattern: protocol.PathUsers, Admin: s.handleListUsers, Rule: api.Rule{Perm: access.UserView, List: true}},
		{Method: "GET", Pattern: protocol.PathUsers + "/{name}", Admin: s.handleGetUser, Rule: api.Rule{Perm: access.UserView, Scope: api.Anywhere}},
		{Method: "PATCH", Pattern: protocol.PathUsers + "/{name}", Body: api.BodySmall, Admin: s.handleUpdateUser, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "user.update"},
		{Method: "DELETE", Pattern: protocol.PathUsers + "/{name}", Admin: s.handleDeleteUser, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "user.delete"},
		{Method: "POST", Pattern: protocol.PathGroups, Body: api.BodySmall, Admin: s.handleCreateGroup, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "group.create"},
		{Method: "GET", Pattern: protocol.PathGroups, Admin: s.handleListGroups, Rule: api.Rule{Perm: access.UserView, List: true}},
		{Method: "DELETE", Pattern: protocol.PathGroups + "/{name}", Admin: s.handleDeleteGroup, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "group.delete"},
		{Method: "POST", Pattern: protocol.PathGroups + "/{name}/members", Body: api.BodySmall, Admin: s.handleAddGroupMember, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "group.add_member"},
		{Method: "DELETE", Pattern: protocol.PathGroups + "/{name}/members/{member}", Admin: s.handleRemoveGroupMember, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "group.remove_member"},
		{Method: "POST", Pattern: protocol.PathRoles, Body: api.BodySmall, Admin: s.handleCreateRole, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "role.create"},
		{Method: "GET", Pattern: protocol.PathRoles, Admin: s.handleListRoles, Rule: api.Rule{Perm: access.UserView, List: true}},
		{Method: "GET", Pattern: protocol.PathRoles + "/{name}", Admin: s.handleGetRole, Rule: api.Rule{Perm: access.UserView, Scope: api.Anywhere}},
		{Method: "PATCH", Pattern: protocol.PathRoles + "/{name}", Body: api.BodySmall, Admin: s.handleUpdateRole, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "role.update"},
		{Method: "DELETE", Pattern: protocol.PathRoles + "/{name}", Admin: s.handleDeleteRole, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "role.delete"},
		{Method: "POST", Pattern: protocol.PathBindings, Body: api.BodySmall, Admin: s.handleCreateBinding, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtBody}, Audit: "binding.create"},
		{Method: "GET", Pattern: protocol.PathBindings, Admin: s.handleListBindings, Rule: api.Rule{Perm: access.UserView, List: true}},
		{Method: "GET", Pattern: protocol.PathAudit, Admin: s.handleListAudit, Rule: api.Rule{Perm: access.AuditView, Scope: api.AtAccount}},
		{Method: "DELETE", Pattern: protocol.PathBindings, Admin: s.handleDeleteBinding, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtQuery}, Audit: "binding.delete"},
	}
}
