package e2e

// End-to-end tests of assignment (issue 3): scope, selectors without
// fallback, capabilities with their allow and deny lists, connectors,
// capacity and thresholds, and the explanation of every decision. Each test
// that involves delivering a task to a delegate runs twice: with the
// delegates on the WebSocket and with POLL_FOR_TASKS=true.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// ---------------------------------------------------------------------------
// Helpers

// deliveryMode is how delegates receive task events.
type deliveryMode struct {
	name string
	env  []string
	conn string
}

var deliveryModes = []deliveryMode{
	{name: "websocket", conn: protocol.ConnWebSocket},
	{name: "polling", env: []string{"POLL_FOR_TASKS=true"}, conn: protocol.ConnPolling},
}

// inBothModes runs f as a parallel subtest per delivery mode.
func inBothModes(t *testing.T, f func(t *testing.T, m deliveryMode)) {
	for _, m := range deliveryModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			f(t, m)
		})
	}
}

// delegateSpec describes one delegate process to start.
type delegateSpec struct {
	name, host, token, tags string
	env                     []string
}

// startDelegates starts every delegate at once, then waits until each is
// connected over the mode's connection.
func (c *cluster) startDelegates(m deliveryMode, specs ...delegateSpec) map[string]*proc {
	c.t.Helper()
	ps := map[string]*proc{}
	for _, s := range specs {
		env := append(c.seed004Env(s.token, s.name, s.tags), m.env...)
		env = append(env, s.env...)
		env = append(env, "DELEGATE_HOSTNAME="+s.host)
		ps[s.host] = start(c.t, "delegate "+s.host, env, "delegate")
	}
	for _, s := range specs {
		c.waitConnected(s.host, m.conn)
	}
	return ps
}

// scopedToken creates a token with extra flags (--org, --project) and
// returns its value.
func (c *cluster) scopedToken(name string, flags ...string) string {
	c.t.Helper()
	out := strings.TrimSpace(c.mustCLI(append([]string{"token", "create", name}, flags...)...))
	lines := strings.Split(out, "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// cliAsync starts the CLI in the background; the returned function waits
// for it. It never touches testing.T, so it is safe off the test goroutine.
func (c *cluster) cliAsync(args ...string) func() cliResult {
	ch := make(chan cliResult, 1)
	url, key := c.url, c.apiKey
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Env = append(baseEnv(), "LEGATE_URL="+url, "LEGATE_API_KEY="+key)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		r := cliResult{stdout: so.String(), stderr: se.String()}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			r.code = ee.ExitCode()
		case err != nil:
			r.code = -1
			r.stderr += "\n(exec: " + err.Error() + ")"
		}
		ch <- r
	}()
	var once sync.Once
	var res cliResult
	return func() cliResult {
		once.Do(func() { res = <-ch })
		return res
	}
}

// runAsync starts `legate task run --json ARGS`; the returned function
// waits for it and decodes the final task (on the test goroutine).
func (c *cluster) runAsync(args ...string) func() (protocol.Task, cliResult) {
	wait := c.cliAsync(append([]string{"task", "run", "--json"}, args...)...)
	return func() (protocol.Task, cliResult) {
		c.t.Helper()
		r := wait()
		var tk protocol.Task
		if err := json.Unmarshal([]byte(r.stdout), &tk); err != nil {
			c.t.Fatalf("task run --json %v: %v\nexit %d\nstdout: %s\nstderr: %s", args, err, r.code, r.stdout, r.stderr)
		}
		return tk, r
	}
}

// submit runs `legate task run --detach ARGS` and returns the task ID.
func (c *cluster) submit(args ...string) string {
	c.t.Helper()
	id := strings.TrimSpace(c.mustCLI(append([]string{"task", "run", "--detach"}, args...)...))
	if id == "" || strings.ContainsAny(id, " \n") {
		c.t.Fatalf("task run --detach %v printed %q, want a task ID", args, id)
	}
	return id
}

// waitTask polls the task until cond holds and returns it.
func (c *cluster) waitTask(id, what string, cond func(protocol.Task) bool) protocol.Task {
	c.t.Helper()
	var tk protocol.Task
	eventually(c.t, 20*time.Second, "task "+id+" "+what, func() bool {
		tk = c.task(id)
		return cond(tk)
	})
	return tk
}

func (c *cluster) waitRunning(id string) protocol.Task {
	c.t.Helper()
	return c.waitTask(id, "running", func(tk protocol.Task) bool {
		if protocol.Terminal(tk.Status) {
			c.t.Fatalf("task %s ended %s before it was seen running: %+v", id, tk.Status, tk)
		}
		return tk.Status == protocol.StatusRunning && tk.StartedAt != nil
	})
}

func (c *cluster) waitTerminal(id string) protocol.Task {
	c.t.Helper()
	return c.waitTask(id, "finished", func(tk protocol.Task) bool { return protocol.Terminal(tk.Status) })
}

// holds checks that cond stays true for d (to show something does not
// happen); it fails at the first poll where it does not.
func holds(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// blocker returns a script that waits for a marker file and a function
// that creates it. The marker is also created at cleanup, and the script
// gives up by itself after about a minute, so no shell outlives the test.
func blocker(t testing.TB, echo string) (script string, release func()) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "release")
	var once sync.Once
	release = func() { once.Do(func() { _ = os.WriteFile(marker, nil, 0o600) }) }
	t.Cleanup(release)
	script = fmt.Sprintf("i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo %s", marker, echo)
	return script, release
}

