//go:build !delegate

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/delegate"
	"github.com/legate-dev/legate/internal/dispatch"
	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/logfile"
	"github.com/legate-dev/legate/internal/manifest"
	"github.com/legate-dev/legate/internal/store"
)

func newDevCmd(stop *stopper, su *startup) *cobra.Command {
	var f managerFlags
	var delegateHTTPPort int
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a manager and one delegate in one process, to try legate",
		Long: `Run a manager with an embedded SQLite store under ./.legate-dev/ (or --data)
and one delegate connected to it, in one process. Nothing else to install.
It prints the URL, account ID and API key, and commands to copy into
another terminal. Ctrl-C stops both cleanly; running again on the same
directory keeps everything. Task secrets are sealed at rest with the master
key in DATA/master.key (created on first start) unless LEGATE_MASTER_KEY is
set; see docs/secrets-at-rest.md.

The manager listens on 127.0.0.1:7460, or on a free port when that one is
taken (admin.env and the banner say which); --listen sets the address. The
dev delegate serves no health and metrics port unless --delegate-http-port
says one, so that other delegates started next to it (legate delegate,
DELEGATE_HTTP_PORT, 3460 by default) do not clash with it.

Dev mode serves plain HTTP on loopback: to try TLS, proxies or client
certificates, run legate manager --tls-cert … and legate delegate.`,
		Example: `  legate dev
  # in another terminal:
  set -a; . .legate-dev/admin.env; set +a
  legate task run --script 'echo hello from $(hostname)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDev(cmd, stop, su, f, delegateHTTPPort) },
	}
	cmd.Flags().StringVar(&f.listen, "listen", "127.0.0.1:7460", "address to listen on (without it: a free port when 127.0.0.1:7460 is taken)")
	cmd.Flags().StringVar(&f.data, "data", ".legate-dev", "data directory")
	cmd.Flags().StringVar(&f.publicURL, "public-url", "", "URL that clients and delegates use to reach this manager, written to admin.env and to install specs (default: from --listen)")
	cmd.Flags().StringVar(&f.delegateImage, "delegate-image", "", "the image of legate you published for delegates, named by install specs (env "+manifest.EnvDelegateImage+")")
	cmd.Flags().DurationVar(&f.heartbeat, "heartbeat-interval", 10*time.Second, "how often delegates heartbeat")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	cmd.Flags().DurationVar(&f.pruneAfter, "prune-delegates-after", defaultPruneAfter, "remove delegate instances out of contact (stopped, or silent) for longer than this; 0 = never")
	cmd.Flags().IntVar(&delegateHTTPPort, "delegate-http-port", 0, "port on 127.0.0.1 of the dev delegate's /healthz, /readyz and /metrics (0 = none)")
	return cmd
}

// runDev runs the dev manager and its delegate until the command's
// context ends, and stops both.
func runDev(cmd *cobra.Command, stop *stopper, su *startup, f managerFlags, delegateHTTPPort int) error {
	// The dev delegate runs tasks in this process's children:
	// restart without the credentials in the environment first.
	exposed := su.guard("")
	log, err := newLogger(f.logLevel)
	if err != nil {
		return err
	}
	if err := f.checkLiveness(); err != nil {
		return err
	}
	if delegateHTTPPort < 0 || delegateHTTPPort > 65535 {
		return fmt.Errorf("--delegate-http-port %d: use 1-65535, or 0 for none", delegateHTTPPort)
	}
	warnExposed(log, exposed)
	ctx := cmd.Context()
	f.lookupEnv = su.lookupEnv
	f.auditRetention = 90 * 24 * time.Hour
	f.retention = 30 * 24 * time.Hour
	f.listenFallback = !cmd.Flags().Changed("listen")
	m, admin, ln, st, err := startManager(ctx, f, log)
	if err != nil {
		return err
	}
	defer st.Close()
	token, err := devToken(ctx, st, f.data, admin)
	if err != nil {
		return err
	}
	// The dev delegate's http tasks honor the proxy variables.
	proxy, err := config.ReadProxy(su.lookupEnv)
	if err != nil {
		return err
	}
	workDir := filepath.Join(f.data, "delegate")
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return err
	}
	logFile, err := openDelegateLog(workDir)
	if err != nil {
		return err
	}
	defer logFile.Close()
	var termLevel slog.Level
	_ = termLevel.UnmarshalText([]byte(f.logLevel)) // checked by newLogger
	dlog := devDelegateLogger(log, termLevel, logFile)
	registered := make(chan struct{}) // closed once, by Run
	a, err := delegate.New(delegate.Options{
		Config: config.Delegate{
			AccountID: admin.AccountID, Token: token, ManagerURLs: []string{publicURL(ln.Addr(), false)},
			Name: "dev-delegate", Type: "SHELL", Tags: []string{"dev"}, Proxy: proxy,
		},
		WorkDir: workDir, Grace: 10 * time.Second, Version: buildVersion(), Logger: dlog, ForceStop: stop.Force,
		HTTPAddr: httpAddr("127.0.0.1", delegateHTTPPort), Environ: su.environ(),
		TaskIsolation: os.Getenv("LEGATE_TASK_ISOLATION"),
		TaskSandbox:   os.Getenv("LEGATE_TASK_SANDBOX"), TaskUIDs: os.Getenv("LEGATE_TASK_UIDS"),
		MaskValues: []string{admin.APIKey},
		Registered: func() { close(registered) },
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
	// The banner comes once the dev delegate is registered, so
	// that the commands it suggests find it.
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	var derr error
	select {
	case <-registered:
		fmt.Fprint(cmd.OutOrStdout(), devBanner(admin, f.data, delegateHTTPPort, thisCLI()))
		derr = <-errc
	case derr = <-errc: // stopped, or failed, before it registered
	}
	stopManager()
	wg.Wait()
	return errors.Join(derr, merr)
}

// devBanner is what legate dev prints once it runs: where it is, the
// credentials, and commands that work as printed from another terminal.
// cli runs this binary's CLI (see thisCLI).
func devBanner(admin identity.Admin, data string, delegateHTTPPort int, cli string) string {
	metrics := admin.URL + "/metrics (manager)"
	if delegateHTTPPort != 0 {
		metrics += fmt.Sprintf(", http://127.0.0.1:%d/metrics and /readyz (delegate)", delegateHTTPPort)
	}
	envFile := admin.EnvFile
	if abs, err := filepath.Abs(envFile); err == nil {
		envFile = abs
	}
	var b strings.Builder
	fmt.Fprintf(&b, `
legate dev is running.

  URL         %s
  account ID  %s
  API key     %s
  data        %s
  metrics     %s

Try it from another terminal:

  set -a; . %s; set +a
  %s delegates list
  %s task run --script 'echo hello from $(hostname); uname -a'
  %s ui --open        # the web UI, signed in with a one-time link
`, admin.URL, admin.AccountID, admin.APIKey, data, metrics, shellQuote(envFile), cli, cli, cli)
	if strings.HasPrefix(cli, "go run ") {
		b.WriteString(`
(run from this directory; go run links legate again for each command, from
its build cache. go install ./cmd/legate puts a legate binary in
$(go env GOPATH)/bin.)
`)
	}
	b.WriteString("\nPress Ctrl-C to stop.\n\n")
	return b.String()
}

// thisCLI is how to run this very binary from another terminal of the
// current directory: "legate" when that is what PATH finds, "go run
// ./cmd/legate" when go run built it from the repository here, else its
// path.
func thisCLI() string {
	exe, err := os.Executable()
	if err != nil {
		return "legate"
	}
	cwd, _ := os.Getwd()
	return cliCommand(exe, cwd, exec.LookPath)
}

// cliCommand is thisCLI for the binary exe run from directory cwd, with
// lookPath finding commands on PATH.
func cliCommand(exe, cwd string, lookPath func(string) (string, error)) string {
	if isGoRunBinary(exe) {
		if fi, err := os.Stat(filepath.Join(cwd, "cmd", "legate")); err == nil && fi.IsDir() {
			return "go run ./cmd/legate"
		}
		return shellQuote(exe) // go run keeps it while legate dev runs
	}
	if p, err := lookPath("legate"); err == nil && sameFile(p, exe) {
		return "legate"
	}
	return shellQuote(exe)
}

// isGoRunBinary reports whether exe is a binary that go run built: in its
// temporary work directory (…/go-buildNNN/b001/exe/NAME) or, since Go
// 1.24, in the build cache (GOCACHE/XX/HASH-d/NAME, XX the hash's first
// two hex digits).
func isGoRunBinary(exe string) bool {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build") {
		return true
	}
	hash, ok := strings.CutSuffix(filepath.Base(dir), "-d")
	return ok && len(hash) == 64 && isHex(hash) && filepath.Base(filepath.Dir(dir)) == hash[:2]
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// sameFile reports whether the paths name one file (through symlinks).
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// devToken returns the dev delegate's token, creating it on first start and
// keeping it in DATA/dev-delegate.token (mode 0600).
func devToken(ctx context.Context, st *store.Store, dataDir string, admin identity.Admin) (string, error) {
	path := filepath.Join(dataDir, "dev-delegate.token")
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	value, err := dispatch.IssueToken(ctx, st, admin.AccountID, fmt.Sprintf("dev-%d", time.Now().Unix()), time.Now())
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		return "", err
	}
	return value, nil
}

// devDelegateLogger is the logger of the delegate of `legate dev`: what
// the terminal shows (term, at the --log-level) and, in the delegate's
// log file, at least info, so the file explains what the delegate did.
func devDelegateLogger(term *slog.Logger, termLevel slog.Level, file *logfile.Writer) *slog.Logger {
	fh := slog.NewTextHandler(file, &slog.HandlerOptions{Level: min(termLevel, slog.LevelInfo)})
	return slog.New(slog.NewMultiHandler(term.Handler(), fh))
}
