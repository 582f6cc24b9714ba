package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

func (a *app) apikeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "apikey",
		Aliases: []string{"apikeys", "api-key", "api-keys"},
		Short:   "Create, list and revoke API keys",
		Long: `API keys authenticate the CLI and other clients of the manager's admin API
(LEGATE_API_KEY or --api-key, or the key legate login stored). Each key
belongs to a user or service account (its owner) and acts with its owner's
roles, no more: a key created without --owner is yours; one created with
--owner NAME (which needs user:manage at the account) belongs to that user
or service account, which is how automation gets a key. Disabling or
deleting the owner refuses its keys. The first key, "admin", is the one a
manager writes to DATA/admin.env for the user admin.

Give each person or system its own key, so that one can be revoked without
the others. The manager stores only a hash of each key; a key is shown once,
when it is created.

Revoking a key takes effect at once on every manager that shares the
database. The account's last active key is revoked only with --force: after
that no key works until a manager restarts and writes a new one to
DATA/admin.env (as it does whenever the key there was revoked or lost).`,
		Example: `  legate apikey create ci
  legate apikey create deploy --owner ci-bot
  export LEGATE_API_KEY=$(legate apikey create ci | tail -n1)
  legate apikey list
  legate apikey revoke ci`,
	}
	cmd.AddCommand(a.apikeyCreateCmd(), a.apikeyListCmd(), a.apikeyRevokeCmd())
	return cmd
}

func (a *app) apikeyCreateCmd() *cobra.Command {
	var (
		out   outputFlags
		owner string
	)
	cmd := &cobra.Command{
		Use:   "create NAME [--owner USER|SERVICE-ACCOUNT]",
		Short: "Create an API key and print it",
		Long: `Create an API key named NAME (1-63 letters, digits, '.', '_' or '-',
starting with a letter or digit; names of revoked keys are not reused). The
key is printed alone on the last line of the output and is shown only once:
the manager stores only its hash.

The key belongs to you, or with --owner to that user or service account
(creating a key for someone else needs user:manage at the account), and acts
with its owner's roles, no more.`,
		Example: `  legate apikey create ci
  legate user create ci-bot --service-account
  legate role bind project-admin --service-account ci-bot --org eng --project web
  legate apikey create deploy --owner ci-bot
  export LEGATE_API_KEY=$(legate apikey create alice | tail -n1)`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			k, err := c.CreateAPIKeyFor(cmd.Context(), args[0], strings.TrimSpace(owner))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if out.structured() {
				return out.print(w, k)
			}
			if k.Value == "" {
				return fmt.Errorf("create API key: the manager returned no key")
			}
			forWhom := ""
			if k.Owner != "" {
				forWhom = " for " + strings.ReplaceAll(k.OwnerKind, "_", " ") + " " + escape(k.Owner)
			}
			_, err = fmt.Fprintf(w, "Created API key %q%s. Use it as %s (or --api-key); it is not shown again:\n%s\n", k.Name, forWhom, EnvAPIKey, k.Value)
			return err
		}),
	}
	cmd.Flags().StringVar(&owner, "owner", "", "the user or service account the key belongs to and acts for (default: you)")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) apikeyListCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List API keys",
		Long: `List the API keys you may see (yours; every key of the account with
user:view there), revoked ones included, never their values: name, status
("current" marks the key this command used), owner (the user or service
account it acts for), when it was created and by whom ("-" for the manager
itself), when it was last used (recorded about once a minute) and when it
was revoked.`,
		Example: `  legate apikey list
  legate apikey list -o name
  legate apikey list --json | jq -r '.api_keys[] | select(.status == "active") | .name'`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListAPIKeys(cmd.Context())
			if err != nil {
				return err
			}
			if list.APIKeys == nil {
				list.APIKeys = []protocol.APIKey{}
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				names := make([]string, len(list.APIKeys))
				for i, k := range list.APIKeys {
					names[i] = k.Name
				}
				return printNames(w, names...)
			}
			now := a.now()
			wide := out.is(formatWide)
			header := []string{"NAME", "STATUS", "OWNER", "CREATED", "CREATED-BY", "LAST-USED", "REVOKED"}
			if wide {
				header = append(header, "OWNER-ID", "CREATED-AT", "LAST-USED-AT", "REVOKED-AT")
			}
			t := newTable(w, header...)
			for _, k := range list.APIKeys {
				status := k.Status
				if k.Current {
					status += ",current"
				}
				revoked := ""
				if k.RevokedAt != nil {
					revoked = age(now, *k.RevokedAt)
					if k.RevokedBy != "" {
						revoked += " by " + k.RevokedBy
					}
				}
				row := []string{k.Name, status, keyOwner(k), age(now, k.CreatedAt), k.CreatedBy, agePtr(now, k.LastUsedAt), revoked}
				if wide {
					row = append(row, k.OwnerKind+"/"+k.OwnerID, a.absTime(&k.CreatedAt), a.absTime(k.LastUsedAt), a.absTime(k.RevokedAt))
				}
				t.row(row...)
			}
			return t.flush()
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatWide, formatName)
	return cmd
}

// keyOwner is the owner column of a key: the owner's name, "account" for
// a key of the account itself (written to the store outside the API).
func keyOwner(k protocol.APIKey) string {
	switch {
	case k.Owner != "":
		return k.Owner
	case k.OwnerKind == protocol.OwnerAccount:
		return "account"
	}
	return k.OwnerID
}

func (a *app) apikeyRevokeCmd() *cobra.Command {
	var (
		out   outputFlags
		force bool
	)
	cmd := &cobra.Command{
		Use:               "revoke NAME",
		ValidArgsFunction: a.complete(apiKeysLister),
		Short:             "Revoke an API key on every manager at once",
		Long: `Revoke the API key NAME. Every manager sharing the database refuses it at
once, with an error that says it was revoked. Revoking the key you are using
is allowed while the account has another active key.

The account's last active key is revoked only with --force, which locks the
account out of the API until a manager restarts: a manager whose
DATA/admin.env holds a revoked key writes a new key there when it starts.`,
		Example: `  legate apikey revoke ci
  legate apikey revoke admin --force`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			k, err := c.RevokeAPIKey(cmd.Context(), args[0], force)
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), k)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Revoked API key %q; every manager refuses it now.\n", k.Name)
			return err
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "revoke even the account's last active key (locks the account out until a manager restart writes a new key to DATA/admin.env)")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}
