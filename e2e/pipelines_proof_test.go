package e2e

// The proofs of issue 14 that need real processes beyond
// pipelines_test.go: the connector preference inside a stage, parallel
// steps that overlap, a delegate killed mid-step, a manager restarted
// mid-run, and the deployment limit refusing a run through the binary.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// proofHeartbeat is the heartbeat interval of these tests' managers: 3
// missed heartbeats (6 s) lose a delegate. The harness's 500 ms (a 1.5 s
// window) is for the failover tests; on a busy machine it loses a
// delegate that is merely slow and fails a step these tests expect to
// succeed. A delegate killed with SIGKILL is still lost within it.
const proofHeartbeat = "2s"

// startProofCluster starts a manager with proofHeartbeat and extra flags.
func startProofCluster(t *testing.T, extra ...string) *cluster {
	t.Helper()
	return startCluster(t, append([]string{"--heartbeat-interval", proofHeartbeat}, extra...)...)
}

// applyPipeline stores the pipeline src.
func (c *cluster) applyPipeline(src string) {
	c.t.Helper()
	file := filepath.Join(c.t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		c.t.Fatal(err)
	}
	c.mustCLI("pipeline", "apply", "-f", file)
}

// getRun reads a run through `legate run get -o json`.
func (c *cluster) getRun(id string) protocol.Run {
	c.t.Helper()
	var r protocol.Run
	out := c.mustCLI("run", "get", id, "-o", "json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		c.t.Fatalf("decode run %s: %v\n%s", id, err, out)
	}
	return r
}

// waitRun polls the run until cond holds and returns it.
func (c *cluster) waitRun(id, what string, cond func(protocol.Run) bool) protocol.Run {
	c.t.Helper()
	var r protocol.Run
	eventually(c.t, 60*time.Second, "run "+id+" "+what, func() bool {
		r = c.getRun(id)
		return cond(r)
	})
	return r
}

// runStep returns the run's record of stage.step.
func runStep(r protocol.Run, stage, step string) (protocol.RunStep, bool) {
	for _, s := range r.Steps {
		if s.Stage == stage && s.Step == step {
			return s, true
		}
	}
	return protocol.RunStep{}, false
}

// runPipelineJSON runs `legate pipeline run NAME -o json`, which follows
// the run to its end and prints it.
func (c *cluster) runPipelineJSON(args ...string) (protocol.Run, cliResult) {
	c.t.Helper()
	r := c.cli(append([]string{"pipeline", "run", "-o", "json"}, args...)...)
	var run protocol.Run
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil {
		c.t.Fatalf("pipeline run -o json %v: exit %d: %v\nstdout: %s\nstderr: %s", args, r.code, err, r.stdout, r.stderr)
	}
	return run, r
}

// stepHosts maps each step of a run that had a task to the hostname of
// the delegate its task ran on.
func (c *cluster) stepHosts(r protocol.Run) map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for _, s := range r.Steps {
		if s.TaskID != "" {
			out[s.Stage+"."+s.Step] = c.task(s.TaskID).DelegateHostname
		}
	}
	return out
}

