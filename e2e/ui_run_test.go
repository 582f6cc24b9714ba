package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/legate-dev/legate/internal/protocol"
)

const uiRunPipeline = `name: greet
description: Greet someone
inputs:
  who: {description: whom to greet}
  greeting: {default: hello, description: the first word}
stages:
  - name: say
    steps:
      - name: hello
        delegateSelectors: [linux]
        shell: |
          echo "$G, $W"
          if [ "$W" = fail ]; then exit 4; fi
          if [ "$W" = wait ]; then sleep 300; fi
        env: {G: "${{ inputs.greeting }}", W: "${{ inputs.who }}"}
      - name: cleanup
        when: failure
        delegateSelectors: [linux]
        shell: echo "cleaning up"
      - name: after
        delegateSelectors: [linux]
        shell: echo "after the greeting"
`

// submitForm clicks the submit button of the form sel.
func submitForm(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel + ` button[type="submit"]`))
}

// setField replaces the value of the field sel.
func setField(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS(sel), v)
}

// pageText is the text of the page's main part.
func pageText(t *testing.T, ctx context.Context) string {
	t.Helper()
	return value(t, ctx, "read the page", chromedp.Evaluate[string](`document.getElementById("main").innerText`))
}

// TestUIRunFormsInBrowser: from the web UI, run a pipeline with its
// inputs (a required input left empty is refused on its field), re-run
// the run with an edited input (the new run names the run it re-runs, and
// its page opens on the step that failed, not on the "when: failure"
// step), cancel a running run, and run a task (script, selectors,
// timeout, a secret by name; a timeout that is no duration is refused on
// its field) whose page follows it to its output; a viewer is refused
// each, with the explanation on the page in its words.
func TestUIRunFormsInBrowser(t *testing.T) {
	bin := chromiumOrSkip(t)
	shots := screenshotDir(t)
	c := startCluster(t)
	c.delegate("runner", "ui-run-a", c.seed004Env(c.token("runners"), "runner", "linux")...)
	c.applyPipeline(uiRunPipeline)
	c.mustCLI("secret", "create", "GREETING_TOKEN", "--from-file", writeTemp(t, "tok-never-shown"))
	ctx := newBrowser(t, bin)
	run(t, ctx, "sign in", chromedp.Navigate(c.uiLink(c.apiKey)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status.on`))

	// Run the pipeline: the form has its inputs with their defaults.
	run(t, ctx, "open the run form from the pipeline's page",
		chromedp.Navigate(c.url+"/pipelines/greet"),
		chromedp.Click(chromedp.CSS(`#pipeline-run-link`)),
		visible(`#pipeline-run-form #input-who`))
	if got := value(t, ctx, "read the default", chromedp.Evaluate[string](`document.getElementById("input-greeting").value`)); got != "hello" {
		t.Errorf("the greeting field holds %q, want its default hello", got)
	}
	run(t, ctx, "submit without the required input",
		submitForm(`#pipeline-run-form`),
		visible(`[data-field-error="input.who"]`))
	if msg := pageText(t, ctx); !strings.Contains(msg, "Fill in who") || strings.Contains(msg, "--input") {
		t.Errorf("the refused form says:\n%s\nwant the field's words (Fill in who), no CLI flag", msg)
	}
	screenshot(t, ctx, shots, "pipeline-run-form")
	run(t, ctx, "run it with an input",
		setField(`#input-who`, "ana"),
		submitForm(`#pipeline-run-form`),
		visible(`#run-status.s-succeeded`),
		visible(`tr[data-step="cleanup"][data-status="skipped"]`))
	first := value(t, ctx, "read the run's ID", chromedp.Evaluate[string](`location.pathname.split("/").pop()`))
	run(t, ctx, "the greeting step's output",
		chromedp.Navigate(c.url+"/runs/"+first+"?step=0"),
		visible(`tr[data-step="hello"].selected`),
		until(`document.getElementById("output").textContent.includes("hello, ana")`))
	if took := value(t, ctx, "read the skipped step's duration", chromedp.Text(chromedp.CSS(`tr[data-step="cleanup"] td.took`))); strings.TrimSpace(took) != "—" {
		t.Errorf("the skipped step shows a duration %q", took)
	}
	order := value(t, ctx, "read the steps' order", chromedp.Evaluate[string](`[...document.querySelectorAll("tr[data-step]")].map(e => e.dataset.step).join(",")`))
	if order != "hello,cleanup,after" {
		t.Errorf("the steps show in the order %s, want the pipeline's hello,cleanup,after", order)
	}

	// Re-run with an edited input: the form holds the run's inputs.
	run(t, ctx, "open the re-run form",
		chromedp.Click(chromedp.CSS(`#run-rerun-edit`)),
		visible(`#rerun-form #input-who`))
	if got := value(t, ctx, "read the run's input", chromedp.Evaluate[string](`document.getElementById("input-who").value`)); got != "ana" {
		t.Errorf("the re-run form's who holds %q, want the run's ana", got)
	}
	run(t, ctx, "edit an input", setField(`#input-who`, "fail"))
	screenshot(t, ctx, shots, "run-rerun-form")
	run(t, ctx, "re-run it",
		submitForm(`#rerun-form`),
		visible(`#run-rerun-of`),
		visible(`#run-status.s-failed`),
		visible(`tr[data-step="cleanup"][data-status="succeeded"]`),
		visible(`#run-failed-step`))
	rerun := value(t, ctx, "read the re-run's ID", chromedp.Evaluate[string](`location.pathname.split("/").pop()`))
	if of := value(t, ctx, "read the re-run's origin", chromedp.Text(chromedp.CSS(`#run-rerun-of`))); !strings.Contains(of, first) || rerun == first {
		t.Errorf("run %s says it re-runs %q, want %s", rerun, of, first)
	}
	run(t, ctx, "the failed step's output shows first (a reload, as someone opening the ended run)",
		chromedp.Navigate(c.url+"/runs/"+rerun),
		visible(`tr[data-step="hello"].selected`),
		until(`document.getElementById("output").textContent.includes("hello, fail")`))
	if out := value(t, ctx, "read the output", chromedp.Evaluate[string](`document.getElementById("output").textContent`)); strings.Contains(out, "cleaning up") {
		t.Errorf("the run page opens on the when: failure step's output:\n%s", out)
	}
	if r := c.getRun(rerun); r.RerunOf != first || r.Inputs["who"] != "fail" || r.Inputs["greeting"] != "hello" {
		t.Errorf("the re-run: rerun_of %q, inputs %v; want %s with who=fail greeting=hello", r.RerunOf, r.Inputs, first)
	}

	run(t, ctx, "re-run the first run with its own inputs",
		chromedp.Navigate(c.url+"/runs/"+first),
		submitForm(`#run-rerun-form`),
		visible(`#run-rerun-of`),
		visible(`#run-status.s-succeeded`))
	same := value(t, ctx, "read the re-run's ID", chromedp.Evaluate[string](`location.pathname.split("/").pop()`))
	if r := c.getRun(same); r.RerunOf != first || r.Inputs["who"] != "ana" || same == first {
		t.Errorf("the re-run with the same inputs: %s, rerun_of %q, inputs %v; want a new run of %s with who=ana", same, r.RerunOf, r.Inputs, first)
	}

	// Cancel a running run from its page.
	waiting := strings.TrimSpace(c.mustCLI("pipeline", "run", "greet", "--input", "who=wait", "--detach"))
	run(t, ctx, "open a running run",
		chromedp.Navigate(c.url+"/runs/"+waiting),
		until(`document.getElementById("output") && document.getElementById("output").textContent.includes("hello, wait")`))
	// The page asks first; the test answers yes.
	value(t, ctx, "answer the confirmation", chromedp.Evaluate[bool](`window.confirm = () => true; true`))
	run(t, ctx, "cancel it",
		submitForm(`#run-cancel-form`),
		visible(`#run-status.s-cancelled`))
	if st := c.getRun(waiting).Status; st != protocol.RunCancelled {
		t.Errorf("the cancelled run is %s", st)
	}

	// Run a task and follow it.
	run(t, ctx, "open the task form",
		chromedp.Navigate(c.url+"/tasks"),
		chromedp.Click(chromedp.CSS(`#task-run-link`)),
		visible(`#task-run-form #script`),
		setField(`#script`, `echo "task says $GREETING_TOKEN"; echo "task done"`),
		setField(`#selectors`, "linux"),
		setField(`#timeout`, "ten minutes"),
		setField(`#secrets`, "GREETING_TOKEN"),
		submitForm(`#task-run-form`),
		visible(`[data-field-error="timeout"]`))
	if msg := pageText(t, ctx); !strings.Contains(msg, "is not a duration") || strings.Contains(msg, "--timeout") {
		t.Errorf("the refused task form says:\n%s\nwant the Timeout field's words, no CLI flag", msg)
	}
	if got := value(t, ctx, "read the kept script", chromedp.Evaluate[string](`document.getElementById("script").value`)); !strings.Contains(got, "task says") {
		t.Errorf("the refused form lost the script: %q", got)
	}
	screenshot(t, ctx, shots, "task-run-form")
	run(t, ctx, "fix the timeout", setField(`#timeout`, "5m"))
	run(t, ctx, "run the task and see its output",
		submitForm(`#task-run-form`),
		visible(`#task-status`),
		until(`document.getElementById("output").textContent.includes("task done")`),
		visible(`#task-status.s-succeeded`))
	out := value(t, ctx, "read the task's output", chromedp.Evaluate[string](`document.getElementById("output").textContent`))
	if !strings.Contains(out, "task says") || strings.Contains(out, "tok-never-shown") {
		t.Errorf("the task's output %q: want its line, the secret masked", out)
	}
	taskID := value(t, ctx, "read the task's ID", chromedp.Evaluate[string](`location.pathname.split("/").pop()`))
	if tk := c.task(taskID); tk.TimeoutMS != 300000 || len(tk.Selectors) != 1 || tk.Selectors[0] != "linux" {
		t.Errorf("the task: timeout %d ms, selectors %v; want 300000 and linux", tk.TimeoutMS, tk.Selectors)
	}

	// A viewer: offered none of it, and refused with the reason when
	// the forms are sent anyway.
	c.mustCLI("user", "create", "vic")
	c.mustCLI("role", "bind", "viewer", "--user", "vic")
	var vk protocol.APIKey
	if err := json.Unmarshal([]byte(c.mustCLI("apikey", "create", "vic-key", "--owner", "vic", "-o", "json")), &vk); err != nil {
		t.Fatal(err)
	}
	viewer := newBrowser(t, bin)
	run(t, viewer, "sign the viewer in",
		chromedp.Navigate(c.uiLink(vk.Value)), visible("#use-link"),
		chromedp.Click(chromedp.CSS("#use-link")), visible(`#live-status`))
	run(t, viewer, "the pipeline's page", chromedp.Navigate(c.url+"/pipelines/greet"), visible(`#pipeline-source`))
	if n := value(t, viewer, "count run links", chromedp.Evaluate[int](`document.querySelectorAll("#pipeline-run-link").length`)); n != 0 {
		t.Errorf("the viewer is offered to run the pipeline")
	}
	run(t, viewer, "the run form anyway",
		chromedp.Navigate(c.url+"/pipelines/greet/run"),
		visible(`#run-denied`),
		setField(`#input-who`, "vic"),
		submitForm(`#pipeline-run-form`),
		visible(`p.error`))
	if msg := pageText(t, viewer); !strings.Contains(msg, "You may not run pipeline greet") || !strings.Contains(msg, "pipeline:execute") || strings.Contains(msg, "--user") {
		t.Errorf("the viewer's run refused with:\n%s\nwant the reason in the page's words", msg)
	}
	run(t, viewer, "the run page", chromedp.Navigate(c.url+"/runs/"+first), visible(`#run-status`))
	if n := value(t, viewer, "count re-run actions", chromedp.Evaluate[int](`document.querySelectorAll("#run-rerun-form, #run-rerun-edit").length`)); n != 0 {
		t.Errorf("the viewer is offered a re-run")
	}
	forge := func(path string) string {
		return fmt.Sprintf(`(async () => {
			const csrf = document.querySelector('input[name="csrf"]').value;
			const r = await fetch(%q, {method: "POST", body: new URLSearchParams({csrf}), redirect: "manual"});
			return r.status + " " + new DOMParser().parseFromString(await r.text(), "text/html").querySelector("p.error").innerText;
		})()`, path)
	}
	if got := value(t, viewer, "forge a re-run", chromedp.Evaluate[string](forge("/runs/"+first+"/rerun"), chromedp.EvalAwaitPromise)); !strings.HasPrefix(got, "403 You may not re-run run "+first) || !strings.Contains(got, "pipeline:execute") {
		t.Errorf("the viewer's forged re-run: %q, want 403 with the reason", got)
	}
	running := strings.TrimSpace(c.mustCLI("pipeline", "run", "greet", "--input", "who=wait", "--detach"))
	t.Cleanup(func() { c.cli("run", "cancel", running) })
	if got := value(t, viewer, "forge a cancel", chromedp.Evaluate[string](forge("/runs/"+running+"/cancel"), chromedp.EvalAwaitPromise)); !strings.HasPrefix(got, "403 You may not cancel run "+running) || !strings.Contains(got, "pipeline:execute") {
		t.Errorf("the viewer's forged cancel: %q, want 403 with the reason", got)
	}
	if st := c.getRun(running).Status; st != protocol.RunRunning {
		t.Errorf("after the viewer's forged cancel the run is %s", st)
	}
	run(t, viewer, "the task form anyway",
		chromedp.Navigate(c.url+"/tasks/new"),
		visible(`#task-denied`),
		setField(`#script`, "echo no"),
		submitForm(`#task-run-form`),
		visible(`p.error`))
	if msg := pageText(t, viewer); !strings.Contains(msg, "You may not run this task") || !strings.Contains(msg, "task:run") || strings.Contains(msg, "--user") {
		t.Errorf("the viewer's task refused with:\n%s\nwant the reason in the page's words", msg)
	}
}
