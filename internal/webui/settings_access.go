package webui

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
)

// The settings of who may do what: users and service accounts, groups,
// roles, role bindings and API keys.

// formError is a form the page refuses before asking the API (a field
// left empty): it reads as the API's bad requests do.
func formError(msg string) error {
	return &protocol.Error{Status: http.StatusBadRequest, Code: protocol.CodeBadRequest, Message: msg}
}

func kindWord(kind string) string { return strings.ReplaceAll(kind, "_", " ") }

func accessActions() map[string]settingsAction {
	userPath := func(f url.Values) string { return protocol.PathUsers + "/" + url.PathEscape(field(f, "name")) }
	setDisabled := func(disabled bool, verb string) func(context.Context, *user, url.Values) (actionResult, error) {
		return func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			err := s.api.Admin(ctx, verb+" user", http.MethodPatch, userPath(f), protocol.UpdateUserRequest{Disabled: &disabled}, nil)
			return actionResult{notice: strings.ToUpper(verb[:1]) + verb[1:] + "d " + field(f, "name") + "."}, err
		}
	}
	return map[string]settingsAction{
		"users/create": {do: createUser},
		"users/disable": {do: setDisabled(true, "disable"), confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Disable " + field(f, "name") + "?", Button: "Disable " + field(f, "name"),
				Detail: "Its API keys and sessions are refused at once, until it is enabled again."}
		}},
		"users/enable": {do: setDisabled(false, "enable")},
		"users/password": {do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			pw := f.Get("password")
			if pw == "" {
				return actionResult{}, formError("type the new password in the field \"New password\"")
			}
			err := s.api.Admin(ctx, "set password", http.MethodPatch, userPath(f), protocol.UpdateUserRequest{Password: &pw}, nil)
			return actionResult{notice: "Password of " + field(f, "name") + " set."}, err
		}},
		"users/delete": {confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Delete " + field(f, "name") + "?", Button: "Delete " + field(f, "name"),
				Detail: "Its role bindings, API keys and sessions are deleted with it. This cannot be undone."}
		}, do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			err := s.api.Admin(ctx, "delete user", http.MethodDelete, userPath(f), nil, nil)
			return actionResult{notice: "Deleted " + field(f, "name") + "."}, err
		}},
		"roles/create": {do: createRole},
		"roles/update": {do: updateRole},
		"roles/delete": {confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Delete role " + field(f, "name") + "?", Button: "Delete role " + field(f, "name"),
				Detail: "A role that is bound cannot be deleted: remove its bindings first."}
		}, do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			err := s.api.Admin(ctx, "delete role", http.MethodDelete, protocol.PathRoles+"/"+url.PathEscape(field(f, "name")), nil, nil)
			return actionResult{notice: "Deleted role " + field(f, "name") + "."}, err
		}},
		"bindings/create": {do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			b, err := bindingOf(f)
			if err != nil {
				return actionResult{}, err
			}
			err = s.api.Admin(ctx, "bind role", http.MethodPost, protocol.PathBindings, b, nil)
			return actionResult{notice: "Bound " + b.Role + " for " + kindWord(b.SubjectKind) + " " + b.Subject + " at " + protocol.ScopeLabel(b.Org, b.Project) + "."}, err
		}},
		"bindings/delete": {confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Remove the binding of " + field(f, "role") + " to " + field(f, "subject") + "?", Button: "Remove the binding",
				Detail: kindWord(field(f, "subject_kind")) + " " + field(f, "subject") + " loses what " + field(f, "role") + " gave it at " + protocol.ScopeLabel(field(f, "org"), field(f, "project")) + "."}
		}, do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			b, err := bindingOf(f)
			if err != nil {
				return actionResult{}, err
			}
			q := url.Values{"role": {b.Role}, "subject_kind": {b.SubjectKind}, "subject": {b.Subject}, "org": {b.Org}, "project": {b.Project}}
			err = s.api.Admin(ctx, "unbind role", http.MethodDelete, protocol.PathBindings+"?"+q.Encode(), nil, nil)
			return actionResult{notice: "Removed the binding of " + b.Role + " to " + b.Subject + "."}, err
		}},
		"apikeys/create": {do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			if field(f, "name") == "" {
				return actionResult{}, formError("give the key a name (the field \"Name\")")
			}
			var k protocol.APIKey
			err := s.api.Admin(ctx, "create API key", http.MethodPost, protocol.PathAPIKeys, protocol.CreateAPIKeyRequest{Name: field(f, "name"), Owner: field(f, "owner")}, &k)
			return actionResult{key: &k, notice: "API key " + k.Name + " created: copy it now, it is not shown again."}, err
		}},
		"apikeys/revoke": {confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Revoke API key " + field(f, "name") + "?", Button: "Revoke " + field(f, "name"),
				Detail: "Whatever uses it is refused from now on.", Force: "Revoke it even if it is the account's last active key"}
		}, do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			_, err := s.api.RevokeAPIKey(ctx, field(f, "name"), f.Get("force") == "yes")
			return actionResult{notice: "API key " + field(f, "name") + " revoked."}, err
		}},
	}
}

