package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestDeploymentLimitsCLI: legate limits shows the manager's defaults
// (its flags), legate limits set changes the account's own and refuses
// bad values with a usage error, a viewer may read but not set them, and
// legate deployments list answers (no deployment yet: a run of a
// deployment stage records them, the pipeline engine's tests cover that).
func TestDeploymentLimitsCLI(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "--deployments-per-hour", "7", "--deployments-per-day", "0")
	out := c.mustCLI("limits")
	for _, want := range []string{"per hour", "7", "per 24 hours", "unlimited", "free now", "Limits: the manager's defaults."} {
		if !strings.Contains(out, want) {
			t.Errorf("legate limits: no %q in\n%s", want, out)
		}
	}
	var l protocol.DeploymentLimits
	if err := json.Unmarshal([]byte(c.mustCLI("limits", "set", "--per-day", "300", "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(protocol.DeploymentLimits{PerHour: protocol.LimitUsage{Limit: 7}, PerDay: protocol.LimitUsage{Limit: 300},
		DefaultPerHour: 7, Custom: true, Now: l.Now}, l); diff != "" {
		t.Errorf("limits set (-want +got):\n%s", diff)
	}
	if out := c.mustCLI("limits"); !strings.Contains(out, "the account's own (the manager's defaults: 7 per hour, unlimited per 24 hours)") {
		t.Errorf("legate limits after set:\n%s", out)
	}
	for _, args := range [][]string{{"limits", "set"}, {"limits", "set", "--per-hour", "-1"}} {
		if r := c.cli(args...); r.code != 2 || r.stderr == "" {
			t.Errorf("legate %v: exit %d, stderr %q; want a usage error (2)", args, r.code, r.stderr)
		}
	}
	c.mustCLI("user", "create", "vera")
	c.mustCLI("role", "bind", "viewer", "--user", "vera")
	key := c.newAPIKeyFor("vk", "vera")
	viewer := []string{"LEGATE_API_KEY=" + key}
	if r := c.cliEnv(viewer, "limits"); r.code != 0 {
		t.Errorf("a viewer reads the limits: exit %d %s", r.code, r.stderr)
	}
	if r := c.cliEnv(viewer, "limits", "set", "--per-hour", "1000"); r.code == 0 || !strings.Contains(r.stderr, "user:manage") {
		t.Errorf("a viewer sets the limits: exit %d %s", r.code, r.stderr)
	}
	if r := c.cli("deployments", "list"); r.code != 0 || !strings.Contains(r.stderr, "No deployments match.") {
		t.Errorf("legate deployments list: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if out := c.mustCLI("deployments", "list", "--service", "api", "-o", "json"); strings.TrimSpace(out) != "{\n  \"deployments\": []\n}" {
		t.Errorf("legate deployments list -o json: %q", out)
	}
}
