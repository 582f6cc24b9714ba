//go:build !delegate

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/manager"
	"github.com/legate-dev/legate/internal/manifest"
	"github.com/legate-dev/legate/internal/release"
	"github.com/legate-dev/legate/internal/seal"
	"github.com/legate-dev/legate/internal/store"
	"github.com/legate-dev/legate/internal/transport"
)

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// publicURL is the URL clients should use for a listener: https:// when
// it serves TLS.
func publicURL(addr net.Addr, tls bool) string {
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	host, port, _ := net.SplitHostPort(addr.String())
	ip := net.ParseIP(host)
	if ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + net.JoinHostPort(host, port)
}

// plainHTTPWarning is the start-up warning of a manager that serves plain
// HTTP where other hosts can reach it, or "" when there is nothing to say:
// it serves TLS, listens on loopback only, or clients reach it through a
// TLS-terminating proxy (an https:// --public-url).
func plainHTTPWarning(addr net.Addr, tls bool, publicURL string) string {
	if tls || strings.HasPrefix(strings.ToLower(publicURL), "https://") {
		return ""
	}
	host, _, err := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsLoopback() {
		return ""
	}
	return "serving plain HTTP on " + addr.String() + ", reachable from other hosts: API keys, delegate tokens and " +
		"task secrets cross the network in clear; serve HTTPS with --tls-cert and --tls-key, or put a TLS-terminating " +
		"proxy in front and set --public-url https://..."
}

type managerFlags struct {
	listen, data, db, publicURL, logLevel string
	// delegateImage is the image install specs name (--delegate-image,
	// else LEGATE_DELEGATE_IMAGE); "" = none.
	delegateImage string
	// masterKeyFile is the key file; "" means DATA/master.key.
	masterKeyFile string
	// lookupEnv reads LEGATE_MASTER_KEY; nil means os.LookupEnv. legate dev
	// passes its startup's lookup: it re-executed itself without the key in
	// its environment.
	lookupEnv func(string) (string, bool)
	heartbeat time.Duration
	// uiHintAfter is the web UI New delegate page's wait before it says
	// what to check (hidden flag, for tests; 0: the UI's default).
	uiHintAfter time.Duration
	// apiKeyTTL is how long a cached API key is trusted (legate manager only).
	apiKeyTTL time.Duration
	// HTTP server limits; zero values mean manager.Config's defaults.
	readTimeout, writeTimeout, idleTimeout time.Duration
	maxConnections                         int
	admissions                             int
	// TLS (legate manager only).
	tls transport.ServerFiles
	// pruneAfter: instances out of contact for longer are removed; 0 =
	// never (legate dev: 6h).
	pruneAfter time.Duration
	// auditRetention: audit records older are removed; 0 = never.
	auditRetention time.Duration
	// retention: finished tasks (with their logs) and pipeline runs older
	// are deleted; 0 = never (legate dev: 30 days).
	retention time.Duration
	// perHour and perDay are the default deployment limits of every
	// account, as the flags say them (0 = unlimited); nil = the manager's
	// defaults (legate dev).
	perHour, perDay *int
	// releaseDir holds the release binaries served to watchers; "" =
	// DATA/releases.
	releaseDir string
	// upgradeSoak is how long a ring runs a version before the next ring
	// is offered it; 0 = the manager's default.
	upgradeSoak time.Duration
	// listenFallback: when listen is taken, listen on a free port of the
	// same host instead (legate dev without --listen).
	listenFallback bool
}

