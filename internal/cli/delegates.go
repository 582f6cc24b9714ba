package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

func (a *app) delegatesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delegates",
		Short: "Show the delegates connected to the manager",
		Long: `Show delegate instances: one row per running delegate process. Replicas
that share a name form one delegate group.

A delegate that stops cleanly (Ctrl-C or SIGTERM) deregisters and leaves
the listing (list --all still shows it); delete removes a stopped delegate
at once; the manager removes by itself the instances out of contact for
longer than its --prune-delegates-after (6h by default).`,
		Example: `  legate delegates list
  legate delegates describe build
  legate delegates delete build
  legate delegates list --pending
  legate delegates approve build
  legate delegates upgrade pin build v1.4.2`,
	}
	cmd.AddCommand(a.delegatesListCmd(), a.delegatesDescribeCmd(), a.delegatesDeleteCmd(),
		a.delegatesDecideCmd(protocol.ApprovalApproved), a.delegatesDecideCmd(protocol.ApprovalRejected),
		a.delegatesUpgradeCmd())
	return cmd
}

func (a *app) delegatesListCmd() *cobra.Command {
	var (
		out       outputFlags
		all       bool
		pending   bool
		query     protocol.DelegateQuery
		connected string
		scope     string
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List delegate instances and their health",
		Long: `List delegate instances: name, status, connection (websocket or polling),
version, tags and tasks (running/capacity). -o wide adds the hostname, IP,
scope (account, org/ORG or project/ORG/PROJECT, from the token), upgrade
state, auto-upgrade, time since the last heartbeat, the delegate
configuration it last ran, its description (DELEGATE_DESCRIPTION), the
instance ID, type, token, registration time, resource threshold and wanted
version; -o name prints each delegate (group) name once.

Instances that stopped cleanly and deregistered are left out; --all lists
them too, with the status deregistered, until the manager prunes them.

A delegate registered with a token that requires approval shows
",pending" in its status until approved (",rejected" once rejected);
--pending lists only those that wait.

With many delegates, the manager filters and pages: --name (part of the
name, case ignored), --tag, --connected true|false, --scope ORG or
ORG/PROJECT select instances; --limit N lists the instances of at most N
delegates, in name order, and says how to ask for the next page (--page,
"next" in the JSON output).`,
		Example: `  legate delegates list
  legate delegates list -o wide
  legate delegates list --all
  legate delegates list --connected false --tag gpu
  legate delegates list --limit 50 --name build
  legate delegates list --limit 50 --page build-049
  legate delegates list --json | jq '.delegates[] | select(.status == "connected") | .name'`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := delegateQuery(&query, all, pending, connected, scope); err != nil {
				return err
			}
			list, err := c.ListDelegatesPage(cmd.Context(), query)
			if err != nil {
				return err
			}
			if list.Next != "" && !out.structured() {
				defer fmt.Fprintf(cmd.ErrOrStderr(), "More delegates: legate delegates list --page %s (with the same filters and --limit).\n", list.Next)
			}
			return a.printDelegateList(cmd, &out, list, pending)
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatWide, formatName)
	cmd.Flags().BoolVar(&all, "all", false, "also list the instances that stopped and deregistered")
	cmd.Flags().BoolVar(&pending, "pending", false, "list only the delegates that wait for approval (legate delegates approve NAME)")
	cmd.Flags().IntVar(&query.Limit, "limit", 0, "list the instances of at most this many delegates, in name order (1-1000; default every one)")
	cmd.Flags().StringVar(&query.Page, "page", "", "the page after this delegate name (the next a listing with --limit printed)")
	cmd.Flags().StringVar(&query.Name, "name", "", "only delegates whose name contains this (case ignored)")
	cmd.Flags().StringVar(&query.Tag, "tag", "", "only instances with this tag")
	cmd.Flags().StringVar(&connected, "connected", "", "only connected (true) or not connected (false) instances")
	cmd.Flags().StringVar(&scope, "scope", "", "only instances of this org (and its projects) or project: ORG or ORG/PROJECT")
	return cmd
}

