package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

const e2ePipeline = `name: ship
description: build, then deploy
inputs:
  version: "1.0"
stages:
  - name: build
    steps:
      - name: compile
        delegateSelectors: [builder]
        shell: |
          echo "compiling $V"
          echo "artifact=web-$V.tgz" >> "$LEGATE_OUTPUT"
        env: {V: "${{ inputs.version }}"}
        outputs: [artifact]
  - name: deploy
    environment: prod
    service: web
    steps:
      - name: push
        delegateSelectors: [deployer]
        shell: |
          echo "pushing $A"
          exit 3
        env: {A: "${{ stages.build.steps.compile.outputs.artifact }}"}
      - name: rollback
        when: failure
        delegateSelectors: [deployer]
        shell: echo "rolling back"
      - name: notify
        delegateSelectors: [deployer]
        shell: echo "never"
`

// TestPipelineRun: with real processes, a two-stage pipeline's steps run
// on the delegates their selectors name; the output one step writes to
// $LEGATE_OUTPUT reaches the next; the failing step runs the `when:
// failure` step and skips the rest; legate pipeline run streams the steps'
// output and exits 1; the deployment stage records a failed deployment.
func TestPipelineRun(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("pl")
	c.delegate("builder", "pl-builder", c.seed004Env(tok, "builder", "builder")...)
	c.delegate("deployer", "pl-deployer", c.seed004Env(tok, "deployer", "deployer")...)

	file := filepath.Join(t.TempDir(), "ship.yaml")
	if err := os.WriteFile(file, []byte(e2ePipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := c.mustCLI("pipeline", "apply", "-f", file); !strings.Contains(out, "pipeline ship created (version 1") {
		t.Errorf("apply: %q", out)
	}
	if out := c.mustCLI("pipeline", "apply", "-f", file); !strings.Contains(out, "unchanged") {
		t.Errorf("second apply: %q", out)
	}
	if out := c.mustCLI("pipeline", "list"); !strings.Contains(out, "build, then deploy") {
		t.Errorf("pipeline list:\n%s", out)
	}

	r := c.cli("pipeline", "run", "ship", "--input", "version=2.0")
	if r.code != 1 {
		t.Errorf("pipeline run: exit %d, want 1 (the run failed)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"compiling 2.0\n", "pushing web-2.0.tgz\n", "rolling back\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("pipeline run's output has no %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "never") {
		t.Errorf("the step after the failure ran:\n%s", r.stdout)
	}
	for _, want := range []string{"▶ build.compile started", "✓ build.compile succeeded", "✗ deploy.push failed", "- deploy.notify skipped", "run r_"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("pipeline run's stderr has no %q:\n%s", want, r.stderr)
		}
	}

	var runs protocol.RunList
	if err := json.Unmarshal([]byte(c.mustCLI("run", "list", "-o", "json")), &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs.Runs) != 1 {
		t.Fatalf("runs: %+v", runs)
	}
	// Filtered by status in the manager's store.
	for status, want := range map[string]int{"failed": 1, "succeeded": 0} {
		var l protocol.RunList
		if err := json.Unmarshal([]byte(c.mustCLI("run", "list", "--status", status, "-o", "json")), &l); err != nil || len(l.Runs) != want {
			t.Errorf("run list --status %s: %+v %v, want %d runs", status, l, err, want)
		}
	}
	if r := c.cli("run", "list", "--status", "done"); r.code == 0 || !strings.Contains(r.stderr, "use running, succeeded, failed or cancelled") {
		t.Errorf("run list --status done: exit %d\n%s", r.code, r.stderr)
	}
	var run protocol.Run
	if err := json.Unmarshal([]byte(c.mustCLI("run", "get", runs.Runs[0].ID, "-o", "json")), &run); err != nil {
		t.Fatal(err)
	}
	if run.Status != protocol.RunFailed || run.Inputs["version"] != "2.0" {
		t.Errorf("run %s, inputs %v: want failed with version 2.0", run.Status, run.Inputs)
	}
	wantHost := map[string]string{"compile": "pl-builder", "push": "pl-deployer", "rollback": "pl-deployer"}
	wantStatus := map[string]string{"compile": "succeeded", "push": "failed", "rollback": "succeeded", "notify": "skipped"}
	for _, s := range run.Steps {
		if s.Status != wantStatus[s.Step] {
			t.Errorf("step %s: %s, want %s", s.Step, s.Status, wantStatus[s.Step])
		}
		if s.TaskID == "" {
			continue
		}
		if task := c.task(s.TaskID); task.DelegateHostname != wantHost[s.Step] {
			t.Errorf("step %s ran on %q, want %q", s.Step, task.DelegateHostname, wantHost[s.Step])
		}
	}
	if len(run.Steps) != 4 {
		t.Errorf("steps: %+v", run.Steps)
	}
	if out := c.mustCLI("run", "get", run.ID); !strings.Contains(out, "artifact=web-2.0.tgz") {
		t.Errorf("run get shows no output of compile:\n%s", out)
	}

	var ds protocol.DeploymentList
	if err := json.Unmarshal([]byte(c.mustCLI("deployments", "list", "-o", "json")), &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Deployments) != 1 || ds.Deployments[0].RunID != run.ID || ds.Deployments[0].Status != protocol.DeploymentFailed ||
		ds.Deployments[0].Version != "2.0" || !strings.HasPrefix(ds.Deployments[0].TriggeredBy, "user:") || ds.Deployments[0].Service != "web" || ds.Deployments[0].Environment != "prod" {
		t.Errorf("deployments: %+v, want one failed deployment of web 2.0 to prod by run %s, triggered by a user", ds.Deployments, run.ID)
	}
}

// TestPipelineApplyRefusesWithTheLine: a bad pipeline file is refused
// with the line and field of the error, and nothing is stored.
func TestPipelineApplyRefusesWithTheLine(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	file := filepath.Join(t.TempDir(), "bad.yaml")
	src := "name: bad\nstages:\n  - name: s\n    steps:\n      - name: a\n        shel: echo\n"
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.cli("pipeline", "apply", "-f", file)
	if r.code == 0 || !strings.Contains(r.stderr, "bad.yaml:6: ") || !strings.Contains(r.stderr, "shel") {
		t.Errorf("apply of a bad file: exit %d, stderr %q; want the line (6) and the field (shel)", r.code, r.stderr)
	}
	if r := c.cli("pipeline", "list"); r.code != 0 || !strings.Contains(r.stderr, "No pipelines") {
		t.Errorf("pipeline list after a refused apply: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}
