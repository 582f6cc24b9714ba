package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

// delegatesUpgradeCmd is legate delegates upgrade pin|hold|release.
func (a *app) delegatesUpgradeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Choose the version a delegate group runs: pin, hold or release",
		Long: `Each delegate group (the delegates that share a name) wants one version:
the manager's own, unless it is pinned to another or held back. Watchers
(legate watcher) upgrade their delegate to the version its group wants,
with no failed task; legate delegates list shows each instance's upgrade
state (current, upgrade available, upgrading, upgrade failed: REASON,
expired) and whether a watcher upgrades it (AUTO-UPGRADE).

  pin NAME VERSION   the group wants VERSION (it must be one the manager
                     accepts: its previous minor version on)
  hold NAME          the group keeps what it runs
  release NAME       the group wants the manager's version again
  ring NAME RING     put the group in a ring: canary, early or default (the
                     default); the manager's version reaches a ring only
                     after every delegate of the earlier ring ran it for
                     the manager's --upgrade-soak (24h) with no failed upgrade

A group is the delegates of one name whose tokens have one scope: the
account's by default, or --org ORG [--project PROJECT]. Delegates of the
same name registered with an org's or a project's token are another group,
with a policy and rings of their own: they never hold back the account's.

A watcher goes back to a version older than the one it runs only when it
is pinned (a rollback); a manager that wants an older version otherwise
leaves it where it is.

Needs the permission user:manage at the account (the account's
administrators). See docs/upgrades.md.`,
		Example: `  legate delegates upgrade pin build v1.4.2
  legate delegates upgrade hold build
  legate delegates upgrade release build
  legate delegates upgrade ring build-canary canary
  legate delegates upgrade hold build --org eng --project web`,
	}
	cmd.AddCommand(
		a.upgradePolicyCmd(protocol.UpgradePin, "pin NAME VERSION", "Make a delegate group want VERSION", cobra.ExactArgs(2)),
		a.upgradePolicyCmd(protocol.UpgradeHold, "hold NAME", "Keep a delegate group on what it runs", cobra.ExactArgs(1)),
		a.upgradePolicyCmd(protocol.UpgradeRelease, "release NAME", "Let a delegate group want the manager's version again", cobra.ExactArgs(1)),
		a.upgradePolicyCmd(protocol.UpgradeSetRing, "ring NAME RING", "Put a delegate group in a ring: canary, early or default", cobra.ExactArgs(2)),
	)
	return cmd
}

func (a *app) upgradePolicyCmd(action, use, short string, args cobra.PositionalArgs) *cobra.Command {
	var out outputFlags
	var org, project string
	cmd := &cobra.Command{
		Use:               use,
		Short:             short,
		Long:              short + ". See legate delegates upgrade --help.",
		Example:           "  legate delegates upgrade " + use,
		Args:              args,
		ValidArgsFunction: a.complete(delegatesLister),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if project != "" && org == "" {
				return fmt.Errorf("--project %s needs its --org", project)
			}
			req := protocol.UpgradePolicyRequest{Action: action, Org: org, Project: project}
			switch action {
			case protocol.UpgradePin:
				req.Version = args[1]
			case protocol.UpgradeSetRing:
				req.Ring = args[1]
			}
			p, err := c.SetUpgradePolicy(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), p)
			}
			wants := p.Wanted
			switch {
			case p.Held:
				wants = "what it runs (held)"
			case p.Waiting != "":
				wants = "what it runs for now: ring " + p.Ring + " " + p.Waiting
			}
			group := escape(args[0])
			if org != "" {
				group += " of " + escape(protocol.ScopeLabel(org, project))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Delegate %s (ring %s) wants %s (manager %s).\n", group, escape(p.Ring), escape(wants), escape(p.ManagerVersion))
			return err
		}),
	}
	cmd.Flags().StringVar(&org, "org", "", "the group of the delegates registered with this org's tokens (default: the account's)")
	cmd.Flags().StringVar(&project, "project", "", "with --org: the group of the delegates registered with this project's tokens")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}
