package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// runPollInterval is how often `pipeline run` and `run get --follow`
// read the run while no step's output is streaming.
const runPollInterval = 300 * time.Millisecond

func (a *app) pipelineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "pipeline",
		Aliases: []string{"pipelines"},
		Short:   "Apply, list, show, delete and run pipelines",
		Long: `A pipeline is a YAML file of stages that run in order, each a list of steps
(shell or http tasks) that run in order or in parallel groups; see
docs/pipelines.md. legate pipeline apply stores one at the account, an org
(--org) or a project (--org and --project); legate pipeline run starts it
and shows each step's start, output and end.`,
		Example: `  legate pipeline apply -f deploy-web.yaml --org eng
  legate pipeline run deploy-web --org eng --input version=1.4.2
  legate run list`,
	}
	cmd.AddCommand(a.pipelineApplyCmd(), a.pipelineListCmd(), a.pipelineGetCmd(), a.pipelineDeleteCmd(), a.pipelineRunCmd(), a.pipelineWebhookCmd())
	return cmd
}

func scopeFlags(cmd *cobra.Command, org, project *string, what string) {
	cmd.Flags().StringVar(org, "org", "", "the "+what+"'s organization (default: account level)")
	cmd.Flags().StringVar(project, "project", "", "the "+what+"'s project of --org")
}

func (a *app) pipelineApplyCmd() *cobra.Command {
	var (
		out          outputFlags
		files        []string
		org, project string
		dryRun       bool
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE [-f FILE...] [--dry-run] [--org ORG [--project PROJECT]]",
		Short: "Store pipelines from their YAML files (a new version when one changed)",
		Long: `Store the pipeline of each FILE (- for standard input) under the name it
gives, at account level or at the level of --org (and --project). The
files are checked together first (a dry run of each on the manager):
when one is refused, every problem of every file is printed, as
FILE:LINE: field: message, and nothing is stored. Then they are applied
one by one: if one still fails at the apply (its permission or the
pipeline changed in between), the ones before it stay applied; the CLI
names them and the ones not applied. An apply of a changed file makes
the next version; runs keep the version they started with.

--dry-run makes the same checks on the manager and prints the plan,
storing nothing: per pipeline, created, changed (and briefly what: the
stages, steps and fields that differ) or unchanged. It needs the same
permission as an apply and is audited as pipeline.dry_run, as is the
check of each file before a plain apply. A manager older than dry runs
refuses them: --dry-run then says so and nothing is stored; a plain
apply stores the files one by one without the check first.`,
		Example: `  legate pipeline apply -f deploy-web.yaml
  legate pipeline apply --dry-run -f build.yaml -f deploy-web.yaml
  legate pipeline apply -f - --org eng --project web < pipeline.yaml`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 {
				return usagef("give the pipeline's file with -f FILE (- for standard input)")
			}
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			srcs := make([]string, len(files))
			for i, f := range files {
				src, err := readScript(cmd.InOrStdin(), f)
				if err != nil {
					return err
				}
				srcs[i] = src
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			reqs := make([]protocol.ApplyPipelineRequest, len(srcs))
			for i, src := range srcs {
				reqs[i] = protocol.ApplyPipelineRequest{Source: src, Org: org, Project: project}
			}
			// Every file is checked (a dry run) before any is stored, so
			// that one command reports every problem of every file.
			plans := make([]protocol.Pipeline, len(files))
			var problems []string
			for i, req := range reqs {
				plans[i], err = c.DryRunPipeline(ctx, req)
				if client.NoRoute(err) {
					// A manager older than dry runs: it refused the
					// request, so it stored nothing.
					if dryRun {
						return &ExitError{Code: ExitFailure, Msg: "legate: the manager at " + c.BaseURL() +
							" does not support dry runs (an older version): nothing was stored"}
					}
					return applyFiles(ctx, cmd.OutOrStdout(), &out, c, files, reqs, nil)
				}
				if err != nil {
					problems = append(problems, fileProblems(files[i], err)...)
				}
			}
			if len(problems) > 0 {
				return &ExitError{Code: ExitFailure, Msg: strings.Join(problems, "\n")}
			}
			if dryRun {
				return printPlans(cmd.OutOrStdout(), &out, plans)
			}
			return applyFiles(ctx, cmd.OutOrStdout(), &out, c, files, reqs, plans)
		}),
	}
	cmd.Flags().StringArrayVarP(&files, "file", "f", nil, "a pipeline's YAML file (- for standard input); repeat for several")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check on the manager and print what an apply would do, storing nothing")
	scopeFlags(cmd, &org, &project, "pipeline")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

