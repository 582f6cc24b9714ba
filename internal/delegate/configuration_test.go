package delegate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

func (tm *testManager) createConfiguration(t *testing.T, name, script string, selectors ...string) protocol.Configuration {
	t.Helper()
	c, err := tm.api.CreateConfiguration(context.Background(), protocol.CreateConfigurationRequest{Name: name, Script: script, Selectors: selectors})
	if err != nil {
		t.Fatalf("create configuration %s: %v", name, err)
	}
	return c
}

// describeInstance returns the describe entry of the test delegate on host.
func (tm *testManager) describeInstance(t *testing.T, host string) protocol.DelegateDetail {
	t.Helper()
	in, err := tm.findInstance(host)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (tm *testManager) findInstance(host string) (protocol.DelegateDetail, error) {
	d, err := tm.api.DescribeDelegate(context.Background(), "test-delegate")
	if err != nil {
		return protocol.DelegateDetail{}, fmt.Errorf("describe: %w", err)
	}
	for _, in := range d.Instances {
		if in.Hostname == host {
			return in, nil
		}
	}
	return protocol.DelegateDetail{}, fmt.Errorf("describe: no instance on %s", host)
}

// waitConfigured waits until describe shows a finished run of version v of
// the configuration on host.
func (tm *testManager) waitConfigured(t *testing.T, host, name string, v int64) protocol.ConfigurationResult {
	t.Helper()
	var res protocol.ConfigurationResult
	eventually(t, fmt.Sprintf("%s ran configuration %s v%d", host, name, v), func() (bool, string) {
		in, err := tm.findInstance(host)
		if err != nil {
			return false, err.Error()
		}
		if in.ConfigurationResult == nil {
			return false, "no result"
		}
		res = *in.ConfigurationResult
		return res.Name == name && res.Version == v && in.Configuring == "", fmt.Sprintf("%+v configuring=%q", res, in.Configuring)
	})
	return res
}

func TestInitScriptRunsBeforeTheDelegateConnects(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{
		initScript:  "echo hello from init\necho to stderr >&2\nprintf '%s' \"$DELEGATE_TOKEN\" > token-seen\necho prepared > prepared.txt",
		description: "the init test box",
	})
	d := tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
	if d.Description != "the init test box" {
		t.Errorf("description = %q", d.Description)
	}
	b, err := os.ReadFile(filepath.Join(ag.workDir, "prepared.txt"))
	if err != nil || string(b) != "prepared\n" {
		t.Fatalf("INIT_SCRIPT did not run in the working directory: %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ag.workDir, "token-seen")); len(b) != 0 {
		t.Errorf("INIT_SCRIPT saw the delegate token")
	}
	for _, want := range []string{"hello from init", "to stderr"} {
		if lines := ag.logs.lines("INIT_SCRIPT", "line=", want); len(lines) != 1 {
			t.Errorf("log lines with %q: %q, want one", want, lines)
		}
	}
	// A task sees what INIT_SCRIPT prepared (tasks run in WORKDIR/tasks/ID).
	task := tm.submitScript(t, "cat ../../prepared.txt")
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	if out, _, _ := tm.logs(t, task.ID, false); out != "prepared\n" {
		t.Errorf("task output %q", out)
	}
}

func TestFailingInitScriptStopsTheDelegate(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	tests := []struct {
		name, script string
		timeout      time.Duration
		want         string
	}{
		{"exit code", "echo about to fail\nexit 3", 0, "INIT_SCRIPT failed with exit code 3"},
		{"timeout", "sleep 30", 300 * time.Millisecond, "INIT_SCRIPT did not finish within 300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ag := startAgent(t, tm, agentOpts{initScript: tt.script, scriptTimeout: tt.timeout})
			err := ag.mustReturn(t)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run returned %v, want an error with %q", err, tt.want)
			}
			if _, ok := tm.delegateByHost(t, ag.hostname); ok {
				t.Errorf("the delegate registered although INIT_SCRIPT failed")
			}
		})
	}
}