func groupActions() map[string]settingsAction {
	groupPath := func(f url.Values) string { return protocol.PathGroups + "/" + url.PathEscape(field(f, "group")) }
	return map[string]settingsAction{
		"groups/create": {do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			if field(f, "group") == "" {
				return actionResult{}, formError("give the group a name (the field \"Name\")")
			}
			err := s.api.Admin(ctx, "create group", http.MethodPost, protocol.PathGroups, protocol.CreateGroupRequest{Name: field(f, "group")}, nil)
			return actionResult{notice: "Created group " + field(f, "group") + ". Add members to it, then bind a role to it on Role bindings."}, err
		}},
		"groups/delete": {confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Delete group " + field(f, "group") + "?", Button: "Delete group " + field(f, "group"),
				Detail: "Its role bindings are deleted with it: its members lose what the group's roles gave them."}
		}, do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			err := s.api.Admin(ctx, "delete group", http.MethodDelete, groupPath(f), nil, nil)
			return actionResult{notice: "Deleted group " + field(f, "group") + "."}, err
		}},
		"groups/add": {do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			if field(f, "member") == "" {
				return actionResult{}, formError("name the user or service account to add (the field \"Member\")")
			}
			err := s.api.Admin(ctx, "add member", http.MethodPost, groupPath(f)+"/members", protocol.GroupMemberRequest{Member: field(f, "member")}, nil)
			return actionResult{notice: "Added " + field(f, "member") + " to group " + field(f, "group") + "."}, err
		}},
		"groups/remove": {confirm: func(f url.Values) confirmView {
			return confirmView{Question: "Remove " + field(f, "member") + " from group " + field(f, "group") + "?", Button: "Remove " + field(f, "member"),
				Detail: "It loses what the group's roles gave it."}
		}, do: func(ctx context.Context, s *user, f url.Values) (actionResult, error) {
			err := s.api.Admin(ctx, "remove member", http.MethodDelete, groupPath(f)+"/members/"+url.PathEscape(field(f, "member")), nil, nil)
			return actionResult{notice: "Removed " + field(f, "member") + " from group " + field(f, "group") + "."}, err
		}},
	}
}

func createUser(ctx context.Context, s *user, f url.Values) (actionResult, error) {
	req := protocol.CreateUserRequest{Name: field(f, "name"), Display: field(f, "display"), Password: f.Get("password")}
	if req.Name == "" {
		return actionResult{}, formError("give the user a name (the field \"Name\")")
	}
	if f.Get("kind") == protocol.PrincipalServiceAccount {
		req.Kind = protocol.PrincipalServiceAccount
		if req.Password != "" {
			return actionResult{}, formError("a service account has no password: leave the field \"Password\" empty and create an API key for it on the API keys page (its field \"Owner\")")
		}
	}
	var got protocol.User
	if err := s.api.Admin(ctx, "create user", http.MethodPost, protocol.PathUsers, req, &got); err != nil {
		return actionResult{}, err
	}
	return actionResult{notice: "Created " + kindWord(got.Kind) + " " + got.Name + ". Bind a role to it on Role bindings."}, nil
}

func createRole(ctx context.Context, s *user, f url.Values) (actionResult, error) {
	req := protocol.CreateRoleRequest{Name: field(f, "name"), Description: field(f, "description")}
	for _, p := range f["permission"] {
		req.Permissions = append(req.Permissions, strings.TrimSpace(p))
	}
	req.Permissions = append(req.Permissions, words(f.Get("more"))...)
	if req.Name == "" {
		return actionResult{}, formError("give the role a name (the field \"Name\")")
	}
	if len(req.Permissions) == 0 {
		return actionResult{}, formError("a role needs at least one permission: tick one in \"Permissions\"")
	}
	err := s.api.Admin(ctx, "create role", http.MethodPost, protocol.PathRoles, req, nil)
	return actionResult{notice: "Created role " + req.Name + ". Bind it on Role bindings."}, err
}

// updateRole saves a role's edit form: its description and the whole
// list of the permissions ticked.
func updateRole(ctx context.Context, s *user, f url.Values) (actionResult, error) {
	name, desc := field(f, "name"), field(f, "description")
	perms := []string{}
	for _, p := range f["permission"] {
		perms = append(perms, strings.TrimSpace(p))
	}
	if len(perms) == 0 {
		return actionResult{}, formError("a role needs at least one permission: tick one in \"Permissions\" of role " + name + " (or delete the role)")
	}
	_, err := s.api.UpdateRole(ctx, name, protocol.UpdateRoleRequest{Description: &desc, Permissions: &perms})
	return actionResult{notice: "Saved role " + name + ": whoever it is bound to has its new permissions now."}, err
}

// granted says whether a role's permissions hold p (an edit form's box is
// ticked).
func granted(perms []string, p access.Permission) bool { return slices.Contains(perms, string(p)) }

// bindingOf reads a binding from a form.
func bindingOf(f url.Values) (protocol.Binding, error) {
	b := protocol.Binding{Role: field(f, "role"), SubjectKind: field(f, "subject_kind"), Subject: field(f, "subject"), Org: field(f, "org"), Project: field(f, "project")}
	switch {
	case b.Role == "":
		return b, formError("pick a role (the field \"Role\")")
	case b.Subject == "":
		return b, formError("name who gets the role (the field \"Subject\")")
	case b.SubjectKind != protocol.PrincipalUser && b.SubjectKind != protocol.PrincipalServiceAccount && b.SubjectKind != protocol.SubjectGroup:
		return b, formError("pick what the subject is (the field \"Subject kind\": user, service account or group)")
	case b.Project != "" && b.Org == "":
		return b, formError("a project is in an organization: fill the field \"Organization\" too")
	}
	return b, nil
}
