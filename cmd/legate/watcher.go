//go:build !delegate

package main

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/release"
	"github.com/legate-dev/legate/internal/transport"
	"github.com/legate-dev/legate/internal/watcher"
)

// upgradePublicKey is the built-in public key that watchers verify
// upgrades with (the base64 of an ed25519 public key), set at build time
// with -ldflags "-X main.upgradePublicKey=…"; LEGATE_UPGRADE_PUBLIC_KEY
// overrides it.
var upgradePublicKey = ""

const watcherHelp = `Run a delegate under a watcher, which keeps it running and upgrades it
with no failed task (docs/upgrades.md).

The watcher starts ` + "`legate delegate`" + ` as a child, with its own environment
(the same variables as legate delegate: ACCOUNT_ID, DELEGATE_TOKEN,
MANAGER_HOST_AND_PORT, DELEGATE_NAME, …), and restarts it when it exits,
with backoff. Every poll interval (the manager's, 1m by default) it asks
the manager which version the delegate's group wants. When that is another
version and AUTO_UPGRADE is not false, it:

  1. downloads the binary and its signature from the manager and verifies
     the ed25519 signature with the trusted public key (nothing is started
     when it does not verify);
  2. starts the new version beside the running one (its own working
     directory DIR/work/VERSION, its own instance, the other health port);
  3. once the manager lists the new version connected, sends the old one
     SIGTERM: it stops acquiring, finishes its tasks while heartbeating,
     deregisters and exits.

A new version that does not connect within --connect-timeout, or exits 3
times first, is stopped; the old one goes on, the manager shows why
(legate delegates describe), and the watcher does not try that version
again until the manager wants another.

  LEGATE_UPGRADE_PUBLIC_KEY   the public key that verifies upgrades: a file
                              (legate release keygen writes NAME.pub) or its
                              base64; default the key built into this binary,
                              if any (without one, the watcher never upgrades)
  AUTO_UPGRADE=false          supervise only; shown in legate delegates list
  DELEGATE_HTTP_PORT          the health port: the running delegate has it,
                              a new version beside it the next port

SIGTERM or Ctrl-C stops the watcher: its delegate drains first (no new
tasks; running tasks finish); a second SIGTERM or Ctrl-C cancels them.`

type watcherFlags struct {
	dir            string
	connectTimeout time.Duration
	pollInterval   time.Duration
	logLevel       string
}

func newWatcherCmd(st *stopper, su *startup) *cobra.Command {
	var f watcherFlags
	cmd := &cobra.Command{
		Use:   "watcher",
		Short: "Run a delegate, keep it running and upgrade it with no downtime",
		Long:  watcherHelp,
		Example: `  ACCOUNT_ID=… DELEGATE_TOKEN=… MANAGER_HOST_AND_PORT=https://legate.example.com \
    DELEGATE_NAME=build LEGATE_UPGRADE_PUBLIC_KEY=/etc/legate/release.pub \
    legate watcher --dir /var/lib/legate-delegate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runWatcher(cmd, &f, st, su) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "the watcher's directory: versions/, work/VERSION (the delegates' working directories) (default: current directory)")
	fl.DurationVar(&f.connectTimeout, "connect-timeout", 2*time.Minute, "how long a new version may take to connect before it is rolled back")
	fl.DurationVar(&f.pollInterval, "poll-interval", 0, "how often to ask the manager which version to run (default: the manager's, 1m)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

func runWatcher(cmd *cobra.Command, f *watcherFlags, st *stopper, su *startup) error {
	exposed := su.guard("")
	cfg, err := config.ReadEnv(su.lookupEnv)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	level, err := config.ParseLogLevel("--log-level", f.logLevel)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(cmd.OutOrStdout(), &slog.HandlerOptions{Level: level})).With("component", "watcher")
	warnExposed(log, exposed)
	dir := f.dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	key, err := watcherKey(su)
	if err != nil {
		return err
	}
	hostname := cfg.Hostname
	if hostname == "" {
		if hostname, err = os.Hostname(); err != nil {
			return fmt.Errorf("detect hostname (set DELEGATE_HOSTNAME): %w", err)
		}
	}
	cl, err := transport.ForDelegate(transport.Options{Proxy: cfg.Proxy, TLS: cfg.TLS, WorkDir: dir, ManagerURLs: cfg.ManagerURLs, Logger: log})
	if err != nil {
		return err
	}
	// Every manager URL, asked in turn when one cannot be reached.
	var managers []watcher.Manager
	for _, u := range cfg.ManagerURLs {
		mc, err := client.New(u, cl.Manager)
		if err != nil {
			return fmt.Errorf("manager URL %q: %w", u, err)
		}
		managers = append(managers, mc)
	}
	w, err := watcher.New(watcher.Options{
		Binary: self, Version: buildVersion(), Dir: dir, Env: su.environ(),
		AccountID: cfg.AccountID, Token: cfg.Token, Name: cfg.Name, Hostname: hostname,
		Manager: watcher.Failover(managers...), PublicKey: key, AutoUpgrade: cfg.AutoUpgrade, HTTPPort: cfg.HTTPPort,
		ConnectTimeout: f.connectTimeout, PollInterval: f.pollInterval, Force: st.Force, Logger: log,
	})
	if err != nil {
		return err
	}
	log.Info("watcher starting", "version", buildVersion(), "dir", dir, "name", cfg.Name, "auto_upgrade", cfg.AutoUpgrade,
		"verifies_upgrades", key != nil)
	return w.Run(cmd.Context())
}

// watcherKey is the public key that verifies upgrades: LEGATE_UPGRADE_PUBLIC_KEY,
// else the built-in one, else none.
func watcherKey(su *startup) (ed25519.PublicKey, error) {
	if v, ok := su.lookupEnv("LEGATE_UPGRADE_PUBLIC_KEY"); ok && v != "" {
		return release.LoadPublicKey(v)
	}
	if upgradePublicKey != "" {
		k, err := release.ParsePublicKey(upgradePublicKey)
		if err != nil {
			return nil, fmt.Errorf("the built-in upgrade public key: %w", err)
		}
		return k, nil
	}
	return nil, nil
}
