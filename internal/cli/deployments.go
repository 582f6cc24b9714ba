package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

func (a *app) deploymentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "deployments",
		Aliases: []string{"deployment"},
		Short:   "List deployments: each run of a pipeline's deployment stage",
		Long: `Every run of a deployment stage (a pipeline stage with a service and an
environment) is recorded as a deployment: the service, the environment,
the version input, the pipeline, its run and stage, who triggered it, its
status (running, succeeded, failed, rolled_back, cancelled: what happened
to its deploy steps), what its deploy steps deployed, and when it started
and finished. Deployments count against the account's deployment limits
(legate limits). legate deployments current shows what runs where;
legate deployments rollback re-deploys the previous good version.

Listing them needs the permission pipeline:view (at the scopes it is
granted at).`,
		Example: `  legate deployments list
  legate deployments list --service api --environment prod -o wide
  legate deployments current --environment prod
  legate deployments rollback api prod`,
	}
	cmd.AddCommand(a.deploymentsListCmd(), a.deploymentsGetCmd(), a.deploymentsCurrentCmd(), a.deploymentsRollbackCmd())
	return cmd
}

func (a *app) deploymentsListCmd() *cobra.Command {
	var (
		out   outputFlags
		q     client.DeploymentQuery
		all   bool
		limit int
	)
	cmd := &cobra.Command{
		Use:     "list [--service NAME] [--environment NAME] [--since WHEN]",
		Aliases: []string{"ls"},
		Short:   "List deployments, newest first",
		Long: `List deployments, newest first: service, environment, version, status,
when it started and how long it took; -o wide adds the pipeline, run,
stage, who triggered it and the scope; -o name prints their IDs.

--service and --environment keep those of one service or environment;
--since those from a time (2026-11-23T08:00:00Z) or a duration back (24h,
7d). --limit bounds the deployments shown (100 by default); --all pages
through every one that matches.`,
		Example: `  legate deployments list --environment prod --since 24h
  legate deployments list --service api -o json | jq '.deployments[] | select(.status == "failed")'`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if limit < 1 || limit > 1000 {
				return usagef("--limit %d: use a number from 1 to 1000", limit)
			}
			q.Limit = limit
			var list protocol.DeploymentList
			for {
				page, err := c.ListDeployments(cmd.Context(), q)
				if err != nil {
					return err
				}
				list.Deployments = append(list.Deployments, page.Deployments...)
				list.Next = page.Next
				if !all || page.Next == "" {
					break
				}
				q.Page = page.Next
			}
			if list.Deployments == nil {
				list.Deployments = []protocol.Deployment{}
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				ids := make([]string, len(list.Deployments))
				for i, d := range list.Deployments {
					ids[i] = d.ID
				}
				return printNames(w, ids...)
			}
			if len(list.Deployments) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No deployments match.")
				return nil
			}
			if err := a.deploymentTable(w, list.Deployments, out.is(formatWide)); err != nil {
				return err
			}
			if list.Next != "" && !all {
				fmt.Fprintf(cmd.ErrOrStderr(), "More deployments match: --all lists them all, or narrow with --service, --environment or --since.\n")
			}
			return nil
		}),
	}
	out.add(cmd, listFormats()...)
	cmd.Flags().StringVar(&q.Service, "service", "", "only the deployments of this service")
	cmd.Flags().StringVar(&q.Environment, "environment", "", "only the deployments to this environment")
	cmd.Flags().StringVar(&q.Since, "since", "", "only deployments started from this time (RFC 3339) or duration back (24h, 7d)")
	cmd.Flags().IntVar(&limit, "limit", 100, "show at most this many deployments (1 to 1000)")
	cmd.Flags().BoolVar(&all, "all", false, "page through every deployment that matches")
	return cmd
}

func (a *app) deploymentTable(w io.Writer, ds []protocol.Deployment, wide bool) error {
	now := a.now()
	header := []string{"SERVICE", "ENVIRONMENT", "VERSION", "STATUS", "STARTED", "DURATION"}
	if wide {
		header = append(header, "PIPELINE", "RUN", "STAGE", "TRIGGERED BY", "SCOPE", "ID", "ROLLBACK OF")
	}
	t := newTable(w, header...)
	for _, d := range ds {
		end := now
		if d.FinishedAt != nil {
			end = *d.FinishedAt
		}
		row := []string{d.Service, d.Environment, d.Version, d.Status, age(now, d.StartedAt), duration(max(end.Sub(d.StartedAt), 0))}
		if wide {
			row = append(row, d.Pipeline, d.RunID, d.Stage, d.TriggeredBy, scope(d.Org, d.Project), d.ID, d.RollbackOf)
		}
		t.row(row...)
	}
	return t.flush()
}

