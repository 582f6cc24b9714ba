package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

const rerunPipeline = `name: greet
inputs:
  who: world
  greeting: hello
stages:
  - name: say
    steps:
      - name: it
        shell: echo "$G, $W"
        env: {G: "${{ inputs.greeting }}", W: "${{ inputs.who }}"}
`

// TestCLIRunRerun: legate run rerun runs a run again with the run's
// inputs, --input replacing one, follows it like pipeline run (its output,
// exit 0), and with --detach -o json answers the new run naming the one it
// re-runs; a malformed --input, an undeclared input and an unknown run
// are refused with a message that says what to do.
func TestCLIRunRerun(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.delegate("d", "rerun-d", c.seed004Env(c.token("rr"), "d", "any")...)
	file := filepath.Join(t.TempDir(), "greet.yaml")
	if err := os.WriteFile(file, []byte(rerunPipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("pipeline", "apply", "-f", file)
	var first protocol.Run
	if err := json.Unmarshal([]byte(c.mustCLI("pipeline", "run", "greet", "--input", "who=ana", "-o", "json")), &first); err != nil {
		t.Fatal(err)
	}
	r := c.cli("run", "rerun", first.ID, "--input", "greeting=bye")
	if r.code != 0 || !strings.Contains(r.stdout, "bye, ana\n") || !strings.Contains(r.stderr, "re-runs run "+first.ID) {
		t.Errorf("run rerun: exit %d\nstdout: %s\nstderr: %s\nwant exit 0, \"bye, ana\" and the run it re-runs", r.code, r.stdout, r.stderr)
	}
	var again protocol.Run
	if err := json.Unmarshal([]byte(c.mustCLI("run", "rerun", first.ID, "--detach", "-o", "json")), &again); err != nil {
		t.Fatal(err)
	}
	if again.RerunOf != first.ID || again.Trigger != protocol.TriggerRerun || again.Inputs["who"] != "ana" || again.Inputs["greeting"] != "hello" {
		t.Errorf("run rerun --detach -o json: %+v, want a re-run of %s with who=ana greeting=hello", again, first.ID)
	}
	if got := c.mustCLI("run", "get", again.ID); !strings.Contains(got, "Re-run of:") || !strings.Contains(got, "run "+first.ID) {
		t.Errorf("run get of a re-run does not name the run it re-runs:\n%s", got)
	}
	if got := c.mustCLI("run", "list", "-o", "wide"); !strings.Contains(got, "rerun of "+first.ID) {
		t.Errorf("run list -o wide does not name the run a re-run re-runs:\n%s", got)
	}
	// Of the current version it says nothing more; once the pipeline
	// changed, a re-run says that it runs the old version.
	if r := c.cli("run", "rerun", first.ID, "--detach"); r.code != 0 || strings.Contains(r.stderr, "which is at version") {
		t.Errorf("re-run of the current version: exit %d, stderr %q; want no version warning", r.code, r.stderr)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(rerunPipeline, `echo "$G, $W"`, `echo "$G, $W!"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("pipeline", "apply", "-f", file)
	if r := c.cli("run", "rerun", first.ID, "--detach"); r.code != 0 || !strings.Contains(r.stderr, "runs version 1 of pipeline greet, which is at version 2 now") {
		t.Errorf("re-run of an old version: exit %d, stderr %q; want it to say it runs version 1 of 2", r.code, r.stderr)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "rerun", first.ID, "--input", "who"}, "KEY=VALUE"},
		{[]string{"run", "rerun", first.ID, "--input", "whom=x"}, "has no input named whom"},
		{[]string{"run", "rerun", "r_nope"}, "r_nope"},
	} {
		if r := c.cli(tt.args...); r.code == 0 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("legate %v: exit %d, stderr %q; want a refusal saying %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}