// verdictLine returns the line of a not_assigned error that explains the
// delegate with this hostname ("  name (host): rule: message; …").
func verdictLine(errText, host string) string {
	for _, line := range strings.Split(errText, "\n") {
		if strings.Contains(line, "("+host+"):") {
			return line
		}
	}
	return ""
}

func (c *cluster) describe(name string) protocol.DelegateDetails {
	c.t.Helper()
	var d protocol.DelegateDetails
	out := c.mustCLI("delegates", "describe", name, "--json")
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		c.t.Fatalf("decode describe %s: %v\n%s", name, err, out)
	}
	if len(d.Instances) != 1 {
		c.t.Fatalf("describe %s: %d instances, want 1: %s", name, len(d.Instances), out)
	}
	return d
}

func capEntry(es []protocol.CapabilityEntry, criteria string) (protocol.CapabilityEntry, bool) {
	for _, e := range es {
		if e.Criteria == criteria {
			return e, true
		}
	}
	return protocol.CapabilityEntry{}, false
}

func (c *cluster) explainJSON(id string) protocol.Explanation {
	c.t.Helper()
	var e protocol.Explanation
	out := c.mustCLI("task", "explain", id, "--json")
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		c.t.Fatalf("decode explain %s: %v\n%s", id, err, out)
	}
	return e
}

func (c *cluster) connector(name string) protocol.Connector {
	c.t.Helper()
	var cn protocol.Connector
	out := c.mustCLI("connector", "get", name, "--json")
	if err := json.Unmarshal([]byte(out), &cn); err != nil {
		c.t.Fatalf("decode connector %s: %v\n%s", name, err, out)
	}
	return cn
}

func (c *cluster) taskList() []protocol.Task {
	c.t.Helper()
	var l protocol.TaskList
	out := c.mustCLI("task", "list", "--json", "--limit", "500")
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		c.t.Fatalf("decode task list: %v\n%s", err, out)
	}
	return l.Tasks
}

var knownRules = []string{
	protocol.RuleDisconnected, protocol.RuleDraining, protocol.RuleScope, protocol.RuleSelectors,
	protocol.RuleTaskDenied, protocol.RuleCapabilityDenied, protocol.RuleCapacity, protocol.RuleThreshold,
}

func rules(v protocol.DelegateVerdict) []string {
	var rs []string
	for _, r := range v.Reasons {
		rs = append(rs, r.Rule)
	}
	return rs
}

func verdictFor(e protocol.Explanation, host string) (protocol.DelegateVerdict, bool) {
	for _, v := range e.Delegates {
		if v.Hostname == host {
			return v, true
		}
	}
	return protocol.DelegateVerdict{}, false
}

