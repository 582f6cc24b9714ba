package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/delegate"
)

// delegateHelp is the long help of `legate delegate`.
const delegateHelp = `Run a legate delegate. It connects out to the manager (WebSocket, with
long-polling as fallback), heartbeats, and runs the tasks it is given.

It reads the environment variables of both generations of the delegate
documents, unchanged:

  ACCOUNT_ID / HARNESS_ACCOUNT_ID           account to join
  DELEGATE_TOKEN / HARNESS_TOKEN            delegate token (legate token create)
  MANAGER_HOST_AND_PORT / HARNESS_URL       manager URL(s), comma-separated
  DELEGATE_NAME / HARNESS_NAME              delegate (group) name, default legate-delegate
  DELEGATE_TAGS / HARNESS_TAGS              comma-separated tags (selectors)
  DELEGATE_TYPE, DEPLOY_MODE, NEXT_GEN, LOG_STREAMING_SERVICE_URL
  INIT_SCRIPT / INIT                        script text run with bash in the working
                                            directory before connecting (10m limit);
                                            its output goes to the log; a failure stops
                                            the delegate
  DELEGATE_DESCRIPTION                      free text shown by legate delegates list
  AUTO_UPGRADE=false                        under legate watcher: supervise, never upgrade
                                            (docs/upgrades.md)
  DELEGATE_HOSTNAME                         overrides the detected hostname (identity)
  POLL_FOR_TASKS=true                       poll instead of using the WebSocket
  DELEGATE_TASK_CAPACITY                    tasks run at once (0 = unlimited)
  DELEGATE_ONCE=true                        one-shot: register, run exactly one task,
                                            report it, deregister and exit (--once)
  DELEGATE_ONCE_TIMEOUT                     one-shot: exit when no task came within this
                                            long (default 5m; --once-timeout)
  LOGGING_LEVEL                             debug, info, warn or error (default info)
  DELEGATE_HTTP_PORT                        port of /healthz, /readyz and /metrics
                                            (Prometheus), default 3460, 0 = off
  LEGATE_TASK_ISOLATION                     how a task's processes all end with it: auto
                                            (default: a cgroup when possible), cgroup or
                                            tree (docs/task-processes.md)
  LEGATE_TASK_SANDBOX                       each shell task in user, PID, mount and IPC
                                            namespaces of its own: auto (default: when the
                                            host allows it), namespaces (required) or off
  LEGATE_TASK_UIDS=FIRST-LAST               as root: run each sandboxed task as a user of
                                            its own from this range
  LEGATE_ALLOW_MIXED_SCOPES=true            without a sandbox, still run tasks of different
                                            scopes at the same time (by default: one scope
                                            at a time; docs/task-processes.md)
  LEGATE_DELEGATE_BINARY=off                run as this binary; by default the delegate
                                            runs as legate-delegate (the delegate alone,
                                            40 % less memory) when that lies next to
                                            this binary and is the same build, as in the
                                            image

Log lines go to stdout and to WORKDIR/delegate.log, rolled daily and at
50 MB, kept 10 days and 1 GB at most (docs/logging.md).

Proxy (PROXY_HOST wins over HTTP(S)_PROXY; both set to different proxies is an error):
  PROXY_HOST, PROXY_PORT, PROXY_SCHEME      the proxy (scheme http or https, default http)
  PROXY_USER, PROXY_PASSWORD                its credentials (never logged, masked in task output)
  PROXY_CREDENTIALS_TO_TASKS=true           give tasks PROXY_USER, PROXY_PASSWORD and proxy URLs
                                            with their credentials (by default they get the
                                            proxy variables without them)
  HTTPS_PROXY, HTTP_PROXY                   standard variables, used when PROXY_HOST is unset
  NO_PROXY                                  hosts, .domains, IPs or CIDRs reached directly
                                            (localhost and loopback always are)
  PROXY_MANAGER=false                       reach the manager directly, proxy the rest (by
                                            default the manager too, in a CONNECT tunnel)

TLS:
  WORKDIR/ca-bundle/*                       PEM CA files trusted besides the system roots
  SHARED_CA_CERTS_PATH                      a PEM CA file or a directory of them, trusted too
  DELEGATE_CLIENT_CERTIFICATE_PATH          client certificate for a manager with
  DELEGATE_CLIENT_CERTIFICATE_KEY_PATH        --tls-client-ca (both or neither)
  TRUST_ALL_CERTIFICATES=true               do not verify the manager (warned at every start)

Identity: a delegate is the same instance across restarts when its account,
name, hostname and IP are the same; Kubernetes-style delegates
(DELEGATE_TYPE=KUBERNETES or HELM_DELEGATE, or running in a pod) by account,
name and hostname alone, so a rescheduled pod with a new IP stays the same.

Delegate configurations (legate configuration create) that match the
delegate's selectors run after it registers and before it takes tasks, and
again whenever they change; see docs/configurations.md.

Tasks never get the delegate token, and cannot read it from the delegate:
at start the delegate restarts itself (same PID) without its credentials in
its environment and command line, and masks them in task output
(docs/proxy-and-tls.md).

Flags override the environment. SIGTERM drains: no new tasks, running tasks
finish within --grace, then the delegate deregisters and exits 0; a second
signal cancels running tasks at once.

One-shot (--once): exit 0 when the task ran and its result was delivered,
whatever the task's status; 3 when no task came within --once-timeout (or
a stop came first), 4 when the claim of the offered task failed (another
delegate took it), 5 when the result could not be delivered (kept in
WORKDIR/spool); see docs/elastic.md.`

