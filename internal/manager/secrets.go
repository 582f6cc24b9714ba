package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/store"
)

// Stored secrets: named values at account, org or project scope, sealed by
// the store. The API takes values in and never gives one back; tasks
// reference them as ${secrets.NAME} (package secretref), checked when the
// task is submitted (each name must resolve, and the caller needs
// secret:access where it resolves: taskUses) and resolved only into the
// answer to the delegate that acquires the task (resolveAcquired), whose
// Mask makes the delegate mask them in the output.

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
	return "secret " + strconv.Quote(name) + " at " + scopeLabel(org, project) + " scope"
}

func (m *Manager) handleCreateSecret(w http.ResponseWriter, r *http.Request, acct string) {
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
	if err := m.checkScope(r.Context(), acct, req.Org, req.Project); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	s, err := m.st.CreateSecret(r.Context(), store.Secret{AccountID: acct, Org: req.Org, Project: req.Project,
		Name: req.Name, CreatedAt: m.cfg.Now()}, req.Value)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "%s already exists; change its value with legate secret update",
				secretLabel(req.Name, req.Org, req.Project))
			return
		}
		api.StoreError(w, err, secretLabel(req.Name, req.Org, req.Project))
		return
	}
	m.log.Info("secret created", "account", acct, "secret", s.Name, "scope", scopeLabel(s.Org, s.Project))
	api.WriteJSON(w, http.StatusCreated, secretView(s))
}

func (m *Manager) handleListSecrets(w http.ResponseWriter, r *http.Request, acct string) {
	ss, err := m.st.ListSecrets(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "secrets")
		return
	}
	pol := api.CallerOf(r.Context()).Policy
	out := protocol.SecretList{Secrets: make([]protocol.Secret, 0, len(ss))}
	for _, s := range ss {
		if pol.Allows(access.SecretView, access.Scope{Org: s.Org, Project: s.Project}) {
			out.Secrets = append(out.Secrets, secretView(s))
		}
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (m *Manager) handleGetSecret(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := secretScope(r)
	s, err := m.st.GetSecret(r.Context(), acct, org, project, name)
	if err != nil {
		api.StoreError(w, err, secretLabel(name, org, project))
		return
	}
	api.WriteJSON(w, http.StatusOK, secretView(s))
}

func (m *Manager) handleUpdateSecret(w http.ResponseWriter, r *http.Request, acct string) {
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
	s, err := m.st.UpdateSecret(r.Context(), acct, org, project, name, req.Value, m.cfg.Now())
	if err != nil {
		api.StoreError(w, err, secretLabel(name, org, project))
		return
	}
	m.log.Info("secret updated", "account", acct, "secret", s.Name, "scope", scopeLabel(s.Org, s.Project), "version", s.Version)
	api.WriteJSON(w, http.StatusOK, secretView(s))
}

func (m *Manager) handleDeleteSecret(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	org, project := secretScope(r)
	if err := m.st.DeleteSecret(r.Context(), acct, org, project, name); err != nil {
		api.StoreError(w, err, secretLabel(name, org, project))
		return
	}
	m.log.Info("secret deleted", "account", acct, "secret", name, "scope", scopeLabel(org, project))
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

// checkSecretRefs refuses a task whose references are malformed or name a
// secret that its scope does not see.
func (m *Manager) checkSecretRefs(ctx context.Context, acct string, spec protocol.TaskSpec) error {
	names, err := secretref.SpecNames(spec)
	if err != nil || len(names) == 0 {
		return err
	}
	found, err := m.st.FindSecrets(ctx, acct, spec.Org, spec.Project, names)
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, ok := found[n]; !ok {
			return fmt.Errorf("unknown secret %s: the task's %s has none of that name (looked in %s); create it with legate secret create %s, or check the name (legate secret list)",
				n, scopeLabel(spec.Org, spec.Project), lookedIn(spec.Org, spec.Project), n)
		}
	}
	return nil
}

// secretNeeds returns what running spec needs for its secret references:
// secret:access on each at the scope it resolves to (at the task's scope
// for a name that resolves nowhere, which the handler then refuses).
func (m *Manager) secretNeeds(ctx context.Context, acct string, spec protocol.TaskSpec) ([]api.Need, error) {
	names, err := secretref.SpecNames(spec)
	if err != nil || len(names) == 0 {
		return nil, nil // the handler reports a malformed reference
	}
	org, project := strings.TrimSpace(spec.Org), strings.TrimSpace(spec.Project)
	found, err := m.st.FindSecrets(ctx, acct, org, project, names)
	if err != nil {
		return nil, err
	}
	out := make([]api.Need, 0, len(names))
	for _, n := range names {
		sc := access.Scope{Org: org, Project: project}
		if s, ok := found[n]; ok {
			sc = access.Scope{Org: s.Org, Project: s.Project}
		}
		out = append(out, api.Need{Perm: access.SecretAccess, Res: access.Resource{Kind: "secret", Name: n, Scope: sc}})
	}
	return out, nil
}

// acquireAnswer is the answer to the delegate that holds t: its spec with
// the stored secrets resolved, and their values to mask.
func acquireAnswer(t store.Task) (protocol.AcquireResponse, error) {
	resp := protocol.AcquireResponse{TaskID: t.ID, Epoch: t.Epoch, Spec: t.Spec, TimeoutMS: t.TimeoutMS}
	if !secretref.Uses(t.Spec) {
		return resp, nil
	}
	spec, mask, err := secretref.ResolveSpec(t.Spec, t.StoredSecrets)
	if err != nil {
		return protocol.AcquireResponse{}, err
	}
	resp.Spec, resp.Mask = spec, mask
	return resp, nil
}

// failMissingSecrets ends a task whose secrets were deleted after it was
// submitted, and answers the delegate that tried to acquire it.
func (m *Manager) failMissingSecrets(ctx context.Context, t store.Task, missing *store.MissingSecretsError) *api.Error {
	msg := missing.Error()
	ft, err := m.st.FinishTask(ctx, t.AccountID, t.ID, store.Result{Status: protocol.StatusFailed, Error: msg}, m.cfg.Now())
	switch {
	case err == nil:
		m.log.Warn("task failed: a secret it references was deleted", "account", t.AccountID, "task", t.ID,
			"secrets", strings.Join(missing.Names, ","), "scope", scopeLabel(t.Spec.Org, t.Spec.Project))
		m.afterManagerFinish(ctx, ft)
	case !errors.Is(err, store.ErrTaskTerminal):
		return api.StoreAPIError(err, "task "+t.ID)
	}
	m.queue.drop(t.ID)
	return api.NewError(http.StatusConflict, protocol.CodeTaskTerminal, "task %s failed: %s", t.ID, msg)
}