// checkExplanation checks what holds for every explanation: the task ID,
// one verdict per delegate of the account, known rules only, reasons
// exactly when ineligible.
func (c *cluster) checkExplanation(e protocol.Explanation, id string, hosts ...string) {
	c.t.Helper()
	if e.TaskID != id || e.Summary == "" {
		c.t.Errorf("explanation of %s: task_id %q summary %q", id, e.TaskID, e.Summary)
	}
	if len(e.Delegates) != len(hosts) {
		c.t.Errorf("explanation of %s has %d verdicts, want %d (one per delegate): %+v", id, len(e.Delegates), len(hosts), e.Delegates)
	}
	for _, h := range hosts {
		if _, ok := verdictFor(e, h); !ok {
			c.t.Errorf("explanation of %s has no verdict for %s: %+v", id, h, e.Delegates)
		}
	}
	for _, v := range e.Delegates {
		if v.Eligible != (len(v.Reasons) == 0) {
			c.t.Errorf("verdict for %s: eligible=%v with reasons %+v", v.Hostname, v.Eligible, v.Reasons)
		}
		if v.Name == "" || v.InstanceID == "" {
			c.t.Errorf("verdict without name or instance: %+v", v)
		}
		for _, r := range v.Reasons {
			if !slices.Contains(knownRules, r.Rule) || r.Message == "" {
				c.t.Errorf("verdict for %s: reason %+v is not a protocol rule with a message", v.Hostname, r)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// 1. Scope

func TestAssignScope(t *testing.T) {
	t.Parallel()
	inBothModes(t, func(t *testing.T, m deliveryMode) {
		c := startCluster(t)
		c.mustCLI("org", "create", "eng")
		c.mustCLI("project", "create", "--org", "eng", "web")
		c.mustCLI("project", "create", "--org", "eng", "api")
		acct := c.scopedToken("acct")
		eng := c.scopedToken("eng-ci", "--org", "eng")
		web := c.scopedToken("web-ci", "--org", "eng", "--project", "web")
		c.startDelegates(m,
			delegateSpec{name: "acct-del", host: "acct-h", token: acct},
			delegateSpec{name: "eng-del", host: "eng-h", token: eng},
			delegateSpec{name: "web-del", host: "web-h", token: web},
		)
		for host, want := range map[string][2]string{"acct-h": {"", ""}, "eng-h": {"eng", ""}, "web-h": {"eng", "web"}} {
			if d, _ := c.findDelegate(host); d.Org != want[0] || d.Project != want[1] {
				t.Errorf("delegate %s has scope org %q project %q, want %q %q", host, d.Org, d.Project, want[0], want[1])
			}
		}

		// An unknown org is refused before anything is created.
		before := len(c.taskList())
		r := c.cli("task", "run", "--org", "nope", "--script", "echo never")
		if r.code == 0 || !strings.Contains(r.stderr, `"nope"`) || !strings.Contains(strings.ToLower(r.stderr), "org") {
			t.Errorf("task run --org nope: exit %d, stderr %q; want a failure naming the org", r.code, r.stderr)
		}
		r = c.cli("task", "run", "--org", "eng", "--project", "nope", "--script", "echo never")
		if r.code == 0 || !strings.Contains(r.stderr, `"nope"`) || !strings.Contains(strings.ToLower(r.stderr), "project") {
			t.Errorf("task run --project nope: exit %d, stderr %q; want a failure naming the project", r.code, r.stderr)
		}
		r = c.cli("task", "run", "--project", "web", "--script", "echo never")
		if r.code == 0 || !strings.Contains(r.stderr, "--org") {
			t.Errorf("task run --project without --org: exit %d, stderr %q; want a failure asking for --org", r.code, r.stderr)
		}
		after := c.taskList()
		if len(after) != before {
			t.Errorf("refused submissions created tasks: %d before, %d after", before, len(after))
		}
		for _, tk := range after {
			if tk.Org == "nope" || tk.Project == "nope" {
				t.Errorf("task list shows a task in the unknown scope: %+v", tk)
			}
		}
		for _, args := range [][]string{
			{"token", "create", "x", "--org", "nope"},
			{"project", "create", "--org", "nope", "x"},
		} {
			if r := c.cli(args...); r.code == 0 || !strings.Contains(r.stderr, `"nope"`) {
				t.Errorf("legate %v: exit %d, stderr %q; want a failure naming the org", args, r.code, r.stderr)
			}
		}
		// An org with a project cannot be deleted.
		r = c.cli("org", "delete", "eng")
		if r.code == 0 || !strings.Contains(r.stderr, `"eng"`) || !strings.Contains(strings.ToLower(r.stderr), "project") {
			t.Errorf("org delete eng with a project: exit %d, stderr %q; want a refusal that names the org and its projects", r.code, r.stderr)
		}
		if out := c.mustCLI("org", "list", "--json"); !strings.Contains(out, `"eng"`) {
			t.Errorf("org eng gone after a refused delete: %s", out)
		}

		type scopeCase struct {
			org, project, host string
			runs               bool
		}
		cases := []scopeCase{
			// Account delegates serve everything.
			{"", "", "acct-h", true},
			{"eng", "", "acct-h", true},
			{"eng", "web", "acct-h", true},
			// Org delegates serve their org's org- and project-level tasks.
			{"eng", "", "eng-h", true},
			{"eng", "web", "eng-h", true},
			{"eng", "api", "eng-h", true},
			{"", "", "eng-h", false},
			// Project delegates serve only their project.
			{"eng", "web", "web-h", true},
			{"", "", "web-h", false},
			{"eng", "", "web-h", false},
			{"eng", "api", "web-h", false},
		}
		waits := make([]func() (protocol.Task, cliResult), len(cases))
		for i, sc := range cases {
			args := []string{"--selector", sc.host, "--script", "echo scoped"}
			if sc.org != "" {
				args = append(args, "--org", sc.org)
			}
			if sc.project != "" {
				args = append(args, "--project", sc.project)
			}
			waits[i] = c.runAsync(args...)
		}
		for i, sc := range cases {
			tk, r := waits[i]()
			what := fmt.Sprintf("task at org %q project %q for %s", sc.org, sc.project, sc.host)
			if tk.Org != sc.org || tk.Project != sc.project {
				t.Errorf("%s: task scope is org %q project %q", what, tk.Org, tk.Project)
			}
			if sc.runs {
				if r.code != 0 || tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != sc.host {
					t.Errorf("%s: exit %d, %s on %q (%s); want succeeded on %s", what, r.code, tk.Status, tk.DelegateHostname, tk.Error, sc.host)
				}
				continue
			}
			if r.code != 3 || tk.Status != protocol.StatusNotAssigned || tk.DelegateHostname != "" {
				t.Errorf("%s: exit %d, %s on %q; want not_assigned with exit 3", what, r.code, tk.Status, tk.DelegateHostname)
				continue
			}
			if line := verdictLine(tk.Error, sc.host); !strings.Contains(line, protocol.RuleScope+":") {
				t.Errorf("%s: the excluded delegate's line %q does not say scope:\nerror: %s", what, line, tk.Error)
			}
			// The account delegate is excluded by the selector, never by scope.
			if line := verdictLine(tk.Error, "acct-h"); line == "" || strings.Contains(line, "scope:") || !strings.Contains(line, "selectors:") {
				t.Errorf("%s: the account delegate's line %q should name only the selectors\nerror: %s", what, line, tk.Error)
			}
		}
	})
}

// TestAssignScopeOrgDeleteInUse: `legate org delete --help` says the
// manager refuses while the org is in use by projects, tokens, delegates
// or tasks. Here only a running task of the org uses it.
func TestAssignScopeOrgDeleteInUse(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.mustCLI("org", "create", "ops")
	tok := c.token("acct")
	c.startDelegates(deliveryModes[0], delegateSpec{name: "acct", host: "ops-acct-h", token: tok})
	script, release := blocker(t, "done")
	id := c.submit("--org", "ops", "--script", script)
	c.waitRunning(id)
	r := c.cli("org", "delete", "ops")
	if r.code == 0 {
		t.Errorf("org delete ops succeeded while task %s of org ops was running; `org delete --help` promises a refusal while tasks use the org", id)
	} else if !strings.Contains(r.stderr, `"ops"`) {
		t.Errorf("org delete refusal does not name the org: %q", r.stderr)
	}
	release()
	if tk := c.waitTerminal(id); tk.Status != protocol.StatusSucceeded {
		t.Errorf("org task: %+v", tk)
	}
}

// ---------------------------------------------------------------------------
// 2. Selectors, no fallback

func TestAssignSelectorsNoFallback(t *testing.T) {
	t.Parallel()
	inBothModes(t, func(t *testing.T, m deliveryMode) {
		c := startCluster(t)
		tok := c.token("sel")
		c.startDelegates(m,
			delegateSpec{name: "del-a", host: "sel-a", token: tok, tags: "blue", env: []string{"DELEGATE_TASK_CAPACITY=1"}},
			delegateSpec{name: "del-b", host: "sel-b", token: tok, tags: "green"},
		)
		// Nobody has purple: not_assigned fast, with the missing selectors per delegate.
		purple := c.runAsync("--selector", "purple", "--selector", "blue", "--script", "echo never")
		purplePlain := c.cliAsync("task", "run", "--selector", "purple", "--script", "echo never")

		script, release := blocker(t, "first")
		first := c.submit("--selector", "blue", "--script", script)
		if tk := c.waitRunning(first); tk.DelegateHostname != "sel-a" {
			t.Fatalf("first blue task runs on %q, want sel-a", tk.DelegateHostname)
		}
		second := c.submit("--selector", "blue", "--script", "echo second")
		// B is alive and takes work...
		if tk, r := c.runJSON("--selector", "sel-b", "--script", "echo on b"); r.code != 0 || tk.DelegateHostname != "sel-b" {
			t.Fatalf("task for sel-b: exit %d %+v", r.code, tk)
		}
		// ...but the blue task waits for A: longer than a liveness window
		// plus a sweep, so neither a fallback nor a fast not_assigned happens.
		holds(t, 2500*time.Millisecond, "second blue task queued while A is at capacity", func() bool {
			tk := c.task(second)
			return tk.Status == protocol.StatusQueued && tk.DelegateHostname == ""
		})
		release()
		if tk := c.waitTerminal(first); tk.Status != protocol.StatusSucceeded {
			t.Errorf("first task: %+v", tk)
		}
		if tk := c.waitTerminal(second); tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != "sel-a" {
			t.Errorf("second blue task: %s on %q (%s), want succeeded on sel-a", tk.Status, tk.DelegateHostname, tk.Error)
		}

		tk, r := purple()
		if r.code != 3 || tk.Status != protocol.StatusNotAssigned || tk.DelegateHostname != "" {
			t.Fatalf("purple task: exit %d %+v", r.code, tk)
		}
		// Failed fast (all excluded for good), not at the 5-minute queue timeout.
		if strings.Contains(tk.Error, "queue timeout") {
			t.Errorf("purple task waited for its queue timeout: %s", tk.Error)
		}
		if line := verdictLine(tk.Error, "sel-a"); !strings.Contains(line, "missing selectors: purple") || strings.Contains(line, "blue") {
			t.Errorf("sel-a line %q, want missing selectors: purple\nerror: %s", line, tk.Error)
		}
		if line := verdictLine(tk.Error, "sel-b"); !strings.Contains(line, "missing selectors: ") || !strings.Contains(line, "purple") || !strings.Contains(line, "blue") {
			t.Errorf("sel-b line %q, want missing selectors naming blue and purple\nerror: %s", line, tk.Error)
		}
		// Without --json, task run prints the reasons and exits 3.
		if r := purplePlain(); r.code != 3 || verdictLine(r.stderr, "sel-a") == "" || !strings.Contains(r.stderr, "missing selectors: purple") {
			t.Errorf("plain task run with an unmatched selector: exit %d stderr %q; want exit 3 and the reasons per delegate", r.code, r.stderr)
		}
	})
}

// ---------------------------------------------------------------------------
// 3. Capabilities

const toolName = "legate-e2e-tool"

// toolPath returns a PATH whose first entry holds the executable toolName.
func toolPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, toolName), []byte("#!/bin/sh\necho tool ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

func TestAssignCapabilities(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath(toolName); err == nil {
		t.Skipf("%s is on this machine's PATH", toolName)
	}
	inBothModes(t, func(t *testing.T, m deliveryMode) {
		c := startCluster(t)
		tok := c.token("cap")
		// A later PATH entry wins in os/exec (duplicate keys: the last value is used).
		c.startDelegates(m,
			delegateSpec{name: "cap-a", host: "cap-a-h", token: tok, env: []string{"PATH=" + toolPath(t)}},
			delegateSpec{name: "cap-b", host: "cap-b-h", token: tok},
		)
		bin := "binary:" + toolName
		for i := 0; i < 3; i++ {
			tk, r := c.runJSON("--capability", bin, "--script", toolName)
			if r.code != 0 || tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != "cap-a-h" {
				t.Fatalf("binary task %d: exit %d, %s on %q (%s); want succeeded on cap-a-h", i, r.code, tk.Status, tk.DelegateHostname, tk.Error)
			}
			if !slices.Contains(tk.Capabilities, bin) {
				t.Errorf("task capabilities %v, want %s", tk.Capabilities, bin)
			}
		}
		// A TCP port that accepts; an HTTP server that answers 500 (any
		// answer counts); a TCP port nobody listens on.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}))
		t.Cleanup(srv.Close)
		tcpOK := "tcp://" + ln.Addr().String()
		httpOK := srv.URL + "/"
		tcpDown := "tcp://" + freePort(t)
		waitTCP := c.runAsync("--capability", tcpOK, "--script", "true")
		waitHTTP := c.runAsync("--capability", httpOK, "--script", "true")
		waitDown := c.runAsync("--capability", tcpDown, "--script", "true")

		// B selected by name still does not get it: denied, and the task ends.
		tk, r := c.runJSON("--selector", "cap-b-h", "--capability", bin, "--script", toolName)
		if r.code != 3 || tk.Status != protocol.StatusNotAssigned || tk.DelegateHostname != "" {
			t.Fatalf("binary task pinned to B: exit %d %+v", r.code, tk)
		}
		if line := verdictLine(tk.Error, "cap-b-h"); !strings.Contains(line, protocol.RuleCapabilityDenied+":") || !strings.Contains(line, bin) {
			t.Errorf("B's line %q, want capability_denied naming %s\nerror: %s", line, bin, tk.Error)
		}
		b := c.describe("cap-b").Instances[0]
		if e, ok := capEntry(b.Denylist, bin); !ok || e.TimeLeftMS <= 0 || e.TimeLeftMS > (5*time.Minute).Milliseconds() || !strings.Contains(e.Error, toolName) {
			t.Errorf("B's deny list %+v, want %s with 0 < time left <= 5m and the error", b.Denylist, bin)
		}
		if _, ok := capEntry(b.Allowlist, bin); ok {
			t.Errorf("B allowlists %s: %+v", bin, b.Allowlist)
		}
		a := c.describe("cap-a").Instances[0]
		if e, ok := capEntry(a.Allowlist, bin); !ok || e.TimeLeftMS <= (5*time.Hour).Milliseconds() || e.TimeLeftMS > (6*time.Hour).Milliseconds() {
			t.Errorf("A's allowlist %+v, want %s with 5h < time left <= 6h", a.Allowlist, bin)
		}
		if _, ok := capEntry(a.Denylist, bin); ok {
			t.Errorf("A's deny list %+v has %s", a.Denylist, bin)
		}
		if r := c.cli("delegates", "describe", "nobody"); r.code == 0 || !strings.Contains(r.stderr, `"nobody"`) {
			t.Errorf("describe nobody: exit %d stderr %q", r.code, r.stderr)
		}
		plain := c.mustCLI("delegates", "describe", "cap-b")
		if !strings.Contains(plain, bin) {
			t.Errorf("describe cap-b does not show the denied capability:\n%s", plain)
		}

		// The network capabilities, checked below.
		for _, x := range []struct {
			crit string
			wait func() (protocol.Task, cliResult)
		}{{tcpOK, waitTCP}, {httpOK, waitHTTP}} {
			tk, r := x.wait()
			if r.code != 0 || tk.Status != protocol.StatusSucceeded || !slices.Contains(tk.Capabilities, x.crit) {
				t.Errorf("task needing %s: exit %d, %s (%s), capabilities %v", x.crit, r.code, tk.Status, tk.Error, tk.Capabilities)
			}
		}
		tk, r = waitDown()
		if r.code != 3 || tk.Status != protocol.StatusNotAssigned {
			t.Fatalf("task needing a closed port: exit %d %+v", r.code, tk)
		}
		for _, h := range []string{"cap-a-h", "cap-b-h"} {
			if line := verdictLine(tk.Error, h); !strings.Contains(line, "capability_denied:") || !strings.Contains(line, tcpDown) {
				t.Errorf("closed port: %s line %q, want capability_denied naming %s\nerror: %s", h, line, tcpDown, tk.Error)
			}
		}
	})
}

// ---------------------------------------------------------------------------
// 4. Allowlisted delegates are preferred

func TestAssignAllowlistedPreferred(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath(toolName); err == nil {
		t.Skipf("%s is on this machine's PATH", toolName)
	}
	inBothModes(t, func(t *testing.T, m deliveryMode) {
		c := startCluster(t)
		tok := c.token("pref")
		path := "PATH=" + toolPath(t)
		c.startDelegates(m,
			delegateSpec{name: "pref-a", host: "pref-a-h", token: tok, env: []string{path}},
			delegateSpec{name: "pref-b", host: "pref-b-h", token: tok, env: []string{path}},
		)
		bin := "binary:" + toolName
		// Both are able: B runs the tool too.
		if tk, r := c.runJSON("--selector", "pref-b-h", "--script", toolName); r.code != 0 || tk.DelegateHostname != "pref-b-h" {
			t.Fatalf("B cannot run the tool: exit %d %+v", r.code, tk)
		}
		// Only A validates the capability.
		if tk, r := c.runJSON("--selector", "pref-a-h", "--capability", bin, "--script", toolName); r.code != 0 || tk.DelegateHostname != "pref-a-h" {
			t.Fatalf("validating task on A: exit %d %+v", r.code, tk)
		}
		if _, ok := capEntry(c.describe("pref-a").Instances[0].Allowlist, bin); !ok {
			t.Fatalf("A did not get allowlisted for %s", bin)
		}
		if al := c.describe("pref-b").Instances[0].Allowlist; len(al) != 0 {
			t.Fatalf("B has an allowlist before being offered the capability: %+v", al)
		}
		for i := 0; i < 5; i++ {
			tk, r := c.runJSON("--capability", bin, "--script", toolName)
			if r.code != 0 || tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != "pref-a-h" {
				t.Errorf("task %d needing allowlisted %s: exit %d, %s on %q; want the allowlisted pref-a-h", i, bin, r.code, tk.Status, tk.DelegateHostname)
			}
			if i == 4 {
				e := c.explainJSON(tk.ID)
				c.checkExplanation(e, tk.ID, "pref-a-h", "pref-b-h")
				a, _ := verdictFor(e, "pref-a-h")
				b, _ := verdictFor(e, "pref-b-h")
				if !a.Eligible || !a.Allowlisted || !b.Eligible || b.Allowlisted {
					t.Errorf("explain: A %+v, B %+v; want both eligible, only A allowlisted", a, b)
				}
			}
		}
	})
}

// ---------------------------------------------------------------------------
// 5. Connectors

func TestAssignConnectors(t *testing.T) {
	t.Parallel()
	inBothModes(t, func(t *testing.T, m deliveryMode) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "git here")
		}))
		t.Cleanup(srv.Close)
		c := startCluster(t)
		tok := c.token("conn")
		c.startDelegates(m,
			delegateSpec{name: "blue-del", host: "conn-blue", token: tok, tags: "blue"},
			delegateSpec{name: "green-del", host: "conn-green", token: tok, tags: "green"},
		)
		out := c.mustCLI("connector", "create", "git", "--url", srv.URL, "--selector", "blue", "--type", "git", "--json")
		var created protocol.Connector
		if err := json.Unmarshal([]byte(out), &created); err != nil || created.URL != srv.URL || !slices.Equal(created.Selectors, []string{"blue"}) {
			t.Fatalf("connector create: %v %+v\n%s", err, created, out)
		}
		if cn := c.connector("git"); cn.LastSuccessDelegate != "" {
			t.Errorf("new connector has a last success: %+v", cn)
		}

		// The connector's selectors and URL as a capability.
		tk, r := c.runJSON("--connector", "git", "--script", "echo via git")
		if r.code != 0 || tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != "conn-blue" {
			t.Fatalf("--connector git: exit %d, %s on %q (%s); want succeeded on conn-blue", r.code, tk.Status, tk.DelegateHostname, tk.Error)
		}
		if !slices.Contains(tk.Capabilities, srv.URL) || tk.Connector != "git" || !slices.Equal(tk.Selectors, []string{"blue"}) {
			t.Errorf("connector task: capabilities %v connector %q selectors %v; want the URL %s, git, [blue]", tk.Capabilities, tk.Connector, tk.Selectors, srv.URL)
		}
		if cn := c.connector("git"); !strings.Contains(cn.LastSuccessDelegate, "conn-blue") {
			t.Errorf("after a success on conn-blue: last_success_delegate %q", cn.LastSuccessDelegate)
		}
		if out := c.mustCLI("connector", "list"); !strings.Contains(out, "git") || !strings.Contains(out, "conn-blue") {
			t.Errorf("connector list does not show git and its last success:\n%s", out)
		}

		// Task selectors override the connector's.
		tk, r = c.runJSON("--connector", "git", "--selector", "conn-green", "--script", "echo via git on green")
		if r.code != 0 || tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != "conn-green" {
			t.Fatalf("--connector git --selector conn-green: exit %d, %s on %q (%s)", r.code, tk.Status, tk.DelegateHostname, tk.Error)
		}
		if !slices.Contains(tk.Capabilities, srv.URL) || !slices.Equal(tk.Selectors, []string{"conn-green"}) {
			t.Errorf("overridden connector task: capabilities %v selectors %v", tk.Capabilities, tk.Selectors)
		}
		if cn := c.connector("git"); !strings.Contains(cn.LastSuccessDelegate, "conn-green") {
			t.Errorf("after a success on conn-green: last_success_delegate %q, want the delegate that last succeeded", cn.LastSuccessDelegate)
		}

		// LAST-SUCCESS: of two delegates that both validated a connector,
		// the one that last succeeded for it is tried first.
		api := srv.URL + "/api"
		c.mustCLI("connector", "create", "api", "--url", api)
		for _, h := range []string{"conn-green", "conn-blue"} {
			if tk, r := c.runJSON("--connector", "api", "--selector", h, "--script", "true"); r.code != 0 || tk.DelegateHostname != h {
				t.Fatalf("--connector api --selector %s: exit %d, %s on %q (%s)", h, r.code, tk.Status, tk.DelegateHostname, tk.Error)
			}
		}
		for _, h := range []string{"blue-del", "green-del"} {
			if _, ok := capEntry(c.describe(h).Instances[0].Allowlist, api); !ok {
				t.Fatalf("%s is not allowlisted for %s", h, api)
			}
		}
		// Each task should run where the previous one (the last success) ran.
		var ranOn []string
		wrong := false
		for i := 0; i < 5; i++ {
			last := c.connector("api").LastSuccessDelegate
			tk, r := c.runJSON("--connector", "api", "--script", "true")
			if r.code != 0 {
				t.Fatalf("--connector api: exit %d %+v", r.code, tk)
			}
			ranOn = append(ranOn, fmt.Sprintf("%s (last success %s)", tk.DelegateHostname, last))
			wrong = wrong || !strings.HasSuffix(last, "/"+tk.DelegateHostname)
		}
		if wrong {
			t.Errorf("connector api: tasks did not run on the delegate that last succeeded for it (LAST-SUCCESS is tried first): %v", ranOn)
		}

		// A connector nobody reaches: its capability is denied everywhere.
		down := "http://" + freePort(t)
		c.mustCLI("connector", "create", "down", "--url", down)
		tk, r = c.runJSON("--connector", "down", "--script", "echo never")
		if r.code != 3 || tk.Status != protocol.StatusNotAssigned {
			t.Fatalf("--connector down: exit %d %+v", r.code, tk)
		}
		for _, h := range []string{"conn-blue", "conn-green"} {
			if line := verdictLine(tk.Error, h); !strings.Contains(line, "capability_denied:") || !strings.Contains(line, down) {
				t.Errorf("unreachable connector: %s line %q\nerror: %s", h, line, tk.Error)
			}
		}

		// Unknown connectors are clear errors, and nothing is queued.
		before := len(c.taskList())
		r = c.cli("task", "run", "--connector", "nope", "--script", "echo never")
		if r.code == 0 || !strings.Contains(r.stderr, `"nope"`) || !strings.Contains(r.stderr, "connector") {
			t.Errorf("--connector nope: exit %d stderr %q", r.code, r.stderr)
		}
		if after := len(c.taskList()); after != before {
			t.Errorf("unknown connector created a task (%d → %d)", before, after)
		}
		r = c.cli("connector", "get", "nope")
		if r.code == 0 || !strings.Contains(r.stderr, `"nope"`) || !strings.Contains(r.stderr, "not found") {
			t.Errorf("connector get nope: exit %d stderr %q", r.code, r.stderr)
		}
	})
}

