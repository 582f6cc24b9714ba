package cli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// outputManager is a fake manager with one of everything.
func outputManager(t *testing.T) *fakeManager {
	t.Helper()
	m := newFakeManager(t, outcomeSpec{chunks: []string{"hi\n"}, status: protocol.StatusFailed, exitCode: intp(3),
		errText: "exit status 3\nsecond line"})
	hb := testNow.Add(-3 * time.Second)
	m.delegates = []protocol.Delegate{
		{InstanceID: "i1", Name: "east", Hostname: "host-a", Tags: []string{"linux"}, Status: protocol.DelegateConnected, Type: "shell",
			TokenName: "ci", Connection: protocol.ConnWebSocket, LastHeartbeat: &hb, RegisteredAt: testNow.Add(-time.Hour),
			Description: strings.Repeat("long description ", 4)},
		{InstanceID: "i2", Name: "east", Hostname: "host-b", Status: protocol.DelegateConnected, RegisteredAt: testNow.Add(-time.Hour)},
		{InstanceID: "i3", Name: "west", Hostname: "host-c", Status: protocol.DelegateDisconnected, RegisteredAt: testNow.Add(-time.Hour)},
	}
	for _, args := range [][]string{
		{"token", "create", "ci"}, {"org", "create", "eng"}, {"project", "create", "--org", "eng", "web"},
		{"task", "run", "--script", "echo hi\nexit 3", "--selector", "linux", "--env", "STAGE=prod"},
	} {
		if r := runCLI(t.Context(), m.env(), "", args...); r.err != nil && exitCodeOf(t, r.err) != 3 {
			t.Fatalf("%v: %v %s", args, r.err, r.stderr)
		}
	}
	m.explanations["t_1"] = protocol.Explanation{TaskID: "t_1", Status: protocol.StatusQueued, Summary: "no delegate can run this task",
		Delegates: []protocol.DelegateVerdict{{InstanceID: "i3", Name: "west", Hostname: "host-c",
			Reasons: []protocol.Reason{{Rule: protocol.RuleSelectors, Message: "missing selectors: linux"}}}}}
	return m
}

// TestOutputName: -o name prints one name (or ID) per line.
func TestOutputName(t *testing.T) {
	t.Parallel()
	m := outputManager(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"token", "list"}, "ci\n"},
		{[]string{"apikey", "list"}, "admin\n"},
		{[]string{"org", "list"}, "eng\n"},
		{[]string{"project", "list"}, "eng/web\n"},
		{[]string{"delegates", "list"}, "east\nwest\n"},
		{[]string{"task", "list"}, "t_1\n"},
		{[]string{"task", "get", "t_1"}, "t_1\n"},
		{[]string{"connector", "list"}, ""},
		{[]string{"configuration", "list"}, ""},
	}
	for _, tt := range tests {
		r := runCLI(t.Context(), m.env(), "", append(tt.args, "-o", "name")...)
		if r.err != nil || r.stdout != tt.want || r.stderr != "" {
			t.Errorf("%v -o name: err %v, stdout %q (want %q), stderr %q", tt.args, r.err, r.stdout, tt.want, r.stderr)
		}
	}
}

