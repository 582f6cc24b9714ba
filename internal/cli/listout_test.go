package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

// listManager is outputManager with something in every list: it serves
// the groups, roles, bindings, pipelines, runs, secrets, queue, audit log
// and deployments itself, on a real loopback socket, and hands every
// other request to outputManager's fake.
func listManager(t *testing.T) map[string]string {
	t.Helper()
	m := outputManager(t)
	m.mu.Lock()
	m.connectors = append(m.connectors, protocol.Connector{Name: "k8s", URL: "https://k8s.internal:6443", Type: "kubernetes", CreatedAt: testNow})
	m.mu.Unlock()
	m.confs.mu.Lock()
	m.confs.list = append(m.confs.list, protocol.Configuration{Name: "tools", Version: 2, CreatedAt: testNow, UpdatedAt: testNow})
	m.confs.mu.Unlock()

	created := testNow.Add(-2 * time.Hour)
	finished := testNow.Add(-2*time.Hour + 90*time.Second)
	answers := map[string]any{
		protocol.PathGroups: protocol.GroupList{Groups: []protocol.Group{{Name: "ops", Members: []string{"alice", "ci-bot"}, CreatedAt: created}}},
		protocol.PathRoles: protocol.RoleList{Roles: []protocol.Role{{Name: "viewer", Builtin: true, Permissions: []string{"delegate:view", "task:view"}},
			{Name: "deleter", Description: "deletes delegates", Permissions: []string{"delegate:delete"}, CreatedAt: created}}},
		protocol.PathBindings: protocol.BindingList{Bindings: []protocol.Binding{
			{Role: "viewer", SubjectKind: protocol.PrincipalUser, Subject: "alice", CreatedAt: created},
			{Role: "deleter", SubjectKind: protocol.SubjectGroup, Subject: "ops", Org: "eng", Project: "web", CreatedAt: created}}},
		protocol.PathPipelines: protocol.PipelineList{Pipelines: []protocol.Pipeline{{Name: "deploy-web", Description: "ships web", Org: "eng",
			Version: 3, UpdatedBy: "user alice", CreatedAt: created, UpdatedAt: testNow.Add(-time.Hour)},
			{Name: "nightly", Org: "eng", Project: "web", Version: 1, CreatedAt: created, UpdatedAt: created},
			{Name: "nightly", Version: 1, CreatedAt: created, UpdatedAt: created}}},
		protocol.PathRuns: protocol.RunList{Runs: []protocol.Run{
			{ID: "r_2", Pipeline: "deploy-web", Org: "eng", Version: 3, Status: protocol.RunRunning, Trigger: "manual", TriggeredBy: "user alice", CreatedAt: testNow.Add(-time.Minute)},
			{ID: "r_1", Pipeline: "deploy-web", Org: "eng", Version: 2, Status: protocol.RunFailed, Trigger: "webhook", TriggeredBy: "webhook:deploy-web",
				Error: "step build failed", CreatedAt: created, FinishedAt: &finished}}},
		protocol.PathSecrets: protocol.SecretList{Secrets: []protocol.Secret{{Name: "DB_PASSWORD", Org: "eng", Version: 2, CreatedAt: created, UpdatedAt: testNow.Add(-time.Hour)}}},
		protocol.PathQueue: protocol.QueueSummary{Queued: 3, OldestSeconds: 90, Sets: []protocol.QueueSignal{
			{Selectors: []string{"gpu", "linux"}, Queued: 2, OldestSeconds: 90}, {Queued: 1, OldestSeconds: 5}}},
		protocol.PathAudit: protocol.AuditList{Events: []protocol.AuditEvent{{ID: "a_1", Time: created, PrincipalKind: protocol.PrincipalUser, Principal: "alice",
			Credential: "api_key", CredentialName: "laptop", Action: "token.create", ResourceType: "token", Resource: "ci", Address: "127.0.0.1",
			Outcome: protocol.AuditSuccess, Status: 201}}},
		protocol.PathDeployments: protocol.DeploymentList{Deployments: []protocol.Deployment{{ID: "dp_1", Service: "api", Environment: "prod", Version: "1.4.2",
			Pipeline: "deploy-web", RunID: "r_1", Stage: "prod", TriggeredBy: "user:alice", Status: "succeeded", StartedAt: created, FinishedAt: &finished}}},
		protocol.PathDeploymentsCurrent: protocol.CurrentDeployments{Current: []protocol.CurrentDeployment{{Service: "api", Environment: "prod",
			Current: protocol.Deployment{ID: "dp_1", Version: "1.4.2", FinishedAt: &finished, TriggeredBy: "user:alice"}}}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := answers[r.URL.Path]
		if !ok || r.Method != http.MethodGet {
			m.srv.Config.Handler.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			writeError(w, 401, protocol.CodeUnauthenticated, "invalid API key")
			return
		}
		if st := r.URL.Query().Get("status"); r.URL.Path == protocol.PathRuns && st != "" {
			runs := protocol.RunList{Runs: []protocol.Run{}}
			for _, run := range v.(protocol.RunList).Runs {
				if run.Status == st {
					runs.Runs = append(runs.Runs, run)
				}
			}
			v = runs
		}
		if r.URL.Path == protocol.PathQueue && r.URL.Query().Get("selectors") != "" {
			v = protocol.QueueSignal{Selectors: []string{"gpu"}, Queued: 2, OldestSeconds: 90, Eligible: 3, EligibleOldestSeconds: 120}
		}
		writeJSON(w, 200, v)
	}))
	t.Cleanup(srv.Close)
	return map[string]string{EnvURL: srv.URL, EnvAPIKey: testKey}
}

