package manager

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

const testHookPipeline = `name: hooked
inputs:
  version: "0.0"
  region: eu
triggers:
  webhook:
    inputs:
      version: release.tag_name
stages:
  - name: build
    steps:
      - name: compile
        shell: echo "$V $R"
        env: {V: "${{ inputs.version }}", R: "${{ inputs.region }}"}
`

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// deliver POSTs body to a webhook path with headers (a "" value leaves a
// header out); it returns the status and the answer.
func (tm *testManager) deliver(t *testing.T, path string, body []byte, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", tm.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (tm *testManager) enableWebhook(t *testing.T, key, name string, rotate bool) protocol.WebhookSecret {
	t.Helper()
	body := `{}`
	if rotate {
		body = `{"rotate":true}`
	}
	var ws protocol.WebhookSecret
	if err := json.Unmarshal([]byte(tm.mustAPI(t, key, "POST", protocol.PathPipelines+"/"+name+"/webhook", body, 200, 201)), &ws); err != nil {
		t.Fatal(err)
	}
	if ws.Secret == "" || !strings.HasPrefix(ws.Path, protocol.PathHooks+"/") {
		t.Fatalf("enable answered %+v: want a secret and a hook path", ws)
	}
	return ws
}

// routeBody is the body limit of the route of method and pattern.
func (tm *testManager) routeBody(t *testing.T, method, pattern string) int64 {
	t.Helper()
	for _, rt := range tm.m.routes() {
		if rt.Method == method && rt.Pattern == pattern {
			return rt.Body
		}
	}
	t.Fatalf("no route %s %s", method, pattern)
	return 0
}

