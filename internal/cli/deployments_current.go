package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

// legate deployments get, current and rollback.

func (a *app) deploymentsGetCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Show one deployment: its status, who triggered it, what its deploy steps deployed and what its verifications saw",
		Long: `Show one deployment (an ID from legate deployments list -o wide): its
service, environment, version, status, pipeline run, who triggered it, the
deployment it rolls back (when a rollback started it), and what its deploy
steps recorded: the cluster and namespace, each workload with its images
and revision, a Helm release with its chart, chart version and revision,
and the revision a step rolled back to; and each verification its verify
steps made: its verdict and reason, and per metric the threshold, the
baseline's mean and the tolerance, the number of data points, their
minimum, mean, maximum and last value, and the metric's verdict (-o json
gives every data point).`,
		Example: `  legate deployments get dp_hx7meyphaa2r2doz_1
  legate deployments get dp_hx7meyphaa2r2doz_1 -o json | jq '.records[].workloads[].images'
  legate deployments get dp_hx7meyphaa2r2doz_1 -o json | jq '.verifications[].metrics[].points'`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			d, err := c.GetDeployment(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), d)
			}
			return a.deploymentDetail(cmd.OutOrStdout(), d)
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) deploymentDetail(w io.Writer, d protocol.Deployment) error {
	t := newTable(w, "ID:", d.ID)
	t.row("Service:", d.Service)
	t.row("Environment:", d.Environment)
	t.row("Version:", d.Version)
	t.row("Status:", d.Status)
	if d.Reason != "" {
		t.row("Reason:", d.Reason)
	}
	t.row("Triggered by:", d.TriggeredBy)
	if d.RollbackOf != "" {
		t.row("Rolls back:", "deployment "+d.RollbackOf)
	}
	t.row("Pipeline:", d.Pipeline+" (run "+d.RunID+", stage "+d.Stage+")")
	t.row("Scope:", scope(d.Org, d.Project))
	t.row("Started:", a.timestamp(&d.StartedAt))
	if d.FinishedAt != nil {
		t.row("Finished:", a.timestamp(d.FinishedAt))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(d.Records) == 0 {
		if _, err := fmt.Fprintln(w, "\nNo deploy records: its steps reported none."); err != nil {
			return err
		}
	}
	if err := a.printRecords(w, d.Records); err != nil {
		return err
	}
	return a.printVerifications(w, d.Verifications)
}

// printRecords writes what a deployment's deploy steps recorded.
func (a *app) printRecords(w io.Writer, records []protocol.DeployRecord) error {
	for _, r := range records {
		fmt.Fprintln(w)
		rt := newTable(w, "Record:", strings.TrimSpace(r.Type+" "+r.Strategy))
		if r.Cluster != "" {
			rt.row("Cluster:", r.Cluster)
		}
		rt.row("Namespace:", r.Namespace)
		if r.Release != "" {
			rt.row("Release:", r.Release+" (revision "+strconv.Itoa(r.ReleaseRevision)+")")
			rt.row("Chart:", strings.TrimSpace(r.Chart+" "+r.ChartVersion))
			if r.AppVersion != "" {
				rt.row("App version:", r.AppVersion)
			}
		}
		if r.RolledBackTo != "" {
			rt.row("Rolled back to:", "revision "+r.RolledBackTo)
		}
		if err := rt.flush(); err != nil {
			return err
		}
		if len(r.Workloads) == 0 {
			continue
		}
		wt := newTable(w, "KIND", "NAME", "IMAGES", "REVISION")
		for _, wl := range r.Workloads {
			wt.row(wl.Kind, wl.Name, strings.Join(wl.Images, ","), wl.Revision)
		}
		if err := wt.flush(); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) deploymentsCurrentCmd() *cobra.Command {
	var (
		out                  outputFlags
		service, environment string
	)
	cmd := &cobra.Command{
		Use:   "current [--service NAME] [--environment NAME]",
		Short: "Show what runs where: per service and environment, the version now and the one before",
		Long: `Show, for each service and environment, the version that runs now (its last
succeeded deployment) and the one before (the last succeeded deployment
of another version before it: what legate deployments rollback goes back
to). Failed, rolled back and cancelled deployments never become current.
-o wide adds the deployments' IDs, who deployed them and the scope; -o name
prints SERVICE/ENVIRONMENT.

Needs the permission pipeline:view (at the scopes it is granted at).`,
		Example: `  legate deployments current --environment prod
  legate deployments current --service api -o wide`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			cur, err := c.CurrentDeployments(cmd.Context(), service, environment)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, cur)
			case out.is(formatName):
				names := make([]string, len(cur.Current))
				for i, c := range cur.Current {
					names[i] = c.Service + "/" + c.Environment
				}
				return printNames(w, names...)
			}
			if len(cur.Current) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "Nothing deployed matches.")
				return nil
			}
			return a.currentTable(w, cur.Current, out.is(formatWide))
		}),
	}
	out.add(cmd, listFormats()...)
	cmd.Flags().StringVar(&service, "service", "", "only this service")
	cmd.Flags().StringVar(&environment, "environment", "", "only this environment")
	return cmd
}

