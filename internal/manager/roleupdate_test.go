package manager

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// A custom role changed in place takes effect for the users bound to it on
// their next request, though their policies are cached for an hour: a
// user refused the audit log is allowed it once the role gains audit:view,
// and refused again once it loses it. The change is audited with what it
// added and removed; built-in roles, unknown permissions and unknown
// roles are refused with what to do.
func TestRoleUpdateTakesEffectAtOnce(t *testing.T) {
	tm := startTestManager(t, Config{APIKeyCacheTTL: time.Hour})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"auditor","description":"reads","permissions":["task:view"]}`, 201)
	key := tm.userKey(t, "audra", "auditor", access.Scope{})
	role := protocol.PathRoles + "/auditor"

	if st, body := tm.api(t, key, "GET", protocol.PathAudit, ""); st != http.StatusForbidden {
		t.Fatalf("before the update the auditor reads the audit log: %d %s", st, body)
	}
	var got protocol.Role
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "PATCH", role, `{"permissions":["task:view","audit:view"]}`, 200)), &got); err != nil {
		t.Fatal(err)
	}
	if got.Description != "reads" || strings.Join(got.Permissions, " ") != "task:view audit:view" {
		t.Errorf("updated role %+v, want the description kept and the new permissions", got)
	}
	tm.mustAPI(t, key, "GET", protocol.PathAudit, "", 200)
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", role, "", 200)), &got); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Permissions, " ") != "task:view audit:view" {
		t.Errorf("role reads back %+v", got)
	}

	// The reverse, and the description alone.
	tm.mustAPI(t, admin, "PATCH", role, `{"description":"reads tasks","permissions":["task:view"]}`, 200)
	if st, body := tm.api(t, key, "GET", protocol.PathAudit, ""); st != http.StatusForbidden {
		t.Fatalf("after audit:view was removed the auditor reads the audit log: %d %s", st, body)
	}

	var l protocol.AuditList
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathAudit, "", 200)), &l); err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, e := range l.Events {
		if e.Action == "role.update" && e.Outcome == protocol.AuditSuccess {
			if e.Resource != "auditor" {
				t.Errorf("role.update names %q, want auditor", e.Resource)
			}
			details = append(details, e.Detail)
		}
	}
	want := []string{"removed audit:view; description changed", "added audit:view"} // newest first
	if strings.Join(details, " | ") != strings.Join(want, " | ") {
		t.Errorf("role.update details %q, want %q", details, want)
	}

	for _, c := range []struct {
		what, path, body string
		status           int
		says             []string
	}{
		{"a built-in role", protocol.PathRoles + "/viewer", `{"permissions":["task:view"]}`, http.StatusConflict, []string{"built-in", "cannot be changed", "custom role"}},
		{"an unknown permission", role, `{"permissions":["task:view","task:fly"]}`, http.StatusBadRequest, []string{"task:fly", "view, run"}},
		{"an unknown resource", role, `{"permissions":["spaceship:view"]}`, http.StatusBadRequest, []string{"spaceship", "resources are delegate"}},
		{"no permissions", role, `{"permissions":[]}`, http.StatusBadRequest, []string{"at least one permission"}},
		{"nothing", role, `{}`, http.StatusBadRequest, []string{"nothing to change"}},
		{"an unknown role", protocol.PathRoles + "/nobody", `{"permissions":["task:view"]}`, http.StatusNotFound, []string{"nobody", "legate role list"}},
	} {
		st, body := tm.api(t, admin, "PATCH", c.path, c.body)
		if st != c.status {
			t.Errorf("%s: %d %s, want %d", c.what, st, body, c.status)
		}
		for _, s := range c.says {
			if !strings.Contains(body, s) {
				t.Errorf("%s: %s does not say %s", c.what, body, s)
			}
		}
	}
	if st, body := tm.api(t, key, "PATCH", role, `{"permissions":["user:manage"]}`); st != http.StatusForbidden {
		t.Errorf("a user without user:manage changes a role: %d %s", st, body)
	}
}

// A role changed on one manager reaches the users bound to it on another,
// whose cached policies the change drops by broadcast.
func TestRoleUpdateReachesTheOtherManager(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg := Config{APIKeyCacheTTL: time.Hour}
	tms := startTestManagers(t, dsn, cfg, cfg)
	a, b := tms[0], tms[1]
	a.mustAPI(t, a.admin.APIKey, "POST", protocol.PathRoles, `{"name":"auditor","permissions":["task:view"]}`, 201)
	key := a.userKey(t, "audra", "auditor", access.Scope{})
	b.mustAPI(t, key, "GET", protocol.PathAudit, "", 403) // B caches audra's policy
	eventually(t, 10*time.Second, "manager B listening", func() bool { return b.m.bus.Listening() })
	a.mustAPI(t, a.admin.APIKey, "PATCH", protocol.PathRoles+"/auditor", `{"permissions":["task:view","audit:view"]}`, 200)
	eventually(t, 10*time.Second, "manager B allowing the role's new permission", func() bool {
		st, _ := b.api(t, key, "GET", protocol.PathAudit, "")
		return st == http.StatusOK
	})
}

// add_permissions and remove_permissions edit a role's current list in
// the manager's own write: wildcards expand as on create (so removing
// pipeline:* removes the expanded permissions stored), the audit says what
// changed, and a permission the role lacks, an empty result, an unknown
// permission and a mix with the whole list are refused with what to do.
func TestRoleUpdateAddRemovePermissions(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["task:view","pipeline:*"]}`, 201)
	role := protocol.PathRoles + "/runner"
	var got protocol.Role
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "PATCH", role, `{"add_permissions":["audit:view","task:view"],"remove_permissions":["pipeline:*"]}`, 200)), &got); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Permissions, " ") != "task:view audit:view" {
		t.Errorf("after add audit:view, remove pipeline:*: %v", got.Permissions)
	}
	var l protocol.AuditList
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathAudit+"?action=role.update", "", 200)), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Events) == 0 || !strings.HasPrefix(l.Events[0].Detail, "added audit:view; removed pipeline:") {
		t.Errorf("role.update audit: %+v", l.Events)
	}
	for _, c := range []struct {
		what, body string
		says       []string
	}{
		{"a permission the role lacks", `{"remove_permissions":["delegate:view"]}`, []string{"role runner has no permission delegate:view", "task:view, audit:view"}},
		{"every permission", `{"remove_permissions":["task:view","audit:view"]}`, []string{"at least one", "legate role delete runner"}},
		{"an unknown permission", `{"add_permissions":["task:fly"]}`, []string{"task:fly", "view, run"}},
		{"both forms", `{"permissions":["task:view"],"add_permissions":["audit:view"]}`, []string{"not both"}},
	} {
		st, body := tm.api(t, admin, "PATCH", role, c.body)
		if st != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", c.what, st, body)
		}
		for _, s := range c.says {
			if !strings.Contains(body, s) {
				t.Errorf("%s: %s does not say %s", c.what, body, s)
			}
		}
	}
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", role, "", 200)), &got); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Permissions, " ") != "task:view audit:view" {
		t.Errorf("refused edits changed the role: %v", got.Permissions)
	}
}
