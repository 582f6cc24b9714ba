package identity

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// The admin API of users, service accounts, groups, roles and bindings,
// and whoami. Every change drops the cached policies on every manager
// (accessChanged), so it applies from the next request on.

func nameError(w http.ResponseWriter, kind, name string) {
	api.BadRequest(w, "%s name %q is invalid: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", kind, name)
}

func kindWord(kind string) string {
	if kind == protocol.PrincipalServiceAccount {
		return "service account"
	}
	return "user"
}

// names maps principal and group IDs of an account to their names.
func (s *Service) names(ctx context.Context, acct string) (map[string]string, error) {
	ps, err := s.st.ListPrincipals(ctx, acct, "")
	if err != nil {
		return nil, err
	}
	gs, err := s.st.ListGroups(ctx, acct)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ps)+len(gs))
	for _, p := range ps {
		out[p.ID] = p.Name
	}
	for _, g := range gs {
		out[g.ID] = g.Name
	}
	return out, nil
}

func bindingView(b store.Binding, names map[string]string) protocol.Binding {
	return protocol.Binding{Role: b.Role, SubjectKind: b.SubjectKind, Subject: names[b.SubjectID], Org: b.Org, Project: b.Project, CreatedAt: b.CreatedAt.UTC()}
}

func (s *Service) userView(ctx context.Context, p store.Principal, names map[string]string) (protocol.User, error) {
	v := protocol.User{Name: p.Name, Kind: p.Kind, Display: p.Display, Disabled: p.Disabled, HasPassword: p.PasswordHash != "", CreatedAt: p.CreatedAt.UTC()}
	groups, err := s.st.GroupsOf(ctx, p.ID)
	if err != nil {
		return v, err
	}
	for _, g := range groups {
		v.Groups = append(v.Groups, names[g])
	}
	bs, err := s.st.ListBindings(ctx, p.AccountID, p.ID)
	if err != nil {
		return v, err
	}
	for _, b := range bs {
		v.Bindings = append(v.Bindings, bindingView(b, names))
	}
	return v, nil
}

func (s *Service) handleCreateUser(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateUserRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name, req.Display = strings.TrimSpace(req.Name), strings.TrimSpace(req.Display)
	api.AuditNamed(r, req.Name)
	if req.Kind == "" {
		req.Kind = protocol.PrincipalUser
	}
	switch {
	case req.Kind != protocol.PrincipalUser && req.Kind != protocol.PrincipalServiceAccount:
		api.BadRequest(w, "kind %q: want %s or %s", req.Kind, protocol.PrincipalUser, protocol.PrincipalServiceAccount)
		return
	case !access.ValidName(req.Name):
		nameError(w, kindWord(req.Kind), req.Name)
		return
	case req.Kind == protocol.PrincipalServiceAccount && req.Password != "":
		api.BadRequest(w, "service accounts have no password: create an API key for it (legate apikey create NAME --owner %s)", req.Name)
		return
	}
	if err := protocol.CheckText("display name", req.Display, protocol.MaxLabelLen); err != nil {
		api.BadRequest(w, "%s", err.Error())
		return
	}
	p := store.Principal{ID: api.NewID("u_"), AccountID: acct, Kind: req.Kind, Name: req.Name, Display: req.Display, CreatedAt: s.cfg.Now()}
	if req.Password != "" {
		if err := access.CheckPassword(req.Password); err != nil {
			api.BadRequest(w, "%s", err.Error())
			return
		}
		h, ok := s.hashPassword(w, r, req.Password)
		if !ok {
			return
		}
		p.PasswordHash = h
	}
	if err := s.st.CreatePrincipal(r.Context(), p); err != nil {
		if errors.Is(err, store.ErrConflict) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "a user or service account named %q already exists", req.Name)
			return
		}
		api.StoreError(w, err, kindWord(req.Kind))
		return
	}
	s.log.Info(kindWord(p.Kind)+" created", "account", acct, "name", p.Name, "by", api.CallerOf(r.Context()).Policy.Principal.Name)
	api.WriteJSON(w, http.StatusCreated, protocol.User{Name: p.Name, Kind: p.Kind, Display: p.Display, HasPassword: p.PasswordHash != "", CreatedAt: p.CreatedAt.UTC()})
}

