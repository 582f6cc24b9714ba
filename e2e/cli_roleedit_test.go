package e2e

import (
	"strings"
	"testing"
)

// TestRoleEditWildcardCLI: --remove-permission resource:* removes the
// permissions it expands to, though the role stores them expanded, and
// --add-permission resource:* adds them all.
func TestRoleEditWildcardCLI(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.mustCLI("role", "create", "runner", "--permission", "task:view", "--permission", "pipeline:*")
	c.mustCLI("role", "update", "runner", "--remove-permission", "pipeline:*", "--add-permission", "audit:view")
	if r := c.roleOf("runner"); strings.Join(r.Permissions, ",") != "task:view,audit:view" {
		t.Errorf("role after --remove-permission pipeline:*: %+v", r)
	}
	c.mustCLI("role", "update", "runner", "--add-permission", "pipeline:*")
	if r := c.roleOf("runner"); !strings.HasPrefix(strings.Join(r.Permissions, ","), "task:view,audit:view,pipeline:") {
		t.Errorf("role after --add-permission pipeline:*: %+v", r)
	}
	r := c.cli("role", "update", "runner", "--remove-permission", "task:view", "--remove-permission", "audit:view", "--remove-permission", "pipeline:*")
	if r.code == 0 || !strings.Contains(r.stderr, "at least one") {
		t.Errorf("removing every permission: exit %d, stderr %q", r.code, r.stderr)
	}
}