// applyFiles applies each file in turn and prints what each apply did,
// with the changes of its dry run (plans, nil when there was none). When
// one fails, the ones before it stay applied: it prints them and names
// them in the error.
func applyFiles(ctx context.Context, w io.Writer, out *outputFlags, c *client.Client, files []string, reqs []protocol.ApplyPipelineRequest, plans []protocol.Pipeline) error {
	applied := make([]protocol.Pipeline, 0, len(reqs))
	for i, req := range reqs {
		p, err := c.ApplyPipeline(ctx, req)
		if err != nil {
			if i == 0 {
				return fmt.Errorf("%s: %w", fileLabel(files[i]), err)
			}
			if perr := printPlans(w, out, applied); perr != nil {
				return perr
			}
			return fmt.Errorf("%s: %w\nlegate: the files before it stay applied: %s; not applied: %s", fileLabel(files[i]), err,
				strings.Join(mapLabels(files[:i]), ", "), strings.Join(mapLabels(files[i:]), ", "))
		}
		if plans != nil {
			p.Changes = plans[i].Changes
		}
		applied = append(applied, p)
	}
	return printPlans(w, out, applied)
}

func mapLabels(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = fileLabel(f)
	}
	return out
}

func fileLabel(f string) string {
	if f == "-" {
		return "<stdin>"
	}
	return f
}

// fileProblems turns the manager's refusal of file into one line per
// problem, "FILE:LINE: field: message" where the line is known.
func fileProblems(file string, err error) []string {
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
		return []string{"legate: " + fileLabel(file) + ": " + plainNetError(err)}
	}
	var out []string
	for l := range strings.SplitSeq(strings.TrimSpace(pe.Message), "\n") {
		if rest, ok := strings.CutPrefix(l, "line "); ok {
			if n, tail, ok := strings.Cut(rest, ": "); ok {
				out = append(out, fileLabel(file)+":"+n+": "+tail)
				continue
			}
		}
		out = append(out, fileLabel(file)+": "+l)
	}
	return out
}

// printPlans prints what an apply did, or a dry run would do: one line
// per pipeline, and what changed indented under a changed one.
func printPlans(w io.Writer, out *outputFlags, plans []protocol.Pipeline) error {
	if out.structured() {
		if len(plans) == 1 {
			return out.print(w, plans[0])
		}
		return out.print(w, plans)
	}
	for _, p := range plans {
		what := p.Plan
		switch {
		case what != "":
		case !p.Changed: // a manager that names no plan
			what = protocol.PlanUnchanged
		case p.Version == 1:
			what = protocol.PlanCreated
		default:
			what = protocol.PlanChanged
		}
		if p.DryRun {
			what = "would be " + what
		}
		fmt.Fprintf(w, "pipeline %s %s (version %d, %s)\n", escape(p.Name), what, p.Version, scope(p.Org, p.Project))
		for _, c := range p.Changes {
			fmt.Fprintf(w, "  %s\n", escape(c))
		}
	}
	return nil
}

func (a *app) pipelineListCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the pipelines you may view",
		Long: `List the pipelines of every scope where you have pipeline:view: name,
scope, version, when it was last applied and its description.`,
		Example: `  legate pipeline list
  legate pipeline list -o name`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListPipelines(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				names := make([]string, len(list.Pipelines))
				for i, p := range list.Pipelines {
					names[i] = p.Name
				}
				return printNames(w, names...)
			}
			if len(list.Pipelines) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No pipelines: legate pipeline apply -f FILE stores one.")
				return nil
			}
			return a.pipelineTable(w, list.Pipelines, out.is(formatWide))
		}),
	}
	out.add(cmd, listFormats()...)
	return cmd
}