func (s *Service) handleListUsers(w http.ResponseWriter, r *http.Request, acct string) {
	c := api.CallerOf(r.Context())
	kind := r.URL.Query().Get("kind")
	ps, err := s.st.ListPrincipals(r.Context(), acct, kind)
	if err != nil {
		api.StoreError(w, err, "users")
		return
	}
	names, err := s.names(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "users")
		return
	}
	all := c.Policy.AllowsBelow(access.UserView, access.Account)
	out := protocol.UserList{Users: []protocol.User{}}
	for _, p := range ps {
		if !all && p.ID != c.PrincipalID() {
			continue
		}
		v, err := s.userView(r.Context(), p, names)
		if err != nil {
			api.StoreError(w, err, "users")
			return
		}
		out.Users = append(out.Users, v)
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (s *Service) handleGetUser(w http.ResponseWriter, r *http.Request, acct string) {
	p, err := s.st.GetPrincipal(r.Context(), acct, r.PathValue("name"))
	if err != nil {
		api.StoreError(w, err, "user "+strconv.Quote(r.PathValue("name")))
		return
	}
	names, err := s.names(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "users")
		return
	}
	v, err := s.userView(r.Context(), p, names)
	if err != nil {
		api.StoreError(w, err, "user")
		return
	}
	api.WriteJSON(w, http.StatusOK, v)
}

func (s *Service) handleUpdateUser(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.UpdateUserRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	name := r.PathValue("name")
	cur, err := s.st.GetPrincipal(r.Context(), acct, name)
	if err != nil {
		api.StoreError(w, err, "user "+strconv.Quote(name))
		return
	}
	c := api.CallerOf(r.Context())
	disabled := cur.Disabled
	if req.Disabled != nil {
		if *req.Disabled && cur.ID == c.PrincipalID() {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "you cannot disable yourself (%s); another administrator can", name)
			return
		}
		disabled = *req.Disabled
	}
	var hash *string
	if req.Password != nil {
		if cur.Kind == protocol.PrincipalServiceAccount {
			api.BadRequest(w, "service accounts have no password")
			return
		}
		if err := access.CheckPassword(*req.Password); err != nil {
			api.BadRequest(w, "%s", err.Error())
			return
		}
		h, ok := s.hashPassword(w, r, *req.Password)
		if !ok {
			return
		}
		hash = &h
	}
	p := cur
	if req.Disabled != nil || hash == nil {
		if p, err = s.st.UpdatePrincipal(r.Context(), acct, name, disabled, nil); err != nil {
			api.StoreError(w, err, "user "+strconv.Quote(name))
			return
		}
	}
	if hash != nil {
		// A new password ends the user's sign-in sessions and unused
		// sign-in links (whoever knew the old one may hold them), but the
		// session that made the change, when the user changed their own.
		keep := ""
		if c.Session.PrincipalID == cur.ID {
			keep = c.Session.ID
		}
		if p, err = s.st.SetPassword(r.Context(), acct, name, *hash, keep, s.cfg.Now()); err != nil {
			api.StoreError(w, err, "user "+strconv.Quote(name))
			return
		}
	}
	s.accessChanged(r.Context(), acct)
	s.log.Info(kindWord(p.Kind)+" updated", "account", acct, "name", p.Name, "disabled", p.Disabled,
		"password_changed", hash != nil, "by", c.Policy.Principal.Name)
	names, _ := s.names(r.Context(), acct)
	v, err := s.userView(r.Context(), p, names)
	if err != nil {
		api.StoreError(w, err, "user")
		return
	}
	api.WriteJSON(w, http.StatusOK, v)
}

