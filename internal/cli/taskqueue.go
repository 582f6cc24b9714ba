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
delegate with those tags could take (what legate autoscaler and KEDA read).
-o wide adds when the longest-waiting task was queued; -o name prints each
selector set.`,
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
				switch {
				case out.structured():
					return out.print(w, sig)
				case out.is(formatName):
					return printNames(w, queueNames(sig)...)
				}
				header := []string{"SELECTORS", "QUEUED", "OLDEST", "ELIGIBLE", "ELIGIBLE-OLDEST"}
				row := []string{setName(sig), strconv.Itoa(sig.Queued), seconds(sig.OldestSeconds), strconv.Itoa(sig.Eligible), seconds(sig.EligibleOldestSeconds)}
				if out.is(formatWide) {
					header = append(header, "WAITING-SINCE", "ELIGIBLE-WAITING-SINCE")
					row = append(row, a.waitingSince(sig.OldestSeconds), a.waitingSince(sig.EligibleOldestSeconds))
				}
				t := newTable(w, header...)
				t.row(row...)
				return t.flush()
			}
			sum, err := c.Queue(cmd.Context())
			if err != nil {
				return err
			}
			switch {
			case out.structured():
				return out.print(w, sum)
			case out.is(formatName):
				return printNames(w, queueNames(sum.Sets...)...)
			}
			wide := out.is(formatWide)
			header := []string{"SELECTORS", "QUEUED", "OLDEST"}
			if wide {
				header = append(header, "WAITING-SINCE")
			}
			t := newTable(w, header...)
			row := func(name string, queued int, oldest int64) {
				r := []string{name, strconv.Itoa(queued), seconds(oldest)}
				if wide {
					r = append(r, a.waitingSince(oldest))
				}
				t.row(r...)
			}
			for _, s := range sum.Sets {
				row(setName(s), s.Queued, s.OldestSeconds)
			}
			row("TOTAL", sum.Queued, sum.OldestSeconds)
			return t.flush()
		}),
	}
	out.add(cmd, listFormats()...)
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