// A configuration that matches runs after registration, describe shows its
// result, and an update runs it again on the connected delegate,
// over the WebSocket and when polling.
func TestConfigurationRunsAtStartAndOnUpdate(t *testing.T) {
	t.Parallel()
	for _, poll := range []bool{false, true} {
		t.Run(fmt.Sprintf("poll=%v", poll), func(t *testing.T) {
			t.Parallel()
			tm := startManager(t, testConfig())
			tm.createConfiguration(t, "tools", "echo configuring $LEGATE_CONFIGURATION v$LEGATE_CONFIGURATION_VERSION\necho v1 > tool.txt", "linux")
			ag := startAgent(t, tm, agentOpts{poll: poll, tags: []string{"linux"}})
			res := tm.waitConfigured(t, ag.hostname, "tools", 1)
			if res.ExitCode == nil || *res.ExitCode != 0 || res.Output != "configuring tools v1\n" || res.Error != "" {
				t.Errorf("result %+v", res)
			}
			task := tm.submitScript(t, "cat ../../tool.txt")
			tm.waitTask(t, task.ID, protocol.StatusSucceeded)
			if out, _, _ := tm.logs(t, task.ID, false); out != "v1\n" {
				t.Errorf("task output %q", out)
			}
			conn := protocol.ConnWebSocket
			if poll {
				conn = protocol.ConnPolling
			}
			if d := tm.waitConnected(t, ag.hostname, conn); d.Configuration != "tools" {
				t.Errorf("listing names configuration %q", d.Configuration)
			}

			script := "echo v2 > tool.txt\necho second run; exit 4"
			if _, err := tm.api.UpdateConfiguration(context.Background(), "tools", protocol.UpdateConfigurationRequest{Script: &script}); err != nil {
				t.Fatal(err)
			}
			res = tm.waitConfigured(t, ag.hostname, "tools", 2)
			if res.ExitCode == nil || *res.ExitCode != 4 || res.Output != "second run\n" || !strings.Contains(res.Error, "exit status 4") {
				t.Errorf("result after update %+v", res)
			}
			if in := tm.describeInstance(t, ag.hostname); in.ConfigurationApplies == nil || in.ConfigurationApplies.Version != 2 {
				t.Errorf("describe: applies %+v", in.ConfigurationApplies)
			}
			if n := len(ag.logs.lines("running delegate configuration")); n != 2 {
				t.Errorf("the configuration ran %d times, want 2", n)
			}
		})
	}
}

// The most specific configuration wins; one that does not match is not
// run; deleting the winner makes the next one apply.
func TestConfigurationMatching(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	tm.createConfiguration(t, "gpu-only", "echo gpu", "gpu")
	tm.createConfiguration(t, "all", "echo all")
	tm.createConfiguration(t, "linux-docker", "echo linux-docker", "linux", "docker")
	tm.createConfiguration(t, "b-linux", "echo b", "linux")
	tm.createConfiguration(t, "a-linux", "echo a", "LINUX")
	ag := startAgent(t, tm, agentOpts{tags: []string{"linux", "docker"}})
	plain := startAgent(t, tm, agentOpts{})
	if res := tm.waitConfigured(t, ag.hostname, "linux-docker", 1); res.Output != "linux-docker\n" {
		t.Errorf("result %+v", res)
	}
	tm.waitConfigured(t, plain.hostname, "all", 1)

	if err := tm.api.DeleteConfiguration(context.Background(), "linux-docker"); err != nil {
		t.Fatal(err)
	}
	// Equal selectors: the first by name.
	if res := tm.waitConfigured(t, ag.hostname, "a-linux", 1); res.Output != "a\n" {
		t.Errorf("result %+v", res)
	}
	if n := len(ag.logs.lines("configuration=gpu-only")) + len(plain.logs.lines("configuration=gpu-only")); n != 0 {
		t.Errorf("a non-matching configuration ran")
	}
	if n := len(plain.logs.lines("running delegate configuration")); n != 1 {
		t.Errorf("the delete re-ran an unchanged configuration on another delegate (%d runs)", n)
	}
}

// A delegate runs its configuration before it takes any task: a task
// submitted while the script runs at start waits (explained by the
// configuring rule) and then sees the script's effect.
func TestNoTasksWhileConfiguring(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	marker := filepath.Join(t.TempDir(), "go")
	tm.createConfiguration(t, "slow", waitMarkerScript(marker)+"echo ready > ready.txt\n")
	ag := startAgent(t, tm, agentOpts{})
	tm.waitDelegate(t, ag.hostname, "configuring", func(d protocol.Delegate) bool {
		return d.Status == protocol.DelegateConnected && d.Configuring == "slow v1"
	})
	task := tm.submitScript(t, "cat ../../ready.txt")
	explain, err := tm.api.ExplainTask(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(explain.Delegates) != 1 || len(explain.Delegates[0].Reasons) != 1 || explain.Delegates[0].Reasons[0].Rule != protocol.RuleConfiguring {
		t.Errorf("explanation %+v, want the configuring rule", explain)
	}
	if got := tm.task(t, task.ID); got.Status != protocol.StatusQueued {
		t.Errorf("task %s while configuring, want queued", got.Status)
	}
	touch(t, marker)
	tm.waitConfigured(t, ag.hostname, "slow", 1)
	tm.waitTask(t, task.ID, protocol.StatusSucceeded)
	if out, _, _ := tm.logs(t, task.ID, false); out != "ready\n" {
		t.Errorf("task output %q", out)
	}
}
