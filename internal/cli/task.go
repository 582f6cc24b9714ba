package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// allStatuses lists the task statuses for help and error messages.
func allStatuses() string {
	return strings.Join([]string{
		protocol.StatusQueued, protocol.StatusRunning, protocol.StatusSucceeded, protocol.StatusFailed,
		protocol.StatusTimedOut, protocol.StatusNotAssigned, protocol.StatusCancelled,
	}, ", ")
}

func (a *app) taskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "task",
		Aliases: []string{"tasks"},
		Short:   "Run, inspect and cancel tasks",
		Long: `Tasks are units of work that a delegate runs: a shell script or an HTTP call.
"legate task run" submits one and shows its output live.`,
		Example: `  legate task run --script 'echo hello from $(hostname)'
  legate task list --status running
  legate task logs t_123 --follow
  legate task explain t_123`,
	}
	cmd.AddCommand(a.taskRunCmd(), a.taskGetCmd(), a.taskLogsCmd(), a.taskCancelCmd(), a.taskListCmd(), a.taskExplainCmd(), a.taskQueueCmd())
	return cmd
}

func (a *app) taskGetCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:               "get ID",
		ValidArgsFunction: a.complete(a.tasksLister(false)),
		Short:             "Show one task",
		Long: `Show a task's status, exit code, error, delegate, timings and payload.
-o wide adds the whole script, the environment's values (secret values are
never shown), the timeouts and the delegate instance.`,
		Example: `  legate task get t_123
  legate task get t_123 -o wide
  legate task get t_123 --json | jq .exit_code`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.GetTask(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, t)
			case out.is(formatName):
				return printNames(w, t.ID)
			}
			return a.printTask(w, t, out.is(formatWide))
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatWide, formatName)
	return cmd
}

