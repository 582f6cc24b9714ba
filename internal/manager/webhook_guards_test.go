package manager

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/pipeline"
	"github.com/legate-dev/legate/internal/pipeline/engine"
	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// signedDelivery is the headers of a delivery of body signed with secret
// at time at, with delivery ID id, as docs/pipelines.md tells a sender to
// sign it.
func signedDelivery(secret string, at time.Time, id string, body []byte) map[string]string {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + id + "."))
	mac.Write(body)
	return map[string]string{
		protocol.HeaderLegateTimestamp:    ts,
		protocol.HeaderLegateDelivery:     id,
		protocol.HeaderLegateSignature256: "sha256=" + hex.EncodeToString(mac.Sum(nil)),
	}
}

func withHeaders(h map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestWebhookReplay: a captured delivery sent again — as it was, with
// another delivery ID, with none, or after the window — starts nothing;
// nor does a body-only (GitHub-style) signature, which anyone who saw one
// delivery could send again forever. It failed before the delivery's
// timestamp and ID were signed and IDs remembered: the body-only capture
// started a run each time it was sent.
func TestWebhookReplay(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	if _, _, err := tm.st.ApplyPipeline(ctx, store.Pipeline{AccountID: tm.admin.AccountID, Name: "hooked", Source: testHookPipeline, UpdatedBy: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ws := tm.enableWebhook(t, tm.admin.APIKey, "hooked", false)
	payload := []byte(`{"release": {"tag_name": "v1.2.3"}}`)

	// A body-only signature, as GitHub sends it, resent with other IDs.
	for i, id := range []string{"", "a", "b", "c"} {
		h := map[string]string{protocol.HeaderHubSignature256: sign(ws.Secret, payload), protocol.HeaderGitHubDelivery: id}
		if st, body := tm.deliver(t, ws.Path, payload, h); st != http.StatusUnauthorized || !strings.Contains(body, protocol.HeaderLegateSignature256) {
			t.Errorf("body-only signature, sent %d times: %d %s, want 401 naming %s", i+1, st, body, protocol.HeaderLegateSignature256)
		}
	}
	if n := tm.runCount(t); n != 0 {
		t.Fatalf("%d runs from a body-only signature, want 0", n)
	}

	now := time.Now()
	good := signedDelivery(ws.Secret, now, "d-1", payload)
	if st, body := tm.deliver(t, ws.Path, payload, good); st != http.StatusCreated {
		t.Fatalf("a good delivery: %d %s, want 201", st, body)
	}
	old := signedDelivery(ws.Secret, now.Add(-engine.WebhookWindow-time.Minute), "d-old", payload)
	future := signedDelivery(ws.Secret, now.Add(engine.WebhookWindow+time.Minute), "d-future", payload)
	refused := []struct {
		name    string
		headers map[string]string
		status  int
		want    string
	}{
		{"the same capture", good, http.StatusConflict, "d-1 was accepted already"},
		{"another delivery ID", withHeaders(good, protocol.HeaderLegateDelivery, "d-2"), http.StatusUnauthorized, "does not match"},
		{"no delivery ID", withHeaders(good, protocol.HeaderLegateDelivery, ""), http.StatusUnauthorized, "missing " + protocol.HeaderLegateDelivery},
		{"another timestamp", withHeaders(good, protocol.HeaderLegateTimestamp, strconv.FormatInt(now.Unix()+1, 10)), http.StatusUnauthorized, "does not match"},
		{"no timestamp", withHeaders(good, protocol.HeaderLegateTimestamp, ""), http.StatusUnauthorized, "missing " + protocol.HeaderLegateTimestamp},
		{"signed before the window", old, http.StatusUnauthorized, "more than 5m0s"},
		{"signed after the window", future, http.StatusUnauthorized, "more than 5m0s"},
		{"a bad delivery ID", signedDelivery(ws.Secret, now, "d 1;x", payload), http.StatusUnauthorized, "letters, digits"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			if st, body := tm.deliver(t, ws.Path, payload, tt.headers); st != tt.status || !strings.Contains(body, tt.want) {
				t.Errorf("%d %s, want %d containing %q", st, body, tt.status, tt.want)
			}
		})
	}
	if n := tm.runCount(t); n != 1 {
		t.Errorf("%d runs, want 1: every replay was refused", n)
	}
	if got := promtest.Scrape(t, tm.url+protocol.PathMetrics).Value(t, "legate_webhook_replays_total"); got != 3 {
		t.Errorf("legate_webhook_replays_total = %v, want 3 (the same capture, before and after the window)", got)
	}
	// A new delivery, with its own ID and time, is accepted.
	if st, body := tm.deliver(t, ws.Path, payload, signedDelivery(ws.Secret, time.Now(), "d-2", payload)); st != http.StatusCreated {
		t.Errorf("a second delivery: %d %s, want 201", st, body)
	}
}

const guardedPipeline = `name: guarded
stages:
  - name: deploy
    steps:
      - name: push
        shell: ./push
        secrets: {TOKEN: deploy_token}
`

const leakingPipeline = `name: guarded
stages:
  - name: deploy
    steps:
      - name: push
        shell: echo "$TOKEN $ROOT"
        secrets: {TOKEN: deploy_token, ROOT: root_password}
`

// TestWebhookEditByLesserUser: a user who may edit a pipeline but not run
// what the edit makes it use rewrites an admin's pipeline; the webhook the
// admin enabled must not run the new text with the admin's rights. It
// failed before an edit suspended the webhook: the next delivery ran the
// edit as the admin.
func TestWebhookEditByLesserUser(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	ctx := context.Background()
	for _, s := range []string{"deploy_token", "root_password"} {
		tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"`+s+`","value":"v-`+s+`"}`, 201)
	}
	tm.mustAPI(t, admin, "POST", protocol.PathPipelines, mustJSON(t, protocol.ApplyPipelineRequest{Source: guardedPipeline}), 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"editor","permissions":["pipeline:view","pipeline:edit"]}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"deployer","permissions":["pipeline:view","pipeline:edit","pipeline:execute","secret:access"]}`, 201)
	mallory := tm.userKey(t, "mallory", "editor", access.Account)

	// Enabling needs the right to run what the pipeline uses.
	if st, body := tm.api(t, mallory, "POST", protocol.PathPipelines+"/guarded/webhook", `{}`); st != http.StatusForbidden || !strings.Contains(body, "pipeline:execute") {
		t.Errorf("enable by someone who may not run it: %d %s, want 403 naming pipeline:execute", st, body)
	}
	ws := tm.enableWebhook(t, admin, "guarded", false)
	if ws.EnabledVersion != 1 {
		t.Errorf("enabled for version %d, want 1", ws.EnabledVersion)
	}
	payload := []byte(`{}`)
	deliver := func(id string) (int, string) {
		return tm.deliver(t, ws.Path, payload, signedDelivery(ws.Secret, time.Now(), id, payload))
	}

	// mallory may edit: the apply is stored, and suspends the webhook.
	tm.mustAPI(t, mallory, "POST", protocol.PathPipelines, mustJSON(t, protocol.ApplyPipelineRequest{Source: leakingPipeline}), 200)
	if st, body := deliver("after-edit"); st != http.StatusForbidden || !strings.Contains(body, "suspended") || !strings.Contains(body, "user mallory") || !strings.Contains(body, "--rotate") {
		t.Errorf("delivery after mallory's edit: %d %s, want 403 saying it is suspended by user mallory's edit and how to enable it again", st, body)
	}
	if n := tm.runCount(t); n != 0 {
		t.Fatalf("%d runs after mallory's edit, want 0", n)
	}
	var pl protocol.Pipeline
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathPipelines+"/guarded", "", 200)), &pl); err != nil {
		t.Fatal(err)
	}
	if pl.Webhook == nil || !strings.Contains(pl.Webhook.Suspended, "user mallory") || pl.Webhook.SuspendedAt == nil {
		t.Errorf("get: webhook %+v, want it suspended naming user mallory", pl.Webhook)
	}
	l, err := tm.client(t, admin).ListAudit(ctx, client.AuditQuery{Action: "pipeline.apply"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Events) == 0 || !strings.Contains(l.Events[0].Detail, "suspended") {
		t.Errorf("audit of the apply: %+v, want its detail to say the webhook was suspended", l.Events)
	}

	// Someone who may run it takes it over; an edit by someone who may run
	// the new text keeps it.
	rot := tm.enableWebhook(t, admin, "guarded", true)
	if rot.Suspended != "" || rot.EnabledVersion != 2 {
		t.Errorf("after the takeover: %+v, want it enabled for version 2", rot.PipelineWebhook)
	}
	ws = rot
	dep := tm.userKey(t, "dora", "deployer", access.Account)
	tm.mustAPI(t, dep, "POST", protocol.PathPipelines, mustJSON(t, protocol.ApplyPipelineRequest{Source: guardedPipeline}), 200)
	if st, body := deliver("after-deployer-edit"); st != http.StatusCreated {
		t.Errorf("delivery after an edit by someone who may run it: %d %s, want 201", st, body)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPipelineScriptInjection: an expression in text a shell or a
// container runs is refused at apply, with the env form in the message;
// unsafeExpressions: true lets it through. It failed before the check: a
// webhook payload's field in a script ran as commands on the delegate.
func TestPipelineScriptInjection(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	head := "name: inj\ninputs: {version: \"1\"}\nstages:\n  - name: s\n    steps:\n      - name: t\n"
	for _, tt := range []struct {
		name, step string
		want       []string
	}{
		{"shell", "        shell: ./ship ${{ inputs.version }}\n", []string{`env: {VERSION: "${{ inputs.version }}"}`, `"$VERSION"`, "unsafeExpressions: true"}},
		{"container script", "        container: {image: alpine, script: \"echo ${{inputs.version}}\"}\n", []string{`env: {VERSION: "${{ inputs.version }}"}`}},
		{"container command", "        container: {image: alpine, command: [sh, -c, \"echo ${{ inputs.version }}\"]}\n", []string{`"$VERSION"`}},
		{"http host", "        http: {url: \"https://${{ inputs.version }}/x\"}\n", []string{"host"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, body := tm.api(t, admin, "POST", protocol.PathPipelines, mustJSON(t, protocol.ApplyPipelineRequest{Source: head + tt.step}))
			if st != http.StatusBadRequest {
				t.Fatalf("apply: %d %s, want 400", st, body)
			}
			var e struct{ Error protocol.Error }
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(e.Error.Message, w) {
					t.Errorf("message %q does not show %q", e.Error.Message, w)
				}
			}
		})
	}
	safe := head + "        shell: ./ship \"$VERSION\"\n        env: {VERSION: \"${{ inputs.version }}\"}\n"
	tm.mustAPI(t, admin, "POST", protocol.PathPipelines, mustJSON(t, protocol.ApplyPipelineRequest{Source: safe}), 201)
	unsafe := head + "        unsafeExpressions: true\n        shell: ./ship ${{ inputs.version }}\n"
	tm.mustAPI(t, admin, "POST", protocol.PathPipelines, mustJSON(t, protocol.ApplyPipelineRequest{Source: unsafe}), 200)
}

// TestPipelineExpansionBounds: a small pipeline and one large input must
// not make a huge task: a step whose expanded value or whole spec is over
// its limit fails without a task, saying which limit. It failed before
// the limits: the step got a task with a value of 100 times the input.
func TestPipelineExpansionBounds(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	refs := strings.Repeat("${{ inputs.x }}", 100)
	var perTask strings.Builder
	for i := range 20 {
		fmt.Fprintf(&perTask, "V%d: \"${{ inputs.x }}${{ inputs.x }}\", ", i)
	}
	for _, tt := range []struct {
		name, env, want string
	}{
		{"one value", "{V: \"" + refs + "\"}", fmt.Sprintf("at most %d bytes", pipeline.MaxExpandedValue)},
		{"the task", "{" + perTask.String() + "}", fmt.Sprintf("at most %d bytes", pipeline.MaxExpandedTask)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: amp\ninputs: {x: {}}\nstages:\n  - name: s\n    steps:\n      - name: t\n        delegateSelectors: [nobody]\n        shell: env\n        env: " + tt.env + "\n"
			tm.mustAPI(t, admin, "POST", protocol.PathPipelines, mustJSON(t, protocol.ApplyPipelineRequest{Source: src}), 200, 201)
			in := strings.Repeat("a", pipeline.MaxInputValueLen)
			var run protocol.Run
			body := tm.mustAPI(t, admin, "POST", protocol.PathPipelines+"/amp/runs", mustJSON(t, protocol.RunPipelineRequest{Inputs: map[string]string{"x": in}}), 201)
			if err := json.Unmarshal([]byte(body[:min(len(body), 1<<20)]), &run); err != nil {
				t.Fatalf("run: %v", err)
			}
			var got store.Run
			eventually(t, 10*time.Second, "the step to end", func() bool {
				var err error
				got, err = tm.st.GetRun(context.Background(), tm.admin.AccountID, run.ID)
				if err != nil {
					t.Fatal(err)
				}
				return len(got.Steps) == 1 && got.Steps[0].Status != store.RunRunning
			})
			s := got.Steps[0]
			if _, err := tm.st.GetTask(context.Background(), tm.admin.AccountID, s.TaskID); !errors.Is(err, store.ErrNotFound) || !strings.Contains(s.Error, tt.want) {
				t.Errorf("step: task %q (%v), error %q; want no task and an error saying %q", s.TaskID, err, s.Error, tt.want)
			}
		})
	}
}
