package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// ok fails the test unless the run succeeded.
func ok(t *testing.T, r result, args ...string) result {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%v: err %v, stderr %q", args, r.err, r.stderr)
	}
	return r
}

// decode unmarshals a command's --json output.
func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("--json output %q: %v", r.stdout, err)
	}
	return v
}

// failsWith checks a runtime failure: exit 1 and one stderr line holding want.
func failsWith(t *testing.T, r result, want string) {
	t.Helper()
	if code := exitCodeOf(t, r.err); code != 1 {
		t.Errorf("exit code = %d, want 1 (stderr %q)", code, r.stderr)
	}
	if !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one line with %q", r.stderr, want)
	}
}

func TestOrgCommands(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	run := func(args ...string) result { return runCLI(t.Context(), m.env(), "", args...) }

	r := ok(t, run("org", "create", "eng"))
	if r.stdout != "Created organization \"eng\".\n" {
		t.Errorf("create: stdout %q", r.stdout)
	}
	r = ok(t, run("org", "create", "ops", "--json"))
	if got := decode[protocol.Org](t, r); got.Name != "ops" || got.CreatedAt.IsZero() {
		t.Errorf("create --json: %+v", got)
	}
	failsWith(t, run("org", "create", "eng"), "org eng already exists")

	r = ok(t, run("org", "list"))
	want := "NAME  CREATED\n" +
		"eng   2m ago\n" +
		"ops   2m ago\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	list := decode[protocol.OrgList](t, ok(t, run("org", "list", "--json")))
	if d := cmp.Diff(m.orgs, list.Orgs); d != "" {
		t.Errorf("list --json (-want +got):\n%s", d)
	}

	ok(t, run("project", "create", "--org", "eng", "web"))
	failsWith(t, run("org", "delete", "eng"), "org eng is in use by project web")
	failsWith(t, run("org", "delete", "nope"), "org nope not found")
	r = ok(t, run("org", "delete", "ops"))
	if r.stdout != "Deleted organization \"ops\".\n" {
		t.Errorf("delete: stdout %q", r.stdout)
	}
	if r := run("org", "list"); !strings.Contains(r.stdout, "eng") || strings.Contains(r.stdout, "ops") {
		t.Errorf("after delete: %q", r.stdout)
	}
}

func TestProjectCommands(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	run := func(args ...string) result { return runCLI(t.Context(), m.env(), "", args...) }
	ok(t, run("org", "create", "eng"))
	ok(t, run("org", "create", "ops"))

	r := ok(t, run("project", "create", "--org", "eng", "web"))
	if r.stdout != "Created project \"web\" in organization \"eng\".\n" {
		t.Errorf("create: stdout %q", r.stdout)
	}
	r = ok(t, run("project", "create", "api", "--org", "eng", "--json"))
	if got := decode[protocol.Project](t, r); got.Org != "eng" || got.Name != "api" {
		t.Errorf("create --json: %+v", got)
	}
	ok(t, run("project", "create", "--org", "ops", "infra"))
	failsWith(t, run("project", "create", "--org", "nope", "web"), "org nope not found")

	r = ok(t, run("project", "list"))
	want := "ORG  NAME   CREATED\n" +
		"eng  web    1m ago\n" +
		"eng  api    1m ago\n" +
		"ops  infra  1m ago\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	r = ok(t, run("project", "list", "--org", "eng"))
	want = "ORG  NAME  CREATED\n" +
		"eng  web   1m ago\n" +
		"eng  api   1m ago\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("--org table (-want +got):\n%s", d)
	}
	list := decode[protocol.ProjectList](t, ok(t, run("project", "list", "--org", "ops", "--json")))
	if d := cmp.Diff([]protocol.Project{{Org: "ops", Name: "infra", CreatedAt: testNow.Add(-time.Minute)}}, list.Projects); d != "" {
		t.Errorf("list --json (-want +got):\n%s", d)
	}
	m.mu.Lock()
	q := append([]string(nil), m.projectQuery...)
	m.mu.Unlock()
	if d := cmp.Diff([]string{"", "org=eng", "org=ops"}, q); d != "" {
		t.Errorf("list queries (-want +got):\n%s", d)
	}

	r = ok(t, run("project", "delete", "--org", "eng", "web"))
	if r.stdout != "Deleted project \"web\" of organization \"eng\".\n" {
		t.Errorf("delete: stdout %q", r.stdout)
	}
	failsWith(t, run("project", "delete", "--org", "eng", "web"), "project eng/web not found")
	if r := ok(t, run("project", "list", "--org", "eng")); strings.Contains(r.stdout, "web") {
		t.Errorf("after delete: %q", r.stdout)
	}
}