// listCommands are the commands of the CLI that list: every "list", and
// the others that print a list of objects.
func listCommands(t *testing.T) [][]string {
	t.Helper()
	root := &cobra.Command{Use: "legate"}
	addCommands(root, &app{getenv: func(string) string { return "" }, now: func() time.Time { return testNow }, loc: time.UTC, build: testBuild})
	Finish(root)
	listLike := map[string]bool{"legate role bindings": true, "legate task queue": true, "legate deployments current": true}
	var out [][]string
	walk(root, func(c *cobra.Command) {
		if c.HasSubCommands() || !c.Runnable() {
			return
		}
		if c.Name() == "list" || strings.HasPrefix(c.Short, "List ") || listLike[c.CommandPath()] {
			out = append(out, strings.Fields(c.CommandPath())[1:])
		}
	})
	if len(out) < 19 {
		t.Fatalf("found only %d list commands: %v", len(out), out)
	}
	return out
}

// TestEveryListTakesEveryFormat walks the command tree: every list command
// (so a new one cannot forget) offers and accepts -o json, yaml, wide and
// name, and each prints what it should: JSON, the same value as YAML, a
// table with more columns than the default one, one name per line.
func TestEveryListTakesEveryFormat(t *testing.T) {
	t.Parallel()
	env := listManager(t)
	for _, args := range listCommands(t) {
		offered := completions(t, env, append(slices.Clone(args), "-o", "")...)
		if d := cmp.Diff(listFormats(), offered); d != "" {
			t.Errorf("%v: -o offers (-want +got):\n%s", args, d)
			continue
		}
		run := func(format ...string) string {
			t.Helper()
			r := runCLI(t.Context(), env, "", append(slices.Clone(args), format...)...)
			if r.err != nil || r.stderr != "" {
				t.Errorf("%v %v: err %v, stderr %q", args, format, r.err, r.stderr)
			}
			return r.stdout
		}
		table, wide := run(), run("-o", "wide")
		header := func(s string) int { return len(strings.Fields(strings.SplitN(s, "\n", 2)[0])) }
		if header(wide) <= header(table) || strings.Count(wide, "\n") != strings.Count(table, "\n") {
			t.Errorf("%v -o wide adds no column:\n%s\nto\n%s", args, wide, table)
		}
		if names := run("-o", "name"); names == "" || !strings.HasSuffix(names, "\n") || strings.Contains(names, "\t") ||
			strings.Count(names, "\n") > strings.Count(table, "\n") {
			t.Errorf("%v -o name: %q", args, names)
		}
		j := run("-o", "json")
		if !json.Valid([]byte(j)) || j != run("--json") {
			t.Errorf("%v -o json: not the JSON of --json:\n%s", args, j)
		}
		checkRoundTrip(t, []byte(j), []byte(run("-o", "yaml")))
	}
}