// startManager opens the store, bootstraps the account and starts the
// manager; it returns when the manager is listening.
func startManager(ctx context.Context, f managerFlags, log *slog.Logger) (*manager.Manager, identity.Admin, net.Listener, *store.Store, error) {
	tlsConf, err := transport.ServerTLS(f.tls)
	if err != nil {
		return nil, identity.Admin{}, nil, nil, err
	}
	if tlsConf != nil && strings.HasPrefix(strings.ToLower(f.publicURL), "http://") {
		return nil, identity.Admin{}, nil, nil, fmt.Errorf("--public-url %s: the manager serves HTTPS (--tls-cert), so clients need an https:// URL", f.publicURL)
	}
	if err := os.MkdirAll(f.data, 0o700); err != nil {
		return nil, identity.Admin{}, nil, nil, fmt.Errorf("create data directory: %w", err)
	}
	lookup := f.lookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	image, err := delegateImage(f.delegateImage, lookup)
	if err != nil {
		return nil, identity.Admin{}, nil, nil, err
	}
	dsn := f.db
	if v, ok := lookup(envDB); ok && dsn == "" {
		dsn = strings.TrimSpace(v)
	}
	if dsn == "" {
		dsn = filepath.Join(f.data, "legate.db")
	}
	preset, _ := lookup(identity.EnvAdminAPIKey)
	preset = strings.TrimSpace(preset)
	if preset != "" {
		if err := identity.CheckPresetKey(preset); err != nil {
			return nil, identity.Admin{}, nil, nil, err
		}
	}
	keys, err := loadMasterKeys(lookup, keyFilePath(f.data, f.masterKeyFile), true)
	if err != nil {
		return nil, identity.Admin{}, nil, nil, err
	}
	if keys.file == "" && f.masterKeyFile != "" {
		log.Warn(seal.EnvMasterKey+" is set: --master-key-file is ignored", "file", f.masterKeyFile)
	}
	st, err := openManagerStore(ctx, dsn, keys, log)
	if err != nil {
		return nil, identity.Admin{}, nil, nil, fmt.Errorf("open store: %w", err)
	}
	ln, err := listen(f.listen, f.listenFallback, log)
	if err != nil {
		st.Close()
		return nil, identity.Admin{}, nil, nil, err
	}
	if tlsConf != nil {
		log.Info("serving HTTPS and WSS", "cert", f.tls.Cert, "client_certificates_required", f.tls.ClientCA != "")
	}
	if w := plainHTTPWarning(ln.Addr(), tlsConf != nil, f.publicURL); w != "" {
		log.Warn(w)
	}
	url := f.publicURL
	if url == "" {
		url = publicURL(ln.Addr(), tlsConf != nil)
	}
	admin, err := identity.BootstrapWithKey(ctx, st, f.data, url, preset, time.Now())
	if err != nil {
		ln.Close()
		st.Close()
		return nil, admin, nil, nil, err
	}
	prune := f.pruneAfter
	if prune == 0 {
		prune = -1 // never
	}
	retention := f.auditRetention
	if retention == 0 {
		retention = -1 // forever
	}
	taskRetention := f.retention
	if taskRetention == 0 {
		taskRetention = -1 // forever
	}
	limit := func(v *int) int {
		switch {
		case v == nil:
			return 0 // manager.Config's default
		case *v == 0:
			return -1 // unlimited
		}
		return *v
	}
	m, err := manager.New(ctx, st, manager.Config{
		HeartbeatInterval: f.heartbeat, APIKeyCacheTTL: f.apiKeyTTL, Version: buildVersion(), Logger: log, TLS: tlsConf, PublicURL: url, DelegateImage: image,
		ReadTimeout: f.readTimeout, WriteTimeout: f.writeTimeout, IdleTimeout: f.idleTimeout, MaxConnections: f.maxConnections, Admissions: f.admissions,
		PruneDelegatesAfter: prune, AuditRetention: retention, TaskRetention: taskRetention,
		DeploymentsPerHour: limit(f.perHour), DeploymentsPerDay: limit(f.perDay),
		ReleaseDir: releaseDir(ctx, f, log), UpgradeSoak: f.upgradeSoak, UINewDelegateHintAfter: f.uiHintAfter,
	})
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
start the manager creates an account and its first API key ("admin") and
writes them to DIR/admin.env (mode 0600), so the CLI is configured with:

  set -a; . DIR/admin.env; set +a

legate apikey creates more keys and revokes them. A start that finds a
revoked key (or none) in DIR/admin.env writes a new one there.
LEGATE_ADMIN_API_KEY=lgk_... presets that first key instead (at least 32
letters or digits after lgk_): every replica on one database then shares it,
it is created on the first start that sees it, and a start refuses to run
with it once it has been revoked.

LEGATE_DB is the database URL when --db is not given (a postgres:// DSN with
its password stays out of the process list).

Restarting on the same DIR keeps everything, a disabled user admin too (the
key in admin.env belongs to it): legate manager reset-admin gives it back.

Secrets at rest (task secret values, the delegates' session-signing key) are
sealed with a master key kept outside the database: DIR/master.key (mode
0600, created on first start; back it up apart from the database), or
LEGATE_MASTER_KEY (base64 or hex, 32 bytes), which wins when set and which
managers sharing one PostgreSQL database must share. See
legate manager rotate-key --help and docs/secrets-at-rest.md.

TLS: with --tls-cert and --tls-key the manager serves HTTPS and WSS only, and
admin.env gets an https:// LEGATE_URL (use --public-url when clients reach it
by a name other than the listen address). With --tls-client-ca every client,
delegates and the CLI alike, must show a certificate signed by that CA
(delegates: DELEGATE_CLIENT_CERTIFICATE_PATH and ..._KEY_PATH; the CLI:
LEGATE_CLIENT_CERT and LEGATE_CLIENT_KEY). Clients that do not trust the
manager's CA by default: delegates read WORKDIR/ca-bundle/ and
SHARED_CA_CERTS_PATH, the CLI reads LEGATE_CA_CERT. See docs/proxy-and-tls.md.`,
		Example: `  legate manager --listen :7460 --data /var/lib/legate
  legate manager --data /var/lib/legate --retention 2160h   # keep finished tasks 90 days
  legate manager --tls-cert /etc/legate/tls.crt --tls-key /etc/legate/tls.key \
    --public-url https://legate.example.com:7460`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runManager(cmd, f) },
	}
	f.register(cmd)
	cmd.AddCommand(newManagerKeyCmds()...)
	return cmd
}