func TestTokenScope(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	run := func(args ...string) result { return runCLI(t.Context(), m.env(), "", args...) }
	ok(t, run("token", "create", "ci"))
	r := ok(t, run("token", "create", "eng-ci", "--org", "eng"))
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if !strings.Contains(lines[0], "(scope org/eng)") || lines[len(lines)-1] != "tok_secret_eng-ci" {
		t.Errorf("org token output %q", r.stdout)
	}
	r = ok(t, run("token", "create", "web-ci", "--org", "eng", "--project", "web", "--json"))
	if got := decode[protocol.Token](t, r); got.Org != "eng" || got.Project != "web" || got.Value == "" {
		t.Errorf("project token --json: %+v", got)
	}
	m.mu.Lock()
	reqs := append([]protocol.CreateTokenRequest(nil), m.tokenReqs...)
	m.mu.Unlock()
	wantReqs := []protocol.CreateTokenRequest{{Name: "ci"}, {Name: "eng-ci", Org: "eng"}, {Name: "web-ci", Org: "eng", Project: "web"}}
	if d := cmp.Diff(wantReqs, reqs); d != "" {
		t.Errorf("token requests (-want +got):\n%s", d)
	}

	r = ok(t, run("token", "list"))
	want := "NAME    SCOPE            STATUS  INIT-SECRETS  CREATED  REVOKED\n" +
		"ci      account          active  -             1m ago   -\n" +
		"eng-ci  org/eng          active  -             1m ago   -\n" +
		"web-ci  project/eng/web  active  -             1m ago   -\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	list := decode[protocol.TokenList](t, ok(t, run("token", "list", "--json")))
	if len(list.Tokens) != 3 || list.Tokens[2].Org != "eng" || list.Tokens[2].Project != "web" {
		t.Errorf("list --json: %+v", list)
	}
}

func TestConnectorCommands(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	run := func(args ...string) result { return runCLI(t.Context(), m.env(), "", args...) }

	r := ok(t, run("connector", "create", "k8s-east", "--url", "https://k8s-east.internal:6443", "--type", "kubernetes",
		"--selector", "East", "--selector", "prod,east", "--token-secret", "EAST_TOKEN"))
	if r.stdout != "Created connector \"k8s-east\" for https://k8s-east.internal:6443.\n" {
		t.Errorf("create: stdout %q", r.stdout)
	}
	r = ok(t, run("connector", "create", "db", "--url", "http://db.internal:8080", "--json"))
	if got := decode[protocol.Connector](t, r); got.Name != "db" || got.URL != "http://db.internal:8080" {
		t.Errorf("create --json: %+v", got)
	}
	m.mu.Lock()
	reqs := append([]protocol.CreateConnectorRequest(nil), m.connReqs...)
	m.connectors[0].LastSuccessDelegate = "build/host-a"
	m.mu.Unlock()
	wantReqs := []protocol.CreateConnectorRequest{
		{Name: "k8s-east", URL: "https://k8s-east.internal:6443", Type: "kubernetes", Selectors: []string{"east", "prod"}, TokenSecret: "EAST_TOKEN"},
		{Name: "db", URL: "http://db.internal:8080"},
	}
	if d := cmp.Diff(wantReqs, reqs); d != "" {
		t.Errorf("create requests (-want +got):\n%s", d)
	}

	r = ok(t, run("connector", "list"))
	want := "NAME      URL                             TYPE        SELECTORS  LAST-SUCCESS\n" +
		"k8s-east  https://k8s-east.internal:6443  kubernetes  east,prod  build/host-a\n" +
		"db        http://db.internal:8080         -           -          -\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("list table (-want +got):\n%s", d)
	}
	list := decode[protocol.ConnectorList](t, ok(t, run("connector", "list", "--json")))
	if d := cmp.Diff(m.connectors, list.Connectors); d != "" {
		t.Errorf("list --json (-want +got):\n%s", d)
	}

	r = ok(t, run("connector", "get", "k8s-east"))
	want = "NAME      URL                             TYPE        SELECTORS  LAST-SUCCESS\n" +
		"k8s-east  https://k8s-east.internal:6443  kubernetes  east,prod  build/host-a\n" +
		"\nToken secret:  EAST_TOKEN (a stored secret; legate secret get EAST_TOKEN)\nCA:            the delegate's system roots\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("get table (-want +got):\n%s", d)
	}
	got := decode[protocol.Connector](t, ok(t, run("connector", "get", "k8s-east", "--json")))
	if d := cmp.Diff(m.connectors[0], got); d != "" {
		t.Errorf("get --json (-want +got):\n%s", d)
	}
	failsWith(t, run("connector", "get", "nope"), "connector nope not found")

	r = ok(t, run("connector", "delete", "db"))
	if r.stdout != "Deleted connector \"db\".\n" {
		t.Errorf("delete: stdout %q", r.stdout)
	}
	failsWith(t, run("connector", "delete", "db"), "connector db not found")
}

