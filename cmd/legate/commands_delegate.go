//go:build delegate

package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/buildinfo"
)

// delegateOnly: this binary holds the delegate alone.
const delegateOnly = true

// addCommands adds the delegate alone (go build -tags delegate): the
// legate-delegate binary, without the manager, the web UI and the admin
// commands, which `legate delegate` runs as when it lies next to it.
func addCommands(root *cobra.Command, st *stopper, su *startup) {
	build := buildinfo.Read(version)
	root.Use = delegateBinaryName
	root.Short = "legate's delegate alone"
	root.Long = `legate-delegate is legate's delegate alone, without the manager, the web UI
and the admin commands: a smaller binary that idles in 40 % less memory.
"legate delegate" runs as it when it lies next to the legate binary of the
same build (the container image has both), so it is seldom run by hand.

  legate-delegate delegate        a delegate, configured by ACCOUNT_ID, DELEGATE_TOKEN,
                                  MANAGER_HOST_AND_PORT, DELEGATE_NAME, DELEGATE_TAGS …
  legate-delegate version         this binary's version, commit and Go version`
	root.Version = build.Version
	root.SetVersionTemplate(`{{printf "%s" ` + strconv.Quote(build.String()) + `}}`)
	root.Flags().BoolP("version", "v", false, "print the version, the commit and the Go version")
	root.AddCommand(newDelegateCmd(st, su), &cobra.Command{
		Use: "version", Short: "Print the version, the commit and the Go version", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), build.String())
			return err
		},
	})
}

// exitError: no command of this binary exits with a code of its own.
func exitError(error) (code int, msg string, ok bool) { return 0, "", false }
