package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPipelineApplyDryRunAndEveryProblem: pipeline apply --dry-run checks
// on the manager and prints the plan (created, changed with what changed,
// unchanged) without storing anything; an apply of files with problems
// reports every problem of every file at once, FILE:LINE first, with a
// structural problem and a reference problem together and the scope's,
// and stores none of them. Before, the references were reported only on a
// second try, and there was no dry run.
func TestPipelineApplyDryRunAndEveryProblem(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	dir := t.TempDir()
	write := func(name, src string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const v1 = "name: web\nstages:\n  - name: build\n    steps:\n      - name: compile\n        shell: make\n"
	web := write("web.yaml", v1)
	api := write("api.yaml", "name: api\nstages:\n  - name: build\n    steps:\n      - name: compile\n        shell: make\n")

	if out := c.mustCLI("pipeline", "apply", "--dry-run", "-f", web); !strings.Contains(out, "pipeline web would be created (version 1") {
		t.Errorf("dry run of a new pipeline: %q", out)
	}
	if r := c.cli("pipeline", "get", "web"); r.code == 0 {
		t.Errorf("a dry run stored the pipeline:\n%s", r.stdout)
	}
	c.mustCLI("pipeline", "apply", "-f", web)
	write("web.yaml", v1+"      - name: test\n        shell: make test\n")
	out := c.mustCLI("pipeline", "apply", "--dry-run", "-f", web, "-f", api)
	for _, want := range []string{"pipeline web would be changed (version 2", "  stage build: steps added test\n", "pipeline api would be created (version 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run of a change and a new pipeline:\n%s\nwant %q", out, want)
		}
	}
	if got := c.mustCLI("pipeline", "get", "web", "-o", "json"); !strings.Contains(got, `"version": 1`) {
		t.Errorf("a dry run stored a new version:\n%s", got)
	}

	bad := write("bad.yaml", `name: bad
stages:
  - name: build
    steps:
      - name: compile
        shell: make
        timout: 5m
      - name: ship
        shell: ./ship.sh
        env:
          REGION: ${{ inputs.region }}
`)
	r := c.cli("pipeline", "apply", "-f", bad, "-f", web, "--org", "nowhere")
	if r.code == 0 {
		t.Fatalf("apply of a bad file: exit 0\n%s", r.stdout)
	}
	for _, want := range []string{
		bad + ":7: stages[0].steps[0].timout: unknown field",
		bad + `:8: stages[0].steps[1].env.REGION: ${{ inputs.region }}: no input named "region"`,
		"nowhere",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("apply of bad files: stderr\n%s\nwant %q", r.stderr, want)
		}
	}
	if got := c.mustCLI("pipeline", "get", "web", "-o", "json"); !strings.Contains(got, `"version": 1`) {
		t.Errorf("an apply refused for another file stored web:\n%s", got)
	}
}
