package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

// runRerunCmd is `legate run rerun ID`: a new run of the run's pipeline
// with the run's definition and inputs, some replaced.
func (a *app) runRerunCmd() *cobra.Command {
	var (
		out    outputFlags
		inputs []string
		detach bool
	)
	cmd := &cobra.Command{
		Use:   "rerun ID [--input KEY=VALUE]... [--detach]",
		Short: "Run a run's pipeline again, with the run's inputs (--input replaces some)",
		Long: `Start a new run of run ID's pipeline with the definition run ID ran (its
version, even when the pipeline was changed since: a re-run repeats what
ran) and its inputs; each --input KEY=VALUE replaces one of them. The new
run says which run it re-runs (legate run get shows "Re-run of"). When
the pipeline was changed since, it says so on stderr.
It needs what running the pipeline needs (pipeline:execute at its scope,
and what its steps use). Then, as legate pipeline run, it prints each
step as it starts and ends, streams each step's output to stdout, and
exits with the run's status: 0 when it succeeded, 1 when it failed, 130
when it was cancelled. Ctrl-C stops following but leaves the run running.
--detach prints the new run's ID and exits at once.`,
		Example: `  legate run rerun r_abc
  legate run rerun r_abc --input version=1.4.3 --detach`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			in, err := parseKV("--input", inputs, nil)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			run, err := c.RerunRun(cmd.Context(), args[0], protocol.RerunRequest{Inputs: in})
			if err != nil {
				return err
			}
			// An old definition runs again: say so, as the web UI asks
			// first (unknown when the pipeline cannot be read: then nothing).
			if p, err := c.GetPipeline(cmd.Context(), run.Pipeline, run.Org, run.Project); err == nil && p.Version != run.Version {
				fmt.Fprintf(cmd.ErrOrStderr(), "legate: run %s runs version %d of pipeline %s, which is at version %d now (a re-run repeats what ran; legate pipeline run %s runs the current one)\n",
					escape(run.ID), run.Version, escape(run.Pipeline), p.Version, escape(run.Pipeline))
			}
			return a.startedRun(cmd, c, run, detach, &out, "run "+escape(run.ID)+" re-runs run "+escape(run.RerunOf))
		}),
	}
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "an input to replace, KEY=VALUE (repeatable; the others keep the run's values)")
	cmd.Flags().BoolVar(&detach, "detach", false, "print the new run's ID (with -o: the run) and exit at once")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}
