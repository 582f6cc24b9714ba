package cli

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

func (a *app) connectorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "connector",
		Aliases: []string{"connectors"},
		Short:   "Create, list, show and delete connectors",
		Long: `A connector is a named third-party endpoint (a cluster API, a registry, a
repository host) reached from the delegates' network. A task that uses one
(legate task run --connector NAME) inherits its selectors, unless the task
has its own, and needs its URL as a capability. The delegate that last
succeeded for a connector is tried first (LAST-SUCCESS).

A connector of type kubernetes is a cluster that deploy tasks reach with
its own credentials: its API server's URL, CA and the stored secret that
holds a ServiceAccount's token (see connector create).`,
		Example: `  legate connector create k8s-east --url https://k8s-east.internal:6443 --type kubernetes \
      --ca-file ca.crt --token-secret K8S_EAST_TOKEN --selector east
  legate connector list
  legate task run --type kubernetes --connector k8s-east --namespace web -f web.yaml`,
	}
	cmd.AddCommand(a.connectorCreateCmd(), a.connectorListCmd(), a.connectorGetCmd(), a.connectorDeleteCmd())
	return cmd
}

// printConnectors writes connectors as out asks, as a table by default.
func (a *app) printConnectors(w io.Writer, out *outputFlags, conns []protocol.Connector) error {
	if out.is(formatName) {
		names := make([]string, len(conns))
		for i, k := range conns {
			names[i] = k.Name
		}
		return printNames(w, names...)
	}
	wide := out.is(formatWide)
	header := []string{"NAME", "URL", "TYPE", "SELECTORS", "LAST-SUCCESS"}
	if wide {
		header = append(header, "TOKEN-SECRET", "CA", "USERNAME", "PASSWORD-SECRET", "CREATED", "CREATED-AT")
	}
	t := newTable(w, header...)
	for _, k := range conns {
		row := []string{k.Name, k.URL, k.Type, strings.Join(k.Selectors, ","), k.LastSuccessDelegate}
		if wide {
			row = append(row, k.TokenSecret, caSummary(k.CAPEM), k.Username, k.PasswordSecret, age(a.now(), k.CreatedAt), a.absTime(&k.CreatedAt))
		}
		t.row(row...)
	}
	return t.flush()
}

// caSummary names the certificates of a CA PEM: the subject of the first
// and its expiry, and how many more.
func caSummary(caPEM string) string {
	var certs []*x509.Certificate
	rest := []byte(caPEM)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
	if len(certs) == 0 {
		return ""
	}
	s := fmt.Sprintf("%s (until %s)", certs[0].Subject.CommonName, certs[0].NotAfter.UTC().Format("2006-01-02"))
	if len(certs) > 1 {
		s += fmt.Sprintf(" +%d", len(certs)-1)
	}
	return s
}

// checkConnectorURL accepts an absolute http:// or https:// URL with a
// host, as the manager does.
func checkConnectorURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return usagef("--url %q: want an http:// or https:// URL, e.g. https://k8s-east.internal:6443", raw)
	}
	return nil
}

// repeatFlag is a string flag that remembers every value it was given, so
// a command whose local --url shadows the global --url (the manager's) can
// tell when both were passed.
type repeatFlag struct{ vals []string }

func (f *repeatFlag) String() string {
	if len(f.vals) == 0 {
		return ""
	}
	return f.vals[len(f.vals)-1]
}

func (f *repeatFlag) Set(v string) error { f.vals = append(f.vals, v); return nil }
func (f *repeatFlag) Type() string       { return "string" }

// connectorURLNote explains the --url clash of connector create.
const connectorURLNote = "on connector create, --url is the connector's endpoint: set the manager URL with " + EnvURL

// connectorCreateLong is the help of connector create.
const connectorCreateLong = `Create the connector NAME for the endpoint URL (http://… or https://…).
Tasks that use it run only on delegates with all its selectors (unless they
set their own) that get an HTTP answer from URL. --type is a free
label such as docker-registry or git, except kubernetes and prometheus:

A kubernetes connector is a cluster that kubernetes tasks (and pipeline
steps) that name it deploy to with its credentials instead of the
delegate's own: --url is its API server (https://HOST[:PORT]), --ca-file
the PEM file of the CA that signs the server's certificate (a
kubeconfig's certificate-authority, a ServiceAccount's ca.crt; without it
the delegate's system roots), and --token-secret the name of the stored
secret (legate secret create) that holds the bearer token, such as a
ServiceAccount's. The token never leaves the secret store until a
delegate claims such a task: whoever runs one needs secret:access on it,
and the delegate masks it in the output. Such tasks need a delegate that
reaches the API server over TCP; other task types cannot use the
connector.

A prometheus connector is a verification provider that verify tasks (and
pipeline verify steps) that name it query: --url is the Prometheus
server's base URL (http:// or https://, a path if it is served under
one), --ca-file the PEM file of the CA that signs its certificate
(optional), and either --token-secret, the stored secret that holds a
bearer token, or --username and --password-secret, the stored secret that
holds the basic auth password (or neither). As for a cluster's token,
whoever runs such a task needs secret:access on the secret, and the
delegate masks it.

Here --url is the connector's endpoint, so the manager's URL comes from
` + EnvURL + ` only.`