func (tm *testManager) runCount(t *testing.T) int {
	t.Helper()
	runs, err := tm.st.ListRuns(context.Background(), tm.admin.AccountID, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

func TestWebhook(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	ctx := context.Background()
	if _, _, err := tm.st.ApplyPipeline(ctx, store.Pipeline{AccountID: tm.admin.AccountID, Name: "hooked", Source: testHookPipeline, UpdatedBy: "test"}, tm.m.cfg.Now()); err != nil {
		t.Fatal(err)
	}
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"hooker","permissions":["pipeline:view","pipeline:edit","pipeline:execute"]}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"editor","permissions":["pipeline:view","pipeline:edit"]}`, 201)
	ed := tm.userKey(t, "ed", "hooker", access.Account)
	ws := tm.enableWebhook(t, ed, "hooked", false)
	if ws.EnabledBy != "user ed" {
		t.Errorf("enabled by %q, want user ed", ws.EnabledBy)
	}

	// The secret is shown once: a second enable without --rotate is a
	// conflict, and get shows the webhook without it.
	if st, body := tm.api(t, ed, "POST", protocol.PathPipelines+"/hooked/webhook", `{}`); st != http.StatusConflict || !strings.Contains(body, "--rotate") {
		t.Errorf("second enable: %d %s, want 409 naming --rotate", st, body)
	}
	got := tm.mustAPI(t, ed, "GET", protocol.PathPipelines+"/hooked", "", 200)
	var pl protocol.Pipeline
	if err := json.Unmarshal([]byte(got), &pl); err != nil {
		t.Fatal(err)
	}
	if pl.Webhook == nil || pl.Webhook.Path != ws.Path || strings.Contains(got, ws.Secret) {
		t.Errorf("get: webhook %+v (secret shown: %v), want path %s and no secret", pl.Webhook, strings.Contains(got, ws.Secret), ws.Path)
	}

	payload := []byte(`{"release": {"tag_name": "v1.2.3"}, "region": "us", "action": "published"}`)
	n := 0
	// signed is a new delivery of body signed with secret.
	signed := func(secret string, body []byte) map[string]string {
		n++
		return signedDelivery(secret, time.Now(), fmt.Sprintf("d-%d", n), body)
	}
	good := signed(ws.Secret, payload)
	sig := protocol.HeaderLegateSignature256

	// Refused deliveries start nothing.
	limit := tm.routeBody(t, "POST", protocol.PathHooks+"/{id}")
	refused := []struct {
		name    string
		path    string
		body    []byte
		headers map[string]string
		status  int
		want    string
	}{
		{"wrong secret", ws.Path, payload, signed("whsec_other", payload), 401, "does not match the delivery"},
		{"missing header", ws.Path, payload, withHeaders(signed(ws.Secret, payload), sig, ""), 401, "missing X-Legate-Signature-256"},
		{"sha1", ws.Path, payload, withHeaders(signed(ws.Secret, payload), sig, "sha1=0123456789abcdef0123456789abcdef01234567"), 401, "must start with sha256="},
		{"not hex", ws.Path, payload, withHeaders(signed(ws.Secret, payload), sig, "sha256="+strings.Repeat("z", 64)), 401, "hex digits"},
		{"short", ws.Path, payload, withHeaders(signed(ws.Secret, payload), sig, "sha256=abcd"), 401, "64 hex digits"},
		{"tampered body", ws.Path, []byte(strings.Replace(string(payload), "v1.2.3", "v6.6.6", 1)), good, 401, "does not match the delivery"},
		{"unknown hook", protocol.PathHooks + "/wh_0123456789abcdef0123456789abcdef", payload, good, 404, "no webhook"},
		{"too large", ws.Path, bytes.Repeat([]byte(" "), int(limit)+1), good, 413, "larger than"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			st, body := tm.deliver(t, tt.path, tt.body, tt.headers)
			if st != tt.status || !strings.Contains(body, tt.want) {
				t.Errorf("%d %s, want %d containing %q", st, body, tt.status, tt.want)
			}
		})
	}
	if n := tm.runCount(t); n != 0 {
		t.Fatalf("%d runs after refused deliveries, want 0", n)
	}
	if got := promtest.Scrape(t, tm.url+protocol.PathMetrics).Value(t, "legate_webhook_bad_signatures_total"); got != 6 {
		t.Errorf("legate_webhook_bad_signatures_total = %v, want 6", got)
	}
	notJSON := []byte("payload=%7B%7D")
	if st, body := tm.deliver(t, ws.Path, notJSON, signed(ws.Secret, notJSON)); st != 400 || !strings.Contains(body, "not JSON") {
		t.Errorf("form-encoded body: %d %s, want 400 saying it is not JSON", st, body)
	}
	if st, body := tm.deliver(t, ws.Path, payload, withHeaders(signed(ws.Secret, payload), protocol.HeaderGitHubEvent, "ping")); st != 200 || !strings.Contains(body, "pong") {
		t.Errorf("ping: %d %s, want 200 pong", st, body)
	}
	if n := tm.runCount(t); n != 0 {
		t.Fatalf("%d runs after a bad payload and a ping, want 0", n)
	}

	// A good delivery starts a run with the payload's inputs, as the webhook.
	st, body := tm.deliver(t, ws.Path, payload, good)
	if st != http.StatusCreated {
		t.Fatalf("good delivery: %d %s, want 201", st, body)
	}
	var run protocol.Run
	if err := json.Unmarshal([]byte(body), &run); err != nil || run.ID == "" {
		t.Fatalf("answer %s: %v", body, err)
	}
	stored, err := tm.st.GetRun(ctx, tm.admin.AccountID, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"version": "v1.2.3", "region": "us"}, stored.Inputs); diff != "" {
		t.Errorf("inputs (-want +got):\n%s", diff)
	}
	if stored.Trigger != "webhook" || stored.TriggeredBy != "webhook:hooked" || stored.Delivery != good[protocol.HeaderLegateDelivery] {
		t.Errorf("trigger %q by %q delivery %q, want webhook by webhook:hooked, delivery %s", stored.Trigger, stored.TriggeredBy, stored.Delivery, good[protocol.HeaderLegateDelivery])
	}

	// The same delivery again is refused (TestWebhookReplay has the rest).
	if st, body := tm.deliver(t, ws.Path, payload, good); st != http.StatusConflict || !strings.Contains(body, "accepted already") {
		t.Errorf("the same delivery again: %d %s, want 409", st, body)
	}
	if n := tm.runCount(t); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}

	// A rotation keeps the URL; the old secret no longer signs.
	rot := tm.enableWebhook(t, ed, "hooked", true)
	if rot.Path != ws.Path || rot.Secret == ws.Secret {
		t.Errorf("rotation: path %s secret changed %v, want the same path and a new secret", rot.Path, rot.Secret != ws.Secret)
	}
	if st, body := tm.deliver(t, ws.Path, payload, signed(ws.Secret, payload)); st != 401 {
		t.Errorf("old secret after the rotation: %d %s, want 401", st, body)
	}
	if st, body := tm.deliver(t, ws.Path, payload, signed(rot.Secret, payload)); st != 201 {
		t.Errorf("new secret: %d %s, want 201", st, body)
	}

	// The webhook acts as ed, checked at each delivery.
	tm.mustAPI(t, admin, "DELETE", protocol.PathBindings+"?role=hooker&subject_kind=user&subject=ed", "", 204)
	tm.mustAPI(t, admin, "POST", protocol.PathBindings, `{"role":"editor","subject_kind":"user","subject":"ed"}`, 201)
	if st, body := tm.deliver(t, ws.Path, payload, signed(rot.Secret, payload)); st != 403 || !strings.Contains(body, "user ed") || !strings.Contains(body, "pipeline:execute") {
		t.Errorf("enabler without pipeline:execute: %d %s, want 403 naming user ed and pipeline:execute", st, body)
	}
	tm.mustAPI(t, admin, "DELETE", protocol.PathUsers+"/ed", "", 204)
	if st, body := tm.deliver(t, ws.Path, payload, signed(rot.Secret, payload)); st != 403 || !strings.Contains(body, "was deleted") {
		t.Errorf("enabler deleted: %d %s, want 403 saying so", st, body)
	}
	before := tm.runCount(t)

	// Taken over by the admin, then disabled: the URL is gone.
	adm := tm.enableWebhook(t, admin, "hooked", true)
	if st, body := tm.deliver(t, ws.Path, payload, signed(adm.Secret, payload)); st != 201 {
		t.Errorf("after a takeover: %d %s, want 201", st, body)
	}
	tm.mustAPI(t, admin, "DELETE", protocol.PathPipelines+"/hooked/webhook", "", 204)
	if st, body := tm.deliver(t, ws.Path, payload, signed(adm.Secret, payload)); st != 404 {
		t.Errorf("disabled: %d %s, want 404", st, body)
	}
	if n := tm.runCount(t); n != before+1 {
		t.Errorf("%d runs, want %d", n, before+1)
	}
}

// TestWebhookOverTheDeploymentLimit: a delivery that would deploy past the
// account's limit is refused as a manual run is (429 deployment_limit).
func TestWebhookOverTheDeploymentLimit(t *testing.T) {
	f := newRunFixture(t, Config{DeploymentsPerHour: 1})
	ws := f.tm.enableWebhook(t, f.tm.admin.APIKey, "ship", false)
	payload := []byte(`{"version": "2.0"}`)
	st, body := f.tm.deliver(t, ws.Path, payload, signedDelivery(ws.Secret, time.Now(), "d-1", payload))
	var run protocol.Run
	if err := json.Unmarshal([]byte(body), &run); st != 201 || err != nil {
		t.Fatalf("first delivery: %d %s", st, body)
	}
	f.finish(t, f.stepTask(t, run.ID, "build", "compile"), protocol.StatusSucceeded, map[string]string{"artifact": "a"})
	f.stepTask(t, run.ID, "deploy", "push") // the deployment began
	st, body = f.tm.deliver(t, ws.Path, payload, signedDelivery(ws.Secret, time.Now(), "d-2", payload))
	var answer struct{ Error protocol.Error }
	if err := json.Unmarshal([]byte(body), &answer); st != http.StatusTooManyRequests || err != nil || answer.Error.Code != protocol.CodeDeploymentLimit ||
		!strings.Contains(answer.Error.Message, "1 of 1 deployments per hour") {
		t.Errorf("second delivery: %d %s, want 429 deployment_limit naming the limit", st, body)
	}
	if n := f.tm.runCount(t); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}
