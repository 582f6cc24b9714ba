package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
)

// secretRule is how secrets are scoped and used, as every command's help
// says it.
const secretRule = `A secret has a scope: the account (the default), an organization (--org) or
a project (--org and --project); the same name may exist at several scopes.
A task references it as ${secrets.NAME} in its script, environment values,
HTTP URL, headers or body; the manager resolves the reference only into the
task handed to the delegate that runs it, taking the task's project's
secret, else its org's, else the account's (never another project's), and
the delegate masks the value in the output. $${secrets.NAME} is the literal
text ${secrets.NAME}. Values are sealed at rest with the manager's master
key and no command or API answer ever shows one.`

func (a *app) secretCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "secret",
		Aliases: []string{"secrets"},
		Short:   "Create, list, show, update and delete secrets that tasks reference",
		Long:    "Secrets are named values that tasks use without holding them.\n\n" + secretRule,
		Example: `  legate secret create DB_PASSWORD --from-file db.pw --org eng
  printf %s "$TOKEN" | legate secret create API_TOKEN --from-stdin
  legate task run --org eng --script 'psql "postgres://app:${secrets.DB_PASSWORD}@db/app" -c "select 1"'`,
	}
	cmd.AddCommand(a.secretCreateCmd(), a.secretListCmd(), a.secretGetCmd(), a.secretUpdateCmd(), a.secretDeleteCmd())
	return cmd
}

// secretSource is where a value comes from: --from-file F or --from-stdin.
type secretSource struct {
	file  string
	stdin bool
}

func (s *secretSource) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.file, "from-file", "", "read the value from this file (one trailing newline is dropped)")
	cmd.Flags().BoolVar(&s.stdin, "from-stdin", false, "read the value from standard input (one trailing newline is dropped)")
}

// read returns the value: the whole file or input, less one trailing
// newline (what echo and most editors add).
func (s *secretSource) read(cmd *cobra.Command) (string, error) {
	var b []byte
	var err error
	switch {
	case s.file != "" && s.stdin:
		return "", usagef("give one of --from-file F and --from-stdin, not both")
	case s.file != "":
		var f *os.File
		if f, err = os.Open(s.file); err == nil {
			b, err = io.ReadAll(io.LimitReader(f, protocol.MaxSecretValue+3))
			f.Close()
		}
		if err != nil {
			return "", usagef("--from-file %s: %v", s.file, err)
		}
	case s.stdin:
		if b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), protocol.MaxSecretValue+3)); err != nil {
			return "", fmt.Errorf("read the value from standard input: %w", err)
		}
	default:
		return "", usagef("give the value with --from-file F or --from-stdin (never on the command line, where ps and the shell history would see it)")
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	switch {
	case len(b) == 0:
		return "", usagef("the value is empty")
	case len(b) > protocol.MaxSecretValue:
		return "", usagef("the value is larger than %d bytes", protocol.MaxSecretValue)
	}
	return string(b), nil
}

func checkSecretName(name string) error {
	if err := secretref.ValidName(name); err != nil {
		return usagef("%v", err)
	}
	return nil
}

func (a *app) secretCreateCmd() *cobra.Command {
	var (
		out          outputFlags
		src          secretSource
		org, project string
	)
	cmd := &cobra.Command{
		Use:   "create NAME (--from-file F | --from-stdin) [--org ORG [--project PROJECT]]",
		Short: "Store a secret",
		Long: `Store the secret NAME (letters, digits and underscores) with the value read
from a file or standard input, at account level or, with --org (and
--project), at the level of that organization (or project). The value is
text (UTF-8), at most 64 KiB; one trailing newline is dropped.

` + secretRule,
		Example: `  legate secret create DB_PASSWORD --from-file db.pw
  printf %s "$TOKEN" | legate secret create API_TOKEN --from-stdin --org eng --project web`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkSecretName(args[0]); err != nil {
				return err
			}
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			value, err := src.read(cmd)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.CreateSecret(cmd.Context(), protocol.CreateSecretRequest{Name: args[0], Org: org, Project: project, Value: value})
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), s)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Created secret %s at %s. Tasks reference it as ${secrets.%s}.\n", s.Name, scope(s.Org, s.Project), s.Name)
			return err
		}),
	}
	src.add(cmd)
	cmd.Flags().StringVar(&org, "org", "", "store the secret at the level of this organization")
	cmd.Flags().StringVar(&project, "project", "", "store the secret at the level of this project of --org")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) secretListCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List secrets (names and scopes, never values)",
		Long: `List the account's secrets at the scopes where you may view them: name, scope,
version and when each was last changed. Values are never shown.

` + secretRule,
		Example: `  legate secret list
  legate secret list -o name`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListSecrets(cmd.Context())
			if err != nil {
				return err
			}
			if list.Secrets == nil {
				list.Secrets = []protocol.Secret{}
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				names := make([]string, len(list.Secrets))
				for i, s := range list.Secrets {
					names[i] = s.Name
				}
				return printNames(w, names...)
			}
			if len(list.Secrets) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No secrets. Create one with: legate secret create NAME --from-file F")
				return nil
			}
			header := []string{"NAME", "SCOPE", "VERSION", "UPDATED"}
			if out.is(formatWide) {
				header = append(header, "CREATED")
			}
			t := newTable(w, header...)
			for _, s := range list.Secrets {
				row := []string{s.Name, scope(s.Org, s.Project), strconv.FormatInt(s.Version, 10), a.timestamp(&s.UpdatedAt)}
				if out.is(formatWide) {
					row = append(row, a.timestamp(&s.CreatedAt))
				}
				t.row(row...)
			}
			return t.flush()
		}),
	}
	out.add(cmd, listFormats()...)
	return cmd
}