func (a *app) connectorCreateCmd() *cobra.Command {
	var (
		out       outputFlags
		urlFlag   repeatFlag
		typ       string
		selectors []string
		caFile    string
		tokenSec  string
		user      string
		passSec   string
	)
	cmd := &cobra.Command{
		Use:   "create NAME --url URL [--selector S]... [--type T] [--ca-file F] [--token-secret SECRET | --username U --password-secret SECRET]",
		Short: "Create a connector",
		Long:  connectorCreateLong,
		Example: `  legate secret create K8S_EAST_TOKEN --from-file sa.token
  legate connector create k8s-east --url https://k8s-east.internal:6443 --type kubernetes \
      --ca-file ca.crt --token-secret K8S_EAST_TOKEN --selector east
  legate secret create PROM_PASSWORD --from-file prom.pass
  legate connector create prom --url https://prometheus.internal:9090 --type prometheus \
      --ca-file ca.crt --username reader --password-secret PROM_PASSWORD
  legate connector create vault --url https://vault.internal:8200 --selector prod,east`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if len(urlFlag.vals) > 1 {
				return usagef("--url given %d times (%s)", len(urlFlag.vals), connectorURLNote)
			}
			rawURL := strings.TrimSpace(urlFlag.String())
			if rawURL == "" {
				return usagef("connector create needs --url URL, the connector's endpoint")
			}
			if err := checkConnectorURL(rawURL); err != nil {
				return err
			}
			req := protocol.CreateConnectorRequest{Name: args[0], URL: rawURL, Type: strings.TrimSpace(typ),
				Selectors: protocol.NormalizeSelectors(selectors), TokenSecret: strings.TrimSpace(tokenSec),
				Username: strings.TrimSpace(user), PasswordSecret: strings.TrimSpace(passSec)}
			if caFile != "" {
				b, err := readBounded(caFile, protocol.MaxKubeCAPEMBytes)
				if err != nil {
					return usagef("--ca-file: %v", err)
				}
				req.CAPEM = string(b)
			}
			if req.Type == protocol.ConnectorKubernetes && req.TokenSecret == "" {
				return usagef("a kubernetes connector needs --token-secret SECRET, the stored secret that holds its token (legate secret create SECRET)")
			}
			if len(req.Selectors) == 0 {
				req.Selectors = nil
			}
			if a.getenv(EnvURL) == "" {
				return &ExitError{Code: ExitUsage, Msg: "legate: no manager URL (" + connectorURLNote + "; " + adminEnvHint + ")"}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			conn, err := c.CreateConnector(cmd.Context(), req)
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), conn)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Created connector %q for %s.\n", conn.Name, escape(conn.URL))
			return err
		}),
	}
	fl := cmd.Flags()
	fl.Var(&urlFlag, "url", "endpoint of the connector: an http:// or https:// URL (required; the manager URL comes from "+EnvURL+" here)")
	fl.StringVar(&typ, "type", "", "kind of endpoint, e.g. kubernetes or git (a label)")
	fl.StringSliceVar(&selectors, "selector", nil, "tasks that use the connector run only on delegates with this tag (repeatable)")
	fl.StringVar(&caFile, "ca-file", "", "kubernetes, prometheus: PEM file of the CA that signs the server's certificate")
	fl.StringVar(&tokenSec, "token-secret", "", "kubernetes, prometheus: name of the stored secret that holds the bearer token")
	fl.StringVar(&user, "username", "", "prometheus: basic auth user name (with --password-secret)")
	fl.StringVar(&passSec, "password-secret", "", "prometheus: name of the stored secret that holds the basic auth password")
	cmd.MarkFlagsMutuallyExclusive("token-secret", "username")
	cmd.MarkFlagsMutuallyExclusive("token-secret", "password-secret")
	cmd.MarkFlagsRequiredTogether("username", "password-secret")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

