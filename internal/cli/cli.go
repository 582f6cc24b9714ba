// Package cli holds legate's admin commands (cobra), one file per noun:
// orgs and projects, delegate tokens, API keys, users, groups, roles and
// bindings (access.go), delegates, connectors, configurations, stored
// secrets, tasks (run, logs, containers), pipelines, runs, webhooks,
// deployments, the audit log, manifests, releases and upgrades, sign-in
// and the web UI link; with the output formats they share (table, wide,
// name, JSON, YAML), shell completion and following a task's output. The
// commands talk to a manager only through internal/client, write to the
// command's output streams (so tests capture them) and report process
// exit codes as *ExitError values for main to act on. Stored data they
// print as text goes through escape, so it cannot drive the terminal.
package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/transport"
)

// Environment variables read when the matching flag is not given.
const (
	EnvURL    = "LEGATE_URL"
	EnvAPIKey = "LEGATE_API_KEY"
	// EnvCACert is a PEM file of CAs trusted besides the system roots,
	// for a manager with a private or self-signed certificate.
	EnvCACert = "LEGATE_CA_CERT"
	// EnvClientCert and EnvClientKey are the client certificate shown to a
	// manager started with --tls-client-ca.
	EnvClientCert = "LEGATE_CLIENT_CERT"
	EnvClientKey  = "LEGATE_CLIENT_KEY"
)

// Exit codes of `legate task run` besides the task's own exit code.
const (
	ExitFailure     = 1   // failed without an exit code, or a runtime error
	ExitUsage       = 2   // bad flags or missing configuration
	ExitNotAssigned = 3   // no delegate took the task in time
	ExitTimedOut    = 124 // like timeout(1)
	ExitInterrupted = 130 // cancelled task, or Ctrl-C while following
)

// ExitError asks main to exit with Code. A command returns it when the
// process's exit status carries meaning (a task's exit code, a failure that
// was already explained on stderr). Msg is printed by main when not empty;
// the commands of this package print their messages themselves and leave
// Msg empty.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// usageError is a bad flag or argument: returned to cobra as an ordinary
// error (main exits 2 and cobra shows the usage).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// app holds the values shared by the commands of one root command.
type app struct {
	url    string // --url
	apiKey string // --api-key
	caCert string // --ca-cert

	getenv     func(string) string
	now        func() time.Time
	loc        *time.Location // for absolute times
	httpClient *http.Client   // nil = the client package's default
	build      BuildInfo      // what legate version prints

	// queueNoticeAfter and explainEvery pace task run's notices about a
	// queued task (0 = defaultQueueNoticeAfter, defaultExplainEvery).
	queueNoticeAfter time.Duration
	explainEvery     time.Duration
}

// AddCommands adds the admin commands (org, project, token, apikey,
// delegates, connector, configuration, task, version) and the persistent
// flags --url, --api-key and --ca-cert to root, which fall back to
// LEGATE_URL, LEGATE_API_KEY and LEGATE_CA_CERT. It also gives root its
// --version flag, which prints build as `legate version --client` does.
func AddCommands(root *cobra.Command, build BuildInfo) {
	addCommands(root, &app{getenv: os.Getenv, now: time.Now, loc: time.Local, build: build})
}