func (a *app) secretGetCmd() *cobra.Command {
	var (
		out          outputFlags
		org, project string
	)
	cmd := &cobra.Command{
		Use:   "get NAME [--org ORG [--project PROJECT]]",
		Short: "Show a secret's metadata (never its value)",
		Long: `Show the secret NAME at account level or at the level given by --org (and
--project): its scope, version and times. The value is never shown.`,
		Example: `  legate secret get DB_PASSWORD --org eng`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.GetSecret(cmd.Context(), args[0], org, project)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, s)
			case out.is(formatName):
				return printNames(w, s.Name)
			}
			t := newTable(w, "Name:", s.Name)
			t.row("Scope:", scope(s.Org, s.Project))
			t.row("Version:", strconv.FormatInt(s.Version, 10))
			t.row("Created:", a.timestamp(&s.CreatedAt))
			t.row("Updated:", a.timestamp(&s.UpdatedAt))
			t.row("Reference:", "${secrets."+s.Name+"}")
			return t.flush()
		}),
	}
	cmd.Flags().StringVar(&org, "org", "", "the secret's organization")
	cmd.Flags().StringVar(&project, "project", "", "the secret's project of --org")
	out.add(cmd, formatJSON, formatYAML, formatName)
	return cmd
}

func (a *app) secretUpdateCmd() *cobra.Command {
	var (
		out          outputFlags
		src          secretSource
		org, project string
	)
	cmd := &cobra.Command{
		Use:   "update NAME (--from-file F | --from-stdin) [--org ORG [--project PROJECT]]",
		Short: "Replace a secret's value",
		Long: `Replace the value of the secret NAME at account level or at the level given
by --org (and --project); its version goes up by one. Tasks that a delegate
acquires from now on get the new value, queued ones included.`,
		Example: `  legate secret update DB_PASSWORD --from-file db.pw --org eng`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			value, err := src.read(cmd)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			s, err := c.UpdateSecret(cmd.Context(), args[0], org, project, value)
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), s)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Updated secret %s at %s to version %d.\n", s.Name, scope(s.Org, s.Project), s.Version)
			return err
		}),
	}
	src.add(cmd)
	cmd.Flags().StringVar(&org, "org", "", "the secret's organization")
	cmd.Flags().StringVar(&project, "project", "", "the secret's project of --org")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) secretDeleteCmd() *cobra.Command {
	var org, project string
	cmd := &cobra.Command{
		Use:   "delete NAME [--org ORG [--project PROJECT]]",
		Short: "Delete a secret",
		Long: `Delete the secret NAME at account level or at the level given by --org (and
--project). Tasks submitted later that reference it take the same name from
a wider scope if there is one, or are refused; a queued task that references
it fails when a delegate acquires it, saying so.`,
		Example: `  legate secret delete DB_PASSWORD --org eng`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSecret(cmd.Context(), args[0], org, project); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted secret %s at %s.\n", args[0], scope(org, project))
			return err
		}),
	}
	cmd.Flags().StringVar(&org, "org", "", "the secret's organization")
	cmd.Flags().StringVar(&project, "project", "", "the secret's project of --org")
	return cmd
}