// delegateQuery completes query, which holds --limit, --page, --name and
// --tag, with the other flags of delegates list; every error is a usage
// error.
func delegateQuery(query *protocol.DelegateQuery, all, pending bool, connected, scope string) error {
	query.All = all
	if pending {
		query.Approval = protocol.ApprovalPending
	}
	if connected != "" {
		b, err := strconv.ParseBool(connected)
		if err != nil {
			return usagef("--connected %q: use true or false", connected)
		}
		query.Connected = &b
	}
	if scope != "" {
		query.Org, query.Project, _ = strings.Cut(scope, "/")
		if query.Org == "" || strings.HasSuffix(scope, "/") || strings.Count(scope, "/") > 1 {
			return usagef("--scope %q: use ORG or ORG/PROJECT", scope)
		}
	}
	if query.Limit < 0 || query.Limit > protocol.MaxDelegatePage {
		return usagef("--limit %d: use 1 to %d (0: every delegate)", query.Limit, protocol.MaxDelegatePage)
	}
	return nil
}

// printDelegateList prints one page of delegates list in the format of
// out; with pending, only the delegates that wait for approval.
func (a *app) printDelegateList(cmd *cobra.Command, out *outputFlags, list protocol.DelegateList, pending bool) error {
	if list.Delegates == nil {
		list.Delegates = []protocol.Delegate{}
	}
	if pending {
		kept := []protocol.Delegate{}
		for _, d := range list.Delegates {
			if d.Approval == protocol.ApprovalPending {
				kept = append(kept, d)
			}
		}
		list.Delegates = kept
	}
	w := cmd.OutOrStdout()
	switch {
	case out.structured():
		return out.print(w, list)
	case out.is(formatName):
		return printNames(w, delegateNames(list.Delegates)...)
	}
	if len(list.Delegates) == 0 && pending {
		fmt.Fprintln(cmd.ErrOrStderr(), "No delegate waits for approval.")
		return nil
	}
	if len(list.Delegates) == 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), "No delegates. Create a token (legate token create NAME) and start one with it (legate delegate).")
		return nil
	}
	return a.delegateTable(w, list.Delegates, out.is(formatWide))
}

