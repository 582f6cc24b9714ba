// Package secrets is the manager's service for stored secrets: named
// values at account, org or project scope, sealed by the store. It holds
// their API (create, list, get, update, delete: values go in, never out),
// the checks of a task spec's ${secrets.NAME} references when the task is
// created (Bind, and Needs for the checks a pipeline run makes before it
// starts), and the explanation of the store's sealing
// errors to an operator (KeyError, IsSealError). Resolving the references
// into the answer to the delegate that acquires a task is part of handing
// the task over (the store's claim hands out the secrets Bind bound).
//
// It may import api, access, protocol, secretref, seal and store (for its
// types; what it calls of the database is its Store interface); never the
// manager, another service, the delegate, the CLI, the executors or the
// web UI. What it needs of the manager is an interface of its own (Scopes).
package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/store"
)

// Stored secrets: the API takes values in and never gives one back; tasks
// reference them as ${secrets.NAME} (package secretref), checked and bound
// to the exact secret each name means when the task is created (Bind),
// and resolved only into the answer to the delegate that acquires the
// task (dispatch's acquireAnswer), whose Mask makes the delegate mask
// them in the output.

// Store is what the service needs of the database (*store.Store).
type Store interface {
	CreateSecret(ctx context.Context, sec store.Secret, value string) (store.Secret, error)
	ListSecrets(ctx context.Context, acct string) ([]store.Secret, error)
	GetSecret(ctx context.Context, acct, org, project, name string) (store.Secret, error)
	UpdateSecret(ctx context.Context, acct, org, project, name, value string, now time.Time) (store.Secret, error)
	DeleteSecret(ctx context.Context, acct, org, project, name string) error
	FindSecrets(ctx context.Context, acct, org, project string, names []string) (map[string]store.Secret, error)
}

// Scopes checks that an org and project exist in an account (the
// manager's orgs and projects).
type Scopes interface {
	// CheckScope returns an error that says what is wrong (a project
	// without its org, an unknown org or project), nil when the scope
	// exists ("" org: the account).
	CheckScope(ctx context.Context, acct, org, project string) error
}

// Config configures a Service.
type Config struct {
	Store  Store
	Scopes Scopes
	// Log; nil = slog.Default().
	Log *slog.Logger
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Service serves stored secrets and checks tasks' references to them.
type Service struct {
	st     Store
	scopes Scopes
	log    *slog.Logger
	now    func() time.Time
}

// New creates the service.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{st: cfg.Store, scopes: cfg.Scopes, log: cfg.Log, now: cfg.Now}
}

// Routes returns the service's routes. It reads nothing of s, so the
// route table can be listed without a running service.
func (s *Service) Routes() []api.Route {
	return []api.Route{
		// Stored secrets: values go in, never out. The scope of a named
		// secret is in the query (?org=&project=).
		{Method: "POST", Pattern: protocol.PathSecrets, Body: bodySecret, Admin: s.handleCreateSecret, Rule: api.Rule{Perm: access.SecretEdit, Scope: api.AtBody}, Audit: "secret.create"},
		{Method: "GET", Pattern: protocol.PathSecrets, Admin: s.handleListSecrets, Rule: api.Rule{Perm: access.SecretView, List: true}},
		{Method: "GET", Pattern: protocol.PathSecrets + "/{name}", Admin: s.handleGetSecret, Rule: api.Rule{Perm: access.SecretView, Scope: api.AtQuery}},
		{Method: "PATCH", Pattern: protocol.PathSecrets + "/{name}", Body: bodySecret, Admin: s.handleUpdateSecret, Rule: api.Rule{Perm: access.SecretEdit, Scope: api.AtQuery}, Audit: "secret.update"},
		{Method: "DELETE", Pattern: protocol.PathSecrets + "/{name}", Admin: s.handleDeleteSecret, Rule: api.Rule{Perm: access.SecretDelete, Scope: api.AtQuery}, Audit: "secret.delete"},
	}
}

// bodySecret: a value of at most MaxSecretValue (64 KiB) bytes, which JSON
// escaping can make six times larger (384 KiB), and a name and scope.
const bodySecret = 512 << 10

