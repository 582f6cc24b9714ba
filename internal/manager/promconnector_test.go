package manager

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
)

// verifyTask is a verify task's body, with extra JSON fields in the task
// (task) and in its verify section (v).
func verifyTask(task, v string) string {
	return `{"type":"verify"` + task + `,"verify":{"metrics":[{"name":"error_rate","query":"sum(rate(errors_total[1m]))","threshold":{"op":"<","value":0.01}}]` + v + `}}`
}

// TestPrometheusConnectorGivesVerifyTasksTheProvider: a connector of
// type prometheus carries its URL, CA, and the names of the stored
// secrets of its bearer token or basic auth password (bad ones refused,
// saying what to give); it shows the secrets' names, never their values.
// A verify task that names it, submitted or prepared as a pipeline's step
// is, gets the provider with the credentials as references to the
// secrets, which the caller needs secret:access for and which the
// delegate gets resolved and masked when it claims the task. A task that
// also sets its own provider, a shell task, and a literal secret in a
// task's own provider are refused.
func TestPrometheusConnectorGivesVerifyTasksTheProvider(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	ctx := context.Background()
	ca := testCAPEM(t)
	caJSON, _ := json.Marshal(ca)
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"PROM_TOKEN","value":"the-prom-token"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"PROM_PASSWORD","value":"the-prom-password"}`, 201)

	for _, tc := range []struct{ body, want string }{
		{`{"name":"p","type":"prometheus","url":"ftp://prom.internal"}`, "http:// or https://"},
		{`{"name":"p","type":"prometheus","url":"https://prom.internal","token_secret":"PROM_TOKEN","username":"u","password_secret":"PROM_PASSWORD"}`, "not both"},
		{`{"name":"p","type":"prometheus","url":"https://prom.internal","username":"u"}`, "needs both username and password_secret"},
		{`{"name":"p","type":"prometheus","url":"https://prom.internal","password_secret":"PROM_PASSWORD"}`, "needs both username and password_secret"},
		{`{"name":"p","type":"prometheus","url":"https://prom.internal","token_secret":"no such"}`, "token_secret"},
		{`{"name":"p","type":"prometheus","url":"https://prom.internal","username":"a:b","password_secret":"PROM_PASSWORD"}`, "cannot hold ':'"},
		{`{"name":"p","type":"prometheus","url":"https://u:pw@prom.internal","token_secret":"PROM_TOKEN"}`, "carries a user"},
		{`{"name":"p","type":"prometheus","url":"https://prom.internal","ca_pem":"not a pem"}`, "not PEM"},
		{`{"name":"p","type":"git","url":"https://git.internal","username":"u","password_secret":"PROM_PASSWORD"}`, "only a connector of type prometheus"},
	} {
		if status, body := tm.api(t, admin, "POST", protocol.PathConnectors, tc.body); status != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("create %s: %d %s; want 400 saying %q", tc.body, status, body, tc.want)
		}
	}
	created := tm.mustAPI(t, admin, "POST", protocol.PathConnectors,
		`{"name":"prom","type":"prometheus","url":"https://prom.internal:9090/","token_secret":"PROM_TOKEN","selectors":["mon"]}`, 201)
	createdBasic := tm.mustAPI(t, admin, "POST", protocol.PathConnectors,
		`{"name":"prom-basic","type":"prometheus","url":"https://prom.internal/prometheus","ca_pem":`+string(caJSON)+`,"username":"reader","password_secret":"PROM_PASSWORD"}`, 201)
	var conn protocol.Connector
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathConnectors+"/prom-basic", "", 200)), &conn); err != nil {
		t.Fatal(err)
	}
	if conn.Username != "reader" || conn.PasswordSecret != "PROM_PASSWORD" || conn.CAPEM != ca || conn.Type != protocol.ProviderPrometheus {
		t.Errorf("the connector as shown: %+v", conn)
	}
	list := tm.mustAPI(t, admin, "GET", protocol.PathConnectors, "", 200)
	for _, body := range []string{created, createdBasic, list} {
		if strings.Contains(body, "the-prom-token") || strings.Contains(body, "the-prom-password") {
			t.Errorf("a connector answer holds a secret's value: %s", body)
		}
	}

	wantTok := protocol.MetricsProvider{Type: protocol.ProviderPrometheus, URL: "https://prom.internal:9090", BearerToken: "${secrets.PROM_TOKEN}"}
	wantBasic := protocol.MetricsProvider{Type: protocol.ProviderPrometheus, URL: "https://prom.internal/prometheus", CAPEM: ca,
		Username: "reader", Password: "${secrets.PROM_PASSWORD}"}
	submit := func(conn string) protocol.Task {
		t.Helper()
		var task protocol.Task
		body := tm.mustAPI(t, admin, "POST", protocol.PathTasks, verifyTask(`,"connector":"`+conn+`"`, ""), 201)
		if err := json.Unmarshal([]byte(body), &task); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(body, "the-prom-") || strings.Contains(tm.mustAPI(t, admin, "GET", protocol.PathTasks+"/"+task.ID, "", 200), "the-prom-") {
			t.Errorf("a task answer holds a secret's value: %s", body)
		}
		return task
	}
	task := submit("prom")
	if task.Verify == nil || task.Verify.Provider == nil || *task.Verify.Provider != wantTok {
		t.Fatalf("the submitted task's provider: %+v", task.Verify)
	}
	if !slices.Equal(task.Selectors, []string{"mon"}) || !slices.Equal(task.Capabilities, []string{"https://prom.internal:9090/"}) {
		t.Errorf("the task's selectors %v and capabilities %v: want the connector's selectors and its URL", task.Selectors, task.Capabilities)
	}
	basic := submit("prom-basic")
	if basic.Verify == nil || basic.Verify.Provider == nil || *basic.Verify.Provider != wantBasic {
		t.Fatalf("the submitted task's provider (basic auth): %+v", basic.Verify)
	}
	if !slices.Equal(basic.Capabilities, []string{"tcp://prom.internal:443"}) {
		t.Errorf("capabilities %v of a provider with its own CA: want a TCP connection to it (an https probe trusts only system roots)", basic.Capabilities)
	}

	// The delegate that claims them gets the secrets, and the values to mask.
	tok, err := tm.client(t, admin).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	del, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "mon", "h", "mon")
	acq, err := del.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p := acq.Spec.Verify; p == nil || p.Provider == nil || p.Provider.BearerToken != "the-prom-token" || !slices.Contains(acq.Mask, "the-prom-token") {
		t.Errorf("the claimed task's verify %+v, mask %q: want the bearer token resolved and masked", acq.Spec.Verify, acq.Mask)
	}
	acq, err = del.Acquire(ctx, basic.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p := acq.Spec.Verify; p == nil || p.Provider == nil || p.Provider.Password != "the-prom-password" || p.Provider.Username != "reader" ||
		!slices.Contains(acq.Mask, "the-prom-password") {
		t.Errorf("the claimed task's verify %+v, mask %q: want the password resolved and masked", acq.Spec.Verify, acq.Mask)
	}

	// Who may use the connector but not the secret is refused.
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["task:run","task:view","connector:access","connector:view","pipeline:execute","pipeline:view"]}`, 201)
	key := tm.userKey(t, "rita", "runner", access.Account)
	if status, body := tm.api(t, key, "POST", protocol.PathTasks, verifyTask(`,"connector":"prom"`, "")); status != http.StatusForbidden || !strings.Contains(body, "secret:access") {
		t.Errorf("a verify task through the connector without secret:access: %d %s, want 403 naming secret:access", status, body)
	}

	// A task with its own provider as well, a shell task, and a literal
	// secret in a task's own provider are refused.
	own := `,"provider":{"type":"prometheus","url":"https://other:9090"}`
	for _, tc := range []struct{ body, want string }{
		{verifyTask(`,"connector":"prom"`, own), "give one or the other"},
		{`{"type":"shell","shell":{"script":"curl prom"},"connector":"prom"}`, "a shell task cannot use it"},
		{verifyTask("", `,"provider":{"type":"prometheus","url":"https://other:9090","bearer_token":"a-literal-token"}`), "must be a stored secret's reference"},
		{verifyTask("", `,"provider":{"type":"prometheus","url":"https://other:9090","username":"u","password":"a-literal"}`), "must be a stored secret's reference"},
	} {
		if status, resp := tm.api(t, admin, "POST", protocol.PathTasks, tc.body); status != http.StatusBadRequest || !strings.Contains(resp, tc.want) {
			t.Errorf("submit %s: %d %s; want 400 saying %q", tc.body, status, resp, tc.want)
		}
	}
	// A task's own provider with references is taken as it is.
	tm.mustAPI(t, admin, "POST", protocol.PathTasks,
		verifyTask("", `,"provider":{"type":"prometheus","url":"https://other:9090","bearer_token":"${secrets.PROM_TOKEN}"}`), 201)

	// A pipeline's step is prepared by the same path (the engine's
	// PrepareTask): the provider is filled in, and the secrets are checked
	// for whoever the run acts as.
	policy := func(kind, id, role string) func(context.Context) (*access.Policy, error) {
		return func(context.Context) (*access.Policy, error) {
			return &access.Policy{Principal: access.Principal{Kind: kind, ID: id, Name: id},
				Bindings: []access.Binding{{Role: role, SubjectKind: kind, SubjectID: id, Scope: access.Account}}}, nil
		}
	}
	var spec protocol.TaskSpec
	if err := json.Unmarshal([]byte(verifyTask(`,"connector":"prom-basic"`, "")), &spec); err != nil {
		t.Fatal(err)
	}
	step := spec
	binds, err := tm.m.dispatch.PrepareTask(ctx, tm.admin.AccountID, &step, policy(access.KindUser, "ana", access.RoleAccountAdmin))
	if err != nil || step.Verify == nil || step.Verify.Provider == nil || *step.Verify.Provider != wantBasic || len(binds) != 1 {
		t.Errorf("a pipeline step's verify task: %+v, bindings %v, %v; want the connector's provider and its password's binding", step.Verify, binds, err)
	}
	step = spec
	step.Verify = &protocol.VerifySpec{Metrics: spec.Verify.Metrics}
	if _, err := tm.m.dispatch.PrepareTask(ctx, tm.admin.AccountID, &step, policy(access.KindUser, "rita", "runner")); err == nil ||
		!strings.Contains(err.Error(), "secret:access") {
		t.Errorf("a pipeline step's verify task for who lacks secret:access: %v, want a refusal naming secret:access", err)
	}

	// A pipeline's verify step that names the connector, end to end from
	// its YAML: its task gets the provider with the secret's reference.
	tm.applyPipeline(t, "name: check\nstages:\n  - name: s\n    steps:\n      - name: v\n        connector: prom-basic\n        verify:\n          duration: 1m\n          interval: 10s\n          metrics:\n            - {name: error_rate, query: 'sum(rate(errors_total[1m]))', threshold: '< 0.01'}\n")
	var run protocol.Run
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathPipelines+"/check/runs", `{}`, 201)), &run); err != nil {
		t.Fatal(err)
	}

	var stepTask protocol.Task // fresh: decoding into a used one keeps what the JSON leaves out
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathTasks+"/"+run.Steps[0].TaskID, "", 200)), &stepTask); err != nil {
		t.Fatal(err)
	}
	if task := stepTask; task.Verify == nil || task.Verify.Provider == nil || *task.Verify.Provider != wantBasic {
		t.Errorf("the pipeline verify step's task's provider (connector %q): %s", task.Connector, cmp.Diff(&wantBasic, task.Verify.Provider))
	}
}