// TestOutputWide: -o wide adds the columns the table leaves out.
func TestOutputWide(t *testing.T) {
	t.Parallel()
	m := outputManager(t)
	r := runCLI(t.Context(), m.env(), "", "task", "list", "-o", "wide")
	want := "ID   STATUS  PRIORITY  TYPE   EXIT  DELEGATE  CREATED  DURATION  HOSTNAME  SCOPE    SELECTORS  ATTEMPTS  CREATED-BY  ERROR\n" +
		"t_1  failed  normal    shell  3     d1        0s ago   1.5s      host1     account  linux      0         -           exit status 3\n"
	if d := cmp.Diff(want, r.stdout); r.err != nil || d != "" {
		t.Errorf("task list -o wide: err %v (-want +got):\n%s", r.err, d)
	}
	r = runCLI(t.Context(), m.env(), "", "delegates", "list", "-o", "wide")
	for _, w := range []string{"INSTANCE-ID", "TOKEN", "REGISTERED", "i1", "shell", "ci", "1h ago", strings.TrimSpace(strings.Repeat("long description ", 4))} {
		if r.err != nil || !strings.Contains(r.stdout, w) {
			t.Errorf("delegates list -o wide lacks %q: err %v\n%s", w, r.err, r.stdout)
		}
	}
	r = runCLI(t.Context(), m.env(), "", "task", "get", "t_1", "-o", "wide")
	for _, w := range []string{"Env:            STAGE=prod", "Script:\n  echo hi\n  exit 3\n"} {
		if r.err != nil || !strings.Contains(r.stdout, w) {
			t.Errorf("task get -o wide lacks %q: err %v\n%s", w, r.err, r.stdout)
		}
	}
	r = runCLI(t.Context(), m.env(), "", "task", "explain", "t_1", "-o", "wide")
	if r.err != nil || !strings.Contains(r.stdout, "INSTANCE-ID") || !strings.Contains(r.stdout, "i3") {
		t.Errorf("task explain -o wide: err %v\n%s", r.err, r.stdout)
	}
	for _, args := range [][]string{{"token", "list"}, {"apikey", "list"}, {"org", "list"}, {"project", "list"}} {
		r := runCLI(t.Context(), m.env(), "", append(args, "-o", "wide")...)
		if r.err != nil || !strings.Contains(r.stdout, "CREATED-AT") || !strings.Contains(r.stdout, "2026-11-22T") {
			t.Errorf("%v -o wide: err %v\n%s", args, r.err, r.stdout)
		}
	}
}

// TestOutputJSONAndYAML: -o json is --json, and -o yaml reads back as the
// same value.
func TestOutputJSONAndYAML(t *testing.T) {
	t.Parallel()
	m := outputManager(t)
	for _, args := range [][]string{
		{"token", "list"}, {"apikey", "list"}, {"org", "list"}, {"project", "list"}, {"delegates", "list"}, {"task", "list"},
		{"task", "get", "t_1"}, {"task", "explain", "t_1"}, {"connector", "list"}, {"configuration", "list"},
	} {
		j := runCLI(t.Context(), m.env(), "", append(args, "--json")...)
		oj := runCLI(t.Context(), m.env(), "", append(args, "-o", "json")...)
		y := runCLI(t.Context(), m.env(), "", append(args, "-o", "yaml")...)
		if j.err != nil || oj.err != nil || y.err != nil {
			t.Fatalf("%v: %v / %v / %v", args, j.err, oj.err, y.err)
		}
		if j.stdout != oj.stdout {
			t.Errorf("%v: --json and -o json differ:\n%s\n%s", args, j.stdout, oj.stdout)
		}
		if !json.Valid([]byte(j.stdout)) {
			t.Errorf("%v --json: not JSON:\n%s", args, j.stdout)
		}
		checkRoundTrip(t, []byte(j.stdout), []byte(y.stdout))
	}
	r := runCLI(t.Context(), m.env(), "", "task", "list", "-o", "yaml")
	if !strings.HasPrefix(r.stdout, "tasks:\n  - id: t_1\n    account_id: \"\"\n    type: shell\n    status: failed\n    exit_code: 3\n    error: |-\n      exit status 3\n      second line\n") {
		t.Errorf("task list -o yaml:\n%s", r.stdout)
	}
}

// TestOutputFlagErrors: an unknown format, or --json with another -o, is
// a usage error that names the formats.
func TestOutputFlagErrors(t *testing.T) {
	t.Parallel()
	m := outputManager(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"task", "list", "-o", "xml"}, "-o xml: want json, yaml, wide, name"},
		{[]string{"task", "list", "--json", "-o", "yaml"}, "--json is -o json: it cannot go with -o yaml"},
		{[]string{"token", "create", "x", "-o", "wide"}, "-o wide: want json, yaml"},
		{[]string{"delegates", "describe", "east", "-o", "name"}, "-o name: want json, yaml"},
	}
	for _, tt := range tests {
		r := runCLI(t.Context(), m.env(), "", tt.args...)
		var ue usageError
		if !errors.As(r.err, &ue) || r.err.Error() != tt.want {
			t.Errorf("%v: err %v, want usage error %q", tt.args, r.err, tt.want)
		}
	}
	// Both spellings agree.
	r := runCLI(t.Context(), m.env(), "", "task", "list", "--json", "-o", "JSON")
	if r.err != nil || !json.Valid([]byte(r.stdout)) {
		t.Errorf("--json -o JSON: %v", r.err)
	}
}
