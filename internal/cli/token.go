package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "token",
		Aliases: []string{"tokens"},
		Short:   "Create, list and revoke delegate tokens",
		Long: `Delegate tokens let delegates register with the manager. A delegate started
with a token (DELEGATE_TOKEN) joins the token's account and gets the token's
scope: account (the default), an organization (--org) or a project (--org and
--project). Revoking the token disconnects every delegate that uses it.`,
		Example: `  legate token create ci
  legate token create eng-ci --org eng
  legate token list
  legate token revoke ci`,
	}
	cmd.AddCommand(a.tokenCreateCmd(), a.tokenListCmd(), a.tokenRevokeCmd())
	return cmd
}

func (a *app) tokenCreateCmd() *cobra.Command {
	var (
		out          outputFlags
		valueOnly    bool
		org, project string
		approval     bool
		initSecrets  []string
		uses         int
	)
	cmd := &cobra.Command{
		Use:   "create NAME [--org ORG [--project PROJECT]]",
		Short: "Create a delegate token and print its value",
		Long: `Create a delegate token named NAME. The value is printed alone on the last
line of the output and is shown only once: the manager stores only its hash.

Delegates that register with the token get its scope: the account (the
default), the organization ORG (--org: they serve that org's org- and
project-level tasks) or the project PROJECT of ORG (--org and --project:
they serve only that project's tasks).

--value-only prints the value alone, for a shell variable; when the token
cannot be created it prints nothing and exits non-zero, so that
TOKEN=$(legate token create ci --value-only) && ... stops there. A token's
name stays taken once it is created, revoked or not: choose another name
to create another token.

--require-approval makes the delegates that register with the token wait,
listed as pending (legate delegates list --pending), offered no task and no
configuration, until an administrator approves them (legate delegates
approve NAME) or rejects them (legate delegates reject NAME: they stop).

--uses N lets at most N delegate processes register with the token (one
each time a process starts; a delegate re-registering, for a new session
or after a reconnect, takes none): then it is refused (token_used_up).
With one-shot delegates (legate delegate --once), --uses 1 gives each
machine a token that is worth nothing once it ran (docs/elastic.md).`,
		Example: `  legate token create ci
  TOKEN=$(legate token create ci --value-only) && echo "token created"
  legate token create eng-ci --org eng
  legate token create web-ci --org eng --project web
  legate token create untrusted --require-approval
  legate token create builders --init-secret REGISTRY_PASSWORD
  legate token create runner-42 --uses 1`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			if cmd.Flags().Changed("uses") && (uses < 1 || uses > protocol.MaxTokenUses) {
				return usagef("--uses %d: give 1 to %d (leave --uses out for a token without a limit)", uses, protocol.MaxTokenUses)
			}
			if out.format != "" && valueOnly {
				return usagef("-o/--json and --value-only: choose one")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			tok, err := c.CreateScopedToken(cmd.Context(), protocol.CreateTokenRequest{Name: args[0], Org: org, Project: project, RequireApproval: approval,
				InitSecrets: initSecrets, Uses: uses})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if out.structured() {
				return out.print(w, tok)
			}
			if tok.Value == "" {
				return fmt.Errorf("create token: the manager returned no token value")
			}
			if valueOnly {
				_, err = fmt.Fprintln(w, tok.Value)
				return err
			}
			where := ""
			if tok.Org != "" {
				where = " (scope " + escape(scope(tok.Org, tok.Project)) + ")"
			}
			if tok.RequireApproval {
				where += ", requiring approval"
			}
			if tok.Uses > 0 {
				where += fmt.Sprintf(", for %d registration(s)", tok.Uses)
			}
			_, err = fmt.Fprintf(w, "Created delegate token %q%s. Start delegates with DELEGATE_TOKEN set to this value; it is not shown again:\n%s\n", tok.Name, where, tok.Value)
			return err
		}),
	}
	cmd.Flags().StringVar(&org, "org", "", "create the token at the level of this organization")
	cmd.Flags().StringVar(&project, "project", "", "create the token at the level of this project of --org")
	out.add(cmd, formatJSON, formatYAML)
	cmd.Flags().BoolVar(&approval, "require-approval", false, "delegates that register with the token wait for an administrator's approval")
	cmd.Flags().StringArrayVar(&initSecrets, "init-secret", nil, "a stored secret the INIT_SCRIPT of the token's delegates may use as ${secrets.NAME} (repeatable; needs secret:access on it)")
	cmd.Flags().IntVar(&uses, "uses", 0, "at most this many delegate processes may register with the token (default: no limit)")
	cmd.Flags().BoolVar(&valueOnly, "value-only", false, "print only the token's value (for TOKEN=$(legate token create NAME --value-only))")
	return cmd
}

func (a *app) tokenListCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List delegate tokens",
		Long:    `List the account's delegate tokens (names, scopes and states, never values).`,
		Example: `  legate token list
  legate token list -o name
  legate token list -o yaml`,
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
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				names := make([]string, len(list.Tokens))
				for i, tok := range list.Tokens {
					names[i] = tok.Name
				}
				return printNames(w, names...)
			}
			if len(list.Tokens) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No tokens. Create one with: legate token create NAME")
				return nil
			}
			now := a.now()
			wide := out.is(formatWide)
			header := []string{"NAME", "SCOPE", "STATUS", "INIT-SECRETS", "CREATED", "REVOKED"}
			if wide {
				header = append(header, "CREATED-AT", "REVOKED-AT")
			}
			t := newTable(w, header...)
			for _, tok := range list.Tokens {
				revoked := ""
				if tok.RevokedAt != nil {
					revoked = age(now, *tok.RevokedAt)
				}
				status := tok.Status
				if tok.RequireApproval {
					status += ",requires-approval"
				}
				if tok.UsesLeft != nil {
					status += fmt.Sprintf(",uses-left=%d/%d", *tok.UsesLeft, tok.Uses)
				}
				initSecrets := "-"
				if len(tok.InitSecrets) > 0 {
					initSecrets = strings.Join(tok.InitSecrets, ",")
				}
				row := []string{tok.Name, scope(tok.Org, tok.Project), status, initSecrets, age(now, tok.CreatedAt), revoked}
				if wide {
					row = append(row, a.absTime(&tok.CreatedAt), a.absTime(tok.RevokedAt))
				}
				t.row(row...)
			}
			return t.flush()
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatWide, formatName)
	return cmd
}

func (a *app) tokenRevokeCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:               "revoke NAME",
		ValidArgsFunction: a.complete(tokensLister),
		Short:             "Revoke a delegate token and disconnect its delegates",
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
			if out.structured() {
				return out.print(cmd.OutOrStdout(), tok)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Revoked delegate token %q; delegates that use it are disconnected.\n", tok.Name)
			return err
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}
