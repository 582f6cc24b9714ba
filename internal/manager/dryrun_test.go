package manager

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestPipelineApplyDryRun: a dry run makes the checks of an apply and
// stores nothing: a new pipeline would be created, a changed one changed
// (with what changes, and that its webhook would be suspended when the
// editor may not run the new text), a bad file is refused with every
// problem and the scope's at once; it needs pipeline:edit as an apply
// does, and is audited as pipeline.dry_run, not as pipeline.apply.
func TestPipelineApplyDryRun(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	ctx := context.Background()
	plan := func(key, src string, want int) protocol.Pipeline {
		t.Helper()
		var p protocol.Pipeline
		body := tm.mustAPI(t, key, "POST", protocol.PathPipelinesDryRun, mustJSON(t, protocol.ApplyPipelineRequest{Source: src}), want)
		if want == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	if p := plan(admin, guardedPipeline, 200); p.Plan != protocol.PlanCreated || !p.DryRun || p.Version != 1 {
		t.Errorf("dry run of a new pipeline: %+v, want created, version 1", p)
	}
	if st, _ := tm.api(t, admin, "GET", protocol.PathPipelines+"/guarded", ""); st != http.StatusNotFound {
		t.Errorf("get after a dry run: %d, want 404 (nothing stored)", st)
	}

	for _, s := range []string{"deploy_token", "root_password"} {
		tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"`+s+`","value":"v-`+s+`"}`, 201)
	}
	tm.mustAPI(t, admin, "POST", protocol.PathPipelines, mustJSON(t, protocol.ApplyPipelineRequest{Source: guardedPipeline}), 201)
	if p := plan(admin, guardedPipeline, 200); p.Plan != protocol.PlanUnchanged || p.Version != 1 || len(p.Changes) != 0 {
		t.Errorf("dry run of the same file: %+v, want unchanged", p)
	}
	tm.enableWebhook(t, admin, "guarded", false)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"editor","permissions":["pipeline:view","pipeline:edit"]}`, 201)
	mallory := tm.userKey(t, "mallory", "editor", access.Account)
	p := plan(mallory, leakingPipeline, 200)
	if p.Plan != protocol.PlanChanged || p.Version != 2 || !slices.Contains(p.Changes, "stage deploy: steps changed push") ||
		!slices.ContainsFunc(p.Changes, func(c string) bool { return strings.HasPrefix(c, "its webhook would be suspended: ") }) {
		t.Errorf("dry run of mallory's edit: %+v, want changed (version 2): the step, and the webhook suspended", p)
	}
	var got protocol.Pipeline
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathPipelines+"/guarded", "", 200)), &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 || got.Webhook == nil || got.Webhook.Suspended != "" {
		t.Errorf("after the dry run: version %d, webhook %+v; want version 1 and the webhook active", got.Version, got.Webhook)
	}

	// Every problem at once, the file's and the scope's.
	bad := "name: bad\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: x\n        timout: 1m\n      - name: b\n        shell: y\n        env: {R: '${{ inputs.r }}'}\n"
	_, body := tm.api(t, admin, "POST", protocol.PathPipelinesDryRun, mustJSON(t, protocol.ApplyPipelineRequest{Source: bad, Org: "nowhere"}))
	for _, want := range []string{"line 7: stages[0].steps[0].timout: unknown field", `no input named \"r\"`, `unknown org \"nowhere\"`} {
		if !strings.Contains(body, want) {
			t.Errorf("dry run of a bad file: %s\nwant %s", body, want)
		}
	}

	// The same permission as an apply.
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"lookers","permissions":["pipeline:view"]}`, 201)
	vic := tm.userKey(t, "vic", "lookers", access.Account)
	plan(vic, guardedPipeline, http.StatusForbidden)

	c := tm.client(t, admin)
	dry, err := c.ListAudit(ctx, client.AuditQuery{Action: "pipeline.dry_run"})
	if err != nil {
		t.Fatal(err)
	}
	// vic's refusal came from the route's permission rule: a dry run's
	// route, so it is a pipeline.dry_run, denied.
	if len(dry.Events) != 5 || !slices.ContainsFunc(dry.Events, func(e protocol.AuditEvent) bool { return e.Detail == "would be changed (nothing stored)" }) ||
		!slices.ContainsFunc(dry.Events, func(e protocol.AuditEvent) bool { return e.Outcome == "denied" }) {
		t.Errorf("audit of the dry runs: %+v, want them as pipeline.dry_run, vic's refusal too", dry.Events)
	}
	applies, err := c.ListAudit(ctx, client.AuditQuery{Action: "pipeline.apply"})
	if err != nil {
		t.Fatal(err)
	}
	if len(applies.Events) != 1 || applies.Events[0].Status != http.StatusCreated {
		t.Errorf("pipeline.apply events: %+v, want the real apply only", applies.Events)
	}
}

// TestPipelineApplyAuditsItsChecks: a plain legate pipeline apply of two
// files checks both with a dry run, then applies them: the audit log holds
// one pipeline.dry_run and one pipeline.apply per file, as docs/audit.md
// says.
func TestPipelineApplyAuditsItsChecks(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	dir := t.TempDir()
	var args []string
	for _, n := range []string{"web", "api"} {
		f := filepath.Join(dir, n+".yaml")
		src := "name: " + n + "\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: echo hi\n"
		if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
	}
	if out, errOut, err := runLegate(ctx, tm, append([]string{"pipeline", "apply"}, args...)...); err != nil {
		t.Fatalf("legate pipeline apply: %v\n%s%s", err, out, errOut)
	}
	c := tm.client(t, tm.admin.APIKey)
	for action, want := range map[string]string{"pipeline.dry_run": "would be created (nothing stored)", "pipeline.apply": "version 1"} {
		got, err := c.ListAudit(ctx, client.AuditQuery{Action: action})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range got.Events {
			if e.Outcome != "success" || e.Detail != want {
				t.Errorf("%s event %+v, want a success, detail %q", action, e, want)
			}
			names = append(names, e.Resource)
		}
		slices.Sort(names)
		if strings.Join(names, ",") != "api,web" {
			t.Errorf("%s events for %v, want one per file (api, web)", action, names)
		}
	}
}
