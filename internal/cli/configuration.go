package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

// configurationRule is the matching rule, as every command's help says it.
const configurationRule = `A configuration has a scope, like a delegate token: the account (the
default), an organization (--org) or a project (--org and --project). It
applies to the delegates whose token's scope covers it (account delegates:
every configuration; org delegates: their org's and its projects'; project
delegates: their project's only) and whose selectors (their tags, their name
and their hostname) include all of its selectors; one without selectors
applies to every delegate its scope reaches. When several apply to a
delegate, the one with the most selectors wins, then the one whose scope is
closest to the delegate's own, then the first by name.`

func (a *app) configurationCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "configuration",
		Aliases: []string{"configurations", "config"},
		Short:   "Create, list, show, update and delete delegate configurations",
		Long: `A delegate configuration is a script that delegates run on their host when they
start, and again whenever it changes (with a 10 minute timeout), to install
tools or prepare the machine. While it runs, the delegate takes no task. The
exit code and an excerpt of the output show in legate delegates describe.

` + configurationRule,
		Example: `  legate configuration create build-tools --script tools.sh --selector linux
  legate configuration update build-tools --script tools.sh
  legate delegates describe build`,
	}
	cmd.AddCommand(a.configurationCreateCmd(), a.configurationListCmd(), a.configurationGetCmd(),
		a.configurationUpdateCmd(), a.configurationDeleteCmd())
	return cmd
}

// readConfigurationScript reads a --script FILE ("-" is standard input).
func readConfigurationScript(cmd *cobra.Command, path string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), protocol.MaxConfigurationScript+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", usagef("--script %s: %v", path, err)
	}
	if len(b) > protocol.MaxConfigurationScript {
		return "", usagef("--script %s: larger than %d bytes; have the script download what it needs instead", path, protocol.MaxConfigurationScript)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", usagef("--script %s is empty", path)
	}
	return string(b), nil
}

// configurationTable writes configurations as a table; wide adds when each
// was created.
func (a *app) configurationTable(w io.Writer, cs []protocol.Configuration, wide bool) error {
	header := []string{"NAME", "VERSION", "SCOPE", "SELECTORS", "SCRIPT", "UPDATED"}
	if wide {
		header = append(header, "CREATED")
	}
	t := newTable(w, header...)
	for _, c := range cs {
		sel := strings.Join(c.Selectors, ",")
		if sel == "" {
			sel = "(all delegates)"
		}
		row := []string{c.Name, strconv.FormatInt(c.Version, 10), scope(c.Org, c.Project), sel, scriptSummary(c.Script), a.timestamp(&c.UpdatedAt)}
		if wide {
			row = append(row, a.timestamp(&c.CreatedAt))
		}
		t.row(row...)
	}
	return t.flush()
}

// scriptSummary is the size and first line of a script.
func scriptSummary(s string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(first) > 40 {
		first = first[:40] + "…"
	}
	lines := strings.Count(strings.TrimRight(s, "\n"), "\n") + 1
	if lines == 1 {
		return "1 line: " + first
	}
	return fmt.Sprintf("%d lines: %s", lines, first)
}

func (a *app) configurationCreateCmd() *cobra.Command {
	var (
		out          outputFlags
		script       string
		selectors    []string
		org, project string
	)
	cmd := &cobra.Command{
		Use:   "create NAME --script FILE [--selector S]... [--org ORG [--project PROJECT]]",
		Short: "Create a delegate configuration",
		Long: `Create the configuration NAME with the script in FILE ("-" reads standard
input), at account level or, with --org (and --project), at the level of that
organization (or project); the scope cannot be changed later. Connected
delegates it applies to run it at once; others when they start.

` + configurationRule,
		Example: `  legate configuration create build-tools --script tools.sh --selector linux
  echo 'apt-get install -y jq' | legate configuration create jq --script - --selector linux,docker
  legate configuration create web-tools --script web.sh --org eng --project web`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if script == "" {
				return usagef("configuration create needs --script FILE")
			}
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			body, err := readConfigurationScript(cmd, script)
			if err != nil {
				return err
			}
			req := protocol.CreateConfigurationRequest{Name: args[0], Script: body, Selectors: protocol.NormalizeSelectors(selectors),
				Org: org, Project: project}
			if len(req.Selectors) == 0 {
				req.Selectors = nil
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			conf, err := c.CreateConfiguration(cmd.Context(), req)
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), conf)
			}
			where := ""
			if conf.Org != "" {
				where = ", scope " + scope(conf.Org, conf.Project)
			}
			if _, err = fmt.Fprintf(cmd.OutOrStdout(), "Created configuration %q (version %d%s) for %s.\n", conf.Name, conf.Version, where, escape(selectorText(conf.Selectors))); err != nil {
				return err
			}
			return noteReach(cmd, conf)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&script, "script", "", `file with the script to run on the delegates ("-" = standard input; required)`)
	fl.StringSliceVar(&selectors, "selector", nil, "apply only to delegates with this selector (repeatable, or comma-separated)")
	fl.StringVar(&org, "org", "", "create the configuration at the level of this organization")
	fl.StringVar(&project, "project", "", "create the configuration at the level of this project of --org")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