// runManager starts the manager of the flags and serves until the
// command's context ends.
func runManager(cmd *cobra.Command, f managerFlags) error {
	log, err := newLogger(f.logLevel)
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	if f.apiKeyTTL <= 0 || f.apiKeyTTL > time.Hour {
		return fmt.Errorf("--api-key-cache-ttl %s: want more than 0 and at most 1h", f.apiKeyTTL)
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
	if admin.Replaced != "" {
		log.Warn(admin.Replaced+"; wrote a new API key to it", "key", admin.KeyName)
	}
	if off, err := identity.AdminDisabled(ctx, st, admin.AccountID); err == nil && off {
		log.Warn("the user admin is disabled, so the API key in "+admin.EnvFile+" is refused; another account admin can enable it "+
			"(legate user enable admin), or run legate manager reset-admin on this data directory", "key", admin.KeyName)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "legate manager at %s (account %s); CLI: set -a; . %s; set +a\n", admin.URL, admin.AccountID, admin.EnvFile)
	return m.Run(ctx, ln)
}

// register adds the manager's flags to cmd.
func (f *managerFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", ":7460", "address to listen on")
	fs.StringVar(&f.data, "data", "legate-data", "data directory (SQLite database, admin.env)")
	fs.StringVar(&f.db, "db", "", "database URL (default: $LEGATE_DB, else SQLite at DATA/legate.db); a postgres:// DSN is better given as LEGATE_DB, out of the process list")
	fs.StringVar(&f.publicURL, "public-url", "", "URL that clients and delegates use to reach this manager, written to admin.env and to install specs (default: from --listen)")
	fs.StringVar(&f.delegateImage, "delegate-image", "", "the image of legate you published for delegates (scripts/image --push), named by install specs (legate manifest, the web UI) (env "+manifest.EnvDelegateImage+")")
	fs.DurationVar(&f.heartbeat, "heartbeat-interval", 10*time.Second, "how often delegates heartbeat; 3 missed heartbeats disconnect a delegate")
	fs.DurationVar(&f.uiHintAfter, "ui-new-delegate-hint-after", 0, "how long the web UI's New delegate page waits for the delegate before it says what to check (default 2m)")
	_ = fs.MarkHidden("ui-new-delegate-hint-after")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.DurationVar(&f.apiKeyTTL, "api-key-cache-ttl", 5*time.Second, "how long a cached API key is trusted before it is read again; a revocation reaches the other managers on the database at once, this bounds it when that message is lost")
	fs.StringVar(&f.tls.Cert, "tls-cert", "", "PEM certificate (chain) to serve HTTPS and WSS with; needs --tls-key")
	fs.StringVar(&f.tls.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.tls.ClientCA, "tls-client-ca", "", "PEM CA file: require every client to show a certificate signed by it")
	fs.StringVar(&f.masterKeyFile, "master-key-file", "", "master key file sealing the secrets at rest (default: DATA/master.key); LEGATE_MASTER_KEY wins when set")
	fs.DurationVar(&f.readTimeout, "read-timeout", 30*time.Second, "a request body must arrive within this long after its headers, or the connection is closed")
	fs.DurationVar(&f.writeTimeout, "write-timeout", 60*time.Second, "a request must be answered within this long after its headers, plus --read-timeout when it has a body (streams: each write), or the connection is closed")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 120*time.Second, "close a keep-alive connection that carries no request for this long")
	fs.IntVar(&f.admissions, "admissions", 0, "registrations and WebSocket openings served at once; past it they are answered 503 with a Retry-After spread over the clients waiting (0 = 64; -1 = no limit, no hints)")
	fs.IntVar(&f.maxConnections, "max-connections", 0, "connections served at once; past it new ones wait and idle ones are closed (0 = from the descriptor limit, ulimit -n)")
	fs.DurationVar(&f.retention, "retention", 30*24*time.Hour, "delete finished tasks, their logs and finished pipeline runs older than this, in small batches; 0 = keep everything")
	fs.DurationVar(&f.auditRetention, "audit-retention", 90*24*time.Hour, "remove audit records older than this (legate audit list); 0 = keep them forever")
	f.perHour, f.perDay = new(int), new(int)
	fs.IntVar(f.perHour, "deployments-per-hour", 40, "default limit of deployments an account may start in any rolling hour (an account admin may set the account's own: legate limits set); 0 = unlimited")
	fs.IntVar(f.perDay, "deployments-per-day", 100, "default limit of deployments an account may start in any rolling 24 hours; 0 = unlimited")
	fs.DurationVar(&f.pruneAfter, "prune-delegates-after", defaultPruneAfter, "remove delegate instances out of contact (stopped, or silent) for longer than this; 0 = never")
	fs.DurationVar(&f.upgradeSoak, "upgrade-soak", 24*time.Hour, "how long every delegate of a ring (canary, early) must run the manager's version, with no failed upgrade, before the next ring is offered it")
	fs.StringVar(&f.releaseDir, "release-dir", "", "release binaries served to watchers, DIR/VERSION/legate-OS-ARCH with its .sig (legate release sign); the manager puts its own binary there (default: DATA/releases)")
}

