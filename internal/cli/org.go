package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

func (a *app) orgCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "org",
		Aliases: []string{"orgs"},
		Short:   "Create, list and delete organizations",
		Long: `Organizations group projects within the account. Tokens, delegates and tasks
may belong to an organization (or to one of its projects): an org-level
delegate serves its org's org- and project-level tasks, an account-level
delegate serves every task.`,
		Example: `  legate org create eng
  legate org list
  legate org delete eng`,
	}
	cmd.AddCommand(a.orgCreateCmd(), a.orgListCmd(), a.orgDeleteCmd())
	return cmd
}

func (a *app) orgCreateCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "create ORG",
		Short: "Create an organization",
		Long:  `Create the organization ORG in the account.`,
		Example: `  legate org create eng
  legate project create --org eng web`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			org, err := c.CreateOrg(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), org)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Created organization %q.\n", org.Name)
			return err
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) orgListCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List organizations",
		Long:    `List the account's organizations.`,
		Example: `  legate org list
  legate org list -o name`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListOrgs(cmd.Context())
			if err != nil {
				return err
			}
			if list.Orgs == nil {
				list.Orgs = []protocol.Org{}
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				names := make([]string, len(list.Orgs))
				for i, o := range list.Orgs {
					names[i] = o.Name
				}
				return printNames(w, names...)
			}
			if len(list.Orgs) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No organizations. Create one with: legate org create ORG")
				return nil
			}
			now := a.now()
			wide := out.is(formatWide)
			header := []string{"NAME", "CREATED"}
			if wide {
				header = append(header, "CREATED-AT")
			}
			t := newTable(w, header...)
			for _, o := range list.Orgs {
				row := []string{o.Name, age(now, o.CreatedAt)}
				if wide {
					row = append(row, a.absTime(&o.CreatedAt))
				}
				t.row(row...)
			}
			return t.flush()
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatWide, formatName)
	return cmd
}

func (a *app) orgDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "delete ORG",
		ValidArgsFunction: a.complete(orgsLister),
		Short:             "Delete an organization",
		Long: `Delete the organization ORG. The manager refuses while it is in use (by
projects, tokens that are not revoked, or queued or running tasks): delete,
revoke or finish those first.`,
		Example: `  legate project delete --org eng web
  legate org delete eng`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteOrg(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted organization %q.\n", args[0])
			return err
		}),
	}
	return cmd
}

func (a *app) projectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "project",
		Aliases: []string{"projects"},
		Short:   "Create, list and delete projects of an organization",
		Long: `Projects belong to an organization. A project-level token (legate token
create NAME --org ORG --project PROJECT) registers delegates that serve only
that project's tasks.`,
		Example: `  legate project create --org eng web
  legate project list --org eng
  legate project delete --org eng web`,
	}
	cmd.AddCommand(a.projectCreateCmd(), a.projectListCmd(), a.projectDeleteCmd())
	return cmd
}

// needOrg refuses a missing --org.
func needOrg(org, what string) error {
	if org == "" {
		return usagef("%s needs --org ORG: a project belongs to an organization", what)
	}
	return nil
}

func (a *app) projectCreateCmd() *cobra.Command {
	var (
		out outputFlags
		org string
	)
	cmd := &cobra.Command{
		Use:   "create --org ORG PROJECT",
		Short: "Create a project in an organization",
		Long:  `Create the project PROJECT in the organization ORG, which must exist.`,
		Example: `  legate project create --org eng web
  legate token create web-ci --org eng --project web`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := needOrg(org, "project create"); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.CreateProject(cmd.Context(), org, args[0])
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), p)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Created project %q in organization %q.\n", p.Name, p.Org)
			return err
		}),
	}
	cmd.Flags().StringVar(&org, "org", "", "organization of the project (required)")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) projectListCmd() *cobra.Command {
	var (
		out outputFlags
		org string
	)
	cmd := &cobra.Command{
		Use:     "list [--org ORG]",
		Aliases: []string{"ls"},
		Short:   "List projects",
		Long: `List the projects of one organization (--org) or of all of them. With
-o name, each line is ORG/PROJECT.`,
		Example: `  legate project list
  legate project list --org eng -o yaml
  legate project list -o name`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListProjects(cmd.Context(), org)
			if err != nil {
				return err
			}
			if list.Projects == nil {
				list.Projects = []protocol.Project{}
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				names := make([]string, len(list.Projects))
				for i, p := range list.Projects {
					names[i] = p.Org + "/" + p.Name
				}
				return printNames(w, names...)
			}
			if len(list.Projects) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No projects. Create one with: legate project create --org ORG PROJECT")
				return nil
			}
			now := a.now()
			wide := out.is(formatWide)
			header := []string{"ORG", "NAME", "CREATED"}
			if wide {
				header = append(header, "CREATED-AT")
			}
			t := newTable(w, header...)
			for _, p := range list.Projects {
				row := []string{p.Org, p.Name, age(now, p.CreatedAt)}
				if wide {
					row = append(row, a.absTime(&p.CreatedAt))
				}
				t.row(row...)
			}
			return t.flush()
		}),
	}
	cmd.Flags().StringVar(&org, "org", "", "only the projects of this organization")
	out.add(cmd, formatJSON, formatYAML, formatWide, formatName)
	return cmd
}

func (a *app) projectDeleteCmd() *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:               "delete --org ORG PROJECT",
		ValidArgsFunction: a.complete(projectsLister),
		Short:             "Delete a project",
		Long:              `Delete the project PROJECT of the organization ORG.`,
		Example:           `  legate project delete --org eng web`,
		Args:              cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := needOrg(org, "project delete"); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteProject(cmd.Context(), org, args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted project %q of organization %q.\n", args[0], org)
			return err
		}),
	}
	cmd.Flags().StringVar(&org, "org", "", "organization of the project (required)")
	return cmd
}