func (s *Service) handleDeleteUser(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	c := api.CallerOf(r.Context())
	if cur, err := s.st.GetPrincipal(r.Context(), acct, name); err == nil && cur.ID == c.PrincipalID() {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "you cannot delete yourself (%s); another administrator can", name)
		return
	}
	p, err := s.st.DeletePrincipal(r.Context(), acct, name, s.cfg.Now())
	if err != nil {
		api.StoreError(w, err, "user "+strconv.Quote(name))
		return
	}
	s.accessChanged(r.Context(), acct)
	// Its keys were revoked with it: drop them from every cache.
	if keys, err := s.st.ListAPIKeys(r.Context(), acct); err == nil {
		for _, k := range keys {
			if k.OwnerID == p.ID {
				s.apiKeys.invalidate(k.ID)
				s.bus.Broadcast(r.Context(), cluster.Event{Kind: cluster.APIKeyRevoke, Account: acct, APIKey: k.ID})
			}
		}
	}
	s.log.Info(kindWord(p.Kind)+" deleted", "account", acct, "name", p.Name, "by", c.Policy.Principal.Name)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) handleCreateGroup(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateGroupRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	api.AuditNamed(r, req.Name)
	if !access.ValidName(req.Name) {
		nameError(w, "group", req.Name)
		return
	}
	g := store.Group{ID: api.NewID("g_"), AccountID: acct, Name: req.Name, CreatedAt: s.cfg.Now()}
	if err := s.st.CreateGroup(r.Context(), g); err != nil {
		api.StoreError(w, err, "group "+strconv.Quote(req.Name))
		return
	}
	api.WriteJSON(w, http.StatusCreated, protocol.Group{Name: g.Name, Members: []string{}, CreatedAt: g.CreatedAt.UTC()})
}

func (s *Service) handleListGroups(w http.ResponseWriter, r *http.Request, acct string) {
	c := api.CallerOf(r.Context())
	gs, err := s.st.ListGroups(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "groups")
		return
	}
	names, err := s.names(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "groups")
		return
	}
	all := c.Policy.AllowsBelow(access.UserView, access.Account)
	out := protocol.GroupList{Groups: []protocol.Group{}}
	for _, g := range gs {
		if !all && !slices.Contains(c.Policy.Principal.Groups, g.ID) {
			continue
		}
		v := protocol.Group{Name: g.Name, Members: []string{}, CreatedAt: g.CreatedAt.UTC()}
		for _, id := range g.Members {
			v.Members = append(v.Members, names[id])
		}
		slices.Sort(v.Members)
		out.Groups = append(out.Groups, v)
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (s *Service) handleDeleteGroup(w http.ResponseWriter, r *http.Request, acct string) {
	if err := s.st.DeleteGroup(r.Context(), acct, r.PathValue("name")); err != nil {
		api.StoreError(w, err, "group "+strconv.Quote(r.PathValue("name")))
		return
	}
	s.accessChanged(r.Context(), acct)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) setMember(w http.ResponseWriter, r *http.Request, acct, member string, in bool) {
	g, err := s.st.GetGroup(r.Context(), acct, r.PathValue("name"))
	if err != nil {
		api.StoreError(w, err, "group "+strconv.Quote(r.PathValue("name")))
		return
	}
	p, err := s.st.GetPrincipal(r.Context(), acct, member)
	if err != nil {
		api.StoreError(w, err, "user "+strconv.Quote(member))
		return
	}
	if err := s.st.SetGroupMember(r.Context(), g.ID, p.ID, in); err != nil {
		api.StoreError(w, err, "group membership")
		return
	}
	s.accessChanged(r.Context(), acct)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) handleAddGroupMember(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.GroupMemberRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Detail = "member " + strings.TrimSpace(req.Member) })
	s.setMember(w, r, acct, strings.TrimSpace(req.Member), true)
}

func (s *Service) handleRemoveGroupMember(w http.ResponseWriter, r *http.Request, acct string) {
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Detail = "member " + r.PathValue("member") })
	s.setMember(w, r, acct, r.PathValue("member"), false)
}

func roleView(r access.Role) protocol.Role {
	v := protocol.Role{Name: r.Name, Builtin: r.Builtin, Description: r.Description, Permissions: []string{}}
	for _, p := range r.Permissions {
		v.Permissions = append(v.Permissions, string(p))
	}
	return v
}

func (s *Service) handleCreateRole(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.CreateRoleRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	api.AuditNamed(r, req.Name)
	if !access.ValidName(req.Name) {
		nameError(w, "role", req.Name)
		return
	}
	if _, ok := access.Builtin(req.Name); ok {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "%q is a built-in role; choose another name", req.Name)
		return
	}
	req.Description = strings.TrimSpace(req.Description) // as an update does
	if err := protocol.CheckText("role description", req.Description, 1024); err != nil {
		api.BadRequest(w, "%s", err.Error())
		return
	}
	perms, ok := rolePermissions(w, req.Permissions)
	if !ok {
		return
	}
	role := store.Role{AccountID: acct, Name: req.Name, Description: req.Description, Permissions: perms, CreatedAt: s.cfg.Now()}
	if err := s.st.CreateRole(r.Context(), role); err != nil {
		api.StoreError(w, err, "role "+strconv.Quote(req.Name))
		return
	}
	s.accessChanged(r.Context(), acct)
	api.WriteJSON(w, http.StatusCreated, protocol.Role{Name: role.Name, Description: role.Description, Permissions: perms, CreatedAt: role.CreatedAt.UTC()})
}

