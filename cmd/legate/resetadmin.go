//go:build !delegate

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/store"
)

func newResetAdminCmd() *cobra.Command {
	var data, db, url string
	cmd := &cobra.Command{
		Use:   "reset-admin",
		Short: "Give the account back its first administrator: enable the user admin and write a new key to DATA/admin.env",
		Long: `Restore the user admin when no one can act as an account admin through the
API any more: the user was disabled, lost its account-admin binding, was
deleted, or its keys were revoked. reset-admin works on the database
directly, like rotate-key (whoever can run it can read the database anyway):
it enables the user admin (creating it if it was deleted) and binds
account-admin to it at account scope if that binding is gone. Then
DATA/admin.env holds a working key: the one there works again, or, when it
was revoked or is missing, a new key of admin ("admin-2", ...) is written
(mode 0600), as a manager start does. Nothing else changes: other users,
keys and bindings stay.

A manager start never enables admin by itself: an administrator who disabled
it meant it, and a restart must not undo that silently. While the user admin
is disabled, a manager start warns that the key in admin.env is refused and
points here.

It may run while managers run. Managers on a shared PostgreSQL database drop
their cached permissions at once; a manager on SQLite sees the change within
its --api-key-cache-ttl (5s by default).`,
		Example: `  legate manager reset-admin --data /var/lib/legate
  set -a; . /var/lib/legate/admin.env; set +a; legate whoami
  legate manager reset-admin --db postgres://legate@db/legate --data /var/lib/legate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dsn := db
			if dsn == "" {
				dsn = strings.TrimSpace(os.Getenv("LEGATE_DB")) // as the manager reads it
			}
			if dsn == "" {
				dsn = filepath.Join(data, "legate.db")
				// Never create an empty database for a mistyped --data.
				if _, err := os.Stat(dsn); errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("no database at %s: give the manager's --data (or --db)", dsn)
				}
			}
			if err := os.MkdirAll(data, 0o700); err != nil {
				return err
			}
			// No master key: reset-admin reads and seals no secret.
			st, err := store.Open(cmd.Context(), dsn)
			if err != nil {
				return err
			}
			defer st.Close()
			a, did, err := identity.ResetAdmin(cmd.Context(), st, data, url, time.Now())
			if err != nil {
				return fmt.Errorf("reset-admin: %w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "account %s: %s\n", a.AccountID, strings.Join(did, "; "))
			fmt.Fprintf(out, "CLI: set -a; . %s; set +a\n", a.EnvFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "legate-data", "data directory of the manager (SQLite database, admin.env)")
	cmd.Flags().StringVar(&db, "db", "", "database URL (default: $LEGATE_DB, else SQLite at DATA/legate.db)")
	cmd.Flags().StringVar(&url, "public-url", "", "LEGATE_URL to write to admin.env (default: the one admin.env holds)")
	return cmd
}
