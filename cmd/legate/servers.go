package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/delegate"
	"github.com/legate-dev/legate/internal/manager"
	"github.com/legate-dev/legate/internal/store"
)

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// publicURL is the URL clients should use for a listener.
func publicURL(addr net.Addr) string {
	host, port, _ := net.SplitHostPort(addr.String())
	ip := net.ParseIP(host)
	if ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

type managerFlags struct {
	listen, data, db, publicURL, logLevel string
	heartbeat                             time.Duration
}

// startManager opens the store, bootstraps the account and starts the
// manager; it returns when the manager is listening.
func startManager(ctx context.Context, f managerFlags, log *slog.Logger) (*manager.Manager, manager.Admin, net.Listener, *store.Store, error) {
	if err := os.MkdirAll(f.data, 0o700); err != nil {
		return nil, manager.Admin{}, nil, nil, fmt.Errorf("create data directory: %w", err)
	}
	dsn := f.db
	if dsn == "" {
		dsn = filepath.Join(f.data, "legate.db")
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, manager.Admin{}, nil, nil, fmt.Errorf("open store: %w", err)
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		st.Close()
		return nil, manager.Admin{}, nil, nil, fmt.Errorf("listen on %s: %w", f.listen, err)
	}
	url := f.publicURL
	if url == "" {
		url = publicURL(ln.Addr())
	}
	admin, err := manager.Bootstrap(ctx, st, f.data, url, time.Now())
	if err != nil {
		ln.Close()
		st.Close()
		return nil, admin, nil, nil, err
	}
	m, err := manager.New(ctx, st, manager.Config{HeartbeatInterval: f.heartbeat, Version: buildVersion(), Logger: log})
	if err != nil {
		ln.Close()
		st.Close()
		return nil, admin, nil, nil, err
	}
	return m, admin, ln, st, nil
}

func newManagerCmd() *cobra.Command {
	var f managerFlags
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the manager (control plane)",
		Long: `Run the legate manager: the API, the delegates' event channel and the scheduler.

State lives in SQLite at DIR/legate.db unless --db says otherwise. On first
start the manager creates an account and an admin API key and writes them to
DIR/admin.env (mode 0600), so the CLI is configured with:

  set -a; . DIR/admin.env; set +a

Restarting on the same DIR keeps everything.`,
		Example: `  legate manager --listen :7460 --data /var/lib/legate`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(f.logLevel)
			if err != nil {
				return err
			}
			if f.heartbeat < 100*time.Millisecond {
				return fmt.Errorf("--heartbeat-interval %s is too short (at least 100ms)", f.heartbeat)
			}
			ctx := cmd.Context()
			m, admin, ln, st, err := startManager(ctx, f, log)
			if err != nil {
				return err
			}
			defer st.Close()
			if admin.Created {
				fmt.Fprintf(cmd.OutOrStdout(), "created account %s; admin credentials in %s\n", admin.AccountID, admin.EnvFile)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "legate manager at %s (account %s); CLI: set -a; . %s; set +a\n", admin.URL, admin.AccountID, admin.EnvFile)
			return m.Run(ctx, ln)
		},
	}
	cmd.Flags().StringVar(&f.listen, "listen", ":7460", "address to listen on")
	cmd.Flags().StringVar(&f.data, "data", "legate-data", "data directory (SQLite database, admin.env)")
	cmd.Flags().StringVar(&f.db, "db", "", "database URL (default: SQLite at DATA/legate.db)")
	cmd.Flags().StringVar(&f.publicURL, "public-url", "", "URL that clients use to reach this manager, written to admin.env (default: from --listen)")
	cmd.Flags().DurationVar(&f.heartbeat, "heartbeat-interval", 10*time.Second, "how often delegates heartbeat; 3 missed heartbeats disconnect a delegate")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

type delegateFlags struct {
	accountID, token, managerURL, name, tags, hostname, workDir, logLevel string
	poll                                                                  bool
	capacity                                                              int
	grace                                                                 time.Duration
}