// ---------------------------------------------------------------------------
// 6. Capacity and thresholds

func TestAssignCapacityAndThreshold(t *testing.T) {
	t.Parallel()
	inBothModes(t, func(t *testing.T, m deliveryMode) {
		c := startCluster(t)
		tok := c.token("cap")
		c.startDelegates(m,
			delegateSpec{name: "one", host: "cap1-a", token: tok, env: []string{"DELEGATE_TASK_CAPACITY=1"}},
			delegateSpec{name: "two", host: "cap1-b", token: tok, env: []string{"DELEGATE_TASK_CAPACITY=1"}},
			delegateSpec{name: "hot", host: "hot-h", token: tok, env: []string{"DELEGATE_MEMORY_THRESHOLD=1"}},
		)
		// 1% of memory is certainly exceeded: the delegate says why it takes nothing.
		var hot protocol.Delegate
		eventually(t, 10*time.Second, "hot-h over its memory threshold", func() bool {
			hot, _ = c.findDelegate("hot-h")
			return hot.OverThreshold != ""
		})
		if !strings.Contains(hot.OverThreshold, "DELEGATE_MEMORY_THRESHOLD") {
			t.Errorf("over_threshold = %q, want it to name DELEGATE_MEMORY_THRESHOLD", hot.OverThreshold)
		}
		if d, _ := c.findDelegate("cap1-a"); d.Capacity != 1 || d.OverThreshold != "" {
			t.Errorf("cap1-a listed as %+v", d)
		}
		waitHot := c.runAsync("--selector", "hot-h", "--queue-timeout", "3s", "--script", "echo never")

		// Two blocking tasks: one on each capacity-1 delegate, none on hot-h.
		s1, rel1 := blocker(t, "one")
		s2, rel2 := blocker(t, "two")
		id1 := c.submit("--script", s1)
		t1 := c.waitRunning(id1)
		id2 := c.submit("--script", s2)
		t2 := c.waitRunning(id2)
		hosts := []string{t1.DelegateHostname, t2.DelegateHostname}
		slices.Sort(hosts)
		if !slices.Equal(hosts, []string{"cap1-a", "cap1-b"}) {
			t.Errorf("two blocking tasks ran on %v, want one on each of cap1-a and cap1-b", hosts)
		}
		// A third waits: both are full and hot-h is over its threshold.
		id3 := c.submit("--script", "echo third")
		e := c.explainJSON(id3)
		c.checkExplanation(e, id3, "cap1-a", "cap1-b", "hot-h")
		if e.Status != protocol.StatusQueued {
			t.Errorf("third task status %s, want queued", e.Status)
		}
		for _, want := range []struct{ host, rule string }{{"cap1-a", protocol.RuleCapacity}, {"cap1-b", protocol.RuleCapacity}, {"hot-h", protocol.RuleThreshold}} {
			if v, _ := verdictFor(e, want.host); v.Eligible || !slices.Equal(rules(v), []string{want.rule}) {
				t.Errorf("third task, %s: eligible %v rules %v; want only %s", want.host, v.Eligible, rules(v), want.rule)
			}
		}

		tk, r := waitHot()
		if r.code != 3 || tk.Status != protocol.StatusNotAssigned || tk.DelegateHostname != "" {
			t.Errorf("task for hot-h: exit %d, %s on %q; want not_assigned", r.code, tk.Status, tk.DelegateHostname)
		}
		if line := verdictLine(tk.Error, "hot-h"); !strings.Contains(line, protocol.RuleThreshold+":") || !strings.Contains(line, "DELEGATE_MEMORY_THRESHOLD") {
			t.Errorf("hot-h line %q, want threshold: naming DELEGATE_MEMORY_THRESHOLD\nerror: %s", line, tk.Error)
		}

		rel1()
		rel2()
		for _, id := range []string{id1, id2} {
			if tk := c.waitTerminal(id); tk.Status != protocol.StatusSucceeded {
				t.Errorf("blocking task %s: %+v", id, tk)
			}
		}
		if tk := c.waitTerminal(id3); tk.Status != protocol.StatusSucceeded || tk.DelegateHostname == "hot-h" {
			t.Errorf("third task: %s on %q", tk.Status, tk.DelegateHostname)
		}
	})
}

