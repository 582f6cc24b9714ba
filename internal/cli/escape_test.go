package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestEscape(t *testing.T) {
	tests := []struct {
		name, in, want, wantLines string // wantLines "" = want
	}{
		{"plain", "build-01.example.com", "build-01.example.com", ""},
		{"empty", "", "", ""},
		{"unicode text", "Zürich 東京 🚀 – café", "Zürich 東京 🚀 – café", ""},
		{"backslashes stay", `C:\x1b\path`, `C:\x1b\path`, ""},
		{"ESC colour", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`, ""},
		{"OSC title", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`, ""},
		{"carriage return overwrites", "ok\rFAILED", `ok\x0dFAILED`, ""},
		{"backspace", "a\bb", `a\x08b`, ""},
		{"NUL and DEL", "\x00\x7f", `\x00\x7f`, ""},
		{"newline and tab", "a\nb\tc", `a\x0ab\x09c`, "a\nb\tc"},
		{"C1 CSI", "\u009b31m", `\u009b31m`, ""},
		{"C1 NEL", "a\u0085b", `a\u0085b`, ""},
		{"bidi override", "invoice\u202egnp.exe", `invoice\u202egnp.exe`, ""},
		{"bidi isolates", "\u2066x\u2069", `\u2066x\u2069`, ""},
		{"zero width space", "ad\u200bmin", `ad\u200bmin`, ""},
		{"byte order mark", "\ufeffname", `\ufeffname`, ""},
		{"line separator", "a\u2028b", `a\u2028b`, ""},
		{"tag character", "x\U000E0041", `x\U000e0041`, ""},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`, ""},
		{"raw C1 byte", "a\x9b31m", `a\x9b31m`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := escape(tt.in); got != tt.want {
				t.Errorf("escape(%q) = %q, want %q", tt.in, got, tt.want)
			}
			want := tt.wantLines
			if want == "" {
				want = tt.want
			}
			if got := escapeLines(tt.in); got != want {
				t.Errorf("escapeLines(%q) = %q, want %q", tt.in, got, want)
			}
		})
	}
}

// FuzzEscape: whatever the input, escape's output holds no control
// character (escapeLines' none but newlines and tabs), plain text comes
// out unchanged, and the output depends on the input alone.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[31mred", "a\u202eb", "\xff\xfe", "line\nnext\ttab\r", "\u009b", "x\U000E0041"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := escape(s)
		if protocol.HasControl(out) {
			t.Fatalf("escape(%q) = %q holds a control character", s, out)
		}
		if out != escape(s) {
			t.Fatalf("escape(%q) is not a function of its input", s)
		}
		if !protocol.HasControl(s) && out != s {
			t.Fatalf("escape changed plain text %q to %q", s, out)
		}
		if escape(out) != out {
			t.Fatalf("escape(%q) = %q is not stable", s, out)
		}
		lines := escapeLines(s)
		if protocol.HasControl(strings.NewReplacer("\n", "", "\t", "").Replace(lines)) {
			t.Fatalf("escapeLines(%q) = %q holds a control character besides newlines and tabs", s, lines)
		}
		if strings.Count(lines, "\n") != strings.Count(s, "\n") {
			t.Fatalf("escapeLines(%q) = %q changed the lines", s, lines)
		}
	})
}

// hostile is stored data as a hostile delegate could have registered it
// before registration refused control characters (or as an older manager
// stored it).
const hostile = "\x1b[2J\x1b]0;pwned\x07ok\rEVIL\u202eexe\u009b"

// noRawControl fails when out holds a control character other than
// newlines, or does not show the hostile text escaped.
func noRawControl(t *testing.T, what, out string) {
	t.Helper()
	if protocol.HasControl(strings.ReplaceAll(out, "\n", "")) {
		t.Errorf("%s: raw control characters in the output:\n%q", what, out)
	}
	if !strings.Contains(out, `\x1b[2J\x1b]0;pwned\x07ok\x0dEVIL\u202eexe\u009b`) {
		t.Errorf("%s: the stored text is not shown escaped:\n%q", what, out)
	}
}

func TestStoredDataIsEscaped(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{chunks: []string{"task says \x1b[32mgreen\x1b[0m\n"}, status: protocol.StatusFailed,
		exitCode: intp(3), errText: "exit status 3: " + hostile})
	hb := testNow.Add(-time.Second)
	d := protocol.Delegate{InstanceID: "i_1" + hostile, Name: "evil" + hostile, Hostname: "host" + hostile, IP: "10.0.0.1" + hostile,
		Tags: []string{"tag" + hostile}, Version: "1.0" + hostile, Type: "SHELL" + hostile, TokenName: "tok" + hostile,
		Status: protocol.DelegateConnected, Connection: protocol.ConnWebSocket, LastHeartbeat: &hb,
		Description: "desc" + hostile, Configuration: "conf" + hostile, OverThreshold: "cpu" + hostile, Configuring: "conf" + hostile}
	m.delegates = []protocol.Delegate{d}
	m.details["evil"] = protocol.DelegateDetails{Name: "evil" + hostile, Instances: []protocol.DelegateDetail{{
		Delegate:             d,
		Allowlist:            []protocol.CapabilityEntry{{Criteria: "binary:" + hostile, TimeLeftMS: 60000}},
		Denylist:             []protocol.CapabilityEntry{{Criteria: "tcp://db:5432", TimeLeftMS: 60000, Error: "refused" + hostile}},
		ConfigurationApplies: &protocol.ConfigurationRef{Name: "conf" + hostile, Version: 2},
		ConfigurationResult: &protocol.ConfigurationResult{Name: "conf" + hostile, Version: 2, Error: "failed" + hostile,
			Output: "line one\n" + hostile + "\n", OutputBytes: 40, FinishedAt: testNow},
	}}}
	m.explanations["t_1"] = protocol.Explanation{TaskID: "t_1", Status: protocol.StatusQueued, Summary: "waits for " + hostile,
		Delegates: []protocol.DelegateVerdict{{Name: "evil" + hostile, Hostname: "host" + hostile,
			Reasons: []protocol.Reason{{Rule: protocol.RuleSelectors, Message: "missing " + hostile}}}}}
	m.tasks["t_1"] = protocol.Task{ID: "t_1", Status: protocol.StatusFailed, Type: protocol.TaskShell, Error: "boom" + hostile,
		DelegateName: "evil" + hostile, DelegateHostname: "host" + hostile, Selectors: []string{"sel" + hostile},
		Shell: &protocol.ShellSpec{Script: "echo " + hostile}, CreatedAt: testNow}
	m.connectors = []protocol.Connector{{Name: "c", URL: "https://x/" + hostile, Type: "k8s" + hostile, Selectors: []string{"s" + hostile},
		LastSuccessDelegate: "evil/" + hostile, CreatedAt: testNow}}
	m.confs.list = []protocol.Configuration{{Name: "conf", Script: "#!/bin/sh\necho " + hostile + "\n", Selectors: []string{"s" + hostile},
		Version: 1, CreatedAt: testNow, UpdatedAt: testNow}}
	m.tokens = []protocol.Token{{Name: "tok" + hostile, Status: protocol.TokenActive, CreatedAt: testNow}}
	m.apiKeys = append(m.apiKeys, protocol.APIKey{Name: "key" + hostile, Status: protocol.TokenActive, CreatedAt: testNow, CreatedBy: "by" + hostile})

	for _, args := range [][]string{
		{"delegates", "list"},
		{"delegates", "describe", "evil"},
		{"task", "explain", "t_1"},
		{"task", "get", "t_1"},
		{"task", "list"},
		{"connector", "list"},
		{"configuration", "list"},
		{"configuration", "get", "conf"},
		{"token", "list"},
		{"apikey", "list"},
	} {
		r := runCLI(t.Context(), m.env(), "", args...)
		if r.err != nil {
			t.Errorf("%v: %v\n%s", args, r.err, r.stderr)
			continue
		}
		noRawControl(t, strings.Join(args, " "), r.stdout)
	}

	// An error message of the manager that quotes stored data.
	r := runCLI(t.Context(), m.env(), "", "task", "get", "t_"+hostile)
	if exitCodeOf(t, r.err) != 1 || protocol.HasControl(strings.TrimSuffix(r.stderr, "\n")) {
		t.Errorf("error message: stderr %q, want it escaped", r.stderr)
	}

	// task run: the task's own output passes as it is (it is the task's
	// bytes); its stored error is escaped.
	r = runCLI(t.Context(), m.env(), "", "task", "run", "--script", "true")
	if !strings.Contains(r.stdout, "task says \x1b[32mgreen\x1b[0m\n") {
		t.Errorf("task run changed the task's output: %q", r.stdout)
	}
	noRawControl(t, "task run's error line", r.stderr)

	// --json passes the stored values exactly.
	r = runCLI(t.Context(), m.env(), "", "delegates", "list", "--json")
	var list protocol.DelegateList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Delegates) != 1 || list.Delegates[0].Name != d.Name {
		t.Errorf("--json: %v, %+v", err, list)
	}
}