// TestListOutputs: the lists that printed raw tab-separated rows, or lacked
// -o wide or -o name, print aligned tables, their wide columns and their
// names.
func TestListOutputs(t *testing.T) {
	t.Parallel()
	env := listManager(t)
	tests := []struct {
		args  []string
		table string
		wide  string // the header of -o wide
		names string
	}{
		{[]string{"user", "list"},
			"NAME    KIND             STATUS    GROUPS  BINDINGS\n" +
				"admin   user             enabled   -       -\n" +
				"alice   user             enabled   -       -\n" +
				"gone    user             disabled  -       -\n" +
				"ci-bot  service account  enabled   -       -\n",
			"NAME    KIND             STATUS    GROUPS  BINDINGS  DISPLAY  PASSWORD  CREATED-AT",
			"admin\nalice\ngone\nci-bot\n"},
		{[]string{"group", "list"},
			"NAME  MEMBERS\nops   alice,ci-bot\n",
			"NAME  MEMBERS       CREATED-AT",
			"ops\n"},
		{[]string{"role", "list"},
			"NAME     BUILT-IN  PERMISSIONS\n" +
				"viewer   yes       delegate:view,task:view\n" +
				"deleter  no        delegate:delete\n",
			"NAME     BUILT-IN  PERMISSIONS              DESCRIPTION        CREATED-AT",
			"viewer\ndeleter\n"},
		{[]string{"role", "bindings"},
			"ROLE     SUBJECT     SCOPE\n" +
				"viewer   user alice  account\n" +
				"deleter  group ops   eng/web\n",
			"ROLE     SUBJECT     SCOPE    CREATED-AT",
			"viewer --user alice\ndeleter --group ops --org eng --project web\n"},
		{[]string{"pipeline", "list"},
			"NAME        SCOPE            VERSION  UPDATED  DESCRIPTION\n" +
				"deploy-web  org/eng          3        1h ago   ships web\n" +
				"nightly     project/eng/web  1        2h ago   -\n" +
				"nightly     account          1        2h ago   -\n",
			"NAME        SCOPE            VERSION  UPDATED  DESCRIPTION  UPDATED-BY  CREATED-AT            UPDATED-AT",
			"deploy-web\nnightly\nnightly\n"},
		{[]string{"run", "list"},
			"ID   PIPELINE    VERSION  STATUS   STARTED  DURATION  TRIGGERED BY        SCOPE\n" +
				"r_2  deploy-web  3        running  1m ago   1m0s      user alice          org/eng\n" +
				"r_1  deploy-web  2        failed   2h ago   1m30s     webhook:deploy-web  org/eng\n",
			"ID   PIPELINE    VERSION  STATUS   STARTED  DURATION  TRIGGERED BY        SCOPE    TRIGGER  CREATED-AT            FINISHED-AT           ERROR",
			"r_2\nr_1\n"},
		{[]string{"secret", "list"},
			"NAME         SCOPE    VERSION  UPDATED\n" +
				"DB_PASSWORD  org/eng  2        2026-11-22 11:00:00 UTC (1h ago)\n",
			"NAME         SCOPE    VERSION  UPDATED                           CREATED",
			"DB_PASSWORD\n"},
		{[]string{"task", "queue"},
			"SELECTORS  QUEUED  OLDEST\n" +
				"gpu,linux  2       1m30s\n" +
				"(none)     1       5s\n" +
				"TOTAL      3       1m30s\n",
			"SELECTORS  QUEUED  OLDEST  WAITING-SINCE",
			"gpu,linux\n(none)\n"},
		{[]string{"task", "queue", "--selectors", "gpu"},
			"SELECTORS  QUEUED  OLDEST  ELIGIBLE  ELIGIBLE-OLDEST\n" +
				"gpu        2       1m30s   3         2m0s\n",
			"SELECTORS  QUEUED  OLDEST  ELIGIBLE  ELIGIBLE-OLDEST  WAITING-SINCE         ELIGIBLE-WAITING-SINCE",
			"gpu\n"},
		{[]string{"audit", "list"},
			"TIME                  PRINCIPAL  ACTION        RESOURCE  SCOPE    ADDRESS    OUTCOME\n" +
				"2026-11-22T10:00:00Z  alice      token.create  ci        account  127.0.0.1  success\n",
			"TIME                  PRINCIPAL  ACTION        RESOURCE  SCOPE    ADDRESS    OUTCOME  CREDENTIAL      STATUS  DETAIL",
			"a_1\n"},
		{[]string{"deployments", "list"},
			"SERVICE  ENVIRONMENT  VERSION  STATUS     STARTED  DURATION\n" +
				"api      prod         1.4.2    succeeded  2h ago   1m30s\n",
			"SERVICE  ENVIRONMENT  VERSION  STATUS     STARTED  DURATION  PIPELINE    RUN  STAGE  TRIGGERED BY  SCOPE    ID    ROLLBACK OF",
			"dp_1\n"},
		{[]string{"deployments", "current"},
			"SERVICE  ENVIRONMENT  VERSION  DEPLOYED  PREVIOUS\n" +
				"api      prod         1.4.2    1h ago    -\n",
			"SERVICE  ENVIRONMENT  VERSION  DEPLOYED  PREVIOUS  DEPLOYMENT  BY          PREVIOUS DEPLOYMENT  SCOPE",
			"api/prod\n"},
	}
	for _, tt := range tests {
		r := runCLI(t.Context(), env, "", tt.args...)
		if d := cmp.Diff(tt.table, r.stdout); r.err != nil || d != "" {
			t.Errorf("%v: err %v (-want +got):\n%s", tt.args, r.err, d)
		}
		r = runCLI(t.Context(), env, "", append(tt.args, "-o", "wide")...)
		if got, _, _ := strings.Cut(r.stdout, "\n"); r.err != nil || strings.TrimRight(got, " ") != tt.wide {
			t.Errorf("%v -o wide: err %v, header\n%q, want\n%q", tt.args, r.err, got, tt.wide)
		}
		r = runCLI(t.Context(), env, "", append(tt.args, "-o", "name")...)
		if r.err != nil || r.stdout != tt.names {
			t.Errorf("%v -o name: err %v, %q, want %q", tt.args, r.err, r.stdout, tt.names)
		}
	}
	// The wide columns hold what the default leaves out.
	for args, want := range map[string][]string{
		"run list":    {"manual", "webhook", "2026-11-22T10:01:30Z", "step build failed"},
		"user list":   {"none"},
		"secret list": {"2026-11-22 10:00:00 UTC (2h ago)"},
		"task queue":  {"2026-11-22T11:58:30Z"},
	} {
		r := runCLI(t.Context(), env, "", append(strings.Fields(args), "-o", "wide")...)
		for _, w := range want {
			if r.err != nil || !strings.Contains(r.stdout, w) {
				t.Errorf("%s -o wide lacks %q: err %v\n%s", args, w, r.err, r.stdout)
			}
		}
	}
}