func (a *app) connectorListCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List connectors",
		Long: `List the account's connectors with their URL, type, selectors and the
delegate that last succeeded for each (LAST-SUCCESS, tried first).`,
		Example: `  legate connector list
  legate connector list -o wide
  legate connector list --json | jq -r '.connectors[].url'`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListConnectors(cmd.Context())
			if err != nil {
				return err
			}
			if list.Connectors == nil {
				list.Connectors = []protocol.Connector{}
			}
			w := cmd.OutOrStdout()
			if out.structured() {
				return out.print(w, list)
			}
			if len(list.Connectors) == 0 && !out.is(formatName) {
				fmt.Fprintln(cmd.ErrOrStderr(), "No connectors. Create one with: legate connector create NAME --url URL")
				return nil
			}
			return a.printConnectors(w, &out, list.Connectors)
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatWide, formatName)
	return cmd
}

func (a *app) connectorGetCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:               "get NAME",
		ValidArgsFunction: a.complete(connectorsLister),
		Short:             "Show one connector",
		Long: `Show the connector NAME: URL, type, selectors and the delegate that last succeeded for it;
for a kubernetes connector also the stored secret that holds its token (never the token) and its CA.`,
		Example: `  legate connector get k8s-east
  legate connector get k8s-east -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			conn, err := c.GetConnector(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), conn)
			}
			if err := a.printConnectors(cmd.OutOrStdout(), &out, []protocol.Connector{conn}); err != nil || out.is(formatName) ||
				(conn.TokenSecret == "" && conn.Type != protocol.ProviderPrometheus) {
				return err
			}
			// A cluster's or a provider's credentials: where its secrets
			// are (never their values) and whose CA it trusts.
			ca := caSummary(conn.CAPEM)
			if ca == "" {
				ca = "the delegate's system roots"
			}
			w := cmd.OutOrStdout()
			fmt.Fprintln(w)
			if conn.TokenSecret != "" {
				fmt.Fprintf(w, "Token secret:  %s (a stored secret; legate secret get %s)\n", escape(conn.TokenSecret), escape(conn.TokenSecret))
			}
			if conn.PasswordSecret != "" {
				fmt.Fprintf(w, "Username:      %s\nPassword:      secret %s (a stored secret; legate secret get %s)\n",
					escape(conn.Username), escape(conn.PasswordSecret), escape(conn.PasswordSecret))
			}
			_, err = fmt.Fprintf(w, "CA:            %s\n", escape(ca))
			return err
		}),
	}
	out.add(cmd, formatJSON, formatYAML, formatWide, formatName)
	return cmd
}

func (a *app) connectorDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "delete NAME",
		ValidArgsFunction: a.complete(connectorsLister),
		Short:             "Delete a connector",
		Long:              `Delete the connector NAME. Tasks already submitted keep what they inherited from it.`,
		Example:           `  legate connector delete k8s-east`,
		Args:              cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteConnector(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted connector %q.\n", args[0])
			return err
		}),
	}
	return cmd
}

// capabilityForms names the accepted --capability forms.
const capabilityForms = "http://URL, https://URL, tcp://HOST:PORT or binary:NAME"

// parseCapability checks one capability criteria and returns it trimmed.
// Accepted: "http://…" or "https://…" with a host, "tcp://HOST:PORT" with a
// port from 1 to 65535, and "binary:NAME" with a NAME without '/' or spaces.
func parseCapability(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	switch {
	case strings.HasPrefix(s, "http://"), strings.HasPrefix(s, "https://"):
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || u.Hostname() == "" {
			return "", fmt.Errorf("%q: an HTTP capability needs a URL with a host, e.g. https://git.internal/health", raw)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return "", fmt.Errorf("%q: port %s: want 1-65535", raw, p)
			}
		}
		return s, nil
	case strings.HasPrefix(s, "tcp://"):
		hostport := strings.TrimPrefix(s, "tcp://")
		host, port, err := net.SplitHostPort(hostport)
		if err != nil || host == "" || strings.ContainsAny(host, "/?#@ \t") {
			return "", fmt.Errorf("%q: a TCP capability is tcp://HOST:PORT, e.g. tcp://db.internal:5432", raw)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q: port %q: want 1-65535", raw, port)
		}
		return s, nil
	case strings.HasPrefix(s, "binary:"):
		name := strings.TrimPrefix(s, "binary:")
		if name == "" || strings.IndexFunc(name, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return "", fmt.Errorf("%q: a binary capability is binary:NAME, a program name without '/' or spaces, e.g. binary:kubectl", raw)
		}
		return s, nil
	}
	return "", fmt.Errorf("%q: want %s", raw, capabilityForms)
}

// readBounded reads a file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}