type delegateFlags struct {
	accountID, token, managerURL, name, tags, hostname, workDir, logLevel string
	poll, once                                                            bool
	onceTimeout                                                           time.Duration
	capacity                                                              int
	grace                                                                 time.Duration
	perfInterval                                                          time.Duration
}

func newDelegateCmd(st *stopper, su *startup) *cobra.Command {
	var f delegateFlags
	cmd := &cobra.Command{
		Use:   "delegate",
		Short: "Run a delegate that connects out to a manager and runs tasks",
		Long:  delegateHelp,
		Example: `  ACCOUNT_ID=… DELEGATE_TOKEN=… MANAGER_HOST_AND_PORT=http://127.0.0.1:7460 \
    DELEGATE_NAME=build DELEGATE_TAGS=linux,docker legate delegate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDelegate(cmd, &f, st, su) },
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
	fl.BoolVar(&f.once, "once", false, "one-shot: run exactly one task, report it, deregister and exit (DELEGATE_ONCE)")
	fl.DurationVar(&f.onceTimeout, "once-timeout", 0, "with --once: exit non-zero when no task came within this long, default 5m (DELEGATE_ONCE_TIMEOUT)")
	fl.StringVar(&f.workDir, "workdir", "", "working directory for task files (default: current directory)")
	fl.DurationVar(&f.grace, "grace", 5*time.Minute, "how long running tasks may finish after SIGTERM")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error (overrides LOGGING_LEVEL)")
	fl.DurationVar(&f.perfInterval, "perf-interval", time.Minute, "how often the performance line is logged")
	_ = fl.MarkHidden("perf-interval")
	return cmd
}

// runDelegate runs `legate delegate`: it configures a delegate from the
// environment and the flags, opens its log, and runs it until it stops.
func runDelegate(cmd *cobra.Command, f *delegateFlags, st *stopper, su *startup) error {
	// Restarts the process without the credentials in its environment
	// and command line, the first time, as the delegate-only binary when
	// it lies next to this one (the first image only: the second, when
	// this one, asks again only to warn of a legate-delegate it skipped).
	self, _ := os.Executable()
	lite, skipped, err := delegateBinary(cmd.Context(), self, os.Getenv(envDelegateBinary))
	if err != nil {
		return err
	}
	if su.reexecuted {
		lite = ""
	}
	exposed := su.guard(lite, "token")
	cfg, level, err := delegateSettings(cmd, f, su)
	if err != nil {
		return err
	}
	workDir := f.workDir
	if workDir == "" {
		if workDir, err = os.Getwd(); err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
	}
	logFile, err := openDelegateLog(workDir)
	if err != nil {
		return err
	}
	defer logFile.Close()
	log := delegateLogger(level, cmd.OutOrStdout(), logFile)
	log.Info("delegate starting", "version", buildVersion(), "binary", self, "workdir", workDir, "log_level", level)
	if skipped != "" {
		log.Warn(skipped)
	}
	warnExposed(log, exposed)
	a, err := delegate.New(delegate.Options{
		Config: cfg, WorkDir: workDir, Grace: f.grace, Version: buildVersion(),
		Logger: log, ForceStop: st.Force, PerfInterval: f.perfInterval,
		HTTPAddr: httpAddr("", cfg.HTTPPort), Environ: su.environ(),
		TaskIsolation: os.Getenv("LEGATE_TASK_ISOLATION"),
		TaskSandbox:   os.Getenv("LEGATE_TASK_SANDBOX"), TaskUIDs: os.Getenv("LEGATE_TASK_UIDS"),
	})
	if err != nil {
		return err
	}
	return a.Run(cmd.Context())
}

// delegateSettings checks the flags and returns the delegate's
// configuration and log level: the environment, overridden by the flags
// that were set (--token as the credential hand-over kept it).
func delegateSettings(cmd *cobra.Command, f *delegateFlags, su *startup) (config.Delegate, slog.Level, error) {
	if tok, ok := su.creds.Flag("token"); ok {
		if err := cmd.Flags().Set("token", tok); err != nil {
			return config.Delegate{}, 0, err
		}
	}
	cfg, err := delegateConfig(cmd, *f, su.lookupEnv)
	if err != nil {
		return config.Delegate{}, 0, err
	}
	level := cfg.LogLevel
	if cmd.Flags().Changed("log-level") {
		if level, err = config.ParseLogLevel("--log-level", f.logLevel); err != nil {
			return config.Delegate{}, 0, err
		}
	}
	if f.grace <= 0 {
		return config.Delegate{}, 0, errors.New("--grace must be positive")
	}
	return cfg, level, nil
}

// delegateConfig reads the environment (both seed generations) and lets
// flags that were set override it.
func delegateConfig(cmd *cobra.Command, f delegateFlags, lookup func(string) (string, bool)) (config.Delegate, error) {
	cfg, err := config.ReadEnv(lookup)
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
	if fl.Changed("once") {
		cfg.Once = f.once
	}
	if fl.Changed("once-timeout") {
		cfg.OnceTimeout = f.onceTimeout
	}
	if fl.Changed("capacity") {
		if f.capacity < 0 {
			return cfg, errors.New("--capacity must not be negative")
		}
		cfg.Capacity = f.capacity
	}
	return cfg, cfg.Validate()
}