// selectorText says which delegates selectors pick.
func selectorText(sel []string) string {
	if len(sel) == 0 {
		return "every delegate"
	}
	return "delegates with " + strings.Join(sel, ", ")
}

func (a *app) configurationListCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List delegate configurations",
		Long: `List the account's delegate configurations with their version, scope,
selectors and script.

` + configurationRule,
		Example: `  legate configuration list
  legate configuration list -o name`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListConfigurations(cmd.Context())
			if err != nil {
				return err
			}
			if list.Configurations == nil {
				list.Configurations = []protocol.Configuration{}
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				names := make([]string, len(list.Configurations))
				for i, c := range list.Configurations {
					names[i] = c.Name
				}
				return printNames(w, names...)
			}
			if len(list.Configurations) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No configurations. Create one with: legate configuration create NAME --script FILE")
				return nil
			}
			return a.configurationTable(w, list.Configurations, out.is(formatWide))
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatWide, formatName)
	return cmd
}

func (a *app) configurationGetCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:               "get NAME",
		ValidArgsFunction: a.complete(configurationsLister),
		Short:             "Show one delegate configuration with its script",
		Long:              `Show the configuration NAME: version, scope, selectors, times and the whole script.`,
		Example: `  legate configuration get build-tools
  legate configuration get build-tools -o yaml
  legate configuration get build-tools --json | jq -r .script`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			conf, err := c.GetConfiguration(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, conf)
			case out.is(formatName):
				return printNames(w, conf.Name)
			}
			t := newTable(w, "Name:", conf.Name)
			t.row("Version:", strconv.FormatInt(conf.Version, 10))
			t.row("Scope:", scope(conf.Org, conf.Project))
			t.row("Applies to:", selectorText(conf.Selectors))
			t.row("Created:", a.timestamp(&conf.CreatedAt))
			t.row("Updated:", a.timestamp(&conf.UpdatedAt))
			if err := t.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "Script:\n%s", indent(conf.Script, "  "))
			return err
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatName)
	return cmd
}

// indent prefixes every line of s and ends it with a newline. s is stored
// text (a script, an output excerpt): its control characters are escaped.
func indent(s, prefix string) string {
	s = escapeLines(strings.TrimRight(s, "\n"))
	if s == "" {
		return ""
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix) + "\n"
}

func (a *app) configurationUpdateCmd() *cobra.Command {
	var (
		out       outputFlags
		script    string
		selectors []string
	)
	cmd := &cobra.Command{
		Use:               "update NAME [--script FILE] [--selector S]...",
		ValidArgsFunction: a.complete(configurationsLister),
		Short:             "Change a delegate configuration's script or selectors",
		Long: `Change the script and/or the selectors of the configuration NAME; its version
goes up by one. Connected delegates it applies to (before or after the
change) fetch it and run it again at once. --selector replaces all the
selectors; --selector "" removes them (the configuration then applies to every
delegate).

` + configurationRule,
		Example: `  legate configuration update build-tools --script tools.sh
  legate configuration update build-tools --selector linux --selector gpu`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			var req protocol.UpdateConfigurationRequest
			if cmd.Flags().Changed("script") {
				body, err := readConfigurationScript(cmd, script)
				if err != nil {
					return err
				}
				req.Script = &body
			}
			if cmd.Flags().Changed("selector") {
				sel := protocol.NormalizeSelectors(selectors)
				req.Selectors = &sel
			}
			if req.Script == nil && req.Selectors == nil {
				return usagef("configuration update needs --script FILE or --selector S")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			conf, err := c.UpdateConfiguration(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), conf)
			}
			if _, err = fmt.Fprintf(cmd.OutOrStdout(), "Updated configuration %q to version %d (for %s).\n", conf.Name, conf.Version, escape(selectorText(conf.Selectors))); err != nil {
				return err
			}
			return noteReach(cmd, conf)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&script, "script", "", `file with the new script ("-" = standard input)`)
	fl.StringSliceVar(&selectors, "selector", nil, "the new selectors, replacing the old ones (repeatable, or comma-separated)")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) configurationDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "delete NAME",
		ValidArgsFunction: a.complete(configurationsLister),
		Short:             "Delete a delegate configuration",
		Long: `Delete the configuration NAME. Nothing is undone on the delegates; those it
applied to run the configuration that applies to them now, if another one
does. What they last ran stays visible in legate delegates describe.`,
		Example: `  legate configuration delete build-tools`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteConfiguration(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted configuration %q.\n", args[0])
			return err
		}),
	}
	return cmd
}

// noteReach prints the manager's notice of a written configuration that
// reaches none of the delegates its selectors match.
func noteReach(cmd *cobra.Command, conf protocol.Configuration) error {
	if conf.Notice == "" {
		return nil
	}
	_, err := fmt.Fprintln(cmd.ErrOrStderr(), "Note: "+escape(conf.Notice)+".")
	return err
}