func (a *app) pipelineGetCmd() *cobra.Command {
	var (
		out          outputFlags
		org, project string
	)
	cmd := &cobra.Command{
		Use:   "get NAME [--org ORG [--project PROJECT]]",
		Short: "Print a pipeline's YAML as applied",
		Long: `Print the YAML of pipeline NAME as it was applied (-o json or yaml: with its
scope, version, times and webhook). Whether it has a webhook, and its URL,
go to stderr (never its secret).`,
		Example: `  legate pipeline get deploy-web --org eng > deploy-web.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.GetPipeline(cmd.Context(), args[0], org, project)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if out.structured() {
				return out.print(w, p)
			}
			src := escapeText(p.Source, true)
			if !strings.HasSuffix(src, "\n") {
				src += "\n"
			}
			if _, err = io.WriteString(w, src); err != nil {
				return err
			}
			if h := p.Webhook; h != nil && h.Suspended != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "legate: webhook suspended %s: %s (%s; enable it again with legate pipeline webhook enable %s --rotate)\n",
					a.timestamp(h.SuspendedAt), escape(webhookURL(c, h.Path)), escape(h.Suspended), escape(p.Name))
			} else if h != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "legate: webhook enabled: %s (acts as %s; secret set %s)\n",
					escape(webhookURL(c, h.Path)), escape(h.EnabledBy), a.timestamp(&h.RotatedAt))
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "legate: no webhook (legate pipeline webhook enable %s adds one)\n", escape(p.Name))
			}
			return nil
		}),
	}
	scopeFlags(cmd, &org, &project, "pipeline")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) pipelineDeleteCmd() *cobra.Command {
	var org, project string
	cmd := &cobra.Command{
		Use:     "delete NAME [--org ORG [--project PROJECT]]",
		Aliases: []string{"rm"},
		Short:   "Delete a pipeline (its runs stay)",
		Long: `Delete pipeline NAME at account level or at the level of --org (and
--project). Its runs, and their steps' tasks, stay.`,
		Example: `  legate pipeline delete deploy-web --org eng`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeletePipeline(cmd.Context(), args[0], org, project); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "pipeline %s deleted\n", escape(args[0]))
			return err
		}),
	}
	scopeFlags(cmd, &org, &project, "pipeline")
	return cmd
}

func (a *app) pipelineRunCmd() *cobra.Command {
	var (
		out          outputFlags
		org, project string
		inputs       []string
		detach       bool
		priority     string
	)
	cmd := &cobra.Command{
		Use:   "run NAME [--input KEY=VALUE]... [--priority LEVEL] [--detach]",
		Short: "Run a pipeline and show each step's start, output and end",
		Long: `Start a run of pipeline NAME with the given inputs (the others take their
defaults), then print on stderr each step as it starts and ends, stream
each step's output to stdout, and exit with the run's status: 0 when it
succeeded, 1 when it failed, 130 when it was cancelled. The steps of a
parallel group run together; their outputs are shown one step after the
other. Ctrl-C stops following but leaves the run running (legate run
cancel ID stops it). --detach prints the run's ID and exits at once.

A run whose pipeline has a deployment stage is refused when the account
has no free deployment slot (legate limits).`,
		Example: `  legate pipeline run deploy-web --input version=1.4.2
  legate pipeline run nightly --org eng --detach`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			in, err := parseKV("--input", inputs, nil)
			if err != nil {
				return err
			}
			req := protocol.RunPipelineRequest{Inputs: in}
			if priority != "" {
				if req.Priority, err = protocol.ParsePriority(priority); err != nil {
					return usagef("--priority: %v", err)
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			run, err := c.RunPipeline(cmd.Context(), args[0], org, project, req)
			if err != nil {
				return err
			}
			return a.startedRun(cmd, c, run, detach, &out, "")
		}),
	}
	scopeFlags(cmd, &org, &project, "pipeline")
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "an input of the run, KEY=VALUE (repeatable)")
	cmd.Flags().BoolVar(&detach, "detach", false, "print the run's ID (with -o: the run) and exit at once")
	cmd.Flags().StringVar(&priority, "priority", "", "priority of the run's step tasks: low, normal, high, urgent or 1-10 (default: the pipeline's, else normal)")
	_ = cmd.RegisterFlagCompletionFunc("priority", fixed("low", "normal", "high", "urgent"))
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