// releaseDir is the manager's release directory (--release-dir, default
// DATA/releases), where it holds its own binary, unsigned until signed,
// and the legate-delegate of its build when that lies beside it.
func releaseDir(ctx context.Context, f managerFlags, log *slog.Logger) string {
	dir := f.releaseDir
	if dir == "" {
		dir = filepath.Join(f.data, "releases")
	}
	exe, err := os.Executable()
	if err != nil {
		log.Warn("cannot find this binary to hold it in the release directory", "err", err)
		return dir
	}
	hold := func(binary, src string) {
		held, err := release.HoldOwnBinary(dir, binary, buildVersion(), runtime.GOOS, runtime.GOARCH, src)
		switch {
		case err != nil:
			log.Warn("cannot hold "+binary+" in the release directory", "dir", dir, "err", err)
		case held != "":
			if _, err := os.Stat(held + ".sig"); err != nil {
				log.Info("this version's "+binary+" is served to watchers once signed: legate release sign --key KEY "+held, "dir", dir)
			}
		}
	}
	hold(release.BinaryLegate, exe)
	if lite, _, _ := delegateBinary(ctx, exe, ""); lite != "" {
		hold(release.BinaryDelegate, lite)
	}
	return dir
}

// defaultPruneAfter is how long a delegate instance out of contact is kept.
const defaultPruneAfter = 6 * time.Hour

