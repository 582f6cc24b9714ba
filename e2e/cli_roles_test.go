package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// roleOf reads a role through `legate role get NAME -o json`.
func (c *cluster) roleOf(name string) protocol.Role {
	c.t.Helper()
	var r protocol.Role
	if err := json.Unmarshal([]byte(c.mustCLI("role", "get", name, "-o", "json")), &r); err != nil {
		c.t.Fatalf("role get %s -o json: %v", name, err)
	}
	return r
}

// TestRoleUpdateCLI: `legate role update` changes a custom role in place
// and a signed-in user bound to it gets the change on their next command,
// both ways; the change is audited with what it added and removed. A
// built-in role, an unknown permission and contradictory flags are
// refused with what to do.
func TestRoleUpdateCLI(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.mustCLI("role", "create", "auditor", "--permission", "task:view", "--description", "reads tasks")
	ada := c.newUser("ada", "correct horse battery")
	c.mustCLI("role", "bind", "auditor", "--user", "ada")
	wantRefused(t, "ada reads the audit log before", ada.cli("audit", "list"), "audit:view", "account")

	out := c.mustCLI("role", "update", "auditor", "--add-permission", "audit:view")
	if !strings.Contains(out, "Updated role auditor: task:view, audit:view") {
		t.Errorf("role update says %q", out)
	}
	if r := c.roleOf("auditor"); strings.Join(r.Permissions, ",") != "task:view,audit:view" || r.Description != "reads tasks" {
		t.Errorf("role after --add-permission: %+v", r)
	}
	ada.mustCLI("audit", "list")

	c.mustCLI("role", "update", "auditor", "--remove-permission", "audit:view", "--description", "tasks only")
	if r := c.roleOf("auditor"); strings.Join(r.Permissions, ",") != "task:view" || r.Description != "tasks only" {
		t.Errorf("role after --remove-permission: %+v", r)
	}
	wantRefused(t, "ada reads the audit log after", ada.cli("audit", "list"), "audit:view", "account")

	c.mustCLI("role", "update", "auditor", "--permission", "task:view", "--permission", "delegate:view")
	if r := c.roleOf("auditor"); strings.Join(r.Permissions, ",") != "task:view,delegate:view" {
		t.Errorf("role after --permission: %+v", r)
	}

	var l protocol.AuditList
	if err := json.Unmarshal([]byte(c.mustCLI("audit", "list", "--action", "role.update", "-o", "json")), &l); err != nil {
		t.Fatalf("audit list -o json: %v", err)
	}
	events := l.Events
	var details []string
	for _, e := range events {
		details = append(details, e.Resource+": "+e.Detail)
	}
	want := "auditor: added delegate:view | auditor: removed audit:view; description changed | auditor: added audit:view"
	if strings.Join(details, " | ") != want {
		t.Errorf("role.update records %q, want %q", strings.Join(details, " | "), want)
	}

	for _, tc := range []struct {
		what string
		args []string
		says []string
	}{
		{"a built-in role", []string{"role", "update", "viewer", "--add-permission", "audit:view"}, []string{"built-in", "cannot be changed", "custom role"}},
		{"an unknown permission", []string{"role", "update", "auditor", "--permission", "task:fly"}, []string{"task:fly", "view, run"}},
		{"both kinds of flag", []string{"role", "update", "auditor", "--permission", "task:view", "--add-permission", "audit:view"}, []string{"not both"}},
		{"no flag", []string{"role", "update", "auditor"}, []string{"nothing to change"}},
		{"removing what it lacks", []string{"role", "update", "auditor", "--remove-permission", "org:edit"}, []string{"has no permission org:edit", "task:view"}},
		{"an unknown role", []string{"role", "update", "nobody", "--permission", "task:view"}, []string{"nobody"}},
	} {
		r := c.cli(tc.args...)
		if r.code == 0 {
			t.Errorf("%s: exit 0, stdout %q", tc.what, r.stdout)
		}
		for _, s := range tc.says {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("%s: stderr %q does not say %q", tc.what, r.stderr, s)
			}
		}
	}
	wantRefused(t, "ada changes a role", ada.cli("role", "update", "auditor", "--permission", "user:manage"), "user:manage", "account")
}