// TestConnectorCreateNeedsEnvURL: on connector create --url is the
// connector's, so the manager URL must come from the environment.
func TestConnectorCreateNeedsEnvURL(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	r := runCLI(t.Context(), map[string]string{EnvAPIKey: testKey}, "", "connector", "create", "k8s", "--url", "https://k8s:6443")
	if code := exitCodeOf(t, r.err); code != ExitUsage {
		t.Errorf("exit code = %d, want %d", code, ExitUsage)
	}
	if !strings.Contains(r.stderr, "--url is the connector's endpoint: set the manager URL with LEGATE_URL") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr = %q", r.stderr)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.connReqs) != 0 {
		t.Errorf("connector created: %v", m.connReqs)
	}
}

func TestTaskExplain(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	e := protocol.Explanation{TaskID: "t_7", Status: protocol.StatusQueued,
		Summary: "eligible: 2 (1 allowlisted); 2 excluded: capability_denied 1, capacity 1, selectors 1",
		Delegates: []protocol.DelegateVerdict{
			{InstanceID: "i_1", Name: "build-1", Hostname: "host-a", Reasons: []protocol.Reason{
				{Rule: protocol.RuleSelectors, Message: "missing selectors: gpu"},
				{Rule: protocol.RuleCapacity, Message: "at capacity (2/2 tasks)"}}},
			{InstanceID: "i_2", Name: "build-2", Hostname: "host-b", Eligible: true, Allowlisted: true, Reasons: []protocol.Reason{}},
			{InstanceID: "i_3", Name: "gpu-1", Hostname: "host-c", Eligible: true},
			{InstanceID: "i_4", Name: "web", Hostname: "host-d", Allowlisted: true, Reasons: []protocol.Reason{
				{Rule: protocol.RuleCapabilityDenied, Message: "tcp://db:5432 failed 1m ago: connection refused"}}},
		}}
	m.explanations["t_7"] = e
	m.explanations["t_8"] = protocol.Explanation{TaskID: "t_8", Status: protocol.StatusSucceeded}

	r := ok(t, runCLI(t.Context(), m.env(), "", "task", "explain", "t_7"))
	want := "Task t_7 (queued): eligible: 2 (1 allowlisted); 2 excluded: capability_denied 1, capacity 1, selectors 1\n" +
		"NAME     HOSTNAME  ELIGIBLE  REASONS\n" +
		"build-1  host-a    no        selectors: missing selectors: gpu; capacity: at capacity (2/2 tasks)\n" +
		"build-2  host-b    yes       allowlisted\n" +
		"gpu-1    host-c    yes       -\n" +
		"web      host-d    no        allowlisted; capability_denied: tcp://db:5432 failed 1m ago: connection refused\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("explain (-want +got):\n%s", d)
	}
	got := decode[protocol.Explanation](t, ok(t, runCLI(t.Context(), m.env(), "", "task", "explain", "t_7", "--json")))
	if d := cmp.Diff(e, got); d != "" {
		t.Errorf("explain --json (-want +got):\n%s", d)
	}

	// No summary, no delegates: a fallback line, and a note on stderr.
	r = ok(t, runCLI(t.Context(), m.env(), "", "task", "explain", "t_8"))
	if r.stdout != "Task t_8 (succeeded)\n" || !strings.HasPrefix(r.stderr, "No delegates") {
		t.Errorf("empty explain: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	r = ok(t, runCLI(t.Context(), m.env(), "", "task", "explain", "t_8", "--json"))
	if !strings.Contains(r.stdout, `"delegates": []`) {
		t.Errorf("empty explain --json: %q", r.stdout)
	}
	failsWith(t, runCLI(t.Context(), m.env(), "", "task", "explain", "t_404"), "task t_404 not found")
}

func TestDelegatesDescribe(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	hb := testNow.Add(-3 * time.Second)
	reg := testNow.Add(-2 * time.Hour)
	d := protocol.DelegateDetails{Name: "build", Instances: []protocol.DelegateDetail{
		{
			Delegate: protocol.Delegate{InstanceID: "i_1", Name: "build", Hostname: "host-a", IP: "10.0.0.1", Tags: []string{"gpu", "linux"},
				Version: "0.2.0", Type: "SHELL", TokenName: "eng-ci", Status: protocol.DelegateConnected, Connection: protocol.ConnWebSocket,
				LastHeartbeat: &hb, RunningTasks: 2, Capacity: 2, RegisteredAt: reg, Org: "eng",
				OverThreshold: "cpu 93% > DELEGATE_CPU_THRESHOLD 80%"},
			Allowlist: []protocol.CapabilityEntry{
				{Criteria: "https://git.internal", ExpiresAt: testNow.Add(6 * time.Hour), TimeLeftMS: (5*time.Hour + 59*time.Minute + 30*time.Second).Milliseconds()},
				{Criteria: "binary:kubectl", ExpiresAt: testNow.Add(time.Hour), TimeLeftMS: 42_500},
			},
			Denylist: []protocol.CapabilityEntry{
				{Criteria: "tcp://db.internal:5432", ExpiresAt: testNow.Add(5 * time.Minute), TimeLeftMS: (4*time.Minute + 12*time.Second).Milliseconds(),
					Error: "dial tcp 10.0.0.9:5432: connect: connection refused"},
			},
		},
		{
			Delegate: protocol.Delegate{InstanceID: "i_2", Name: "build", Hostname: "host-b", IP: "10.0.0.2", Version: "0.2.0",
				Status: protocol.DelegateDisconnected, Connection: protocol.ConnPolling, Draining: true, RegisteredAt: reg},
		},
	}}
	m.details["build"] = d

	r := ok(t, runCLI(t.Context(), m.env(), "", "delegates", "describe", "build"))
	want := `Delegate build: 2 instances

Instance i_1
  Hostname:        host-a
  IP:              10.0.0.1
  Status:          connected
  Connection:      websocket, last heartbeat 3s ago
  Scope:           org/eng
  Tags:            gpu, linux
  Running:         2/2 tasks
  Isolation:       not reported (older delegate)
  Over threshold:  cpu 93% > DELEGATE_CPU_THRESHOLD 80% (takes no new tasks)
  Version:         0.2.0
  Type:            SHELL
  Token:           eng-ci
  Registered:      2026-11-22 10:00:00 UTC (2h ago)
  Allowlist:
    CRITERIA              TIME-LEFT
    https://git.internal  5h59m left
    binary:kubectl        42s left
  Deny list:
    CRITERIA                TIME-LEFT   ERROR
    tcp://db.internal:5432  4m12s left  dial tcp 10.0.0.9:5432: connect: connection refused

Instance i_2
  Hostname:    host-b
  IP:          10.0.0.2
  Status:      disconnected,draining
  Connection:  polling, last heartbeat never
  Scope:       account
  Tags:        -
  Running:     0 tasks
  Isolation:   not reported (older delegate)
  Version:     0.2.0
  Type:        -
  Token:       -
  Registered:  2026-11-22 10:00:00 UTC (2h ago)
  Allowlist: none
  Deny list: none
`
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("describe (-want +got):\n%s", diff)
	}

	got := decode[protocol.DelegateDetails](t, ok(t, runCLI(t.Context(), m.env(), "", "delegates", "describe", "build", "--json")))
	wantJSON := d
	wantJSON.Instances = append([]protocol.DelegateDetail(nil), d.Instances...)
	wantJSON.Instances[1].Allowlist, wantJSON.Instances[1].Denylist = []protocol.CapabilityEntry{}, []protocol.CapabilityEntry{}
	if diff := cmp.Diff(wantJSON, got); diff != "" {
		t.Errorf("describe --json (-want +got):\n%s", diff)
	}
	if r := ok(t, runCLI(t.Context(), m.env(), "", "delegates", "describe", "build", "--json")); strings.Contains(r.stdout, `list": null`) {
		t.Errorf("describe --json has null lists:\n%s", r.stdout)
	}
	failsWith(t, runCLI(t.Context(), m.env(), "", "delegates", "describe", "gpu"), "no delegate named gpu")
}