// delegateConfig reads the environment (both seed generations) and lets
// flags that were set override it.
func delegateConfig(cmd *cobra.Command, f delegateFlags) (config.Delegate, error) {
	cfg, err := config.ReadEnv(os.LookupEnv)
	if err != nil {
		return cfg, err
	}
	fl := cmd.Flags()
	if fl.Changed("account-id") {
		cfg.AccountID = strings.TrimSpace(f.accountID)
	}
	if fl.Changed("token") {
		cfg.Token = strings.TrimSpace(f.token)
	}
	if fl.Changed("manager-url") {
		cfg.ManagerURLs = nil
		for _, u := range strings.Split(f.managerURL, ",") {
			if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
				cfg.ManagerURLs = append(cfg.ManagerURLs, u)
			}
		}
	}
	if fl.Changed("name") {
		cfg.Name = strings.TrimSpace(f.name)
	}
	if fl.Changed("tags") {
		cfg.Tags = splitTags(f.tags)
	}
	if fl.Changed("hostname") {
		cfg.Hostname = strings.TrimSpace(f.hostname)
	}
	if fl.Changed("poll") {
		cfg.PollForTasks = f.poll
	}
	if fl.Changed("capacity") {
		if f.capacity < 0 {
			return cfg, errors.New("--capacity must not be negative")
		}
		cfg.Capacity = f.capacity
	}
	return cfg, cfg.Validate()
}