// ---------------------------------------------------------------------------
// 7. Explain

func TestAssignExplain(t *testing.T) {
	t.Parallel()
	inBothModes(t, func(t *testing.T, m deliveryMode) {
		c := startCluster(t)
		tok := c.token("exp")
		c.startDelegates(m,
			delegateSpec{name: "exp-a", host: "exp-a-h", token: tok, tags: "blue", env: []string{"DELEGATE_TASK_CAPACITY=1"}},
			delegateSpec{name: "exp-b", host: "exp-b-h", token: tok, tags: "green"},
		)
		script, release := blocker(t, "blocking")
		blockerID := c.submit("--selector", "exp-a-h", "--script", script)
		c.waitRunning(blockerID)
		id := c.submit("--selector", "blue", "--script", "echo explained")

		// Queued behind capacity.
		e := c.explainJSON(id)
		c.checkExplanation(e, id, "exp-a-h", "exp-b-h")
		if e.Status != protocol.StatusQueued {
			t.Errorf("status %s, want queued", e.Status)
		}
		if v, _ := verdictFor(e, "exp-a-h"); v.Eligible || !slices.Equal(rules(v), []string{protocol.RuleCapacity}) {
			t.Errorf("queued: exp-a-h eligible %v rules %v, want only capacity", v.Eligible, rules(v))
		}
		if v, _ := verdictFor(e, "exp-b-h"); v.Eligible || !slices.Equal(rules(v), []string{protocol.RuleSelectors}) || !strings.Contains(v.Reasons[0].Message, "blue") {
			t.Errorf("queued: exp-b-h verdict %+v, want only selectors naming blue", v)
		}
		checkPlainExplain(t, c.mustCLI("task", "explain", id), e)

		// The running blocker: its delegate is full.
		eb := c.explainJSON(blockerID)
		c.checkExplanation(eb, blockerID, "exp-a-h", "exp-b-h")
		if eb.Status != protocol.StatusRunning || !strings.Contains(eb.Summary, "exp-a") {
			t.Errorf("running task explanation: status %s summary %q", eb.Status, eb.Summary)
		}

		release()
		if tk := c.waitTerminal(id); tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != "exp-a-h" {
			t.Fatalf("explained task: %s on %q (%s)", tk.Status, tk.DelegateHostname, tk.Error)
		}
		c.waitTerminal(blockerID)
		// Finished: A is eligible again as delegates stand now.
		var done protocol.Explanation
		eventually(t, 10*time.Second, "exp-a free again", func() bool {
			done = c.explainJSON(id)
			v, _ := verdictFor(done, "exp-a-h")
			return v.Eligible
		})
		c.checkExplanation(done, id, "exp-a-h", "exp-b-h")
		if done.Status != protocol.StatusSucceeded || !strings.Contains(done.Summary, protocol.StatusSucceeded) {
			t.Errorf("finished: status %s summary %q", done.Status, done.Summary)
		}
		if v, _ := verdictFor(done, "exp-b-h"); v.Eligible || !slices.Equal(rules(v), []string{protocol.RuleSelectors}) {
			t.Errorf("finished: exp-b-h eligible %v rules %v", v.Eligible, rules(v))
		}
		checkPlainExplain(t, c.mustCLI("task", "explain", id), done)

		// An unknown task is a clear error.
		if r := c.cli("task", "explain", "t_nope"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
			t.Errorf("explain t_nope: exit %d stderr %q", r.code, r.stderr)
		}
	})
}

