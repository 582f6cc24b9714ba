package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

func (a *app) taskQueueCmd() *cobra.Command {
	var (
		out       outputFlags
		selectors string
	)
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Show the queued tasks per selector set",
		Long: `Show how many tasks wait and how long the oldest has waited, per selector
set (normalized: lower case, sorted, without duplicates), the largest
queues first: at most 20 sets, the others in one (other) row. With
--selectors, the queue of that one set and, as ELIGIBLE, the queued tasks a
delegate with those tags could take (what legate autoscaler and KEDA read).`,
		Example: `  legate task queue
  legate task queue --selectors gpu,linux -o json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if cmd.Flags().Changed("selectors") {
				sig, err := c.QueueSignal(cmd.Context(), protocol.SplitTags(selectors))
				if err != nil {
					return err
				}
				if out.structured() {
					return out.print(w, sig)
				}
				t := newTable(w, "SELECTORS", "QUEUED", "OLDEST", "ELIGIBLE", "ELIGIBLE-OLDEST")
				t.row(setName(sig), strconv.Itoa(sig.Queued), seconds(sig.OldestSeconds), strconv.Itoa(sig.Eligible), seconds(sig.EligibleOldestSeconds))
				return t.flush()
			}
			sum, err := c.Queue(cmd.Context())
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(w, sum)
			}
			t := newTable(w, "SELECTORS", "QUEUED", "OLDEST")
			for _, s := range sum.Sets {
				t.row(setName(s), strconv.Itoa(s.Queued), seconds(s.OldestSeconds))
			}
			t.row("TOTAL", strconv.Itoa(sum.Queued), seconds(sum.OldestSeconds))
			return t.flush()
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	cmd.Flags().StringVar(&selectors, "selectors", "", "one selector set, comma-separated (a delegate pool's tags)")
	return cmd
}

func setName(s protocol.QueueSignal) string {
	switch {
	case s.Other:
		return protocol.QueueOtherSelectors
	case len(s.Selectors) == 0:
		return "(none)"
	}
	return strings.Join(s.Selectors, ",")
}

func seconds(s int64) string {
	if s == 0 {
		return "-"
	}
	return (time.Duration(s) * time.Second).String()
}
