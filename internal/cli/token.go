package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "token",
		Aliases: []string{"tokens"},
		Short:   "Create, list and revoke delegate tokens",
		Long: `Delegate tokens let delegates register with the manager. A delegate started
with a token (DELEGATE_TOKEN) joins the token's account; revoking the token
disconnects every delegate that uses it.`,
		Example: `  legate token create ci
  legate token list
  legate token revoke ci`,
	}
	cmd.AddCommand(a.tokenCreateCmd(), a.tokenListCmd(), a.tokenRevokeCmd())
	return cmd
}

func (a *app) tokenCreateCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a delegate token and print its value",
		Long: `Create a delegate token named NAME. The value is printed alone on the last
line of the output and is shown only once: the manager stores only its hash.`,
		Example: `  legate token create ci
  export DELEGATE_TOKEN=$(legate token create ci | tail -n1)`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			tok, err := c.CreateToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, tok)
			}
			if tok.Value == "" {
				return fmt.Errorf("create token: the manager returned no token value")
			}
			_, err = fmt.Fprintf(out, "Created delegate token %q. Start delegates with DELEGATE_TOKEN set to this value; it is not shown again:\n%s\n", tok.Name, tok.Value)
			return err
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the token object (with its value) as JSON")
	return cmd
}

func (a *app) tokenListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List delegate tokens",
		Long:    `List the account's delegate tokens (names and states, never values).`,
		Example: `  legate token list
  legate token list --json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListTokens(cmd.Context())
			if err != nil {
				return err
			}
			if list.Tokens == nil {
				list.Tokens = []protocol.Token{}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			if len(list.Tokens) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No tokens. Create one with: legate token create NAME")
				return nil
			}
			now := a.now()
			t := newTable(cmd.OutOrStdout(), "NAME", "STATUS", "CREATED", "REVOKED")
			for _, tok := range list.Tokens {
				revoked := ""
				if tok.RevokedAt != nil {
					revoked = age(now, *tok.RevokedAt)
				}
				t.row(tok.Name, tok.Status, age(now, tok.CreatedAt), revoked)
			}
			return t.flush()
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the token list as JSON")
	return cmd
}

func (a *app) tokenRevokeCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a delegate token and disconnect its delegates",
		Long: `Revoke the delegate token NAME. Delegates that registered with it are
disconnected and cannot register again with it.`,
		Example: `  legate token revoke ci`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			tok, err := c.RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), tok)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Revoked delegate token %q; delegates that use it are disconnected.\n", tok.Name)
			return err
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the revoked token as JSON")
	return cmd
}
