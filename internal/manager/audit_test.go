package manager

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// TestEveryChangeIsAudited makes every change the admin API offers, one
// at a time, and checks that each leaves exactly one audit record with
// the right principal, credential, action, resource, scope, address and
// outcome; then that GET /api/v1/audit filters and pages them, and that
// no record holds a token, key or password.
func TestEveryChangeIsAudited(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.admin.APIKey
	acct := tm.admin.AccountID
	tm.mustAPI(t, admin, "POST", protocol.PathUsers, `{"name":"alice","password":"correct horse"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathBindings, `{"role":"account-admin","subject_kind":"user","subject":"alice"}`, 201)
	var ak protocol.APIKey
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathAPIKeys, `{"name":"alice-key","owner":"alice"}`, 201)), &ak); err != nil {
		t.Fatal(err)
	}
	viewer := tm.userKey(t, "vic", access.RoleViewer, access.Account)
	var task protocol.Task
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTasks, `{"type":"shell","shell":{"script":"true"},"org":"","project":""}`, 201)), &task); err != nil {
		t.Fatal(err)
	}
	var gated protocol.Token
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTokens, `{"name":"gated","require_approval":true}`, 201)), &gated); err != nil {
		t.Fatal(err)
	}
	tm.registerFake(t, acct, gated.Value, "edge", "edge-1")
	tm.registerFake(t, acct, gated.Value, "rogue", "rogue-1")
	secrets := []string{ak.Value, admin, gated.Value, "correct horse"}

	// The sign-in session, made and ended by the table below.
	var session protocol.Session
	alice := func(kind string) store.AuditEvent {
		e := store.AuditEvent{PrincipalKind: protocol.PrincipalUser, Principal: "alice", Credential: "api_key", CredentialName: "alice-key", Address: "127.0.0.1"}
		if kind == "session" {
			e.Credential, e.CredentialName = "session", ""
		}
		return e
	}
	with := func(e store.AuditEvent, f func(*store.AuditEvent)) store.AuditEvent { f(&e); return e }

	for _, tc := range []struct {
		name                string
		key                 func() string // "" for none
		method, path, body  string
		status              int
		want                store.AuditEvent // ID, At, AccountID, PrincipalID ignored
		sessionCredentialID bool
	}{
		{"org create", func() string { return ak.Value }, "POST", protocol.PathOrgs, `{"name":"o1"}`, 201,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "org.create", "org", "o1" }), false},
		{"project create", func() string { return ak.Value }, "POST", protocol.PathOrgs + "/o1/projects", `{"name":"p1"}`, 201,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Org = "project.create", "project", "p1", "o1"
			}), false},
		{"token create", func() string { return ak.Value }, "POST", protocol.PathTokens, `{"name":"ci","org":"o1","project":"p1"}`, 201,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Org, e.Project = "token.create", "token", "ci", "o1", "p1"
			}), false},
		{"token revoke denied", func() string { return viewer }, "POST", protocol.PathTokens + "/ci/revoke", "", 403,
			store.AuditEvent{PrincipalKind: protocol.PrincipalUser, Principal: "vic", Credential: "api_key", CredentialName: "k-vic",
				Action: "token.revoke", ResourceType: "token", Resource: "ci", Org: "o1", Project: "p1", Address: "127.0.0.1",
				Outcome: protocol.AuditDenied, Status: 403, Detail: `user vic lacks the permission token:delete on token "ci" at project o1/p1; a role with token:delete bound at project o1/p1 or above grants it (legate role bind ROLE --user vic ...)`}, false},
		{"token revoke", func() string { return ak.Value }, "POST", protocol.PathTokens + "/ci/revoke", "", 200,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Org, e.Project = "token.revoke", "token", "ci", "o1", "p1"
			}), false},
		{"connector create", func() string { return ak.Value }, "POST", protocol.PathConnectors, `{"name":"git","url":"http://127.0.0.1:1"}`, 201,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource = "connector.create", "connector", "git"
			}), false},
		{"connector delete", func() string { return ak.Value }, "DELETE", protocol.PathConnectors + "/git", "", 204,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource = "connector.delete", "connector", "git"
			}), false},
		{"configuration create", func() string { return ak.Value }, "POST", protocol.PathConfigurations, `{"name":"base","script":"true","org":"o1"}`, 201,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Org = "configuration.create", "configuration", "base", "o1"
			}), false},
		{"configuration update", func() string { return ak.Value }, "PATCH", protocol.PathConfigurations + "/base", `{"script":"echo hi"}`, 200,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Org = "configuration.update", "configuration", "base", "o1"
			}), false},
		{"configuration delete", func() string { return ak.Value }, "DELETE", protocol.PathConfigurations + "/base", "", 204,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Org = "configuration.delete", "configuration", "base", "o1"
			}), false},
		{"delegate approve", func() string { return ak.Value }, "POST", protocol.PathDelegates + "/edge/approve", "", 200,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Detail = "delegate.approve", "delegate", "edge", "instances: edge-1"
			}), false},
		{"delegate reject", func() string { return ak.Value }, "POST", protocol.PathDelegates + "/rogue/reject", "", 200,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Detail = "delegate.reject", "delegate", "rogue", "instances: rogue-1"
			}), false},
		{"delegate delete refused", func() string { return ak.Value }, "DELETE", protocol.PathDelegates + "/edge", "", 409,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Outcome, e.Status = "delegate.delete", "delegate", "edge", protocol.AuditFailed, 409
				e.Detail = `delegate "edge" has 1 connected instance (edge-1): stop it first (a delegate that stops with Ctrl-C or SIGTERM deregisters and leaves the listing by itself), or revoke its token to disconnect it (legate token revoke NAME)`
			}), false},
		{"task cancel", func() string { return ak.Value }, "POST", protocol.PathTasks + "/" + task.ID + "/cancel", "", 200,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "task.cancel", "task", task.ID }), false},
		{"user create", func() string { return ak.Value }, "POST", protocol.PathUsers, `{"name":"bob","password":"another secret"}`, 201,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "user.create", "user", "bob" }), false},
		{"user update", func() string { return ak.Value }, "PATCH", protocol.PathUsers + "/bob", `{"disabled":true}`, 200,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "user.update", "user", "bob" }), false},
		{"group create", func() string { return ak.Value }, "POST", protocol.PathGroups, `{"name":"ops"}`, 201,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "group.create", "group", "ops" }), false},
		{"group add member", func() string { return ak.Value }, "POST", protocol.PathGroups + "/ops/members", `{"member":"bob"}`, 204,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Detail = "group.add_member", "group", "ops", "member bob"
			}), false},
		{"group remove member", func() string { return ak.Value }, "DELETE", protocol.PathGroups + "/ops/members/bob", "", 204,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Detail = "group.remove_member", "group", "ops", "member bob"
			}), false},
		{"role create", func() string { return ak.Value }, "POST", protocol.PathRoles, `{"name":"deleters","permissions":["delegate:delete"]}`, 201,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "role.create", "role", "deleters" }), false},
		{"binding create", func() string { return ak.Value }, "POST", protocol.PathBindings, `{"role":"deleters","subject_kind":"group","subject":"ops","org":"o1"}`, 201,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Org, e.Detail = "binding.create", "binding", "deleters", "o1", "group ops"
			}), false},
		{"binding delete", func() string { return ak.Value }, "DELETE", protocol.PathBindings + "?role=deleters&subject_kind=group&subject=ops&org=o1", "", 204,
			with(alice(""), func(e *store.AuditEvent) {
				e.Action, e.ResourceType, e.Resource, e.Org, e.Detail = "binding.delete", "binding", "deleters", "o1", "group ops"
			}), false},
		{"role delete", func() string { return ak.Value }, "DELETE", protocol.PathRoles + "/deleters", "", 204,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "role.delete", "role", "deleters" }), false},
		{"group delete", func() string { return ak.Value }, "DELETE", protocol.PathGroups + "/ops", "", 204,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "group.delete", "group", "ops" }), false},
		{"user delete", func() string { return ak.Value }, "DELETE", protocol.PathUsers + "/bob", "", 204,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "user.delete", "user", "bob" }), false},
		{"API key create", func() string { return ak.Value }, "POST", protocol.PathAPIKeys, `{"name":"spare"}`, 201,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "apikey.create", "apikey", "spare" }), false},
		{"API key revoke", func() string { return ak.Value }, "POST", protocol.PathAPIKeys + "/spare/revoke", `{}`, 200,
			with(alice(""), func(e *store.AuditEvent) { e.Action, e.ResourceType, e.Resource = "apikey.revoke", "apikey", "spare" }), false},
		{"failed sign-in", func() string { return "" }, "POST", protocol.PathSessions, `{"user":"alice","password":"wrong password"}`, 401,
			store.AuditEvent{PrincipalKind: protocol.PrincipalUser, Principal: "alice", Credential: "password", Action: "session.create",
				ResourceType: "session", Address: "127.0.0.1", Outcome: protocol.AuditFailed, Status: 401, Detail: "wrong user name or password"}, false},
		{"sign-in", func() string { return "" }, "POST", protocol.PathSessions, `{"user":"alice","password":"correct horse"}`, 201,
			store.AuditEvent{PrincipalKind: protocol.PrincipalUser, Principal: "alice", Credential: "session", Action: "session.create",
				ResourceType: "session", Address: "127.0.0.1", Outcome: protocol.AuditSuccess, Status: 201}, true},
		{"sign-out", func() string { return session.Token }, "DELETE", protocol.PathSessions, "", 204,
			with(alice("session"), func(e *store.AuditEvent) { e.Action, e.ResourceType = "session.delete", "session" }), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := tm.st.ListAuditEvents(ctx, store.AuditFilter{AccountID: acct, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			status, body := tm.api(t, tc.key(), tc.method, tc.path, tc.body)
			if status != tc.status {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, status, body, tc.status)
			}
			if tc.name == "sign-in" {
				if err := json.Unmarshal([]byte(body), &session); err != nil {
					t.Fatal(err)
				}
			}
			after, err := tm.st.ListAuditEvents(ctx, store.AuditFilter{AccountID: acct, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != len(before)+1 {
				t.Fatalf("%d audit records added, want 1: %+v", len(after)-len(before), after[:len(after)-len(before)])
			}
			want := tc.want
			if want.Outcome == "" {
				want.Outcome, want.Status = protocol.AuditSuccess, tc.status
			}
			got := after[0]
			if tc.sessionCredentialID {
				if !strings.HasPrefix(got.CredentialName, "s_") {
					t.Errorf("credential name %q, want the session's ID", got.CredentialName)
				}
				want.Resource = got.CredentialName
				want.CredentialName = got.CredentialName
			}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(store.AuditEvent{}, "ID", "At", "AccountID", "PrincipalID")); diff != "" {
				t.Errorf("audit record (-want +got):\n%s", diff)
			}
		})
	}

	// No record holds a secret.
	all, err := tm.st.ListAuditEvents(ctx, store.AuditFilter{AccountID: acct, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(all)
	for _, s := range append(secrets, session.Token) {
		if strings.Contains(string(b), s) {
			t.Errorf("the audit log holds a secret (%.6s...)", s)
		}
	}

	// Reads are not audited.
	tm.mustAPI(t, ak.Value, "GET", protocol.PathTokens, "", 200)

	// The API: filters and pages.
	list := func(key, query string) protocol.AuditList {
		t.Helper()
		var l protocol.AuditList
		if err := json.Unmarshal([]byte(tm.mustAPI(t, key, "GET", protocol.PathAudit+query, "", 200)), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	actions := func(l protocol.AuditList) []string {
		out := []string{}
		for _, e := range l.Events {
			out = append(out, e.Action)
		}
		return out
	}
	if diff := cmp.Diff([]string{"token.revoke", "token.revoke", "token.create"}, actions(list(ak.Value, "?resource=token/ci"))); diff != "" {
		t.Errorf("?resource=token/ci (-want +got):\n%s", diff)
	}
	if got := actions(list(ak.Value, "?user=vic")); len(got) != 1 || got[0] != "token.revoke" {
		t.Errorf("?user=vic: %v", got)
	}
	if got := list(ak.Value, "?since=1h&resource=delegate"); len(got.Events) != 3 {
		t.Errorf("?since=1h&resource=delegate: %v", actions(got))
	}
	seen := map[string]bool{}
	next := ""
	for page := 0; ; page++ {
		q := "?limit=7"
		if next != "" {
			q += "&after=" + next
		}
		l := list(ak.Value, q)
		for _, e := range l.Events {
			if seen[e.ID] {
				t.Fatalf("record %s on two pages", e.ID)
			}
			seen[e.ID] = true
		}
		if next = l.Next; next == "" {
			break
		}
		if page > 100 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != len(all) {
		t.Errorf("paging saw %d records, the store holds %d", len(seen), len(all))
	}
	if st, body := tm.api(t, viewer, "GET", protocol.PathAudit, ""); st != http.StatusForbidden {
		t.Errorf("a viewer reads the audit log: %d %s (audit:view is not in the viewer role)", st, body)
	}
	if st, _ := tm.api(t, ak.Value, "GET", protocol.PathAudit+"?since=yesterday", ""); st != http.StatusBadRequest {
		t.Errorf("?since=yesterday: %d, want 400", st)
	}
}

// notAudited are the admin routes that change something and are not
// audited, and why.
var notAudited = map[string]string{
	// Running tasks is the work itself, thousands a second: the task
	// list (legate task list) records who ran what.
	"POST " + protocol.PathTasks: "tasks are their own record",
}

// TestEveryChangingRouteIsAudited: an admin route that is not a GET
// names its audit action (or is listed in notAudited with a reason), and
// no GET does.
func TestEveryChangingRouteIsAudited(t *testing.T) {
	m := &Manager{metrics: &managerMetrics{}}
	for _, rt := range m.routes() {
		if rt.Access() != api.AccessAPIKey {
			continue
		}
		key := rt.Method + " " + rt.Pattern
		_, exempt := notAudited[key]
		switch {
		case rt.Method == "GET" && rt.Audit != "":
			t.Errorf("%s reads and is audited (%s)", key, rt.Audit)
		case rt.Method != "GET" && rt.Audit == "" && !exempt:
			t.Errorf("%s changes something and records no audit event: give it audit: \"RESOURCE.VERB\" in routes()", key)
		case rt.Audit != "" && !strings.Contains(rt.Audit, "."):
			t.Errorf("%s: audit action %q is not RESOURCE.VERB", key, rt.Audit)
		}
	}
}