// TestCompletionPipelinesAndRuns: pipeline names (each once, with its
// scopes; only those of --org and --project when set) and run IDs (recent
// ones; running ones for cancel) complete as task IDs and delegate names
// do.
func TestCompletionPipelinesAndRuns(t *testing.T) {
	t.Parallel()
	env := listManager(t)
	runs := []string{"r_2\tdeploy-web, running, 1m ago", "r_1\tdeploy-web, failed, 2h ago"}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"pipeline", "get", ""}, []string{"deploy-web\torg/eng", "nightly\tproject/eng/web, account"}},
		{[]string{"pipeline", "run", "n"}, []string{"nightly\tproject/eng/web, account"}},
		{[]string{"pipeline", "delete", "--org", "eng", ""}, []string{"deploy-web\torg/eng"}},
		{[]string{"pipeline", "delete", "--org", "eng", "--project", "web", ""}, []string{"nightly\tproject/eng/web"}},
		{[]string{"pipeline", "webhook", "enable", "d"}, []string{"deploy-web\torg/eng"}},
		{[]string{"pipeline", "webhook", "disable", ""}, []string{"deploy-web\torg/eng", "nightly\tproject/eng/web, account"}},
		{[]string{"pipeline", "run", "nightly", ""}, nil}, // one argument only
		{[]string{"run", "list", "--pipeline", "de"}, []string{"deploy-web\torg/eng"}},
		{[]string{"run", "get", ""}, runs},
		{[]string{"run", "logs", "r_1"}, runs[1:]},
		{[]string{"run", "cancel", ""}, runs[:1]},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, completions(t, env, tt.args...), cmpopts.EquateEmpty()); d != "" {
			t.Errorf("__complete %v (-want +got):\n%s", tt.args, d)
		}
	}
}

// TestEveryGetTakesJSONAndYAML: every get and describe command offers -o
// json and -o yaml (the README says so).
func TestEveryGetTakesJSONAndYAML(t *testing.T) {
	t.Parallel()
	root := &cobra.Command{Use: "legate"}
	addCommands(root, &app{getenv: func(string) string { return "" }, now: func() time.Time { return testNow }, loc: time.UTC, build: testBuild})
	Finish(root)
	n := 0
	walk(root, func(c *cobra.Command) {
		if c.Name() != "get" && c.Name() != "describe" {
			return
		}
		n++
		offered := completions(t, nil, append(strings.Fields(c.CommandPath())[1:], "x", "-o", "")...)
		if !slices.Contains(offered, formatJSON) || !slices.Contains(offered, formatYAML) {
			t.Errorf("%s: -o offers %v, want json and yaml among them", c.CommandPath(), offered)
		}
	})
	if n < 10 {
		t.Errorf("found only %d get commands", n)
	}
}