// printTask writes one task as aligned "Key: value" lines; wide adds the
// whole script, the environment's values, the timeouts and the instance.
func (a *app) printTask(w io.Writer, t protocol.Task, wide bool) error {
	tb := newTable(w, "ID:", t.ID)
	tb.row("Status:", t.Status)
	tb.row("Type:", t.Type)
	tb.row("Exit code:", exitCode(t))
	if t.Error != "" {
		// A not_assigned error has one line per delegate.
		for i, l := range strings.Split(indentLines(t.Error), "\n") {
			key := "Error:"
			if i > 0 {
				key, l = " ", strings.TrimSpace(l)
			}
			tb.row(key, l)
		}
	}
	delegate := t.DelegateName
	if t.DelegateHostname != "" {
		delegate += " (" + t.DelegateHostname + ")"
	}
	tb.row("Delegate:", delegate)
	tb.row("Scope:", scope(t.Org, t.Project))
	tb.row("Selectors:", strings.Join(t.Selectors, ", "))
	if len(t.Capabilities) > 0 {
		tb.row("Capabilities:", strings.Join(t.Capabilities, ", "))
	}
	if t.Connector != "" {
		tb.row("Connector:", t.Connector)
	}
	tb.row("Priority:", priorityText(t.Priority))
	tb.row("Attempts:", fmt.Sprintf("%d (retries allowed: %d)", t.Attempts, t.Retries))
	tb.row("Created:", a.timestamp(&t.CreatedAt))
	if t.CreatedBy != "" {
		tb.row("Created by:", t.CreatedBy)
	}
	tb.row("Acquired:", a.timestamp(t.AcquiredAt))
	tb.row("Started:", a.timestamp(t.StartedAt))
	tb.row("Finished:", a.timestamp(t.FinishedAt))
	tb.row("Duration:", taskDuration(a.now(), t))
	if wide {
		tb.row("Timeout:", msDuration(t.TimeoutMS))
		tb.row("Queue timeout:", msDuration(t.QueueTimeoutMS))
		tb.row("Instance:", t.InstanceID)
	}
	if t.Shell != nil && !wide {
		script := t.Shell.Script
		if i := strings.IndexByte(script, '\n'); i >= 0 {
			script = script[:i] + " ..."
		}
		tb.row("Script:", script)
	}
	if t.HTTP != nil {
		tb.row("Request:", t.HTTP.Method+" "+t.HTTP.URL)
	}
	if t.HTTPResult != nil {
		tb.row("HTTP status:", strconv.Itoa(t.HTTPResult.Status))
	}
	if len(t.Env) > 0 {
		names := make([]string, 0, len(t.Env))
		for k := range t.Env {
			names = append(names, k)
		}
		sort.Strings(names)
		if wide {
			for i, k := range names {
				names[i] = k + "=" + t.Env[k]
			}
		}
		tb.row("Env:", strings.Join(names, ", "))
	}
	if len(t.SecretEnvNames) > 0 {
		tb.row("Secret env:", strings.Join(t.SecretEnvNames, ", "))
	}
	if err := tb.flush(); err != nil {
		return err
	}
	if wide && t.Shell != nil {
		if _, err := fmt.Fprintf(w, "Script:\n%s", indent(t.Shell.Script, "  ")); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return nil
}

// msDuration renders a timeout in milliseconds; "" for 0.
func msDuration(ms int64) string {
	if ms <= 0 {
		return ""
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func (a *app) taskLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:               "logs ID",
		ValidArgsFunction: a.complete(a.tasksLister(false)),
		Short:             "Print a task's output",
		Long: `Print the output of a task as the delegate captured it (secrets masked).
With --follow, keep printing new output until the task finishes; if the
manager cannot be reached meanwhile, say so on stderr and keep trying. A
task cancelled elsewhere ends with a line that says when and by whom;
Ctrl-C stops following and leaves the task running.

The manager keeps the first and the last 4 MiB of each attempt's output;
a marker in the output says how much was left out between them.`,
		Example: `  legate task logs t_123
  legate task logs t_123 --follow`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, id, stderr := cmd.Context(), args[0], cmd.ErrOrStderr()
			final, err := c.StreamLogsWith(ctx, id, client.StreamOptions{Follow: follow,
				OnEvent: connectionNotices(stderr, c.BaseURL(), id)}, rawOutput(cmd.OutOrStdout(), stderr, id))
			if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
				if follow {
					fmt.Fprintf(stderr, "legate: stopped following task %s; it keeps running (legate task cancel %s to stop it)\n", escape(id), escape(id))
				}
				return &ExitError{Code: ExitInterrupted}
			}
			if err == nil && follow && final.Status == protocol.StatusCancelled {
				// Cancelled elsewhere (another terminal, the web UI, its run).
				msg := "legate: task " + final.ID + " was cancelled"
				if final.FinishedAt != nil {
					msg += " at " + final.FinishedAt.UTC().Format(time.RFC3339)
				}
				if final.Error != "" {
					msg += ": " + final.Error
				}
				fmt.Fprintln(stderr, escapeLines(msg))
			}
			return err
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep streaming until the task finishes")
	return cmd
}

// rawOutput returns a StreamLogs callback that writes chunk data as it is
// and notes on stderr where a new attempt's output starts.
func rawOutput(out, stderr io.Writer, id string) func(protocol.LogStreamLine) error {
	attempt := 0
	return func(l protocol.LogStreamLine) error {
		if l.Chunk == nil {
			return nil
		}
		if l.Chunk.Attempt > attempt {
			if attempt > 0 {
				fmt.Fprintf(stderr, "legate: task %s: output of attempt %d follows\n", id, l.Chunk.Attempt)
			}
			attempt = l.Chunk.Attempt
		}
		if _, err := io.WriteString(out, l.Chunk.Data); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	}
}

func (a *app) taskCancelCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:               "cancel ID",
		ValidArgsFunction: a.complete(a.tasksLister(true)),
		Short:             "Cancel a queued or running task",
		Long: `Cancel a task. A queued task is cancelled at once; a running task's delegate
is told to stop it.`,
		Example: `  legate task cancel t_123`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.CancelTask(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), t)
			}
			if protocol.Terminal(t.Status) {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Task %s is %s.\n", escape(t.ID), escape(t.Status))
			} else {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Cancellation of task %s requested (status: %s).\n", escape(t.ID), escape(t.Status))
			}
			return err
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) taskListCmd() *cobra.Command {
	var (
		out outputFlags
		q   client.TaskQuery
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List recent tasks",
		Long: `List tasks, newest first, optionally only those in one status, of one
scope (an org and its projects, or a project) or run by one delegate (its
name or hostname). -o wide adds the scope, selectors, attempts, the
delegate's hostname and the error; -o name prints only the IDs.`,
		Example: `  legate task list
  legate task list --status failed --limit 10 -o wide
  legate task list --scope eng/web --delegate builder
  legate task list --status queued -o name | xargs -n1 legate task cancel`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if q.Status != "" && !protocol.ValidStatus(q.Status) {
				return usagef("--status %q: want one of %s", q.Status, allStatuses())
			}
			if q.Limit < 0 {
				return usagef("--limit %d: want 0 (the manager's default) or more", q.Limit)
			}
			if q.Scope != "" {
				if _, _, err := protocol.ParseScope(q.Scope); err != nil {
					return usagef("--scope %q: %v", q.Scope, err)
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListTasksPage(cmd.Context(), q)
			if err != nil {
				return err
			}
			if list.Tasks == nil {
				list.Tasks = []protocol.Task{}
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				ids := make([]string, len(list.Tasks))
				for i, t := range list.Tasks {
					ids[i] = t.ID
				}
				return printNames(w, ids...)
			}
			if len(list.Tasks) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No tasks.")
				return nil
			}
			return a.taskTable(w, list.Tasks, out.is(formatWide))
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatWide, formatName)
	cmd.Flags().StringVar(&q.Status, "status", "", "only tasks in this status ("+allStatuses()+")")
	_ = cmd.RegisterFlagCompletionFunc("status", fixed(strings.Split(allStatuses(), ", ")...))
	cmd.Flags().StringVar(&q.Scope, "scope", "", "only tasks of this org (and its projects) or project: ORG or ORG/PROJECT")
	cmd.Flags().StringVar(&q.Delegate, "delegate", "", "only tasks the delegate of this name or hostname ran or runs")
	cmd.Flags().IntVar(&q.Limit, "limit", 50, "at most this many tasks (0 = the manager's default)")
	return cmd
}

// priorityText is a priority as task get shows it: its name and number.
func priorityText(p int) string {
	p = protocol.PriorityOrNormal(p)
	if n := protocol.PriorityName(p); n != strconv.Itoa(p) {
		return fmt.Sprintf("%s (%d)", n, p)
	}
	return strconv.Itoa(p)
}

// taskTable writes tasks as a table; wide adds scope, selectors, attempts,
// the delegate's hostname and the first line of the error.
func (a *app) taskTable(w io.Writer, tasks []protocol.Task, wide bool) error {
	now := a.now()
	header := []string{"ID", "STATUS", "PRIORITY", "TYPE", "EXIT", "DELEGATE", "CREATED", "DURATION"}
	if wide {
		header = append(header, "HOSTNAME", "SCOPE", "SELECTORS", "ATTEMPTS", "CREATED-BY", "ERROR")
	}
	t := newTable(w, header...)
	for _, task := range tasks {
		row := []string{task.ID, task.Status, protocol.PriorityName(task.Priority), task.Type, exitCode(task), task.DelegateName, age(now, task.CreatedAt), taskDuration(now, task)}
		if wide {
			errLine, _, _ := strings.Cut(strings.TrimSpace(task.Error), "\n")
			row = append(row, task.DelegateHostname, scope(task.Org, task.Project), strings.Join(task.Selectors, ","),
				strconv.Itoa(task.Attempts), task.CreatedBy, shorten(errLine, 60))
		}
		t.row(row...)
	}
	return t.flush()
}

func (a *app) taskExplainCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:               "explain ID",
		ValidArgsFunction: a.complete(a.tasksLister(false)),
		Short:             "Explain why a task runs where it runs, or waits",
		Long: `Explain, per delegate, whether it may run the task and which rules exclude it:
disconnected, draining, scope, selectors, task_denied, capability_denied,
capacity or threshold (checked in that order), and unresponsive (a delegate
that heartbeats but ignores its offers). "allowlisted" marks a
delegate that validated the task's capabilities recently; it is preferred.
A task that ended not_assigned is explained the same way. -o wide adds each
delegate's instance ID.

For a queued task that no delegate can run now, a Next: line after the
summary says what happens next: when no known delegate (one the manager
has a record of, connected or not, until it is deleted) could ever run
it, it ends not_assigned within one liveness window; when a known
delegate that is not connected could, it waits for it up to its queue
timeout.`,
		Example: `  legate task explain t_123
  legate task explain t_123 --json | jq '.delegates[] | select(.eligible)'`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			e, err := c.ExplainTask(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if e.Delegates == nil {
				e.Delegates = []protocol.DelegateVerdict{}
			}
			w := cmd.OutOrStdout()
			if out.structured() {
				return out.print(w, e)
			}
			summary := fmt.Sprintf("Task %s (%s)", e.TaskID, e.Status)
			if s := strings.TrimSpace(e.Summary); s != "" {
				summary += ": " + s
			}
			if _, err := fmt.Fprintln(w, escape(summary)); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			if e.Outlook != "" {
				fmt.Fprintln(w, escape("Next: "+e.Outlook))
			}
			if len(e.Delegates) == 0 {
				if !waitsForKnown(e) {
					fmt.Fprintln(cmd.ErrOrStderr(), "No delegates to consider. Start one with a token: legate token create NAME, then legate delegate.")
				}
				return nil
			}
			return verdictTable(w, e.Delegates, out.is(formatWide))
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatWide)
	return cmd
}

// verdictTable writes one row per delegate instance; wide adds its ID.
func verdictTable(w io.Writer, vs []protocol.DelegateVerdict, wide bool) error {
	header := []string{"NAME", "HOSTNAME", "ELIGIBLE", "REASONS"}
	if wide {
		header = append(header, "INSTANCE-ID")
	}
	t := newTable(w, header...)
	for _, v := range vs {
		row := []string{v.Name, v.Hostname, yesNo(v.Eligible), verdictReasons(v)}
		if wide {
			row = append(row, v.InstanceID)
		}
		t.row(row...)
	}
	return t.flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// verdictReasons renders a verdict's reasons as "rule: message" joined with
// "; ", led by "allowlisted" for an allowlisted delegate.
func verdictReasons(v protocol.DelegateVerdict) string {
	parts := make([]string, 0, len(v.Reasons)+1)
	if v.Allowlisted {
		parts = append(parts, "allowlisted")
	}
	for _, r := range v.Reasons {
		switch {
		case r.Message == "":
			parts = append(parts, r.Rule)
		case r.Rule == "":
			parts = append(parts, r.Message)
		default:
			parts = append(parts, r.Rule+": "+r.Message)
		}
	}
	return strings.Join(parts, "; ")
}