func (a *app) delegatesDeleteCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Remove a stopped delegate: every instance of it",
		Long: `Remove every instance of the delegate NAME from the manager, with their
capability lists and configuration results. Tasks keep the name and
hostname of the delegate that ran them.

A delegate with an instance connected, or running a task, is not removed:
stop it first (Ctrl-C or SIGTERM: it finishes its tasks and deregisters),
or revoke its token to disconnect it (legate token revoke). A delegate
started again after its deletion registers as a new instance.

There is no need to delete what stopped: deregistered instances are left
out of legate delegates list, and the manager removes by itself the
instances out of contact for longer than --prune-delegates-after (6h).`,
		Example: `  legate delegates delete build`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			del, err := c.DeleteDelegate(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if del.Instances == nil {
				del.Instances = []protocol.Delegate{}
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), del)
			}
			hosts := make([]string, 0, len(del.Instances))
			for _, in := range del.Instances {
				hosts = append(hosts, in.Hostname)
			}
			noun := "instances"
			if len(hosts) == 1 {
				noun = "instance"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted delegate %q (%d %s: %s).\n", del.Name, len(hosts), noun, escape(strings.Join(hosts, ", ")))
			if err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			return nil
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

// delegateTable writes delegate instances as a table: a narrow one, or
// with wide every column.
func (a *app) delegateTable(w io.Writer, ds []protocol.Delegate, wide bool) error {
	now := a.now()
	if !wide {
		// What a glance needs; the rest is under -o wide.
		t := newTable(w, "NAME", "STATUS", "CONNECTION", "VERSION", "TAGS", "TASKS")
		for _, d := range ds {
			t.row(d.Name, delegateStatus(d), d.Connection, versionColumn(d), strings.Join(d.Tags, ","), running(d))
		}
		return t.flush()
	}
	t := newTable(w, "NAME", "HOSTNAME", "IP", "SCOPE", "TAGS", "VERSION", "UPGRADE", "AUTO-UPGRADE", "STATUS", "CONNECTION", "LAST-HEARTBEAT", "TASKS",
		"CONFIGURATION", "DESCRIPTION", "INSTANCE-ID", "TYPE", "TOKEN", "REGISTERED", "OVER-THRESHOLD", "WANTED-VERSION")
	for _, d := range ds {
		t.row(d.Name, d.Hostname, d.IP, scope(d.Org, d.Project), strings.Join(d.Tags, ","), versionColumn(d), upgradeState(d),
			autoUpgrade(d), delegateStatus(d), d.Connection, agePtr(now, d.LastHeartbeat), running(d), d.Configuration, d.Description,
			d.InstanceID, d.Type, d.TokenName, age(now, d.RegisteredAt), d.OverThreshold, wantedVersion(d))
	}
	return t.flush()
}

// versionColumn is the instance's version, marked when the next minor
// version of the manager will refuse it.
func versionColumn(d protocol.Delegate) string {
	if d.RefusedFrom == "" {
		return d.Version
	}
	return d.Version + " (refused from " + d.RefusedFrom + ")"
}

// upgradeState is where the instance stands with upgrades.
func upgradeState(d protocol.Delegate) string {
	if d.UpgradeState == "" {
		return "-"
	}
	return d.UpgradeState
}

// autoUpgrade says whether a watcher upgrades the instance: on, off
// (AUTO_UPGRADE=false) or manual (no watcher runs it).
func autoUpgrade(d protocol.Delegate) string {
	switch d.Upgrade {
	case protocol.UpgradeAuto:
		return "on"
	case protocol.UpgradeOff:
		return "off"
	}
	return "manual"
}

// wantedVersion is the version the group wants, "held" when held back,
// "waiting" while its ring waits for an earlier one.
func wantedVersion(d protocol.Delegate) string {
	switch {
	case d.WantedVersion == "" && d.UpgradeWaiting != "":
		return "waiting"
	case d.WantedVersion == "" && d.UpgradeState != "":
		return "held"
	}
	return d.WantedVersion
}

// delegateNames returns each delegate (group) name once, in list order.
func delegateNames(ds []protocol.Delegate) []string {
	var names []string
	seen := map[string]bool{}
	for _, d := range ds {
		if !seen[d.Name] {
			seen[d.Name] = true
			names = append(names, d.Name)
		}
	}
	return names
}

// delegateStatus is the status with ",draining" when the delegate drains
// and ",configuring" while it runs its configuration script; a connected
// delegate the manager marked unresponsive (offered no task) shows so.
func delegateStatus(d protocol.Delegate) string {
	s := d.Status
	if d.Unresponsive != nil && s == protocol.DelegateConnected {
		s = "unresponsive"
	}
	if d.Draining {
		s += ",draining"
	}
	if d.Configuring != "" {
		s += ",configuring"
	}
	if d.Approval == protocol.ApprovalPending || d.Approval == protocol.ApprovalRejected {
		s += "," + d.Approval
	}
	return s
}

// delegatesDecideCmd is legate delegates approve (state approved) or
// reject (rejected).
func (a *app) delegatesDecideCmd(state string) *cobra.Command {
	var out outputFlags
	verb, short, long := "approve", "Approve a delegate that waits for approval", `Approve the delegate NAME, registered with a token that requires approval
(legate token create NAME --require-approval): it receives its delegate
configuration and takes tasks from now on. The decision is about the
delegate, not one process: every instance of it, and the replicas that
register later with the same name and token, are approved. It holds on
every manager and across restarts. A rejected delegate can be approved
too; start it again afterwards.

Needs the permission delegate:edit at the delegate's scope.`
	if state == protocol.ApprovalRejected {
		verb, short, long = "reject", "Reject a delegate: it is refused and stops", `Reject the delegate NAME, registered with a token that requires approval:
each of its instances is refused at its next call (delegate_rejected),
logs why and stops; replicas that register later with the same name and
token are refused too. legate delegates approve NAME reverses it.

To stop every delegate of a token at once, revoke the token instead
(legate token revoke NAME). Needs the permission delegate:edit at the
delegate's scope.`
	}
	cmd := &cobra.Command{
		Use:     verb + " NAME",
		Short:   short,
		Long:    long,
		Example: "  legate delegates list --pending\n  legate delegates " + verb + " build",
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			decide := c.ApproveDelegate
			if state == protocol.ApprovalRejected {
				decide = c.RejectDelegate
			}
			ans, err := decide(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if ans.Instances == nil {
				ans.Instances = []protocol.Delegate{}
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), ans)
			}
			hosts := make([]string, 0, len(ans.Instances))
			for _, in := range ans.Instances {
				hosts = append(hosts, in.Hostname)
			}
			which := "no instance now; replicas that register get the decision"
			if len(hosts) > 0 {
				which = strconv.Itoa(len(hosts)) + " instance(s): " + escape(strings.Join(hosts, ", "))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Delegate %q %s (%s).\n", ans.Name, state, which)
			return err
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// running renders running tasks as "running/capacity", or "running" when
// the capacity is unlimited.
func running(d protocol.Delegate) string {
	r := strconv.Itoa(d.RunningTasks)
	if d.Capacity > 0 {
		r += "/" + strconv.Itoa(d.Capacity)
	}
	return r
}

func (a *app) delegatesDescribeCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:               "describe NAME",
		ValidArgsFunction: a.complete(delegatesLister),
		Short:             "Show every instance of a delegate with its capability lists",
		Long: `Show each instance of the delegate NAME: hostname, status, connection, scope,
tags, running tasks and capacity, the performance figures its last
heartbeat reported (host CPU and memory, the delegate's own CPU and
resident memory, tasks run and failed since it started, its last task
acquisition's round trip), why it takes no tasks when it is over a
resource threshold, and its capability lists:

  allowlist  capabilities it validated, trusted for 6h (each success resets
             the time); allowlisted delegates are preferred
  deny list  capabilities that failed on it, with the error; it is not
             offered tasks that need them until the time runs out (5m)

and its delegate configuration: the one that applies now, whether its
script is running (the instance takes no task meanwhile), and the last run
with its version, exit code, time and an excerpt of its output.`,
		Example: `  legate delegates describe build
  legate delegates describe build --json | jq '.instances[].denylist'`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			d, err := c.DescribeDelegate(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if d.Instances == nil {
				d.Instances = []protocol.DelegateDetail{}
			}
			for i := range d.Instances {
				if d.Instances[i].Allowlist == nil {
					d.Instances[i].Allowlist = []protocol.CapabilityEntry{}
				}
				if d.Instances[i].Denylist == nil {
					d.Instances[i].Denylist = []protocol.CapabilityEntry{}
				}
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), d)
			}
			if d.Name == "" {
				d.Name = args[0]
			}
			return a.printDelegateDetails(cmd.OutOrStdout(), d)
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

// printDelegateDetails writes one block per instance.
func (a *app) printDelegateDetails(w io.Writer, d protocol.DelegateDetails) error {
	n := len(d.Instances)
	noun := "instances"
	if n == 1 {
		noun = "instance"
	}
	if _, err := fmt.Fprintf(w, "Delegate %s: %d %s\n", escape(d.Name), n, noun); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	now := a.now()
	for _, inst := range d.Instances {
		fmt.Fprintf(w, "\nInstance %s\n", escape(inst.InstanceID))
		t := newTable(w, "  Hostname:", inst.Hostname)
		if inst.Description != "" {
			t.row("  Description:", inst.Description)
		}
		t.row("  IP:", inst.IP)
		t.row("  Status:", delegateStatus(inst.Delegate))
		conn := inst.Connection
		if conn != "" {
			conn += ", "
		}
		t.row("  Connection:", conn+"last heartbeat "+agePtr(now, inst.LastHeartbeat))
		t.row("  Scope:", scope(inst.Org, inst.Project))
		t.row("  Tags:", strings.Join(inst.Tags, ", "))
		t.row("  Running:", running(inst.Delegate)+" tasks")
		t.row("  Isolation:", inst.TaskIsolation.Summary())
		if inst.TaskTypes != nil { // an older delegate does not say
			t.row("  Task types:", strings.Join(inst.TaskTypes, ", "))
		}
		if inst.ContainerRuntime != "" {
			t.row("  Containers:", inst.ContainerRuntime)
		} else if inst.ContainerReason != "" {
			t.row("  Containers:", "none: "+inst.ContainerReason)
		}
		if inst.Perf != nil {
			t.row("  Performance:", inst.Perf.Summary())
		}
		if inst.OverThreshold != "" {
			t.row("  Over threshold:", inst.OverThreshold+" (takes no new tasks)")
		}
		if inst.DuplicateIdentity != "" {
			t.row("  Duplicate:", inst.DuplicateIdentity)
		}
		if u := inst.Unresponsive; u != nil {
			t.row("  Unresponsive:", u.Reason+" (offered no task since "+age(now, u.Since)+")")
		}
		t.row("  Version:", inst.Version)
		if inst.RefusedFrom != "" {
			t.row("  Version expiry:", "a manager of "+inst.RefusedFrom+" or later refuses this version: upgrade the delegate before the manager")
		}
		if inst.UpgradeState != "" {
			ring := ""
			if inst.UpgradeRing != "" {
				ring = "; ring " + inst.UpgradeRing
			}
			t.row("  Upgrade:", inst.UpgradeState+" (wants "+wantedVersion(inst.Delegate)+ring+"; auto-upgrade "+autoUpgrade(inst.Delegate)+")")
			if inst.UpgradeWaiting != "" {
				t.row("  Upgrade waits:", inst.UpgradeWaiting)
			}
		}
		t.row("  Type:", inst.Type)
		t.row("  Token:", inst.TokenName)
		t.row("  Registered:", a.timestamp(&inst.RegisteredAt))
		a.configurationRows(t, inst)
		if err := t.flush(); err != nil {
			return err
		}
		if res := inst.ConfigurationResult; res != nil && res.OutputWithheld {
			if _, err := fmt.Fprintln(w, "  Configuration output: withheld (it needs configuration:view at the configuration's scope)"); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
		} else if res != nil && res.Output != "" {
			head := "  Configuration output:\n"
			if int64(len(res.Output)) < res.OutputBytes {
				head = fmt.Sprintf("  Configuration output (excerpt of %d bytes):\n", res.OutputBytes)
			}
			if _, err := fmt.Fprint(w, head+indent(res.Output, "    ")); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
		}
		if err := writeEntries(w, now, "Allowlist", inst.Allowlist, false); err != nil {
			return err
		}
		if err := writeEntries(w, now, "Deny list", inst.Denylist, true); err != nil {
			return err
		}
	}
	return nil
}

// writeEntries writes an allowlist or deny list as an indented table.
func writeEntries(w io.Writer, now time.Time, title string, entries []protocol.CapabilityEntry, withError bool) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintf(w, "  %s: none\n", title)
		if err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		return nil
	}
	fmt.Fprintf(w, "  %s:\n", title)
	header := []string{"    CRITERIA", "TIME-LEFT"}
	if withError {
		header = append(header, "ERROR")
	}
	t := newTable(w, header...)
	for _, e := range entries {
		ms := e.TimeLeftMS
		if ms <= 0 && !e.ExpiresAt.IsZero() {
			ms = e.ExpiresAt.Sub(now).Milliseconds()
		}
		cells := []string{"    " + e.Criteria, timeLeft(ms)}
		if withError {
			cells = append(cells, e.Error)
		}
		t.row(cells...)
	}
	return t.flush()
}

// configurationRows adds what describe says about an instance's delegate
// configuration: the one that applies, the one running, the last run.
func (a *app) configurationRows(t *table, inst protocol.DelegateDetail) {
	if inst.Configuring != "" {
		t.row("  Configuring:", inst.Configuring+" is running (takes no new tasks)")
	}
	applies := "none applies"
	if c := inst.ConfigurationApplies; c != nil {
		applies = fmt.Sprintf("%s v%d applies", c.Name, c.Version)
	}
	res := inst.ConfigurationResult
	if inst.ConfigurationApplies == nil && res == nil {
		return
	}
	t.row("  Configuration:", applies)
	if res == nil {
		t.row("  Last applied:", "not run yet")
		return
	}
	exit := "no exit code"
	if res.ExitCode != nil {
		exit = "exit " + strconv.Itoa(*res.ExitCode)
	}
	last := fmt.Sprintf("%s v%d, %s, %s", res.Name, res.Version, exit, a.timestamp(&res.FinishedAt))
	if res.Error != "" {
		last += ": " + res.Error
	}
	t.row("  Last applied:", last)
}
