package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

const e2eHookPipeline = `name: release
inputs:
  version: "0.0"
  channel: beta
triggers:
  webhook:
    inputs:
      version: release.tag_name
stages:
  - name: build
    steps:
      - name: announce
        delegateSelectors: [builder]
        shell: echo "releasing $V on $C"
        env: {V: "${{ inputs.version }}", C: "${{ inputs.channel }}"}
`

// TestWebhookRun: the CLI enables a pipeline's webhook; a delivery,
// signed with its secret, starts a run whose inputs come from the
// payload; the same delivery again starts none; legate run logs shows the
// run's output.
func TestWebhookRun(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("wh")
	c.delegate("builder", "wh-builder", c.seed004Env(tok, "builder", "builder")...)

	file := filepath.Join(t.TempDir(), "release.yaml")
	if err := os.WriteFile(file, []byte(e2eHookPipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("pipeline", "apply", "-f", file)
	out := c.mustCLI("pipeline", "webhook", "enable", "release")
	var url, secret string
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "URL:"); ok {
			url = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "Secret:"); ok {
			secret = strings.TrimSpace(v)
		}
	}
	if !strings.HasPrefix(url, c.url+protocol.PathHooks+"/") || secret == "" {
		t.Fatalf("webhook enable printed %q: want the URL and the secret", out)
	}
	if r := c.cli("pipeline", "get", "release"); r.code != 0 || !strings.Contains(r.stderr, "webhook enabled: "+url) || strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("pipeline get: exit %d, stderr %q: want the webhook's URL and not its secret", r.code, r.stderr)
	}

	payload := []byte(`{"action": "published", "release": {"tag_name": "v3.1.4", "draft": false}, "channel": "stable"}`)
	// Signed as docs/pipelines.md says: TIMESTAMP.DELIVERY.BODY.
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	const id = "9b8e7c00-0000-4000-8000-000000000001"
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + id + "."))
	mac.Write(payload)
	deliver := func(sig string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("POST", url, bytes.NewReader(payload))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Legate-Timestamp", ts)
		req.Header.Set("X-Legate-Delivery", id)
		req.Header.Set("X-Legate-Signature-256", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if st, b := deliver("sha256=" + strings.Repeat("0", 64)); st != http.StatusUnauthorized {
		t.Errorf("a wrong signature: %d %s, want 401", st, b)
	}
	sig := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	st, b := deliver(sig)
	var run protocol.Run
	if err := json.Unmarshal(b, &run); st != http.StatusCreated || err != nil || run.ID == "" {
		t.Fatalf("delivery: %d %s, want 201 with the run", st, b)
	}
	if st, b := deliver(sig); st != http.StatusConflict || !strings.Contains(string(b), "accepted already") {
		t.Errorf("the same delivery again: %d %s, want 409", st, b)
	}

	r := c.cli("run", "logs", run.ID, "--follow")
	if r.code != 0 || !strings.Contains(r.stdout, "releasing v3.1.4 on stable\n") || !strings.Contains(r.stderr, "✓ build.announce succeeded") {
		t.Errorf("run logs --follow: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = c.cli("run", "logs", run.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "releasing v3.1.4 on stable\n") || !strings.Contains(r.stderr, "run "+run.ID+" succeeded") {
		t.Errorf("run logs: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var got protocol.Run
	if err := json.Unmarshal([]byte(c.mustCLI("run", "get", run.ID, "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Trigger != "webhook" || got.TriggeredBy != "webhook:release" || got.Inputs["version"] != "v3.1.4" || got.Inputs["channel"] != "stable" {
		t.Errorf("run: trigger %q by %q, inputs %v", got.Trigger, got.TriggeredBy, got.Inputs)
	}
	var runs protocol.RunList
	if err := json.Unmarshal([]byte(c.mustCLI("run", "list", "-o", "json")), &runs); err != nil || len(runs.Runs) != 1 {
		t.Errorf("runs: %+v, %v; want one (the same delivery again started none)", runs, err)
	}

	c.mustCLI("pipeline", "webhook", "disable", "release")
	if st, b := deliver(sig); st != http.StatusNotFound {
		t.Errorf("after disable: %d %s, want 404", st, b)
	}
}