func TestParseCapability(t *testing.T) {
	t.Parallel()
	good := []string{"http://x", "https://git.internal/health?x=1", "http://10.0.0.1:8080", "https://[::1]:443/",
		"tcp://db:5432", "tcp://10.0.0.9:1", "tcp://[fe80::1]:65535", "binary:kubectl", "binary:python3.12"}
	for _, c := range good {
		if got, err := parseCapability(c); err != nil || got != c {
			t.Errorf("parseCapability(%q) = %q, %v", c, got, err)
		}
	}
	bad := []string{"", "x", "db:5432", "HTTP://x", "ftp://x", "http://", "https://:443", "http://x:99999", "tcp://", "tcp://db",
		"tcp://db:", "tcp://:22", "tcp://db:0", "tcp://db:65536", "tcp://db:-1", "tcp://db:ssh", "tcp://db:22/x", "tcp://u@db:22",
		"binary:", "binary:./x", "binary:/usr/bin/x", "binary:a b", "binary:x\x00", "binary kubectl"}
	for _, c := range bad {
		if got, err := parseCapability(c); err == nil {
			t.Errorf("parseCapability(%q) = %q, want an error", c, got)
		}
	}
}

func TestScopeAndTimeLeft(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ org, project, want string }{
		{"", "", "account"}, {"eng", "", "org/eng"}, {"eng", "web", "project/eng/web"},
	} {
		if got := scope(tt.org, tt.project); got != tt.want {
			t.Errorf("scope(%q, %q) = %q, want %q", tt.org, tt.project, got, tt.want)
		}
	}
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "expired"}, {0, "expired"}, {999 * time.Millisecond, "expired"}, {time.Second, "1s left"},
		{59*time.Second + 999*time.Millisecond, "59s left"}, {time.Minute, "1m0s left"}, {4*time.Minute + 12*time.Second, "4m12s left"},
		{time.Hour, "1h0m left"}, {5*time.Hour + 59*time.Minute + 59*time.Second, "5h59m left"}, {30 * time.Hour, "30h0m left"},
	} {
		if got := timeLeft(tt.d.Milliseconds()); got != tt.want {
			t.Errorf("timeLeft(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestTaskGetShowsScope checks the v2 fields in task get.
func TestTaskGetShowsScope(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{status: protocol.StatusNotAssigned,
		errText: "no delegate can run the task:\nbuild-1 (host-a): scope: serves org/ops"})
	r := runCLI(t.Context(), m.env(), "", "task", "run", "--script", "x", "--org", "eng", "--project", "web",
		"--capability", "binary:kubectl", "--connector", "k8s")
	if code := exitCodeOf(t, r.err); code != ExitNotAssigned {
		t.Fatalf("exit code = %d, want 3", code)
	}
	r = ok(t, runCLI(t.Context(), m.env(), "", "task", "get", "t_1"))
	for _, want := range []string{"Scope:         project/eng/web", "Capabilities:  binary:kubectl", "Connector:     k8s",
		"Error:         no delegate can run the task:\n               build-1 (host-a): scope: serves org/ops\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("task get lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestKubernetesConnectorCreate: connector create --type kubernetes sends
// the CA file's PEM and the token secret's name; without --token-secret,
// or with a CA file that is missing, it is a usage error that says what to
// give; connector list -o wide and get show the secret's name and the CA.
func TestKubernetesConnectorCreate(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	run := func(args ...string) result { return runCLI(t.Context(), m.env(), "", args...) }
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, []byte(ca), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", "https://k8s:6443"}, "needs --token-secret SECRET"},
		{[]string{"--url", "https://k8s:6443", "--token-secret", "T", "--ca-file", caFile + ".none"}, "--ca-file"},
	} {
		r := run(append([]string{"connector", "create", "prod", "--type", "kubernetes"}, tc.args...)...)
		if cliCode(t, r.err) != ExitUsage || !strings.Contains(errText(r.err), tc.want) {
			t.Errorf("%v: %v, want a usage error saying %q", tc.args, r.err, tc.want)
		}
	}
	ok(t, run("connector", "create", "prod", "--type", "kubernetes", "--url", "https://k8s:6443", "--ca-file", caFile, "--token-secret", "PROD_TOKEN"))
	m.mu.Lock()
	reqs := append([]protocol.CreateConnectorRequest(nil), m.connReqs...)
	m.mu.Unlock()
	if d := cmp.Diff([]protocol.CreateConnectorRequest{{Name: "prod", URL: "https://k8s:6443", Type: "kubernetes", CAPEM: ca, TokenSecret: "PROD_TOKEN"}}, reqs); d != "" {
		t.Errorf("create requests (-want +got):\n%s", d)
	}
	r := ok(t, run("connector", "list", "-o", "wide"))
	if !strings.Contains(r.stdout, "TOKEN-SECRET") || !strings.Contains(r.stdout, "PROD_TOKEN    kube-ca (until 2036-01-01)") {
		t.Errorf("list -o wide:\n%s", r.stdout)
	}
	r = ok(t, run("connector", "get", "prod"))
	if !strings.Contains(r.stdout, "Token secret:  PROD_TOKEN") || !strings.Contains(r.stdout, "CA:            kube-ca (until 2036-01-01)") {
		t.Errorf("get:\n%s", r.stdout)
	}
}