// followRun shows a run's steps as they start and end, with their output,
// until the run is over, and exits with its status. Without follow it
// shows the output so far of the steps that started, once, and returns
// nil.
// startedRun shows a run just started: its ID (or, -o json|yaml, the
// run) when detached; otherwise says first, on stderr, what it is (about:
// "" for nothing) and follows it.
func (a *app) startedRun(cmd *cobra.Command, c *client.Client, run protocol.Run, detach bool, out *outputFlags, about string) error {
	w := cmd.OutOrStdout()
	if detach {
		if out.structured() {
			return out.print(w, run)
		}
		_, err := fmt.Fprintln(w, escape(run.ID))
		return err
	}
	if about != "" && !out.structured() {
		fmt.Fprintf(cmd.ErrOrStderr(), "legate: %s\n", about)
	}
	return a.followRun(cmd, c, run, out)
}

func (a *app) followRun(cmd *cobra.Command, c *client.Client, run protocol.Run, o *outputFlags) error {
	return a.showRun(cmd, c, run, o, true)
}

func (a *app) showRun(cmd *cobra.Command, c *client.Client, run protocol.Run, o *outputFlags, follow bool) error {
	ctx := cmd.Context()
	out, stderr := cmd.OutOrStdout(), io.Writer(&syncWriter{w: cmd.ErrOrStderr()})
	quiet := o.structured()
	if !quiet {
		fmt.Fprintf(stderr, "legate: run %s of pipeline %s (version %d)\n", escape(run.ID), escape(run.Pipeline), run.Version)
	}
	shown := map[string]bool{}
	for {
		progressed := false
		for _, s := range run.Steps {
			key := s.Stage + "." + s.Step
			if shown[key] || s.Status == protocol.RunRunning && s.TaskID == "" {
				continue
			}
			err := a.showStep(ctx, c, s, out, stderr, quiet, follow)
			if follow && ctx.Err() != nil {
				// Ctrl-C while a step's output streamed.
				fmt.Fprintf(stderr, "legate: stopped following run %s; it keeps running (legate run cancel %s to stop it)\n", escape(run.ID), escape(run.ID))
				return &ExitError{Code: ExitInterrupted}
			}
			if errors.Is(err, errStepNotYet) {
				if !follow {
					continue
				}
				break // its task is being created: read the run again
			}
			if err != nil {
				return err
			}
			shown[key], progressed = true, true
		}
		if run.Status != protocol.RunRunning && !progressed {
			break
		}
		if !follow {
			break // one pass: the output so far
		}
		if !progressed {
			select {
			case <-ctx.Done():
				fmt.Fprintf(stderr, "legate: stopped following run %s; it keeps running (legate run cancel %s to stop it)\n", escape(run.ID), escape(run.ID))
				return &ExitError{Code: ExitInterrupted}
			case <-time.After(runPollInterval):
			}
		}
		var err error
		if run, err = c.GetRun(ctx, run.ID); err != nil {
			if ctx.Err() != nil {
				return &ExitError{Code: ExitInterrupted}
			}
			return fmt.Errorf("run %s started, but following it failed (legate run get %s): %w", run.ID, run.ID, err)
		}
	}
	if quiet {
		if err := o.print(out, run); err != nil {
			return err
		}
	}
	if !follow {
		if !quiet {
			msg := "legate: run " + run.ID + " " + run.Status
			if run.Status == protocol.RunRunning {
				msg += " (legate run logs --follow " + run.ID + " follows it)"
			} else if run.Error != "" {
				msg += ": " + run.Error
			}
			fmt.Fprintln(stderr, escapeLines(msg))
		}
		return nil
	}
	switch run.Status {
	case protocol.RunSucceeded:
		if !quiet {
			fmt.Fprintf(stderr, "legate: run %s succeeded\n", escape(run.ID))
		}
		return nil
	case protocol.RunCancelled:
		if !quiet {
			fmt.Fprintf(stderr, "legate: run %s cancelled\n", escape(run.ID))
		}
		return &ExitError{Code: ExitInterrupted}
	}
	if !quiet {
		msg := "legate: run " + run.ID + " " + run.Status
		if run.Error != "" {
			msg += ": " + run.Error
		}
		fmt.Fprintln(stderr, escapeLines(msg))
	}
	return &ExitError{Code: ExitFailure}
}

// errStepNotYet: a step's task is not created yet.
var errStepNotYet = errors.New("the step's task is not created yet")