// roleEdit checks the permissions to add and remove, expanded as on
// create, into c; it answers the request when one is unknown.
func roleEdit(w http.ResponseWriter, req protocol.UpdateRoleRequest, c *store.RoleChange) bool {
	for _, s := range req.AddPermissions {
		ps, err := access.ParsePermission(s)
		if err != nil {
			api.BadRequest(w, "%s", err.Error())
			return false
		}
		for _, p := range ps {
			if !slices.Contains(c.Add, string(p)) {
				c.Add = append(c.Add, string(p))
			}
		}
	}
	for _, s := range req.RemovePermissions {
		ps, err := access.ParsePermission(s)
		if err != nil {
			api.BadRequest(w, "%s", err.Error())
			return false
		}
		rm := store.RoleRemoval{Asked: strings.ToLower(strings.TrimSpace(s))}
		for _, p := range ps {
			rm.Permissions = append(rm.Permissions, string(p))
		}
		c.Remove = append(c.Remove, rm)
	}
	return true
}

// rolePermissions checks a role's permissions and expands "resource:*";
// it answers the request when one is unknown or there are none.
func rolePermissions(w http.ResponseWriter, in []string) ([]string, bool) {
	if len(in) == 0 {
		api.BadRequest(w, "a role needs at least one permission (--permission delegate:delete; legate role list shows the built-in roles' permissions)")
		return nil, false
	}
	var perms []string
	for _, s := range in {
		ps, err := access.ParsePermission(s)
		if err != nil {
			api.BadRequest(w, "%s", err.Error())
			return nil, false
		}
		for _, p := range ps {
			if !slices.Contains(perms, string(p)) {
				perms = append(perms, string(p))
			}
		}
	}
	return perms, true
}

// handleUpdateRole changes a custom role's description and permissions in
// place. Every cached policy is dropped, so the users bound to the role
// get its new permissions on their next request.
func (s *Service) handleUpdateRole(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	if _, ok := access.Builtin(name); ok {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict,
			"%q is a built-in role and cannot be changed; create a custom role with the permissions you want instead (legate role get %s shows them; legate role create)", name, name)
		return
	}
	var req protocol.UpdateRoleRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	edit := len(req.AddPermissions)+len(req.RemovePermissions) > 0
	if req.Description == nil && req.Permissions == nil && !edit {
		api.BadRequest(w, "nothing to change: give the description, the permissions (or permissions to add or remove) or both")
		return
	}
	if req.Permissions != nil && edit {
		api.BadRequest(w, "give either permissions (the whole new list) or add_permissions/remove_permissions, not both")
		return
	}
	var change store.RoleChange
	if req.Description != nil {
		desc := strings.TrimSpace(*req.Description)
		if err := protocol.CheckText("role description", desc, 1024); err != nil {
			api.BadRequest(w, "%s", err.Error())
			return
		}
		change.Description = &desc
	}
	if req.Permissions != nil {
		perms, ok := rolePermissions(w, *req.Permissions)
		if !ok {
			return
		}
		change.Permissions = perms
	}
	if edit && !roleEdit(w, req, &change) {
		return
	}
	old, now, err := s.st.UpdateRole(r.Context(), acct, name, change)
	if errors.Is(err, store.ErrNotFound) {
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "no custom role named %q (legate role list)", name)
		return
	}
	var ee *store.RoleEditError
	if errors.As(err, &ee) {
		if ee.Missing != "" {
			api.BadRequest(w, "role %s has no permission %s (it has %s)", name, ee.Missing, strings.Join(ee.Has, ", "))
		} else {
			api.BadRequest(w, "removing those permissions would leave role %s with none: a role needs at least one (legate role delete %s removes it)", name, name)
		}
		return
	}
	if err != nil {
		api.StoreError(w, err, "role "+strconv.Quote(name))
		return
	}
	api.NoteAudit(r.Context(), func(e *store.AuditEvent) { e.Detail = roleChange(old, now.Description, now.Permissions) })
	s.accessChanged(r.Context(), acct)
	api.WriteJSON(w, http.StatusOK, protocol.Role{Name: name, Description: now.Description, Permissions: now.Permissions, CreatedAt: now.CreatedAt.UTC()})
}

