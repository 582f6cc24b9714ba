//go:build !delegate

package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/transport"
	"github.com/legate-dev/legate/internal/upgrader"
)

func newUpgraderCmd(su *startup) *cobra.Command {
	return &cobra.Command{
		Use:   "upgrader",
		Short: "Upgrade a Kubernetes delegate's StatefulSet to the version the manager wants (run by a CronJob)",
		Long: `Run one upgrade pass of a Kubernetes delegate installed with
legate manifest kubernetes --upgrade auto, whose CronJob runs this hourly:
ask the manager which version the delegate's group wants and, when the
StatefulSet's delegate container runs another, patch its image to the same
repository with that version's tag. The StatefulSet replaces its pods one
at a time and each delegate drains first: no task fails.

It reads the delegate's variables (ACCOUNT_ID, DELEGATE_TOKEN,
MANAGER_HOST_AND_PORT, DELEGATE_NAME, proxy and TLS settings) and:

  UPGRADER_NAMESPACE, UPGRADER_STATEFULSET   the StatefulSet to patch
  UPGRADER_KUBERNETES_API                    the API's URL (default: in the pod,
                                             https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)
  UPGRADER_KUBERNETES_TOKEN_FILE             default: the pod's ServiceAccount token
  UPGRADER_KUBERNETES_CA_FILE                default: the pod's ServiceAccount CA

Its ServiceAccount needs get and patch on that StatefulSet only.`,
		Example: `  legate manifest kubernetes --new-token k8s --name prod --upgrade auto | kubectl apply -f -`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(cmd.OutOrStdout(), nil)).With("component", "upgrader")
			cfg, err := config.ReadEnv(su.lookupEnv)
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			api, hc, bearer, err := upgrader.KubernetesAPI(os.Getenv)
			if err != nil {
				return err
			}
			cl, err := transport.ForDelegate(transport.Options{Proxy: cfg.Proxy, TLS: cfg.TLS, ManagerURLs: cfg.ManagerURLs, Logger: log})
			if err != nil {
				return err
			}
			mc, err := client.New(cfg.ManagerURLs[0], cl.Manager)
			if err != nil {
				return err
			}
			u, err := upgrader.New(upgrader.Options{Manager: mc, AccountID: cfg.AccountID, Token: cfg.Token, Name: cfg.Name,
				Namespace: os.Getenv("UPGRADER_NAMESPACE"), StatefulSet: os.Getenv("UPGRADER_STATEFULSET"),
				API: api, BearerToken: bearer, HTTPClient: hc, Logger: log})
			if err != nil {
				return err
			}
			_, err = u.Run(cmd.Context())
			return err
		},
	}
}