func newDelegateCmd(st *stopper) *cobra.Command {
	var f delegateFlags
	cmd := &cobra.Command{
		Use:   "delegate",
		Short: "Run a delegate that connects out to a manager and runs tasks",
		Long: `Run a legate delegate. It connects out to the manager (WebSocket, with
long-polling as fallback), heartbeats, and runs the tasks it is given.

It reads the environment variables of both generations of the delegate
documents, unchanged:

  ACCOUNT_ID / HARNESS_ACCOUNT_ID           account to join
  DELEGATE_TOKEN / HARNESS_TOKEN            delegate token (legate token create)
  MANAGER_HOST_AND_PORT / HARNESS_URL       manager URL(s), comma-separated
  DELEGATE_NAME / HARNESS_NAME              delegate (group) name, default legate-delegate
  DELEGATE_TAGS / HARNESS_TAGS              comma-separated tags (selectors)
  DELEGATE_TYPE, DEPLOY_MODE, NEXT_GEN, LOG_STREAMING_SERVICE_URL
  INIT_SCRIPT                               script text run with bash in the working
                                            directory before connecting (10m limit);
                                            its output goes to the log; a failure stops
                                            the delegate
  DELEGATE_DESCRIPTION                      free text shown by legate delegates list
  DELEGATE_HOSTNAME                         overrides the detected hostname (identity)
  POLL_FOR_TASKS=true                       poll instead of using the WebSocket
  DELEGATE_TASK_CAPACITY                    tasks run at once (0 = unlimited)

Identity: a delegate is the same instance across restarts when its account,
name, hostname and IP are the same; Kubernetes-style delegates
(DELEGATE_TYPE=KUBERNETES or HELM_DELEGATE, or running in a pod) by account,
name and hostname alone, so a rescheduled pod with a new IP stays the same.

Delegate configurations (legate configuration create) that match the
delegate's selectors run after it registers and before it takes tasks, and
again whenever they change; see docs/configurations.md.

Flags override the environment. SIGTERM drains: no new tasks, running tasks
finish within --grace, then the delegate deregisters and exits 0; a second
signal cancels running tasks at once.`,
		Example: `  ACCOUNT_ID=… DELEGATE_TOKEN=… MANAGER_HOST_AND_PORT=http://127.0.0.1:7460 \
    DELEGATE_NAME=build DELEGATE_TAGS=linux,docker legate delegate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(f.logLevel)
			if err != nil {
				return err
			}
			cfg, err := delegateConfig(cmd, f)
			if err != nil {
				return err
			}
			if f.grace <= 0 {
				return errors.New("--grace must be positive")
			}
			a, err := delegate.New(delegate.Options{
				Config: cfg, WorkDir: f.workDir, Grace: f.grace, Version: buildVersion(),
				Logger: log, ForceStop: st.Force,
			})
			if err != nil {
				return err
			}
			return a.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.accountID, "account-id", "", "account ID (ACCOUNT_ID)")
	fl.StringVar(&f.token, "token", "", "delegate token (DELEGATE_TOKEN); prefer the environment variable")
	fl.StringVar(&f.managerURL, "manager-url", "", "manager URL(s), comma-separated (MANAGER_HOST_AND_PORT)")
	fl.StringVar(&f.name, "name", "", "delegate name (DELEGATE_NAME)")
	fl.StringVar(&f.tags, "tags", "", "comma-separated tags (DELEGATE_TAGS)")
	fl.StringVar(&f.hostname, "hostname", "", "hostname to register with (DELEGATE_HOSTNAME)")
	fl.BoolVar(&f.poll, "poll", false, "poll for tasks instead of using the WebSocket (POLL_FOR_TASKS)")
	fl.IntVar(&f.capacity, "capacity", 0, "tasks run at once, 0 = unlimited (DELEGATE_TASK_CAPACITY)")
	fl.StringVar(&f.workDir, "workdir", "", "working directory for task files (default: current directory)")
	fl.DurationVar(&f.grace, "grace", 5*time.Minute, "how long running tasks may finish after SIGTERM")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

func splitTags(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.ToLower(strings.TrimSpace(t)); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func newDevCmd(stop *stopper) *cobra.Command {
	var f managerFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a manager and one delegate in one process, to try legate",
		Long: `Run a manager with an embedded SQLite store under ./.legate-dev/ (or --data)
and one delegate connected to it, in one process. Nothing else to install.
It prints the URL, account ID and API key, and an example to copy. Ctrl-C stops
both cleanly; running again on the same directory keeps everything.`,
		Example: `  legate dev
  # in another terminal:
  set -a; . .legate-dev/admin.env; set +a
  legate task run --script 'echo hello from $(hostname)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(f.logLevel)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			m, admin, ln, st, err := startManager(ctx, f, log)
			if err != nil {
				return err
			}
			defer st.Close()
			token, err := devToken(ctx, st, f.data, admin)
			if err != nil {
				return err
			}
			workDir := filepath.Join(f.data, "delegate")
			if err := os.MkdirAll(workDir, 0o700); err != nil {
				return err
			}
			a, err := delegate.New(delegate.Options{
				Config: config.Delegate{
					AccountID: admin.AccountID, Token: token, ManagerURLs: []string{publicURL(ln.Addr())},
					Name: "dev-delegate", Type: "SHELL", Tags: []string{"dev"},
				},
				WorkDir: workDir, Grace: 10 * time.Second, Version: buildVersion(), Logger: log, ForceStop: stop.Force,
			})
			if err != nil {
				return err
			}
			mctx, stopManager := context.WithCancel(context.WithoutCancel(ctx))
			defer stopManager()
			var wg sync.WaitGroup
			var merr error
			wg.Add(1)
			go func() { defer wg.Done(); merr = m.Run(mctx, ln) }()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, `
legate dev is running.

  URL         %s
  account ID  %s
  API key     %s
  data        %s

Try it from another terminal:

  set -a; . %s; set +a
  legate delegates list
  legate task run --script 'echo hello from $(hostname); uname -a'

Press Ctrl-C to stop.

`, admin.URL, admin.AccountID, admin.APIKey, f.data, admin.EnvFile)
			derr := a.Run(ctx)
			stopManager()
			wg.Wait()
			return errors.Join(derr, merr)
		},
	}
	cmd.Flags().StringVar(&f.listen, "listen", "127.0.0.1:7460", "address to listen on")
	cmd.Flags().StringVar(&f.data, "data", ".legate-dev", "data directory")
	cmd.Flags().DurationVar(&f.heartbeat, "heartbeat-interval", 10*time.Second, "how often delegates heartbeat")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	return cmd
}

// devToken returns the dev delegate's token, creating it on first start and
// keeping it in DATA/dev-delegate.token (mode 0600).
func devToken(ctx context.Context, st *store.Store, dataDir string, admin manager.Admin) (string, error) {
	path := filepath.Join(dataDir, "dev-delegate.token")
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	value, err := manager.IssueToken(ctx, st, admin.AccountID, fmt.Sprintf("dev-%d", time.Now().Unix()), time.Now())
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		return "", err
	}
	return value, nil
}
