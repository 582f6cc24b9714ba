package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/client"
)

// webhookURL is the URL of a webhook's path on the manager c talks to.
func webhookURL(c *client.Client, path string) string {
	return strings.TrimSuffix(c.BaseURL(), "/") + path
}

func (a *app) pipelineWebhookCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Enable or disable a pipeline's webhook (a signed URL that starts runs)",
		Long: `A pipeline's webhook is a URL that starts a run when it receives a POST
signed with the webhook's secret: X-Legate-Signature-256 over the time
(X-Legate-Timestamp), a new delivery ID (X-Legate-Delivery) and the body;
each delivery is accepted once, within 5 minutes of its time. legate
pipeline webhook enable prints the URL and the secret, the secret only
then. The run's inputs come from the JSON payload; it acts as whoever
enabled the webhook, and an edit of the pipeline by someone who may not
run it suspends the webhook until it is enabled again with --rotate. See
docs/pipelines.md, Webhooks.`,
		Example: `  legate pipeline webhook enable deploy-web --org eng
  legate pipeline webhook enable deploy-web --org eng --rotate
  legate pipeline webhook disable deploy-web --org eng`,
	}
	cmd.AddCommand(a.webhookEnableCmd(), a.webhookDisableCmd())
	return cmd
}

func (a *app) webhookEnableCmd() *cobra.Command {
	var (
		out          outputFlags
		org, project string
		rotate       bool
	)
	cmd := &cobra.Command{
		Use:   "enable NAME [--rotate] [--org ORG [--project PROJECT]]",
		Short: "Give a pipeline a webhook and print its URL and secret (shown only now)",
		Long: `Give pipeline NAME a webhook and print its URL and its secret. The secret is
shown only now: put it where the sender keeps it (GitHub: the webhook's
Secret, content type application/json). --rotate gives an existing webhook
a new secret (the URL stays; the old secret stops working at once).

The webhook's runs act as you: you need the permissions a run needs
(pipeline:execute, and access to what the steps use), each delivery is
checked against them at that moment, so it stops working if you lose
them; someone else takes it over with --rotate. An edit of the pipeline
by someone who may not run it suspends the webhook; --rotate by someone
who may enables it again.`,
		Example: `  legate pipeline webhook enable deploy-web --org eng`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ws, err := c.EnableWebhook(cmd.Context(), args[0], org, project, rotate)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			url := webhookURL(c, ws.Path)
			if out.structured() {
				return out.print(w, map[string]string{"url": url, "secret": ws.Secret, "enabled_by": ws.EnabledBy})
			}
			verb := "enabled"
			if rotate {
				verb = "has a new secret"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "legate: the webhook of pipeline %s %s; its runs act as %s. The secret is not shown again.\n",
				escape(args[0]), verb, escape(ws.EnabledBy))
			_, err = fmt.Fprintf(w, "URL:    %s\nSecret: %s\n", escape(url), escape(ws.Secret))
			return err
		}),
	}
	scopeFlags(cmd, &org, &project, "pipeline")
	cmd.Flags().BoolVar(&rotate, "rotate", false, "replace the secret of the webhook the pipeline has (its URL stays)")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) webhookDisableCmd() *cobra.Command {
	var org, project string
	cmd := &cobra.Command{
		Use:   "disable NAME [--org ORG [--project PROJECT]]",
		Short: "Remove a pipeline's webhook (its URL stops working)",
		Long: `Remove pipeline NAME's webhook: its URL answers 404 from now on. Runs it
started stay. A later enable makes a new URL and a new secret.`,
		Example: `  legate pipeline webhook disable deploy-web --org eng`,
		Args:    cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := checkScopeFlags(org, project); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DisableWebhook(cmd.Context(), args[0], org, project); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "the webhook of pipeline %s is disabled\n", escape(args[0]))
			return err
		}),
	}
	scopeFlags(cmd, &org, &project, "pipeline")
	return cmd
}