// showStep prints a step's start, streams its task's output until it
// ends, and prints its end.
func (a *app) showStep(ctx context.Context, c *client.Client, s protocol.RunStep, out, stderr io.Writer, quiet, follow bool) error {
	name := escape(s.Stage + "." + s.Step)
	note := func(format string, args ...any) {
		if !quiet {
			fmt.Fprintf(stderr, format, args...)
		}
	}
	if s.TaskID == "" {
		if s.Status == protocol.StepSkipped {
			note("legate: - %s skipped\n", name)
		} else {
			note("legate: ✗ %s %s: %s\n", name, s.Status, escapeLines(s.Error))
		}
		return nil
	}
	started := false
	show := rawOutput(out, stderr, s.TaskID)
	if quiet {
		show = func(protocol.LogStreamLine) error { return nil }
	}
	notices := connectionNotices(stderr, c.BaseURL(), s.TaskID)
	t, err := c.StreamLogsWith(ctx, s.TaskID, client.StreamOptions{Follow: follow, OnEvent: func(e client.StreamEvent) {
		if e.Kind == client.StreamConnected && !started {
			started = true
			note("legate: ▶ %s started (task %s)\n", name, escape(s.TaskID))
		}
		notices(e)
	}}, show)
	var pe *protocol.Error
	if !started && errors.As(err, &pe) && pe.Code == protocol.CodeNotFound {
		// The run records a step before the manager creates its task.
		return errStepNotYet
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // followRun says so
		}
		return fmt.Errorf("follow step %s (legate task logs --follow %s): %w", name, s.TaskID, err)
	}
	took := ""
	if t.StartedAt != nil && t.FinishedAt != nil {
		took = " in " + duration(t.FinishedAt.Sub(*t.StartedAt))
	}
	if t.Status == protocol.StatusSucceeded {
		note("legate: ✓ %s succeeded%s\n", name, took)
		return nil
	}
	if !protocol.Terminal(t.Status) {
		note("legate: … %s %s (output so far)\n", name, t.Status)
		return nil
	}
	_, reason := outcome(t)
	note("legate: ✗ %s %s%s (%s)\n", name, t.Status, took, strings.TrimPrefix(escapeLines(reason), "legate: "))
	return nil
}

func (a *app) runCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "run",
		Aliases: []string{"runs"},
		Short:   "List, show, read the output of and cancel pipeline runs",
		Long: `A run is one execution of a pipeline (legate pipeline run): each of its
steps is a task, with the task's leases, retries and output; a run
survives manager restarts as its tasks do.`,
		Example: `  legate run list --pipeline deploy-web
  legate run get r_abc
  legate run logs r_abc --follow
  legate run cancel r_abc`,
	}
	cmd.AddCommand(a.runListCmd(), a.runGetCmd(), a.runLogsCmd(), a.runCancelCmd(), a.runRerunCmd())
	return cmd
}

func (a *app) runListCmd() *cobra.Command {
	var (
		out   outputFlags
		q     client.RunQuery
		all   bool
		limit int
	)
	cmd := &cobra.Command{
		Use:     "list [--pipeline NAME] [--status STATUS]",
		Aliases: []string{"ls"},
		Short:   "List pipeline runs, newest first",
		Long: `List the runs of the pipelines you may view, newest first: ID, pipeline,
version, status, when it started, how long it took and who started it.

--pipeline keeps the runs of pipelines of that name, --status those
running, succeeded, failed or cancelled. --limit bounds the runs shown
(100 by default); --all pages through every run that matches. -o wide
adds the trigger (a re-run's names the run it re-runs), the times and a
failed run's error; -o name prints one run ID per line.`,
		Example: `  legate run list
  legate run list --pipeline deploy-web --status failed
  legate run list --status failed -o name | xargs -n1 legate run rerun --detach
  legate run list --all -o json | jq -r '.runs[].id'`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > 1000 {
				return usagef("--limit %d: use a number from 1 to 1000", limit)
			}
			switch q.Status {
			case "", protocol.RunRunning, protocol.RunSucceeded, protocol.RunFailed, protocol.RunCancelled:
			default:
				return usagef("--status %q: use running, succeeded, failed or cancelled", q.Status)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			q.Limit = limit
			var list protocol.RunList
			for {
				page, err := c.ListRunsPage(cmd.Context(), q)
				if err != nil {
					return err
				}
				list.Runs = append(list.Runs, page.Runs...)
				list.Next = page.Next
				if !all || page.Next == "" {
					break
				}
				q.Page = page.Next
			}
			if list.Runs == nil {
				list.Runs = []protocol.Run{}
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				ids := make([]string, len(list.Runs))
				for i, r := range list.Runs {
					ids[i] = r.ID
				}
				return printNames(w, ids...)
			}
			if len(list.Runs) == 0 {
				if q.Pipeline != "" || q.Status != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), "No run matches.")
				} else {
					fmt.Fprintln(cmd.ErrOrStderr(), "No runs: legate pipeline run NAME starts one.")
				}
				return nil
			}
			if err := a.runTable(w, list.Runs, out.is(formatWide)); err != nil {
				return err
			}
			if list.Next != "" && !all {
				fmt.Fprintln(cmd.ErrOrStderr(), "More runs match: --all lists them all, or narrow with --pipeline or --status.")
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&q.Pipeline, "pipeline", "", "only the runs of this pipeline")
	cmd.Flags().StringVar(&q.Status, "status", "", "only runs in this status: running, succeeded, failed or cancelled")
	cmd.Flags().IntVar(&limit, "limit", 100, "show at most this many runs (1 to 1000)")
	cmd.Flags().BoolVar(&all, "all", false, "page through every run that matches")
	out.add(cmd, listFormats()...)
	return cmd
}