func addCommands(root *cobra.Command, a *app) {
	if a.build.Version != "" {
		root.Version = a.build.Version
		root.SetVersionTemplate(versionTemplate(a.build.String()))
		root.Flags().BoolP("version", "v", false, "print the version, the commit and the Go version (as legate version --client)")
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", "", "manager URL, e.g. http://127.0.0.1:7460 or https://legate.example.com (env "+EnvURL+"; HOST:PORT means http://HOST:PORT)")
	pf.StringVar(&a.apiKey, "api-key", "", "admin API key (env "+EnvAPIKey+")")
	pf.StringVar(&a.caCert, "ca-cert", "", "PEM file of the CA that signed the manager's certificate, trusted besides the system roots (env "+EnvCACert+")")
	root.AddCommand(a.orgCmd(), a.projectCmd(), a.tokenCmd(), a.auditCmd(), a.apikeyCmd(), a.delegatesCmd(), a.connectorCmd(), a.configurationCmd(), a.secretCmd(), a.taskCmd(), a.deploymentsCmd(), a.limitsCmd(), a.pipelineCmd(), a.runCmd(), a.manifestCmd(), a.versionCmd(), a.releaseCmd(),
		a.userCmd(), a.groupCmd(), a.roleCmd(), a.whoamiCmd(), a.loginCmd(), a.logoutCmd(), a.uiCmd())
	for _, c := range root.Commands() {
		switch c.Name() {
		case "user", "group", "role", "whoami", "login", "logout":
			fillHelp(c)
		}
	}
	a.completeFlags(root)
}

// adminEnvHint says where a local manager's settings are.
const adminEnvHint = "a local manager writes both to DATA/admin.env: set -a; . DATA/admin.env; set +a"

// client returns a client for the configured manager and API key.
func (a *app) client() (*client.Client, error) {
	u, from := a.url, "--url"
	if u == "" {
		u, from = a.getenv(EnvURL), EnvURL
	}
	key := a.apiKey
	if key == "" {
		key = a.getenv(EnvAPIKey)
	}
	// What legate login stored, when neither flags nor the environment
	// say (they win). Its key goes only to the manager it was made for.
	var stored loginConfig
	if u == "" || key == "" {
		var err error
		if stored, err = a.storedLogin(); err != nil {
			return nil, &ExitError{Code: ExitUsage, Msg: "legate: " + err.Error()}
		}
	}
	if u == "" && stored.URL != "" {
		u, from = stored.URL, "the config of legate login"
	}
	if u == "" {
		return nil, &ExitError{Code: ExitUsage, Msg: "legate: no manager URL: set " + EnvURL + " or pass --url, or sign in with legate login (" + adminEnvHint + ")"}
	}
	base, err := client.ParseManagerURL(u)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Msg: "legate: " + from + ": " + err.Error()}
	}
	if key == "" && stored.APIKey != "" {
		if stored.URL != base {
			return nil, &ExitError{Code: ExitUsage, Msg: "legate: no API key for " + base + ": the key legate login stored is for " +
				stored.URL + "; set " + EnvAPIKey + " or pass --api-key, or sign in to " + base + " with legate login"}
		}
		key = stored.APIKey
	}
	if key == "" {
		return nil, &ExitError{Code: ExitUsage, Msg: "legate: no API key: set " + EnvAPIKey + " or pass --api-key, or sign in with legate login (" + adminEnvHint + ")"}
	}
	hc := a.httpClient
	if hc == nil {
		ca, caFrom := a.caCert, "--ca-cert"
		if ca == "" {
			ca, caFrom = a.getenv(EnvCACert), EnvCACert
		}
		hc, err = transport.ForCLI(transport.CLIFiles{CA: ca, Cert: a.getenv(EnvClientCert), Key: a.getenv(EnvClientKey)}, transport.Hints{
			AddCA:      "set " + EnvCACert + " (or --ca-cert) to the PEM file of the CA that signed the manager's certificate",
			ClientCert: "set " + EnvClientCert + " and " + EnvClientKey + " to a certificate signed by the manager's --tls-client-ca and its key",
		})
		if err != nil {
			if ca != "" {
				err = fmt.Errorf("%s=%s: %w", caFrom, ca, err)
			}
			return nil, &ExitError{Code: ExitUsage, Msg: "legate: " + err.Error()}
		}
	}
	c, err := client.New(base, hc)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Msg: "legate: " + err.Error() + " (check " + EnvURL + " or --url)"}
	}
	c.SetSecret(key)
	return c, nil
}

// run adapts a command body to cobra. Usage errors go back to cobra as
// they are; everything else is explained on stderr in one line and turned
// into an *ExitError (with an empty Msg: it was printed), with cobra's own
// error and usage printing switched off for it.
func (a *app) run(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		if err == nil {
			return nil
		}
		var ue usageError
		if errors.As(err, &ue) {
			return err
		}
		cmd.SilenceErrors = true
		cmd.SilenceUsage = true
		stderr := cmd.ErrOrStderr()
		var ee *ExitError
		switch {
		case errors.As(err, &ee):
			if ee.Msg != "" {
				fmt.Fprintln(stderr, escapeLines(ee.Msg))
			}
			return &ExitError{Code: ee.Code}
		case errors.Is(err, context.Canceled) && cmd.Context().Err() != nil:
			fmt.Fprintln(stderr, "legate: interrupted")
			return &ExitError{Code: ExitInterrupted}
		}
		// The manager's messages may quote stored data.
		fmt.Fprintln(stderr, "legate: "+escapeLines(plainNetError(err))+a.hint(err))
		return &ExitError{Code: ExitFailure}
	}
}

// hint suggests a fix for common runtime errors.
func (a *app) hint(err error) string {
	var nm *client.NotManagerError
	if errors.As(err, &nm) {
		if nm.Manager {
			return "; check the path of " + EnvURL + " or --url"
		}
		return ": check " + EnvURL + " or --url"
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if pe.Code == protocol.CodeUnauthenticated || pe.Code == protocol.CodeAPIKeyRevoked {
			return " (check " + EnvAPIKey + " or --api-key, or sign in again with legate login)"
		}
		return ""
	}
	var ce *transport.CertError
	if errors.As(err, &ce) {
		return "" // it says how to fix it
	}
	if errors.Is(err, context.DeadlineExceeded) || isNetError(err) {
		return "; is the manager running? check " + EnvURL + " or --url"
	}
	return ""
}

// plainNetError is err's text with a failed request to the manager said
// plainly: "manager at http://HOST:PORT unreachable (connection refused)"
// instead of Go's `Post "http://HOST:PORT/api/v1/tasks": dial tcp HOST:PORT:
// connect: connection refused`.
func plainNetError(err error) string {
	var ue *url.Error
	var ce *transport.CertError
	reason, ok := netReason(err)
	if !ok || reason == "network error" || !errors.As(err, &ue) || errors.As(err, &ce) {
		return err.Error()
	}
	where := "the manager"
	if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
		where = "manager at " + u.Scheme + "://" + u.Host
	}
	return strings.Replace(err.Error(), ue.Error(), where+" unreachable ("+reason+")", 1)
}