// listen listens on addr. When fallback is set and addr is in use, it
// listens on a free port of the same host instead, and says so.
func listen(addr string, fallback bool, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if fallback && errors.Is(err, syscall.EADDRINUSE) {
		host, _, splitErr := net.SplitHostPort(addr)
		if splitErr == nil {
			if ln, err2 := net.Listen("tcp", net.JoinHostPort(host, "0")); err2 == nil {
				log.Warn(addr+" is in use (another legate?): listening on a free port instead; --listen chooses the address", "addr", ln.Addr().String())
				return ln, nil
			}
		}
	}
	return nil, fmt.Errorf("listen on %s: %w", addr, err)
}

// delegateImage is the manager's delegate image: the flag, else the
// environment, checked.
func delegateImage(flag string, lookup func(string) (string, bool)) (string, error) {
	image, from := strings.TrimSpace(flag), "--delegate-image"
	if v, ok := lookup(manifest.EnvDelegateImage); ok && image == "" {
		image, from = strings.TrimSpace(v), manifest.EnvDelegateImage
	}
	if image == "" {
		return "", nil
	}
	if err := manifest.CheckImage(image); err != nil {
		return "", fmt.Errorf("%s: %w", from, err)
	}
	return image, nil
}

// envDB is the database URL when --db is not given.
const envDB = "LEGATE_DB"

// maxHeartbeatInterval keeps the liveness window (3 intervals) and leases
// in a sane range.
const maxHeartbeatInterval = 10 * time.Minute

// check refuses flag values the manager cannot run with.
func (f managerFlags) check() error {
	if err := f.checkLiveness(); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--read-timeout", f.readTimeout}, {"--write-timeout", f.writeTimeout}, {"--idle-timeout", f.idleTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("%s %s: want a positive duration such as 30s", d.name, d.v)
		}
	}
	if f.admissions < -1 {
		return fmt.Errorf("--admissions %d: want a positive number, 0 (the default, 64) or -1 (no limit)", f.admissions)
	}
	if f.maxConnections < 0 {
		return fmt.Errorf("--max-connections %d: want 0 (from the descriptor limit) or a positive number", f.maxConnections)
	}
	if f.retention < 0 {
		return fmt.Errorf("--retention %s: use 0 (keep everything) or a positive duration such as 720h (30 days)", f.retention)
	}
	if f.auditRetention < 0 {
		return fmt.Errorf("--audit-retention %s: use 0 (forever) or a positive duration such as 2160h (90 days)", f.auditRetention)
	}
	for _, l := range []struct {
		name string
		v    *int
	}{{"--deployments-per-hour", f.perHour}, {"--deployments-per-day", f.perDay}} {
		if l.v != nil && *l.v < 0 {
			return fmt.Errorf("%s %d: use 0 (unlimited) or a positive number", l.name, *l.v)
		}
	}
	return nil
}

// checkLiveness checks the heartbeat interval and the pruning delay, the
// flags legate dev shares with legate manager.
func (f managerFlags) checkLiveness() error {
	if f.heartbeat < 100*time.Millisecond || f.heartbeat > maxHeartbeatInterval {
		return fmt.Errorf("--heartbeat-interval %s: use 100ms to %s", f.heartbeat, maxHeartbeatInterval)
	}
	if least := 2 * 3 * f.heartbeat; f.pruneAfter != 0 && f.pruneAfter < least {
		return fmt.Errorf("--prune-delegates-after %s: use 0 (never) or at least %s, twice the liveness window (3 heartbeat intervals)", f.pruneAfter, least)
	}
	return nil
}
