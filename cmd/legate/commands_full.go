//go:build !delegate

package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/cli"
)

// delegateOnly: this binary holds every command.
const delegateOnly = false

// addCommands adds every command: the manager, the delegate, dev mode,
// bench, the watcher, the upgrader and the CLI.
func addCommands(root *cobra.Command, st *stopper, su *startup) {
	root.AddCommand(newManagerCmd(), newDelegateCmd(st, su), newDevCmd(st, su), newBenchCmd(), newWatcherCmd(st, su), newUpgraderCmd(su), newAutoscalerCmd())
	cli.AddCommands(root, cli.ReadBuildInfo(version))
	cli.Finish(root)
}

// exitError returns the exit code and message of a CLI command's error
// that carries them (cli.ExitError).
func exitError(err error) (code int, msg string, ok bool) {
	var ee *cli.ExitError
	if !errors.As(err, &ee) {
		return 0, "", false
	}
	return ee.Code, ee.Msg, true
}
