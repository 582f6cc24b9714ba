package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

func (a *app) delegatesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delegates",
		Short: "Show the delegates connected to the manager",
		Long: `Show delegate instances: one row per running delegate process. Replicas
that share a name form one delegate group.`,
		Example: `  legate delegates list`,
	}
	cmd.AddCommand(a.delegatesListCmd())
	return cmd
}

func (a *app) delegatesListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List delegate instances and their health",
		Long: `List delegate instances with their tags, version, connection (websocket or
polling), time since the last heartbeat and running tasks (running/capacity).`,
		Example: `  legate delegates list
  legate delegates list --json | jq '.delegates[] | select(.status == "connected") | .name'`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListDelegates(cmd.Context())
			if err != nil {
				return err
			}
			if list.Delegates == nil {
				list.Delegates = []protocol.Delegate{}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			if len(list.Delegates) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No delegates. Create a token (legate token create NAME) and start one with it (legate delegate).")
				return nil
			}
			now := a.now()
			t := newTable(cmd.OutOrStdout(), "NAME", "HOSTNAME", "IP", "TAGS", "VERSION", "STATUS", "CONNECTION", "LAST-HEARTBEAT", "RUNNING")
			for _, d := range list.Delegates {
				status := d.Status
				if d.Draining {
					status += ",draining"
				}
				running := strconv.Itoa(d.RunningTasks)
				if d.Capacity > 0 {
					running += "/" + strconv.Itoa(d.Capacity)
				}
				t.row(d.Name, d.Hostname, d.IP, strings.Join(d.Tags, ","), d.Version, status, d.Connection,
					agePtr(now, d.LastHeartbeat), running)
			}
			return t.flush()
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the delegate list as JSON")
	return cmd
}
