package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

func (a *app) auditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit log: who changed what, when, from where",
		Long: `The manager records every change made through its API — tokens, API keys,
orgs and projects, connectors, configurations, delegate approvals,
rejections and deletions, task cancels, users, groups, roles, bindings,
sign-ins and sign-outs (failed sign-ins too) — with who made it (user or
service account, and the API key or session used), when, at which scope,
from which address, and whether it succeeded or was denied. Records are
kept for the manager's --audit-retention (90 days by default). Never a
secret, token or key value: names only.

Reading it needs the permission audit:view.`,
		Example: `  legate audit list
  legate audit list --since 24h --user alice
  legate audit list --action task --since 7d
  legate audit list --resource token/ci -o json`,
	}
	cmd.AddCommand(a.auditListCmd())
	return cmd
}

func (a *app) auditListCmd() *cobra.Command {
	var (
		out   outputFlags
		q     client.AuditQuery
		all   bool
		limit int
	)
	cmd := &cobra.Command{
		Use:     "list [--since WHEN] [--user NAME] [--resource TYPE[/NAME]] [--action ACTION]",
		Aliases: []string{"ls"},
		Short:   "List audit records, newest first",
		Long: `List the audit log, newest first: the time, who (user or service
account, and the API key or sign-in session it used), the action, the
resource and its scope, the client's address, and the outcome (success,
denied: a permission was missing, or failed, with the reason).

--since keeps the records from a time (2026-11-23T08:00:00Z) or from a
duration back (24h, 7d); --user those of one user or service account;
--resource those of one resource type (token, delegate, user, ...) or one
resource (token/ci); --action those of an action and the actions beneath it
(task.cancel; task keeps task.cancel and every other task action) or,
ending with "." or "*", of the actions that start so (token.). --limit bounds the records shown (100 by default);
--all pages through every record that matches.`,
		Example: `  legate audit list --since 7d
  legate audit list --user alice --resource delegate
  legate audit list --action delegate. --since 24h
  legate audit list --action session.
  legate audit list --all -o json | jq '.events[] | select(.outcome != "success")'`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if limit < 1 || limit > 1000 {
				return usagef("--limit %d: use a number from 1 to 1000", limit)
			}
			q.Limit = limit
			list, err := listAudit(cmd.Context(), c, &q, all)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch {
			case out.structured():
				return out.print(w, list)
			case out.is(formatName):
				ids := make([]string, len(list.Events))
				for i, e := range list.Events {
					ids[i] = e.ID
				}
				return printNames(w, ids...)
			}
			if len(list.Events) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No audit records match.")
				return nil
			}
			if err := a.auditTable(w, list.Events, out.is(formatWide)); err != nil {
				return err
			}
			if list.Next != "" && !all {
				fmt.Fprintf(cmd.ErrOrStderr(), "More records match: --all lists them all, or narrow with --since, --user, --resource or --action.\n")
			}
			return nil
		}),
	}
	out.add(cmd, listFormats()...)
	cmd.Flags().StringVar(&q.Since, "since", "", "only records from this time (RFC 3339) or duration back (24h, 7d)")
	cmd.Flags().StringVar(&q.User, "user", "", "only the records of this user or service account")
	cmd.Flags().StringVar(&q.Resource, "resource", "", "only the records of this resource type (token) or resource (token/ci)")
	cmd.Flags().StringVar(&q.Action, "action", "", "only the records of this action and those beneath it (task.cancel, task), or of the actions starting so when it ends with . or * (token.)")
	cmd.Flags().IntVar(&limit, "limit", 100, "show at most this many records (1 to 1000)")
	cmd.Flags().BoolVar(&all, "all", false, "page through every record that matches")
	return cmd
}

// listAudit fetches the records q selects: one page, or with all every
// page, advancing q.After as it goes. Events is never nil.
func listAudit(ctx context.Context, c *client.Client, q *client.AuditQuery, all bool) (protocol.AuditList, error) {
	var list protocol.AuditList
	for {
		page, err := c.ListAudit(ctx, *q)
		if err != nil {
			return list, err
		}
		list.Events = append(list.Events, page.Events...)
		list.Next = page.Next
		if !all || page.Next == "" {
			break
		}
		q.After = page.Next
	}
	if list.Events == nil {
		list.Events = []protocol.AuditEvent{}
	}
	return list, nil
}

// auditTable writes the audit records as a table; wide adds the
// credential, the HTTP status and the whole detail.
func (a *app) auditTable(w io.Writer, events []protocol.AuditEvent, wide bool) error {
	header := []string{"TIME", "PRINCIPAL", "ACTION", "RESOURCE", "SCOPE", "ADDRESS", "OUTCOME"}
	if wide {
		header = append(header, "CREDENTIAL", "STATUS", "DETAIL")
	}
	t := newTable(w, header...)
	for _, e := range events {
		who := e.Principal
		if e.PrincipalKind == protocol.PrincipalServiceAccount {
			who += " (service account)"
		}
		outcome := e.Outcome
		if e.Outcome != protocol.AuditSuccess && e.Detail != "" && !wide {
			outcome += ": " + shorten(e.Detail, 60)
		}
		row := []string{a.absTime(&e.Time), who, e.Action, e.Resource, scope(e.Org, e.Project), e.Address, outcome}
		if wide {
			cred := e.Credential
			if e.CredentialName != "" {
				cred += " " + e.CredentialName
			}
			row = append(row, cred, strconv.Itoa(e.Status), e.Detail)
		}
		t.row(row...)
	}
	return t.flush()
}
