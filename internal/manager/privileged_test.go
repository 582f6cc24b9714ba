package manager

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
)

// The attack: a project user with task:run submits a privileged container
// that mounts the host's / . It needs task:privileged, which no built-in
// role below account admin has; so do added capabilities and host paths
// alone, and a pipeline whose step asks for them.
func TestPrivilegedContainerNeedsPermission(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathOrgs, `{"name":"o1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathOrgs+"/o1/projects", `{"name":"p1"}`, 201)
	dev := tm.userKey(t, "dev", access.RoleProjectAdmin, access.Scope{Org: "o1", Project: "p1"})
	orgAdmin := tm.userKey(t, "oa", access.RoleOrgAdmin, access.Scope{Org: "o1"})
	ops := tm.userKey(t, "ops", access.RoleAccountAdmin, access.Scope{Org: "o1", Project: "p1"})
	task := func(container string) string {
		return `{"type":"container","org":"o1","project":"p1","container":{"image":"img",` + container + `}}`
	}
	attack := task(`"script":"touch /host/pwned","security_context":{"privileged":true},
		"volumes":[{"name":"root","mount_path":"/host","host_path":{"path":"/"}}]`)
	for name, key := range map[string]string{"project admin": dev, "org admin": orgAdmin} {
		st, b := tm.api(t, key, "POST", protocol.PathTasks, attack)
		if st != 403 || !strings.Contains(b, "task:privileged") {
			t.Errorf("%s: privileged container with host_path /: %d %s; want 403 naming task:privileged", name, st, b)
		}
	}
	for _, c := range []string{
		`"volumes":[{"name":"h","mount_path":"/h","host_path":{"path":"/data"}}]`,
		`"security_context":{"add_capability":["SYS_ADMIN"]}`,
	} {
		if st, b := tm.api(t, dev, "POST", protocol.PathTasks, task(c)); st != 403 || !strings.Contains(b, "task:privileged") {
			t.Errorf("%s: %d %s; want 403 naming task:privileged", c, st, b)
		}
	}
	// An ordinary container, and capabilities the runtime gives anyway,
	// need task:run alone.
	tm.mustAPI(t, dev, "POST", protocol.PathTasks, task(`"security_context":{"drop_capability":["ALL"],"add_capability":["CHOWN"]}`), 201)
	// With the permission the task is accepted; the delegate's policy
	// decides next (internal/executor, internal/delegate).
	tm.mustAPI(t, ops, "POST", protocol.PathTasks, attack, 201)

	// A pipeline's container step asks the same of whoever runs it.
	pipe := "name: priv\nstages:\n  - name: s\n    steps:\n      - name: root\n        container:\n          image: img\n" +
		"          security_context:\n            privileged: true\n"
	body, _ := json.Marshal(map[string]string{"source": pipe, "org": "o1", "project": "p1"})
	tm.mustAPI(t, admin, "POST", protocol.PathPipelines, string(body), 200, 201)
	if st, b := tm.api(t, dev, "POST", protocol.PathPipelines+"/priv/runs?org=o1&project=p1", `{}`); st != 403 || !strings.Contains(b, "task:privileged") {
		t.Errorf("pipeline run with a privileged step: %d %s; want 403 naming task:privileged", st, b)
	}
}
