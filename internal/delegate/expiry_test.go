package delegate_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/cli"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestVersionExpiryWarned: a manager of v1.3.2 accepts v1.2.0 on, and
// its next minor version, v1.4, refuses everything before v1.3.0. A
// delegate of v1.2.0 is told at registration, logs a warning naming
// v1.4, and the delegates list and describe show it; a delegate of
// v1.3.0 is neither warned nor marked.
func TestVersionExpiryWarned(t *testing.T) {
	cfg := testConfig()
	cfg.Version = "v1.3.2"
	tm := startManager(t, cfg)
	old := startAgent(t, tm, agentOpts{version: "v1.2.0"})
	cur := startAgent(t, tm, agentOpts{version: "v1.3.0"})
	tm.waitConnected(t, old.hostname, protocol.ConnWebSocket)
	tm.waitConnected(t, cur.hostname, protocol.ConnWebSocket)

	const warning = "will be refused by the manager's next minor version"
	if lines := old.logs.lines("level=WARN", warning, "version=v1.2.0", "refused_from=v1.4"); len(lines) != 1 {
		t.Errorf("the v1.2.0 delegate's warnings: %q; want one naming v1.4", old.logs.lines(warning))
	}
	if lines := cur.logs.lines(warning); len(lines) != 0 {
		t.Errorf("the v1.3.0 delegate was warned: %q", lines)
	}
	if d, _ := tm.delegateByHost(t, old.hostname); d.RefusedFrom != "v1.4" {
		t.Errorf("listed v1.2.0 delegate: refused_from %q, want v1.4", d.RefusedFrom)
	}
	if d, _ := tm.delegateByHost(t, cur.hostname); d.RefusedFrom != "" {
		t.Errorf("listed v1.3.0 delegate: refused_from %q, want none", d.RefusedFrom)
	}

	run := func(args ...string) string {
		t.Helper()
		root := &cobra.Command{Use: "legate", SilenceUsage: true, SilenceErrors: true}
		cli.AddCommands(root, cli.BuildInfo{})
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(args, "--url", tm.url, "--api-key", tm.admin.APIKey))
		if err := root.ExecuteContext(t.Context()); err != nil {
			t.Fatalf("legate %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	list := run("delegates", "list")
	for _, line := range strings.Split(list, "\n") {
		switch {
		case strings.Contains(line, old.hostname) && !strings.Contains(line, "v1.2.0 (refused from v1.4)"):
			t.Errorf("delegates list, v1.2.0 delegate not marked:\n%s", list)
		case strings.Contains(line, cur.hostname) && strings.Contains(line, "refused from"):
			t.Errorf("delegates list, v1.3.0 delegate marked:\n%s", list)
		}
	}
	if out := run("delegates", "describe", "test-delegate"); !strings.Contains(out, "a manager of v1.4 or later refuses this version") {
		t.Errorf("delegates describe does not say when v1.2.0 is refused:\n%s", out)
	}
}