func (a *app) limitsCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Show the account's deployment limits, their usage and when the next slot frees up",
		Long: `An account may start at most so many deployments in any rolling hour and
in any rolling 24 hours: by default 40 and 100 (the manager's
--deployments-per-hour and --deployments-per-day). A pipeline run whose
deployment stage would exceed a limit is refused before the stage starts,
with an error that names the limit, the usage and when the next slot frees
up. A slot frees up an hour (or 24 hours) after the deployment that takes
it started.

legate limits shows both limits and their usage now; an account
administrator (user:manage at the account) changes them with
legate limits set.`,
		Example: `  legate limits
  legate limits set --per-hour 80 --per-day 300
  legate limits set --default`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.DeploymentLimits(cmd.Context())
			if err != nil {
				return err
			}
			return a.printLimits(cmd.OutOrStdout(), out, l)
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	cmd.AddCommand(a.limitsSetCmd())
	return cmd
}

func (a *app) limitsSetCmd() *cobra.Command {
	var (
		out             outputFlags
		perHour, perDay int
		reset           bool
	)
	cmd := &cobra.Command{
		Use:   "set [--per-hour N] [--per-day N] [--default]",
		Short: "Set the account's deployment limits (account administrators)",
		Long: `Set the most deployments the account may start in any rolling hour
(--per-hour) and in any rolling 24 hours (--per-day); 0 means unlimited. A
limit not given stays as it is; --default returns both to the manager's
defaults first. Lowering a limit below the current usage refuses new
deployments until enough of the current ones leave the window; it stops
none that runs.

Needs the permission user:manage at the account (the account-admin role).
The change is recorded in the audit log (limits.update).`,
		Example: `  legate limits set --per-hour 80 --per-day 300
  legate limits set --per-day 0
  legate limits set --default --per-hour 10`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			var req protocol.SetLimitsRequest
			for _, f := range []struct {
				name string
				v    int
				dst  **int
			}{{"per-hour", perHour, &req.PerHour}, {"per-day", perDay, &req.PerDay}} {
				if !cmd.Flags().Changed(f.name) {
					continue
				}
				if f.v < 0 || f.v > protocol.MaxDeploymentLimit {
					return usagef("--%s %d: use 0 (unlimited) to %d", f.name, f.v, protocol.MaxDeploymentLimit)
				}
				v := f.v
				*f.dst = &v
			}
			req.Reset = reset
			if req.PerHour == nil && req.PerDay == nil && !reset {
				return usagef("nothing to set: give --per-hour, --per-day or --default")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.SetDeploymentLimits(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.printLimits(cmd.OutOrStdout(), out, l)
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	cmd.Flags().IntVar(&perHour, "per-hour", 0, "most deployments in any rolling hour (0 = unlimited)")
	cmd.Flags().IntVar(&perDay, "per-day", 0, "most deployments in any rolling 24 hours (0 = unlimited)")
	cmd.Flags().BoolVar(&reset, "default", false, "return both limits to the manager's defaults (before --per-hour and --per-day)")
	return cmd
}

func (a *app) printLimits(w io.Writer, out outputFlags, l protocol.DeploymentLimits) error {
	if out.structured() {
		return out.print(w, l)
	}
	limitText := func(n int) string {
		if n == 0 {
			return "unlimited"
		}
		return strconv.Itoa(n)
	}
	t := newTable(w, "LIMIT", "USED", "MAX", "NEXT SLOT")
	for _, r := range []struct {
		name string
		u    protocol.LimitUsage
	}{{"per hour", l.PerHour}, {"per 24 hours", l.PerDay}} {
		next := "free now"
		if r.u.NextFree != nil {
			next = fmt.Sprintf("in %s (%s)", duration(max0(r.u.NextFree.Sub(l.Now))), a.absTime(r.u.NextFree))
		}
		t.row(r.name, strconv.Itoa(r.u.Used), limitText(r.u.Limit), next)
	}
	if err := t.flush(); err != nil {
		return err
	}
	src := "the manager's defaults"
	if l.Custom {
		src = fmt.Sprintf("the account's own (the manager's defaults: %s per hour, %s per 24 hours)", limitText(l.DefaultPerHour), limitText(l.DefaultPerDay))
	}
	_, err := fmt.Fprintf(w, "Limits: %s.\n", src)
	return err
}

func max0(d time.Duration) time.Duration { return max(d, 0).Round(time.Second) }