func (a *app) runGetCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show a run and its steps (their tasks, statuses and outputs)",
		Long: `Show run ID: its pipeline, inputs and status, and each step that started or
was skipped with its task (legate task logs TASK shows its output), status
and outputs.`,
		Example: `  legate run get r_abc`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.GetRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if out.structured() {
				return out.print(w, r)
			}
			return a.runDetail(w, r)
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) runDetail(w io.Writer, r protocol.Run) error {
	t := newTable(w, "ID:", r.ID)
	t.row("Pipeline:", r.Pipeline+" (version "+strconv.FormatInt(r.Version, 10)+")")
	t.row("Scope:", scope(r.Org, r.Project))
	t.row("Status:", r.Status)
	if r.Error != "" {
		t.row("Error:", r.Error)
	}
	t.row("Triggered:", r.Trigger+" by "+r.TriggeredBy)
	if r.RollbackOf != "" {
		t.row("Rolls back:", "deployment "+r.RollbackOf)
	}
	if r.RerunOf != "" {
		t.row("Re-run of:", "run "+r.RerunOf)
	}
	t.row("Started:", a.timestamp(&r.CreatedAt))
	if r.FinishedAt != nil {
		t.row("Finished:", a.timestamp(r.FinishedAt))
	}
	for _, k := range sortedKeys(r.Inputs) {
		t.row("Input:", k+"="+r.Inputs[k])
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(r.Steps) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	st := newTable(w, "STAGE", "STEP", "STATUS", "TASK", "OUTPUTS", "ERROR")
	for _, s := range r.Steps {
		var outs []string
		for _, k := range sortedKeys(s.Outputs) {
			outs = append(outs, k+"="+s.Outputs[k])
		}
		st.row(s.Stage, s.Step, s.Status, s.TaskID, strings.Join(outs, " "), s.Error)
	}
	return st.flush()
}

func (a *app) runLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs ID [--follow]",
		Short: "Print a run's output, step by step (--follow: until it ends)",
		Long: `Print the output of run ID's steps in order, each between the start and end
lines legate pipeline run prints (on stderr; the output goes to stdout).
Without --follow it prints what the steps that started have written so
far and exits 0. With --follow it streams until the run ends and exits
with its status as legate pipeline run does: 0 when it succeeded, 1 when
it failed, 130 when it was cancelled.`,
		Example: `  legate run logs r_abc
  legate run logs r_abc --follow`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.GetRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.showRun(cmd, c, r, &outputFlags{}, follow)
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream until the run ends and exit with its status")
	return cmd
}

func (a *app) runCancelCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a run: its running steps' tasks are cancelled and no further step starts",
		Long: `Cancel run ID: its running steps' tasks are cancelled (their delegates are
told to stop them) and no further step starts, not even "when: always"
ones. The run ends cancelled.`,
		Example: `  legate run cancel r_abc`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.CancelRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if out.structured() {
				return out.print(w, r)
			}
			_, err = fmt.Fprintf(w, "run %s %s\n", escape(r.ID), r.Status)
			return err
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