// roleChange says what an update changed of a role, for the audit log:
// the permissions added and removed, and whether the description changed.
func roleChange(old store.Role, desc string, perms []string) string {
	var added, removed, parts []string
	for _, p := range perms {
		if !slices.Contains(old.Permissions, p) {
			added = append(added, p)
		}
	}
	for _, p := range old.Permissions {
		if !slices.Contains(perms, p) {
			removed = append(removed, p)
		}
	}
	if len(added) > 0 {
		parts = append(parts, "added "+strings.Join(added, ","))
	}
	if len(removed) > 0 {
		parts = append(parts, "removed "+strings.Join(removed, ","))
	}
	if desc != old.Description {
		parts = append(parts, "description changed")
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, "; ")
}

func (s *Service) roles(ctx context.Context, acct string) ([]protocol.Role, error) {
	rs, err := s.st.ListRoles(ctx, acct)
	if err != nil {
		return nil, err
	}
	out := []protocol.Role{}
	for _, b := range access.Builtins() {
		out = append(out, roleView(b))
	}
	for _, r := range rs {
		out = append(out, protocol.Role{Name: r.Name, Description: r.Description, Permissions: r.Permissions, CreatedAt: r.CreatedAt.UTC()})
	}
	return out, nil
}

func (s *Service) handleListRoles(w http.ResponseWriter, r *http.Request, acct string) {
	// Roles name permissions, nothing of the account: every caller sees
	// them (a caller needs to know what it could ask for).
	rs, err := s.roles(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "roles")
		return
	}
	api.WriteJSON(w, http.StatusOK, protocol.RoleList{Roles: rs})
}

func (s *Service) handleGetRole(w http.ResponseWriter, r *http.Request, acct string) {
	rs, err := s.roles(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "roles")
		return
	}
	for _, role := range rs {
		if role.Name == r.PathValue("name") {
			api.WriteJSON(w, http.StatusOK, role)
			return
		}
	}
	api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "no role named %q (legate role list)", r.PathValue("name"))
}

func (s *Service) handleDeleteRole(w http.ResponseWriter, r *http.Request, acct string) {
	name := r.PathValue("name")
	if _, ok := access.Builtin(name); ok {
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "%q is a built-in role and cannot be deleted", name)
		return
	}
	if err := s.st.DeleteRole(r.Context(), acct, name); err != nil {
		if errors.Is(err, store.ErrInUse) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "role %q is bound; unbind it first (legate role bindings, legate role unbind)", name)
			return
		}
		api.StoreError(w, err, "role "+strconv.Quote(name))
		return
	}
	s.accessChanged(r.Context(), acct)
	w.WriteHeader(http.StatusNoContent)
}

// bindingOfRequest resolves a binding's subject and checks its role and
// scope; it answers the request when they do not hold.
func (s *Service) bindingOfRequest(w http.ResponseWriter, r *http.Request, acct string, b protocol.Binding) (store.Binding, bool) {
	out := store.Binding{AccountID: acct, Role: strings.TrimSpace(b.Role), SubjectKind: b.SubjectKind,
		Org: strings.TrimSpace(b.Org), Project: strings.TrimSpace(b.Project)}
	if _, ok := access.Builtin(out.Role); !ok {
		rs, err := s.st.ListRoles(r.Context(), acct)
		if err != nil {
			api.StoreError(w, err, "roles")
			return out, false
		}
		if !slices.ContainsFunc(rs, func(x store.Role) bool { return x.Name == out.Role }) {
			api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "no role named %q (legate role list)", out.Role)
			return out, false
		}
	}
	switch b.SubjectKind {
	case protocol.SubjectGroup:
		g, err := s.st.GetGroup(r.Context(), acct, b.Subject)
		if err != nil {
			api.StoreError(w, err, "group "+strconv.Quote(b.Subject))
			return out, false
		}
		out.SubjectID = g.ID
	case protocol.PrincipalUser, protocol.PrincipalServiceAccount:
		p, err := s.st.GetPrincipal(r.Context(), acct, b.Subject)
		if err != nil || p.Kind != b.SubjectKind {
			api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "no %s named %q", kindWord(b.SubjectKind), b.Subject)
			return out, false
		}
		out.SubjectID = p.ID
	default:
		api.BadRequest(w, "subject kind %q: want %s, %s or %s", b.SubjectKind, protocol.PrincipalUser, protocol.PrincipalServiceAccount, protocol.SubjectGroup)
		return out, false
	}
	if err := s.cfg.CheckScope(r.Context(), acct, out.Org, out.Project); err != nil {
		api.BadRequest(w, "%s", err.Error())
		return out, false
	}
	return out, true
}

