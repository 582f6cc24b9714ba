// Command legate is the single binary of legate: the manager, the
// delegate, the all-in-one dev mode and the CLI.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

// buildVersion is the version that `legate version` prints, which the
// manager reports and delegates register with.
func buildVersion() string { return buildinfo.Read(version).Version }

// watcherSlotEnv is set by legate watcher for the delegates it starts.
const watcherSlotEnv = "LEGATE_WATCHER_SLOT"

// stopper turns signals into a graceful stop (first SIGINT/SIGTERM cancels
// the context) and a forced stop (the second closes Force).
type stopper struct {
	Force <-chan struct{}
}

func main() {
	// First of all: a delegate that restarted itself without its
	// credentials in the environment reads them back (credentials.go).
	su, err := receiveCredentials()
	if err != nil {
		fmt.Fprintln(os.Stderr, "legate:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	force := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM)
	if os.Getenv(watcherSlotEnv) == "" {
		signal.Notify(sigs, syscall.SIGINT)
	} else {
		// A delegate under legate watcher: Ctrl-C in a terminal reaches
		// the whole process group, and the watcher decides (its first
		// signal drains, its second cancels) and tells its delegate with
		// SIGTERM. Had the delegate taken the terminal's SIGINT too, the
		// watcher's SIGTERM would have been its second stop request and
		// cancelled its tasks at the first Ctrl-C. Caught and dropped,
		// not ignored: an ignored signal would stay ignored in the
		// processes of the tasks it starts.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGINT)
	}
	go func() {
		<-sigs
		cancel()
		<-sigs
		close(force)
	}()
	st := &stopper{Force: force}

	root := &cobra.Command{
		Use:   "legate",
		Short: "legate: a manager and delegates that run work inside your network",
		Long: `legate runs work where your infrastructure is. A manager (control plane)
queues tasks; delegates run inside your networks, connect out to the manager,
and run scripts and API calls there.

  legate dev                      manager + one delegate in one process, for trying it out
  legate manager --data DIR       the manager (SQLite under DIR)
  legate delegate                 a delegate, configured by ACCOUNT_ID, DELEGATE_TOKEN,
                                  MANAGER_HOST_AND_PORT, DELEGATE_NAME, DELEGATE_TAGS …
  legate task run --script 'echo hi'   run a task and watch it
  legate version                  this binary's version, commit and Go version
  legate completion bash          shell completion (also zsh, fish, powershell)

The admin commands read the manager's URL and an API key from LEGATE_URL and
LEGATE_API_KEY (a manager writes both to DATA/admin.env).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	addCommands(root, st, su)

	err = root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	// A one-shot delegate's exit code says why it ran no task.
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		fmt.Fprintln(os.Stderr, "legate:", err)
		os.Exit(coded.ExitCode())
	}
	if code, msg, ok := exitError(err); ok {
		if msg != "" {
			fmt.Fprintln(os.Stderr, "legate:", msg)
		}
		os.Exit(code)
	}
	fmt.Fprintln(os.Stderr, "legate:", err)
	os.Exit(2)
}