// blockScalar prefixes every line of s with n spaces (a script in a YAML
// block scalar).
func blockScalar(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestPipelineConnectorPreference: in a stage with `infrastructure: farm`,
// of two delegates that can both run its steps, the steps without
// selectors go to the delegate that succeeded for the connector — B,
// the only one that validated it, in three runs in a row; a step with
// selectors goes where they say (A), which makes A the one that last
// succeeded, and the steps without selectors after it (in its run and
// the next) follow it to A.
func TestPipelineConnectorPreference(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "farm here") }))
	t.Cleanup(srv.Close)
	c := startProofCluster(t)
	tok := c.token("pc")
	// A sorts first and both are idle: without the preference either could
	// get a step.
	c.delegate("pc-a", "pc-a-h", c.seed004Env(tok, "pc-a", "")...)
	c.delegate("pc-b", "pc-b-h", c.seed004Env(tok, "pc-b", "")...)
	c.mustCLI("connector", "create", "farm", "--url", srv.URL)

	// B validates the connector's capability and succeeds for it.
	if tk, r := c.runJSON("--connector", "farm", "--selector", "pc-b-h", "--script", "true"); r.code != 0 || tk.DelegateHostname != "pc-b-h" {
		t.Fatalf("validating task on B: exit %d, %s on %q (%s)", r.code, tk.Status, tk.DelegateHostname, tk.Error)
	}
	if last := c.connector("farm").LastSuccessDelegate; !strings.HasSuffix(last, "/pc-b-h") {
		t.Fatalf("connector farm: last success %q, want pc-b-h", last)
	}

	c.applyPipeline(`name: farm-build
stages:
  - name: build
    infrastructure: farm
    steps:
      - name: compile
        shell: echo compiled
      - name: package
        shell: echo packaged
`)
	c.applyPipeline(`name: farm-pinned
stages:
  - name: build
    infrastructure: farm
    steps:
      - name: pinned
        delegateSelectors: [pc-a-h]
        shell: echo pinned
      - name: follow
        shell: echo follows
`)
	// Each step without selectors should run on the delegate that last
	// succeeded for farm: the one of the step before it. That delegate is
	// offered the step alone for the offer window (250 ms) and then every
	// eligible delegate is: on a machine so busy that it did not acquire
	// in time, the step may run on the other, which the manager counts
	// (legate_manager_offers_widened_total). A step elsewhere in a run
	// with no widened offer means the preference was not applied.
	widened := func() float64 {
		return promtest.Scrape(t, c.url+protocol.PathMetrics).Value(t, "legate_manager_offers_widened_total")
	}
	last, clean := "pc-b-h", map[string]int{}
	check := func(what, pipeline string) {
		t.Helper()
		before := widened()
		run, r := c.runPipelineJSON(pipeline)
		if r.code != 0 || run.Status != protocol.RunSucceeded {
			t.Fatalf("%s: exit %d, run %s (%s)\nstderr: %s", what, r.code, run.Status, run.Error, r.stderr)
		}
		hosts, w := c.stepHosts(run), widened()-before
		for _, s := range run.Steps {
			host := hosts[s.Stage+"."+s.Step]
			switch {
			case s.Step == "pinned":
				if host != "pc-a-h" {
					t.Errorf("%s: step pinned (delegateSelectors [pc-a-h]) ran on %q", what, host)
				}
			case host == last:
				clean[last]++
			case w > 0:
				t.Logf("%s: step %s ran on %s, not on %s that last succeeded for farm: %v offer(s) widened (the machine is busy)", what, s.Step, host, last, w)
			default:
				t.Errorf("%s: step %s ran on %s, want %s (the delegate that last succeeded for farm), and no offer widened", what, s.Step, host, last)
			}
			last = host
		}
	}
	for i := range 3 {
		check(fmt.Sprintf("run %d of farm-build", i+1), "farm-build")
	}
	check("farm-pinned", "farm-pinned")
	check("farm-build after A succeeded for farm", "farm-build")
	if clean["pc-a-h"] == 0 || clean["pc-b-h"] == 0 {
		t.Errorf("steps that ran where the preference sent them: %v; want some on each delegate", clean)
	}
}

// TestPipelineParallelStepsOverlap: the two steps of a parallel group
// each announce that they started and wait (at most a minute, then fail)
// until the other has: both succeed only if each was running while the
// other started, so they overlapped. The step after the group runs once
// both have ended.
func TestPipelineParallelStepsOverlap(t *testing.T) {
	t.Parallel()
	c := startProofCluster(t)
	tok := c.token("pp")
	c.delegate("pp", "pp-h", c.seed004Env(tok, "pp", "pp")...)
	dir := t.TempDir()
	side := func(me, other string) string {
		return fmt.Sprintf(`touch %[1]s/%[2]s.started
i=0
while [ ! -e %[1]s/%[3]s.started ]; do
  i=$((i+1))
  if [ $i -gt 1200 ]; then echo "%[3]s never started while %[2]s ran"; exit 1; fi
  sleep 0.05
done
echo "%[2]s saw %[3]s running"
touch %[1]s/%[2]s.ended
`, dir, me, other)
	}
	c.applyPipeline(`name: fan
stages:
  - name: s
    steps:
      - parallel:
          - name: left
            delegateSelectors: [pp]
            shell: |
` + blockScalar(side("left", "right"), 14) + `          - name: right
            delegateSelectors: [pp]
            shell: |
` + blockScalar(side("right", "left"), 14) + `      - name: after
        delegateSelectors: [pp]
        shell: |
          test -e ` + dir + `/left.ended && test -e ` + dir + `/right.ended && echo "both ended before after"
`)
	run, r := c.runPipelineJSON("fan")
	if r.code != 0 || run.Status != protocol.RunSucceeded {
		t.Fatalf("pipeline run fan: exit %d, run %s (%s)\nstderr: %s", r.code, run.Status, run.Error, r.stderr)
	}
	for _, s := range []struct{ step, want string }{
		{"left", "left saw right running"}, {"right", "right saw left running"}, {"after", "both ended before after"},
	} {
		rs, ok := runStep(run, "s", s.step)
		if !ok || rs.Status != protocol.RunSucceeded {
			t.Errorf("step %s: %+v", s.step, rs)
			continue
		}
		if logs := c.mustCLI("task", "logs", rs.TaskID); !strings.Contains(logs, s.want) {
			t.Errorf("step %s logs %q, want %q", s.step, logs, s.want)
		}
	}
}