// checkPlainExplain checks the human output: the summary, then one line per
// delegate with its name, hostname, yes/no and the rules that exclude it.
func checkPlainExplain(t *testing.T, out string, e protocol.Explanation) {
	t.Helper()
	if !strings.Contains(out, e.Summary) {
		t.Errorf("plain explain lacks the summary %q:\n%s", e.Summary, out)
	}
	for _, v := range e.Delegates {
		var found []string
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == v.Name && f[1] == v.Hostname {
				found = append(found, line)
			}
		}
		if len(found) != 1 {
			t.Errorf("plain explain has %d lines for %s (%s), want 1:\n%s", len(found), v.Name, v.Hostname, out)
			continue
		}
		f := strings.Fields(found[0])
		want := "no"
		if v.Eligible {
			want = "yes"
		}
		if f[2] != want {
			t.Errorf("plain explain line %q: eligible column %q, want %q", found[0], f[2], want)
		}
		for _, r := range v.Reasons {
			if !strings.Contains(found[0], r.Rule+":") {
				t.Errorf("plain explain line %q lacks rule %s", found[0], r.Rule)
			}
		}
	}
}

// TestAssignLeastLoadedWins: among equally eligible delegates, the least
// loaded one wins (DESIGN §5). A runs a blocking task; B is idle; both have
// room for more.
func TestAssignLeastLoadedWins(t *testing.T) {
	t.Parallel()
	inBothModes(t, func(t *testing.T, m deliveryMode) {
		c := startCluster(t)
		tok := c.token("load")
		c.startDelegates(m,
			delegateSpec{name: "busy", host: "load-a", token: tok, env: []string{"DELEGATE_TASK_CAPACITY=2"}},
			delegateSpec{name: "idle", host: "load-b", token: tok, env: []string{"DELEGATE_TASK_CAPACITY=2"}},
		)
		script, release := blocker(t, "blocking")
		id := c.submit("--selector", "load-a", "--script", script)
		c.waitRunning(id)
		var ranOn []string
		for i := 0; i < 5; i++ {
			tk, r := c.runJSON("--script", "true")
			if r.code != 0 {
				t.Fatalf("task %d: exit %d %+v", i, r.code, tk)
			}
			ranOn = append(ranOn, tk.DelegateHostname)
		}
		if slices.Contains(ranOn, "load-a") {
			t.Errorf("with load-a at 1/2 and load-b at 0/2, 5 tasks ran on %v; want all on the least loaded load-b", ranOn)
		}
		release()
		c.waitTerminal(id)
	})
}