// checkSecretValue says what is wrong with a value ("" if nothing).
func checkSecretValue(v string) string {
	switch {
	case v == "":
		return "the secret's value is empty"
	case len(v) > protocol.MaxSecretValue:
		return fmt.Sprintf("the secret's value is %d bytes; at most %d are allowed", len(v), protocol.MaxSecretValue)
	case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
		return "the secret's value must be text (UTF-8 without NUL bytes): it goes into scripts, environment values and HTTP headers; store a binary file's base64 instead"
	}
	return ""
}

func secretView(s store.Secret) protocol.Secret {
	return protocol.Secret{Name: s.Name, Org: s.Org, Project: s.Project, Version: s.Version,
		CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}
}

// secretScope reads the scope of the secret a path names from the query.
func secretScope(r *http.Request) (org, project string) {
	q := r.URL.Query()
	return q.Get("org"), q.Get("project")
}

func secretLabel(name, org, project string) string {
	return "secret " + strconv.Quote(name) + " at " + protocol.ScopeLabel(org, project) + " scope"
}

func (s *Service) handleCreateSecret(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateSecretRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	if err := secretref.ValidName(req.Name); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	if msg := checkSecretValue(req.Value); msg != "" {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", msg)
		return
	}
	req.Org, req.Project = strings.TrimSpace(req.Org), strings.TrimSpace(req.Project)
	if err := s.scopes.CheckScope(r.Context(), acct, req.Org, req.Project); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	sec, err := s.st.CreateSecret(r.Context(), store.Secret{AccountID: acct, Org: req.Org, Project: req.Project,
		Name: req.Name, CreatedAt: s.now()}, req.Value)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "%s already exists; change its value with legate secret update",
				secretLabel(req.Name, req.Org, req.Project))
			return
		}
		api.StoreError(w, err, secretLabel(req.Name, req.Org, req.Project))
		return
	}
	s.log.Info("secret created", "account", acct, "secret", sec.Name, "scope", protocol.ScopeLabel(sec.Org, sec.Project))
	api.WriteJSON(w, http.StatusCreated, secretView(sec))
}