func (a *app) currentTable(w io.Writer, cur []protocol.CurrentDeployment, wide bool) error {
	now := a.now()
	header := []string{"SERVICE", "ENVIRONMENT", "VERSION", "DEPLOYED", "PREVIOUS"}
	if wide {
		header = append(header, "DEPLOYMENT", "BY", "PREVIOUS DEPLOYMENT", "SCOPE")
	}
	t := newTable(w, header...)
	for _, c := range cur {
		deployed := ""
		if c.Current.FinishedAt != nil {
			deployed = age(now, *c.Current.FinishedAt)
		}
		prev, prevID := "", ""
		if c.Previous != nil {
			prev, prevID = c.Previous.Version, c.Previous.ID
			if prev == "" {
				prev = "(no version)"
			}
		}
		row := []string{c.Service, c.Environment, c.Current.Version, deployed, prev}
		if wide {
			row = append(row, c.Current.ID, c.Current.TriggeredBy, prevID, scope(c.Org, c.Project))
		}
		t.row(row...)
	}
	return t.flush()
}

func (a *app) deploymentsRollbackCmd() *cobra.Command {
	var (
		out          outputFlags
		req          protocol.RollbackRequest
		detach       bool
		org, project string
	)
	cmd := &cobra.Command{
		Use:   "rollback SERVICE ENVIRONMENT [--to DEPLOYMENT_ID] [--detach]",
		Short: "Re-deploy the previous good version of a service in an environment",
		Long: `Re-deploy the version that ran before the current one (legate deployments
current shows both) through the same pipeline: a new run of the pipeline
of that deployment, as stored now, with the inputs of that deployment's
run. --to names another succeeded deployment of the same service and
environment to go back to. The run is recorded as triggered by you and as
a rollback of the current deployment (legate run get, legate deployments
list -o wide), and is followed as legate pipeline run follows a run
(--detach prints its ID and exits).

Needs what running the pipeline needs (pipeline:execute at its scope and
what its steps use). Refused, saying why, when there is nothing to roll
back to, or when the pipeline changed so that the old inputs no longer
validate. --org and --project choose the pipeline's scope when the
service is deployed from several.`,
		Example: `  legate deployments rollback api prod
  legate deployments rollback api prod --to dp_hx7meyphaa2r2doz_1 --detach`,
		Args: cobra.ExactArgs(2),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			req.Service, req.Environment, req.Org, req.Project = args[0], args[1], org, project
			c, err := a.client()
			if err != nil {
				return err
			}
			run, err := c.RollbackDeployment(cmd.Context(), req)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if !out.structured() {
				fmt.Fprintf(cmd.ErrOrStderr(), "legate: rolling back %s in %s (deployment %s) with run %s, version %s\n",
					escape(req.Service), escape(req.Environment), escape(run.RollbackOf), escape(run.ID), escape(run.Inputs["version"]))
			}
			if detach {
				if out.structured() {
					return out.print(w, run)
				}
				_, err := fmt.Fprintln(w, escape(run.ID))
				return err
			}
			return a.followRun(cmd, c, run, &out)
		}),
	}
	scopeFlags(cmd, &org, &project, "pipeline")
	cmd.Flags().StringVar(&req.To, "to", "", "the succeeded deployment to go back to (default: the one before the current)")
	cmd.Flags().BoolVar(&detach, "detach", false, "print the run's ID (with -o: the run) and exit at once")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}