// TestPipelineDelegateKilledMidStep: two delegates have the step's
// selector; the one that runs the step (retries: 1) is killed with
// SIGKILL mid-step; the step's task runs again on the other, the run goes
// on to its next stage and succeeds, and the step's record names that
// task, on the survivor, at attempt 2.
func TestPipelineDelegateKilledMidStep(t *testing.T) {
	t.Parallel()
	c := startProofCluster(t)
	tok := c.token("kl")
	procs := map[string]*proc{
		"kl-a-h": c.delegate("kl-a", "kl-a-h", c.seed004Env(tok, "kl-a", "kl")...),
		"kl-b-h": c.delegate("kl-b", "kl-b-h", c.seed004Env(tok, "kl-b", "kl")...),
	}
	w := newTwoRuns(t)
	c.applyPipeline(`name: survive
stages:
  - name: work
    steps:
      - name: long
        delegateSelectors: [kl]
        retries: 1
        shell: |
` + blockScalar(w.script(), 10) + `  - name: after
    steps:
      - name: done
        delegateSelectors: [kl]
        shell: echo after the failover
`)
	id := strings.TrimSpace(c.mustCLI("pipeline", "run", "survive", "--detach"))
	run := c.waitRun(id, "with its step work.long's task created", func(r protocol.Run) bool {
		s, ok := runStep(r, "work", "long")
		return ok && s.TaskID != ""
	})
	step, _ := runStep(run, "work", "long")
	first := c.waitRunning(step.TaskID)
	waitFile(t, w.path("first"), "first run of the step started")
	victim, survivor := first.DelegateHostname, "kl-a-h"
	if victim == survivor {
		survivor = "kl-b-h"
	}
	if procs[victim] == nil || first.Attempts != 1 {
		t.Fatalf("step's task on %q at attempt %d, want one of the two delegates at attempt 1", victim, first.Attempts)
	}

	procs[victim].signal(syscall.SIGKILL)
	signalledExit(procs[victim])

	run = c.waitRun(id, "ended", func(r protocol.Run) bool { return r.Status != protocol.RunRunning })
	if run.Status != protocol.RunSucceeded {
		t.Fatalf("run after %s was killed: %s (%s); want succeeded", victim, run.Status, run.Error)
	}
	after, ok := runStep(run, "work", "long")
	if !ok || after.Status != protocol.RunSucceeded || after.TaskID != step.TaskID {
		t.Errorf("step work.long: %+v, want succeeded with task %s", after, step.TaskID)
	}
	tk := c.task(step.TaskID)
	if tk.Status != protocol.StatusSucceeded || tk.Attempts != 2 || tk.DelegateHostname != survivor {
		t.Errorf("step's task: %s, attempt %d on %q (%s); want succeeded at attempt 2 on %s", tk.Status, tk.Attempts, tk.DelegateHostname, tk.Error, survivor)
	}
	if logs := c.mustCLI("task", "logs", step.TaskID); !strings.Contains(logs, "second run") {
		t.Errorf("step's task logs = %q, want the second run's output", logs)
	}
	if !acquired(procs[survivor], step.TaskID) {
		t.Errorf("the survivor's log shows no acquire of %s", step.TaskID)
	}
	if hosts := c.stepHosts(run); hosts["after.done"] != survivor {
		t.Errorf("the next stage's step ran on %q, want the survivor %s", hosts["after.done"], survivor)
	}
	if out := c.mustCLI("run", "get", id); !hasLine(out, "work", "long", "succeeded", step.TaskID) {
		t.Errorf("legate run get does not show the step succeeded with its task:\n%s", out)
	}
}