func (s *Service) handleListSecrets(w http.ResponseWriter, r *http.Request, acct string) {
	ss, err := s.st.ListSecrets(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "secrets")
		return
	}
	pol := api.CallerOf(r.Context()).Policy
	out := protocol.SecretList{Secrets: make([]protocol.Secret, 0, len(ss))}
	for _, sec := range ss {
		if pol.Allows(access.SecretView, access.Scope{Org: sec.Org, Project: sec.Project}) {
			out.Secrets = append(out.Secrets, secretView(sec))
		}
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (s *Service) handleGetSecret(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := secretScope(r)
	sec, err := s.st.GetSecret(r.Context(), acct, org, project, name)
	if err != nil {
		api.StoreError(w, err, secretLabel(name, org, project))
		return
	}
	api.WriteJSON(w, http.StatusOK, secretView(sec))
}

func (s *Service) handleUpdateSecret(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := secretScope(r)
	var req protocol.UpdateSecretRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	if msg := checkSecretValue(req.Value); msg != "" {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", msg)
		return
	}
	sec, err := s.st.UpdateSecret(r.Context(), acct, org, project, name, req.Value, s.now())
	if err != nil {
		api.StoreError(w, err, secretLabel(name, org, project))
		return
	}
	s.log.Info("secret updated", "account", acct, "secret", sec.Name, "scope", protocol.ScopeLabel(sec.Org, sec.Project), "version", sec.Version)
	api.WriteJSON(w, http.StatusOK, secretView(sec))
}

func (s *Service) handleDeleteSecret(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := secretScope(r)
	if err := s.st.DeleteSecret(r.Context(), acct, org, project, name); err != nil {
		api.StoreError(w, err, secretLabel(name, org, project))
		return
	}
	s.log.Info("secret deleted", "account", acct, "secret", name, "scope", protocol.ScopeLabel(org, project))
	w.WriteHeader(http.StatusNoContent)
}

// lookedIn names the scopes a task at org/project takes secrets from.
func lookedIn(org, project string) string {
	s := []string{}
	if project != "" {
		s = append(s, "project "+org+"/"+project)
	}
	if org != "" {
		s = append(s, "org "+org)
	}
	return strings.Join(append(s, "the account"), ", then ")
}

// RefError is why the secret references of a task about to be created
// are refused: Status is 400 (malformed, unknown) or 403 (the principal
// lacks secret:access where a name resolves).
type RefError struct {
	Status int
	msg    string
}

func (e *RefError) Error() string { return e.msg }

// HTTPStatus is the status that answers the refusal.
func (e *RefError) HTTPStatus() int { return e.Status }

// Bind is the one check of the secret references of a task about to be
// created, on its final spec (after every expansion: a pipeline step's
// inputs and outputs are in it), whatever path creates it (the task API,
// a pipeline run's step, a webhook's run). Each name a field of the spec
// references must resolve at the task's scope (its project, its org, the
// account: the closest wins), and the principal policy returns must hold
// secret:access on the secret it resolves to. It returns what each name
// resolved to (its scope, ID and version), for the task to keep: a claim
// hands out exactly those and looks no name up again. policy is called
// only when the spec references a stored secret.
func (s *Service) Bind(ctx context.Context, acct string, spec protocol.TaskSpec, policy func(context.Context) (*access.Policy, error)) ([]store.SecretBinding, error) {
	names, err := secretref.SpecNames(spec)
	if err != nil {
		return nil, &RefError{Status: http.StatusBadRequest, msg: err.Error()}
	}
	if len(names) == 0 {
		return nil, nil
	}
	org, project := strings.TrimSpace(spec.Org), strings.TrimSpace(spec.Project)
	found, err := s.st.FindSecrets(ctx, acct, org, project, names)
	if err != nil {
		return nil, err
	}
	pol, err := policy(ctx)
	if err != nil {
		return nil, err
	}
	// The permission first, at the task's scope for a name found nowhere:
	// who may not use a secret there learns nothing of which names exist.
	for _, n := range needsOf(names, found, org, project) {
		if err := pol.Check(n.Perm, n.Res); err != nil {
			return nil, &RefError{Status: http.StatusForbidden, msg: err.Error()}
		}
	}
	out := make([]store.SecretBinding, 0, len(names))
	for _, n := range names {
		sec, ok := found[n]
		if !ok {
			return nil, &RefError{Status: http.StatusBadRequest, msg: fmt.Sprintf("unknown secret %s: the %s's %s has none of that name (looked in %s); create it with legate secret create %s, or check the name (legate secret list)",
				n, secretref.Referrer(ctx), protocol.ScopeLabel(org, project), lookedIn(org, project), n)}
		}
		out = append(out, store.BindingOf(sec))
	}
	return out, nil
}

// Needs returns what running spec would need for its secret references
// (the checks a pipeline run makes before it starts; Bind makes the one
// that counts, when each task is created):
// secret:access on each at the scope it resolves to (at the task's scope
// for a name that resolves nowhere, which the handler then refuses).
func (s *Service) Needs(ctx context.Context, acct string, spec protocol.TaskSpec) ([]api.Need, error) {
	names, err := secretref.SpecNames(spec)
	if err != nil || len(names) == 0 {
		return nil, nil // the handler reports a malformed reference
	}
	org, project := strings.TrimSpace(spec.Org), strings.TrimSpace(spec.Project)
	found, err := s.st.FindSecrets(ctx, acct, org, project, names)
	if err != nil {
		return nil, err
	}
	return needsOf(names, found, org, project), nil
}

// needsOf is the decision Bind and Needs share: secret:access on each
// name at the scope of the secret it resolves to (found), at the task's
// scope (org, project) for a name found nowhere.
func needsOf(names []string, found map[string]store.Secret, org, project string) []api.Need {
	out := make([]api.Need, 0, len(names))
	for _, n := range names {
		sc := access.Scope{Org: org, Project: project}
		if sec, ok := found[n]; ok {
			sc = access.Scope{Org: sec.Org, Project: sec.Project}
		}
		out = append(out, api.Need{Perm: access.SecretAccess, Res: access.Resource{Kind: "secret", Name: n, Scope: sc}})
	}
	return out
}