func (s *Service) handleCreateBinding(w http.ResponseWriter, r *http.Request, acct string) {
	var req protocol.Binding
	if !api.DecodeBody(w, r, &req) {
		return
	}
	api.AuditBinding(r, req)
	b, ok := s.bindingOfRequest(w, r, acct, req)
	if !ok {
		return
	}
	b.ID, b.CreatedAt = api.NewID("b_"), s.cfg.Now()
	if err := s.st.CreateBinding(r.Context(), b); err != nil {
		if errors.Is(err, store.ErrConflict) {
			api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "that binding exists already")
			return
		}
		api.StoreError(w, err, "binding")
		return
	}
	s.accessChanged(r.Context(), acct)
	s.log.Info("role bound", "account", acct, "role", b.Role, "subject", req.Subject, "kind", b.SubjectKind,
		"scope", access.Scope{Org: b.Org, Project: b.Project}.Key(), "by", api.CallerOf(r.Context()).Policy.Principal.Name)
	req.CreatedAt = b.CreatedAt.UTC()
	api.WriteJSON(w, http.StatusCreated, req)
}

func (s *Service) handleDeleteBinding(w http.ResponseWriter, r *http.Request, acct string) {
	q := r.URL.Query()
	req := protocol.Binding{Role: q.Get("role"), SubjectKind: q.Get("subject_kind"),
		Subject: q.Get("subject"), Org: q.Get("org"), Project: q.Get("project")}
	api.AuditBinding(r, req)
	b, ok := s.bindingOfRequest(w, r, acct, req)
	if !ok {
		return
	}
	if err := s.st.DeleteBinding(r.Context(), b); err != nil {
		api.StoreError(w, err, "binding")
		return
	}
	s.accessChanged(r.Context(), acct)
	s.log.Info("role unbound", "account", acct, "role", b.Role, "subject", q.Get("subject"), "kind", b.SubjectKind,
		"scope", access.Scope{Org: b.Org, Project: b.Project}.Key(), "by", api.CallerOf(r.Context()).Policy.Principal.Name)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Service) handleListBindings(w http.ResponseWriter, r *http.Request, acct string) {
	c := api.CallerOf(r.Context())
	bs, err := s.st.ListBindings(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "bindings")
		return
	}
	names, err := s.names(r.Context(), acct)
	if err != nil {
		api.StoreError(w, err, "bindings")
		return
	}
	out := protocol.BindingList{Bindings: []protocol.Binding{}}
	for _, b := range bs {
		ab := bindingOf(b)
		if !ab.Applies(c.Policy.Principal) && !c.Policy.Allows(access.UserView, ab.Scope) {
			continue
		}
		out.Bindings = append(out.Bindings, bindingView(b, names))
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (s *Service) handleWhoAmI(w http.ResponseWriter, r *http.Request, acct string) {
	c := api.CallerOf(r.Context())
	out := protocol.WhoAmI{AccountID: acct, Version: s.cfg.Version, PrincipalKind: c.Policy.Principal.Kind,
		Principal: c.Policy.Principal.Name, APIKey: c.Key.Name, Session: c.Session.ID != "",
		PublicURL: s.cfg.PublicURL, DelegateImage: s.cfg.DelegateImage}
	if id := c.PrincipalID(); id != "" {
		names, err := s.names(r.Context(), acct)
		if err != nil {
			api.StoreError(w, err, "bindings")
			return
		}
		ids := append([]string{id}, c.Policy.Principal.Groups...)
		bs, err := s.st.ListBindings(r.Context(), acct, ids...)
		if err != nil {
			api.StoreError(w, err, "bindings")
			return
		}
		for _, b := range bs {
			out.Bindings = append(out.Bindings, bindingView(b, names))
		}
	}
	api.WriteJSON(w, http.StatusOK, out)
}