// pipelineManagerRestart stops the manager with sig while a run's first
// stage blocks on a marker file, starts it again on the same address and
// SQLite data directory, and lets the step end (while the manager is down
// when releaseWhileDown, else after the restart): the run ends succeeded,
// its next stage ran, and the `legate pipeline run` that followed it from
// the start saw all of it and exits 0.
func pipelineManagerRestart(t *testing.T, sig syscall.Signal, prefix string, releaseWhileDown bool) {
	c := startProofCluster(t)
	tok := c.token(prefix)
	c.delegate(prefix, prefix+"-h", c.seed004Env(tok, prefix, prefix)...)
	dir := t.TempDir()
	marker, done := filepath.Join(dir, "release"), filepath.Join(dir, "done")
	c.applyPipeline(fmt.Sprintf(`name: resume
stages:
  - name: first
    steps:
      - name: block
        delegateSelectors: [%[1]s]
        shell: |
          echo "before the restart"
          i=0; while [ ! -e %[2]s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
          [ -e %[2]s ] || exit 9
          echo "released"
          touch %[3]s
  - name: second
    steps:
      - name: later
        delegateSelectors: [%[1]s]
        shell: echo "the later stage ran"
`, prefix, marker, done))
	follow := c.cliAsync("pipeline", "run", "resume")
	var id string
	eventually(t, 30*time.Second, "the run listed", func() bool {
		var runs protocol.RunList
		if err := json.Unmarshal([]byte(c.mustCLI("run", "list", "-o", "json")), &runs); err != nil || len(runs.Runs) != 1 {
			return false
		}
		id = runs.Runs[0].ID
		return true
	})
	run := c.waitRun(id, "with its step first.block's task created", func(r protocol.Run) bool {
		s, ok := runStep(r, "first", "block")
		return ok && s.TaskID != ""
	})
	step, _ := runStep(run, "first", "block")
	c.waitRunning(step.TaskID)
	eventually(t, 20*time.Second, "the step's first line stored", func() bool {
		return strings.Contains(c.mustCLI("task", "logs", step.TaskID), "before the restart")
	})

	addr := strings.TrimPrefix(c.url, "http://")
	c.mgr.signal(sig)
	code := c.mgr.wait(20 * time.Second)
	if sig == syscall.SIGTERM && code != 0 {
		t.Errorf("manager exit code on SIGTERM = %d, want 0", code)
	}
	release := func() {
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if releaseWhileDown {
		release()
		waitFile(t, done, "the step finished while the manager was down")
	}
	c.startManager(addr, "--heartbeat-interval", proofHeartbeat)
	if !releaseWhileDown {
		if r := c.getRun(id); r.Status != protocol.RunRunning {
			t.Fatalf("run after the restart, before the step was released: %s (%s), want running", r.Status, r.Error)
		}
		release()
	}

	run = c.waitRun(id, "ended", func(r protocol.Run) bool { return r.Status != protocol.RunRunning })
	if run.Status != protocol.RunSucceeded {
		t.Fatalf("run across the manager restart: %s (%s), want succeeded", run.Status, run.Error)
	}
	for _, s := range []struct{ stage, step string }{{"first", "block"}, {"second", "later"}} {
		if rs, ok := runStep(run, s.stage, s.step); !ok || rs.Status != protocol.RunSucceeded {
			t.Errorf("step %s.%s: %+v, want succeeded", s.stage, s.step, rs)
		}
	}
	if tk := c.task(step.TaskID); tk.Attempts != 1 {
		t.Errorf("the blocking step's task ran %d times, want once (it ran through the restart)", tk.Attempts)
	}
	if out := c.mustCLI("run", "get", id); !hasLine(out, "Status:", "succeeded") || !hasLine(out, "second", "later", "succeeded") {
		t.Errorf("legate run get after the restart:\n%s", out)
	}
	r := follow()
	t.Logf("manager stopped with %s (exit %d), step released while it was down: %v; run %s %s; the follower exited %d:\n%s",
		sig, code, releaseWhileDown, id, run.Status, r.code, r.stderr)
	if r.code != 0 {
		t.Errorf("legate pipeline run that followed the run across the restart: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"before the restart\n", "released\n", "the later stage ran\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("legate pipeline run's output has no %q:\n%s\nstderr: %s", want, r.stdout, r.stderr)
		}
	}
}

func TestPipelineManagerSigtermMidRun(t *testing.T) {
	t.Parallel()
	pipelineManagerRestart(t, syscall.SIGTERM, "pmt", false)
}

func TestPipelineManagerKillMidRun(t *testing.T) {
	t.Parallel()
	pipelineManagerRestart(t, syscall.SIGKILL, "pmk", true)
}

// TestPipelineDeploymentLimitRefused: with --deployments-per-hour 2, two
// runs of a deployment pipeline deploy; the third `legate pipeline run`
// is refused before it starts with the limit, the usage and when the
// next slot frees up; legate limits shows the usage, nothing of the third
// run is recorded, and /metrics counts one refusal of the hour limit.
func TestPipelineDeploymentLimitRefused(t *testing.T) {
	t.Parallel()
	c := startProofCluster(t, "--deployments-per-hour", "2")
	tok := c.token("dl")
	c.delegate("dl", "dl-h", c.seed004Env(tok, "dl", "dl")...)
	c.applyPipeline(`name: ship
inputs:
  version: "1"
stages:
  - name: deploy
    environment: prod
    service: web
    steps:
      - name: push
        delegateSelectors: [dl]
        shell: echo "pushing $V"
        env: {V: "${{ inputs.version }}"}
`)
	for _, v := range []string{"1", "2"} {
		if r := c.cli("pipeline", "run", "ship", "--input", "version="+v); r.code != 0 || !strings.Contains(r.stdout, "pushing "+v) {
			t.Fatalf("deployment %s: exit %d\nstdout: %s\nstderr: %s", v, r.code, r.stdout, r.stderr)
		}
	}
	r := c.cli("pipeline", "run", "ship", "--input", "version=3")
	msg := regexp.MustCompile(`deployment limit reached: 2 of 2 deployments per hour used; the next slot frees up at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in (\d+h)?(\d+m)?\d+s\)`)
	if r.code == 0 || !msg.MatchString(r.stderr) || strings.Contains(r.stdout, "pushing 3") {
		t.Errorf("third deployment in the hour: exit %d, stderr %q, stdout %q; want refused with %q", r.code, r.stderr, r.stdout, msg)
	}

	out := c.mustCLI("limits")
	if !hasLine(out, "per hour", "2", "2", "in ") || !hasLine(out, "per 24 hours", "2", "100", "free now") {
		t.Errorf("legate limits after two deployments:\n%s", out)
	}
	var l protocol.DeploymentLimits
	if err := json.Unmarshal([]byte(c.mustCLI("limits", "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	if l.PerHour.Used != 2 || l.PerHour.Limit != 2 || l.PerHour.NextFree == nil {
		t.Errorf("limits -o json: per hour %+v, want 2 of 2 with a next free slot", l.PerHour)
	}
	var runs protocol.RunList
	if err := json.Unmarshal([]byte(c.mustCLI("run", "list", "-o", "json")), &runs); err != nil {
		t.Fatal(err)
	}
	var ds protocol.DeploymentList
	if err := json.Unmarshal([]byte(c.mustCLI("deployments", "list", "-o", "json")), &ds); err != nil {
		t.Fatal(err)
	}
	if len(runs.Runs) != 2 || len(ds.Deployments) != 2 {
		t.Errorf("after the refusal: %d runs and %d deployments, want 2 and 2 (the refused run records nothing)", len(runs.Runs), len(ds.Deployments))
	}
	mf := promtest.Scrape(t, c.url+protocol.PathMetrics)
	if got := mf.Value(t, "legate_deployments_refused_total", "limit", "hour"); got != 1 {
		t.Errorf("legate_deployments_refused_total{limit=\"hour\"} = %v, want 1", got)
	}
	if got := mf.Value(t, "legate_deployments_refused_total", "limit", "day"); got != 0 {
		t.Errorf("legate_deployments_refused_total{limit=\"day\"} = %v, want 0", got)
	}
}
