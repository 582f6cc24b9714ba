// Package client is the typed Go client of the legate manager's HTTP API,
// for the delegate, the CLI, the web UI (in-process) and legate bench. It
// holds the delegate's calls (register, session refresh, poll, heartbeat,
// acquire, started, logs and log frames, result, capability and
// configuration reports, deregister); the admin calls (tokens, API keys,
// manifests, delegates and their approval, audit, orgs, projects,
// connectors, configurations, secrets, tasks and their explanations,
// pipelines, runs, webhooks, deployments and limits, sign-in links, and
// Admin for a route without a method of its own); followed output
// (stream.go); upgrade policies, the watcher's upgrade check and release
// downloads (upgrade.go); and ParseManagerURL (url.go). Every request
// carries the protocol version header and, when a secret is set,
// "Authorization: Bearer <secret>". Error answers of the manager are
// returned as wrapped *protocol.Error values, so callers decide with
// errors.As and Code.Recoverable.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// MaxBodyBytes bounds every answer body (and every log stream line) the
// client reads.
const MaxBodyBytes = 16 << 20

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// DefaultRequestTimeout bounds one ordinary API call. Long polls get this
// much on top of their wait; log streams are bounded by their context only
// (and by an idle watchdog, see StreamLogs).
const DefaultRequestTimeout = 30 * time.Second

// Client talks to one manager. It is safe for concurrent use.
type Client struct {
	base string // scheme://host[/prefix], escaped, no trailing slash
	hc   *http.Client

	// timeout bounds ordinary calls; streamIdle is how long a log stream
	// may stay silent (not even a keep-alive line) before it is reopened;
	// backoffMin and backoffMax bound the stream's reconnect delays. Tests
	// of this package shorten them.
	timeout    time.Duration
	streamIdle time.Duration
	backoffMin time.Duration
	backoffMax time.Duration

	mu     sync.Mutex
	secret string
}

// New returns a client for the manager at baseURL ("http://host:port" or
// "https://host/prefix"; a path prefix is kept). A nil httpClient means a
// default one with connect and TLS handshake timeouts, proxy settings from
// the environment and no overall timeout (which would cut long polls and log
// streams); each call bounds itself with its own context.
func New(baseURL string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("manager URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("manager URL %q must start with http:// or https://", baseURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("manager URL %q has no host", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("manager URL %q must not have credentials, a query or a fragment", baseURL)
	}
	if httpClient == nil {
		httpClient = defaultHTTPClient()
	}
	base := u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")
	return &Client{
		base:       base,
		hc:         httpClient,
		timeout:    DefaultRequestTimeout,
		streamIdle: 2 * time.Minute,
		backoffMin: 200 * time.Millisecond,
		backoffMax: 5 * time.Second,
	}, nil
}

func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSHandshakeTimeout = 10 * time.Second
	t.MaxIdleConnsPerHost = 16
	t.ResponseHeaderTimeout = 0 // long polls answer late by design
	return &http.Client{Transport: t}
}

// BaseURL returns the manager URL the client talks to, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// SetSecret sets the credential sent as "Authorization: Bearer <secret>":
// an API key for admin calls, a delegate session for delegate calls. An
// empty secret sends no Authorization header. Safe for concurrent use.
func (c *Client) SetSecret(secret string) {
	c.mu.Lock()
	c.secret = secret
	c.mu.Unlock()
}

func (c *Client) getSecret() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.secret
}

// call describes one request.
type call struct {
	op     string // for error messages, e.g. "create token"
	method string
	path   string // escaped, starting with "/"
	query  url.Values
	in     any // JSON body; nil = none
	// raw is a body other than JSON, of type rawType (when in is nil).
	raw     []byte
	rawType string
	out     any     // decoded from a 2xx answer; nil = discarded
	text    *string // set to a 2xx answer's body as it is (instead of out)
	noAuth  bool
	timeout time.Duration // 0 = c.timeout; <0 = none (context only)
	accept  string
	header  http.Header // added to the request's headers
}

// newRequest builds the HTTP request of a call.
func (c *Client) newRequest(ctx context.Context, k *call) (*http.Request, error) {
	u := c.base + k.path
	if len(k.query) > 0 {
		u += "?" + k.query.Encode()
	}
	var body io.Reader
	if k.in != nil {
		b, err := json.Marshal(k.in)
		if err != nil {
			return nil, fmt.Errorf("%s: encode request: %w", k.op, err)
		}
		body = bytes.NewReader(b)
	} else if k.raw != nil {
		body = bytes.NewReader(k.raw)
	}
	req, err := http.NewRequestWithContext(ctx, k.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.op, err)
	}
	req.Header.Set(protocol.HeaderProtocolVersion, strconv.Itoa(protocol.Version))
	if k.in != nil {
		req.Header.Set("Content-Type", "application/json")
	} else if k.raw != nil {
		req.Header.Set("Content-Type", k.rawType)
	}
	accept := k.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "legate-client/"+strconv.Itoa(protocol.Version))
	if !k.noAuth {
		if s := c.getSecret(); s != "" {
			req.Header.Set("Authorization", "Bearer "+s)
		}
	}
	for name, vs := range k.header {
		req.Header[name] = vs
	}
	return req, nil
}

// do performs a call and decodes its answer.
func (c *Client) do(ctx context.Context, k *call) error {
	timeout := k.timeout
	if timeout == 0 {
		timeout = c.timeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, k)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", k.op, err)
	}
	defer closeBody(resp.Body)
	if err := c.checkStatus(resp); err != nil {
		return fmt.Errorf("%s: %w", k.op, err)
	}
	if (k.out == nil && k.text == nil) || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("%s: read answer: %w", k.op, err)
	}
	if len(b) > MaxBodyBytes {
		return fmt.Errorf("%s: answer larger than %d bytes", k.op, MaxBodyBytes)
	}
	if k.text != nil {
		*k.text = string(b)
		return nil
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil // an empty 2xx answer leaves out at its zero value
	}
	if err := json.Unmarshal(b, k.out); err != nil {
		if notAPI(resp) {
			return fmt.Errorf("%s: %w", k.op, c.notManager(resp))
		}
		return fmt.Errorf("%s: decode answer (HTTP %d): %w", k.op, resp.StatusCode, err)
	}
	return nil
}

// checkStatus turns a non-2xx answer into a *protocol.Error, wrapped in
// a *NotManagerError when the answer did not come from a manager.
func (c *Client) checkStatus(resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	b = bytes.TrimSpace(b)
	pe := protocol.DecodeError(resp.StatusCode, b)
	pe.RetryAfter = protocol.ParseRetryAfter(resp.Header.Get("Retry-After"))
	var eb protocol.ErrorBody
	if notAPI(resp) && (json.Unmarshal(b, &eb) != nil || eb.Error.Code == "") {
		e := c.notManager(resp)
		// The code stays what the status means (a 502 is still worth a
		// retry: the proxy's manager may come back); the page is dropped.
		pe.Message = e.Error()
		e.err = pe
		return e
	}
	return pe
}

// NotManagerError is an answer that did not come from a legate manager's
// API: without the Legate-Protocol-Version header every manager answer
// carries, or an HTML page (the web UI's, for a path under the manager
// that is not the API), and not the API's JSON — a web server's or a
// proxy's page, say, because the URL names something else. It says so in
// one line, with the status and the content type, never the page itself.
// It wraps the *protocol.Error the status maps to (nil for a 2xx answer),
// so codes and retries work as for any error answer.
type NotManagerError struct {
	URL         string // the manager URL the client was given
	Status      int
	ContentType string // the media type, without parameters; "" when none
	// Manager: the answer carried the manager's header (a manager answered,
	// at a path that is not its API: the URL's path is wrong).
	Manager bool
	err     *protocol.Error
}

func (e *NotManagerError) Error() string {
	ct := e.ContentType
	if ct == "" {
		ct = "no content type"
	}
	if e.Manager {
		return fmt.Sprintf("%s does not look like a legate manager's API (HTTP %d, %s): a manager answered", e.URL, e.Status, ct)
	}
	msg := fmt.Sprintf("%s does not look like a legate manager (HTTP %d, %s)", e.URL, e.Status, ct)
	if e.Status >= 500 {
		msg += "; or a proxy in front of it answered for a manager that is down"
	}
	return msg
}

// Unwrap returns the *protocol.Error of the status.
func (e *NotManagerError) Unwrap() error {
	if e.err == nil {
		return nil
	}
	return e.err
}

// fromManager reports whether resp carries the manager's protocol header.
func fromManager(resp *http.Response) bool {
	return resp.Header.Get(protocol.HeaderProtocolVersion) != ""
}

// mediaType is resp's content type without parameters, "" when none.
func mediaType(resp *http.Response) string {
	ct, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return ct
}

// notAPI reports whether resp may come from something other than the
// manager's API: it lacks the manager's header, or it is an HTML page
// (the API never answers one).
func notAPI(resp *http.Response) bool {
	return !fromManager(resp) || mediaType(resp) == "text/html"
}

func (c *Client) notManager(resp *http.Response) *NotManagerError {
	return &NotManagerError{URL: c.base, Status: resp.StatusCode, ContentType: mediaType(resp), Manager: fromManager(resp)}
}

// closeBody drains a little of the body so the connection can be reused,
// then closes it.
func closeBody(rc io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, 64<<10))
	_ = rc.Close()
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// requireID refuses an empty path parameter before it turns into a
// request for a different endpoint.
func requireID(op, what, v string) error {
	if v == "" {
		return fmt.Errorf("%s: empty %s", op, what)
	}
	return nil
}

// IsCode reports whether err is (or wraps) a *protocol.Error with code.
func IsCode(err error, code protocol.Code) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == code
}

// ---------------------------------------------------------------------------
// Admin API (secret = API key)

// Health checks that the manager answers on its health endpoint.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, &call{op: "health check", method: http.MethodGet, path: protocol.PathHealth, noAuth: true})
}

// WhoAmI returns the account the API key belongs to.
func (c *Client) WhoAmI(ctx context.Context) (protocol.WhoAmI, error) {
	var out protocol.WhoAmI
	err := c.do(ctx, &call{op: "who am I", method: http.MethodGet, path: protocol.PathWhoAmI, out: &out})
	return out, err
}

// CreateToken creates an account-level delegate token; the answer carries
// its value, which the manager never shows again.
func (c *Client) CreateToken(ctx context.Context, name string) (protocol.Token, error) {
	return c.CreateScopedToken(ctx, protocol.CreateTokenRequest{Name: name})
}

// CreateScopedToken creates a delegate token at account level (no Org), org
// level (Org) or project level (Org and Project); delegates that register
// with it get that scope. A Project without an Org is refused before any
// request is sent.
func (c *Client) CreateScopedToken(ctx context.Context, req protocol.CreateTokenRequest) (protocol.Token, error) {
	const op = "create token"
	if req.Project != "" && req.Org == "" {
		return protocol.Token{}, fmt.Errorf("%s: project %q needs an org", op, req.Project)
	}
	var out protocol.Token
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathTokens, in: req, out: &out})
	return out, err
}

// Manifest generates the install manifest of a delegate (the manager's
// internal/manifest generator, for the API key's account) and returns its
// text.
func (c *Client) Manifest(ctx context.Context, req protocol.ManifestRequest) (string, error) {
	var out string
	err := c.do(ctx, &call{op: "manifest", method: http.MethodPost, path: protocol.PathManifests, in: req, text: &out, accept: "text/plain"})
	return out, err
}

// ListTokens lists the account's delegate tokens (without values).
func (c *Client) ListTokens(ctx context.Context) (protocol.TokenList, error) {
	var out protocol.TokenList
	err := c.do(ctx, &call{op: "list tokens", method: http.MethodGet, path: protocol.PathTokens, out: &out})
	return out, err
}

// RevokeToken revokes a delegate token; delegates that use it are disconnected.
func (c *Client) RevokeToken(ctx context.Context, name string) (protocol.Token, error) {
	const op = "revoke token"
	if err := requireID(op, "token name", name); err != nil {
		return protocol.Token{}, err
	}
	var out protocol.Token
	err := c.do(ctx, &call{op: op, method: http.MethodPost,
		path: protocol.PathTokens + "/" + seg(name) + "/revoke", out: &out})
	return out, err
}

// CreateAPIKey creates an API key for the caller; the answer carries its
// value, which the manager never shows again.
func (c *Client) CreateAPIKey(ctx context.Context, name string) (protocol.APIKey, error) {
	return c.CreateAPIKeyFor(ctx, name, "")
}

// CreateAPIKeyFor creates an API key owned by the user or service account
// owner ("" for the caller), which acts with its owner's roles. A key for
// another principal needs user:manage at account scope.
func (c *Client) CreateAPIKeyFor(ctx context.Context, name, owner string) (protocol.APIKey, error) {
	var out protocol.APIKey
	err := c.do(ctx, &call{op: "create API key", method: http.MethodPost, path: protocol.PathAPIKeys,
		in: protocol.CreateAPIKeyRequest{Name: name, Owner: owner}, out: &out})
	return out, err
}

// ListAPIKeys lists the account's API keys (without values), revoked ones
// included; Current marks the key the client uses.
func (c *Client) ListAPIKeys(ctx context.Context) (protocol.APIKeyList, error) {
	var out protocol.APIKeyList
	err := c.do(ctx, &call{op: "list API keys", method: http.MethodGet, path: protocol.PathAPIKeys, out: &out})
	return out, err
}

// RevokeAPIKey revokes an API key at once, on every manager. The account's
// last active key is revoked only with force (the manager answers
// conflict otherwise).
func (c *Client) RevokeAPIKey(ctx context.Context, name string, force bool) (protocol.APIKey, error) {
	const op = "revoke API key"
	if err := requireID(op, "API key name", name); err != nil {
		return protocol.APIKey{}, err
	}
	var out protocol.APIKey
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathAPIKeys + "/" + seg(name) + "/revoke",
		in: protocol.RevokeAPIKeyRequest{Force: force}, out: &out})
	return out, err
}

// ListDelegates lists the account's delegate instances.
func (c *Client) ListDelegates(ctx context.Context) (protocol.DelegateList, error) {
	var out protocol.DelegateList
	err := c.do(ctx, &call{op: "list delegates", method: http.MethodGet, path: protocol.PathDelegates, out: &out})
	return out, err
}

// ListAllDelegates lists the account's delegate instances, those that
// stopped and deregistered included (status "deregistered").
func (c *Client) ListAllDelegates(ctx context.Context) (protocol.DelegateList, error) {
	var out protocol.DelegateList
	err := c.do(ctx, &call{op: "list delegates", method: http.MethodGet, path: protocol.PathDelegates,
		query: url.Values{protocol.QueryAll: {"true"}}, out: &out})
	return out, err
}

// ListDelegatesPage lists the delegate instances q selects: with a
// Limit, a page of whole delegate groups in name order whose Next, when
// set, is the Page of the next one. A manager that predates delegate
// listings by page ignores the paging and filters and answers every
// instance.
func (c *Client) ListDelegatesPage(ctx context.Context, q protocol.DelegateQuery) (protocol.DelegateList, error) {
	var out protocol.DelegateList
	err := c.do(ctx, &call{op: "list delegates", method: http.MethodGet, path: protocol.PathDelegates, query: q.Values(), out: &out})
	return out, err
}

// DeleteDelegate removes every instance of the delegate called name. The
// manager answers conflict while one of them is connected or runs a task,
// and not_found when no instance has that name.
func (c *Client) DeleteDelegate(ctx context.Context, name string) (protocol.DeletedDelegate, error) {
	const op = "delete delegate"
	if err := requireID(op, "delegate name", name); err != nil {
		return protocol.DeletedDelegate{}, err
	}
	var out protocol.DeletedDelegate
	err := c.do(ctx, &call{op: op, method: http.MethodDelete, path: protocol.PathDelegates + "/" + seg(name), out: &out})
	return out, err
}

// ApproveDelegate approves the delegate called name (every instance of
// it, and the replicas that register later with its token).
func (c *Client) ApproveDelegate(ctx context.Context, name string) (protocol.ApprovalAnswer, error) {
	return c.decide(ctx, "approve", name)
}

// RejectDelegate rejects the delegate called name: its instances are
// refused at their next call and stop.
func (c *Client) RejectDelegate(ctx context.Context, name string) (protocol.ApprovalAnswer, error) {
	return c.decide(ctx, "reject", name)
}

func (c *Client) decide(ctx context.Context, verb, name string) (protocol.ApprovalAnswer, error) {
	op := verb + " delegate"
	if err := requireID(op, "delegate name", name); err != nil {
		return protocol.ApprovalAnswer{}, err
	}
	var out protocol.ApprovalAnswer
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathDelegates + "/" + seg(name) + "/" + verb, out: &out})
	return out, err
}

// AuditQuery selects a page of the audit log; zero fields select
// everything (the manager's default page size).
type AuditQuery struct {
	// Since is a time (RFC 3339) or a duration back from now (24h, 7d).
	Since string
	// User is the name of a user or service account.
	User string
	// Resource is TYPE or TYPE/NAME (token, token/ci).
	Resource string
	// Action is an action (task.cancel), or the start of actions when it
	// ends with "." or "*" (task.).
	Action string
	Limit  int
	// After is the Next of the previous page.
	After string
}

// ListAudit returns a page of the audit log, newest first.
func (c *Client) ListAudit(ctx context.Context, q AuditQuery) (protocol.AuditList, error) {
	v := url.Values{}
	for k, s := range map[string]string{"since": q.Since, "user": q.User, "resource": q.Resource, "action": q.Action, "after": q.After} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out protocol.AuditList
	err := c.do(ctx, &call{op: "list the audit log", method: http.MethodGet, path: protocol.PathAudit, query: v, out: &out})
	return out, err
}

// DescribeDelegate returns every instance of the delegate called name, with
// its capability allowlist and deny list. The manager answers not_found when
// no instance has that name.
func (c *Client) DescribeDelegate(ctx context.Context, name string) (protocol.DelegateDetails, error) {
	const op = "describe delegate"
	if err := requireID(op, "delegate name", name); err != nil {
		return protocol.DelegateDetails{}, err
	}
	var out protocol.DelegateDetails
	err := c.do(ctx, &call{op: op, method: http.MethodGet, path: protocol.PathDelegates + "/" + seg(name), out: &out})
	return out, err
}

// CreateOrg creates an organization in the account.
func (c *Client) CreateOrg(ctx context.Context, name string) (protocol.Org, error) {
	const op = "create org"
	if err := requireID(op, "org name", name); err != nil {
		return protocol.Org{}, err
	}
	var out protocol.Org
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathOrgs,
		in: protocol.CreateOrgRequest{Name: name}, out: &out})
	return out, err
}

// ListOrgs lists the account's organizations.
func (c *Client) ListOrgs(ctx context.Context) (protocol.OrgList, error) {
	var out protocol.OrgList
	err := c.do(ctx, &call{op: "list orgs", method: http.MethodGet, path: protocol.PathOrgs, out: &out})
	return out, err
}

// DeleteOrg deletes an organization. The manager refuses (conflict) while
// projects, tokens, delegates or tasks still use it.
func (c *Client) DeleteOrg(ctx context.Context, name string) error {
	const op = "delete org"
	if err := requireID(op, "org name", name); err != nil {
		return err
	}
	return c.do(ctx, &call{op: op, method: http.MethodDelete, path: protocol.PathOrgs + "/" + seg(name)})
}

func projectsPath(org string) string { return protocol.PathOrgs + "/" + seg(org) + "/projects" }

// CreateProject creates project name in org; the manager answers not_found
// when the org does not exist.
func (c *Client) CreateProject(ctx context.Context, org, name string) (protocol.Project, error) {
	const op = "create project"
	if err := requireID(op, "org name", org); err != nil {
		return protocol.Project{}, err
	}
	if err := requireID(op, "project name", name); err != nil {
		return protocol.Project{}, err
	}
	var out protocol.Project
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: projectsPath(org),
		in: protocol.CreateProjectRequest{Name: name}, out: &out})
	return out, err
}

// ListProjects lists the projects of org, or of every org when org is empty.
func (c *Client) ListProjects(ctx context.Context, org string) (protocol.ProjectList, error) {
	q := url.Values{}
	if org != "" {
		q.Set("org", org)
	}
	var out protocol.ProjectList
	err := c.do(ctx, &call{op: "list projects", method: http.MethodGet, path: protocol.PathProjects, query: q, out: &out})
	return out, err
}

// DeleteProject deletes project name of org.
func (c *Client) DeleteProject(ctx context.Context, org, name string) error {
	const op = "delete project"
	if err := requireID(op, "org name", org); err != nil {
		return err
	}
	if err := requireID(op, "project name", name); err != nil {
		return err
	}
	return c.do(ctx, &call{op: op, method: http.MethodDelete, path: projectsPath(org) + "/" + seg(name)})
}

// CreateConnector creates a connector: a named endpoint whose selectors and
// URL (as a capability) the tasks that use it inherit.
func (c *Client) CreateConnector(ctx context.Context, req protocol.CreateConnectorRequest) (protocol.Connector, error) {
	const op = "create connector"
	if err := requireID(op, "connector name", req.Name); err != nil {
		return protocol.Connector{}, err
	}
	var out protocol.Connector
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathConnectors, in: req, out: &out})
	return out, err
}

// ListConnectors lists the account's connectors.
func (c *Client) ListConnectors(ctx context.Context) (protocol.ConnectorList, error) {
	var out protocol.ConnectorList
	err := c.do(ctx, &call{op: "list connectors", method: http.MethodGet, path: protocol.PathConnectors, out: &out})
	return out, err
}

// GetConnector returns one connector.
func (c *Client) GetConnector(ctx context.Context, name string) (protocol.Connector, error) {
	const op = "get connector"
	if err := requireID(op, "connector name", name); err != nil {
		return protocol.Connector{}, err
	}
	var out protocol.Connector
	err := c.do(ctx, &call{op: op, method: http.MethodGet, path: protocol.PathConnectors + "/" + seg(name), out: &out})
	return out, err
}

// DeleteConnector deletes a connector.
func (c *Client) DeleteConnector(ctx context.Context, name string) error {
	const op = "delete connector"
	if err := requireID(op, "connector name", name); err != nil {
		return err
	}
	return c.do(ctx, &call{op: op, method: http.MethodDelete, path: protocol.PathConnectors + "/" + seg(name)})
}

// CreateConfiguration creates a delegate configuration.
func (c *Client) CreateConfiguration(ctx context.Context, req protocol.CreateConfigurationRequest) (protocol.Configuration, error) {
	const op = "create configuration"
	if err := requireID(op, "configuration name", req.Name); err != nil {
		return protocol.Configuration{}, err
	}
	var out protocol.Configuration
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathConfigurations, in: req, out: &out})
	return out, err
}

// ListConfigurations lists the account's delegate configurations.
func (c *Client) ListConfigurations(ctx context.Context) (protocol.ConfigurationList, error) {
	var out protocol.ConfigurationList
	err := c.do(ctx, &call{op: "list configurations", method: http.MethodGet, path: protocol.PathConfigurations, out: &out})
	return out, err
}

// GetConfiguration returns one delegate configuration.
func (c *Client) GetConfiguration(ctx context.Context, name string) (protocol.Configuration, error) {
	const op = "get configuration"
	if err := requireID(op, "configuration name", name); err != nil {
		return protocol.Configuration{}, err
	}
	var out protocol.Configuration
	err := c.do(ctx, &call{op: op, method: http.MethodGet, path: protocol.PathConfigurations + "/" + seg(name), out: &out})
	return out, err
}

// UpdateConfiguration changes a delegate configuration's script and/or
// selectors (nil fields are kept) and returns it with its new version.
func (c *Client) UpdateConfiguration(ctx context.Context, name string, req protocol.UpdateConfigurationRequest) (protocol.Configuration, error) {
	const op = "update configuration"
	if err := requireID(op, "configuration name", name); err != nil {
		return protocol.Configuration{}, err
	}
	var out protocol.Configuration
	err := c.do(ctx, &call{op: op, method: http.MethodPatch, path: protocol.PathConfigurations + "/" + seg(name), in: req, out: &out})
	return out, err
}

// DeleteConfiguration deletes a delegate configuration.
func (c *Client) DeleteConfiguration(ctx context.Context, name string) error {
	const op = "delete configuration"
	if err := requireID(op, "configuration name", name); err != nil {
		return err
	}
	return c.do(ctx, &call{op: op, method: http.MethodDelete, path: protocol.PathConfigurations + "/" + seg(name)})
}

// secretQuery names a secret's scope in the query of its URL.
func secretQuery(org, project string) url.Values {
	q := url.Values{}
	if org != "" {
		q.Set("org", org)
	}
	if project != "" {
		q.Set("project", project)
	}
	return q
}

// CreateSecret stores a secret; the answer never carries its value.
func (c *Client) CreateSecret(ctx context.Context, req protocol.CreateSecretRequest) (protocol.Secret, error) {
	const op = "create secret"
	if err := requireID(op, "secret name", req.Name); err != nil {
		return protocol.Secret{}, err
	}
	var out protocol.Secret
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathSecrets, in: req, out: &out})
	return out, err
}

// ListSecrets lists the account's secrets the caller may view: names and
// scopes, never values.
func (c *Client) ListSecrets(ctx context.Context) (protocol.SecretList, error) {
	var out protocol.SecretList
	err := c.do(ctx, &call{op: "list secrets", method: http.MethodGet, path: protocol.PathSecrets, out: &out})
	return out, err
}

// GetSecret returns a secret's metadata (never its value).
func (c *Client) GetSecret(ctx context.Context, name, org, project string) (protocol.Secret, error) {
	const op = "get secret"
	if err := requireID(op, "secret name", name); err != nil {
		return protocol.Secret{}, err
	}
	var out protocol.Secret
	err := c.do(ctx, &call{op: op, method: http.MethodGet, path: protocol.PathSecrets + "/" + seg(name),
		query: secretQuery(org, project), out: &out})
	return out, err
}

// UpdateSecret replaces a secret's value and returns its metadata.
func (c *Client) UpdateSecret(ctx context.Context, name, org, project, value string) (protocol.Secret, error) {
	const op = "update secret"
	if err := requireID(op, "secret name", name); err != nil {
		return protocol.Secret{}, err
	}
	var out protocol.Secret
	err := c.do(ctx, &call{op: op, method: http.MethodPatch, path: protocol.PathSecrets + "/" + seg(name),
		query: secretQuery(org, project), in: protocol.UpdateSecretRequest{Value: value}, out: &out})
	return out, err
}

// DeleteSecret deletes a secret.
func (c *Client) DeleteSecret(ctx context.Context, name, org, project string) error {
	const op = "delete secret"
	if err := requireID(op, "secret name", name); err != nil {
		return err
	}
	return c.do(ctx, &call{op: op, method: http.MethodDelete, path: protocol.PathSecrets + "/" + seg(name), query: secretQuery(org, project)})
}

// SubmitTask queues a task.
func (c *Client) SubmitTask(ctx context.Context, spec protocol.TaskSpec) (protocol.Task, error) {
	var out protocol.Task
	err := c.do(ctx, &call{op: "submit task", method: http.MethodPost, path: protocol.PathTasks, in: spec, out: &out})
	return out, err
}

// ListTasks lists tasks, newest first as the manager orders them. An empty
// status lists all statuses; limit <= 0 means the manager's default.
func (c *Client) ListTasks(ctx context.Context, status string, limit int) (protocol.TaskList, error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out protocol.TaskList
	err := c.do(ctx, &call{op: "list tasks", method: http.MethodGet, path: protocol.PathTasks, query: q, out: &out})
	return out, err
}

// TaskQuery selects a page of tasks; zero fields select every task (the
// manager's default page size).
type TaskQuery struct {
	Status string
	// Delegate is a delegate's name or hostname: the tasks it ran or runs.
	Delegate string
	// Scope is ORG or ORG/PROJECT: the tasks of that org (and its
	// projects) or project.
	Scope string
	Limit int
	// Page is the Next of the previous page.
	Page string
}

// ListTasksPage returns a page of tasks, newest first; its Next, when
// set, is the Page of the next.
func (c *Client) ListTasksPage(ctx context.Context, tq TaskQuery) (protocol.TaskList, error) {
	q := url.Values{}
	for k, s := range map[string]string{"status": tq.Status, "delegate": tq.Delegate, protocol.QueryScope: tq.Scope, "page": tq.Page} {
		if s != "" {
			q.Set(k, s)
		}
	}
	if tq.Limit > 0 {
		q.Set("limit", strconv.Itoa(tq.Limit))
	}
	var out protocol.TaskList
	err := c.do(ctx, &call{op: "list tasks", method: http.MethodGet, path: protocol.PathTasks, query: q, out: &out})
	return out, err
}

// GetTask returns one task.
func (c *Client) GetTask(ctx context.Context, id string) (protocol.Task, error) {
	const op = "get task"
	if err := requireID(op, "task ID", id); err != nil {
		return protocol.Task{}, err
	}
	var out protocol.Task
	err := c.do(ctx, &call{op: op, method: http.MethodGet, path: protocol.PathTasks + "/" + seg(id), out: &out})
	return out, err
}

// CancelTask cancels a queued or running task and returns it.
func (c *Client) CancelTask(ctx context.Context, id string) (protocol.Task, error) {
	const op = "cancel task"
	if err := requireID(op, "task ID", id); err != nil {
		return protocol.Task{}, err
	}
	var out protocol.Task
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathTasks + "/" + seg(id) + "/cancel", out: &out})
	return out, err
}

// ExplainTask says, per delegate, why task id runs where it runs or waits
// (or ended not_assigned).
func (c *Client) ExplainTask(ctx context.Context, id string) (protocol.Explanation, error) {
	const op = "explain task"
	if err := requireID(op, "task ID", id); err != nil {
		return protocol.Explanation{}, err
	}
	var out protocol.Explanation
	err := c.do(ctx, &call{op: op, method: http.MethodGet, path: protocol.PathTasks + "/" + seg(id) + "/explain", out: &out})
	return out, err
}

// ---------------------------------------------------------------------------
// Delegate API (secret = session; Register sends the token in its body)

// InitSecrets asks for the values of the stored secrets a delegate's
// INIT_SCRIPT uses, with the delegate token (before it registers).
func (c *Client) InitSecrets(ctx context.Context, req protocol.InitSecretsRequest) (protocol.InitSecretsResponse, error) {
	var out protocol.InitSecretsResponse
	err := c.do(ctx, &call{op: "get INIT_SCRIPT's secrets", method: http.MethodPost, path: protocol.PathDelegateInitSecrets, in: req, out: &out, noAuth: true})
	return out, err
}

// Register registers a delegate instance. A zero req.ProtocolVersion is
// sent as protocol.Version. It sends no Authorization header and does not
// change the client's secret: the caller passes the answer's Session to
// SetSecret.
func (c *Client) Register(ctx context.Context, req protocol.RegisterRequest) (protocol.RegisterResponse, error) {
	if req.ProtocolVersion == 0 {
		req.ProtocolVersion = protocol.Version
	}
	// The credentials also go in the headers, so the manager checks them
	// before it reads the body.
	h := http.Header{}
	h.Set("Authorization", "Bearer "+req.Token)
	h.Set(protocol.HeaderAccountID, req.AccountID)
	var out protocol.RegisterResponse
	err := c.do(ctx, &call{op: "register", method: http.MethodPost, path: protocol.PathRegister, in: req, out: &out, noAuth: true, header: h})
	return out, err
}

// RefreshSession exchanges the current session for a fresh one. It does not
// change the client's secret: the caller passes the answer to SetSecret.
func (c *Client) RefreshSession(ctx context.Context) (protocol.SessionResponse, error) {
	var out protocol.SessionResponse
	err := c.do(ctx, &call{op: "refresh session", method: http.MethodPost, path: protocol.PathSession, out: &out})
	return out, err
}

// Poll long-polls for events: the manager answers as soon as it has events,
// or after wait with none. The request's own timeout is wait plus
// DefaultRequestTimeout, so a slow answer is not mistaken for a dead manager.
func (c *Client) Poll(ctx context.Context, wait time.Duration) (protocol.EventsResponse, error) {
	if wait < 0 {
		wait = 0
	}
	q := url.Values{"wait_ms": {strconv.FormatInt(wait.Milliseconds(), 10)}}
	var out protocol.EventsResponse
	err := c.do(ctx, &call{op: "poll events", method: http.MethodGet, path: protocol.PathEvents, query: q,
		out: &out, timeout: wait + c.timeout})
	return out, err
}

// Heartbeat sends a heartbeat over HTTP; the answer lists tasks to abort.
func (c *Client) Heartbeat(ctx context.Context, hb protocol.Heartbeat) (protocol.HeartbeatResponse, error) {
	var out protocol.HeartbeatResponse
	err := c.do(ctx, &call{op: "heartbeat", method: http.MethodPost, path: protocol.PathHeartbeat, in: hb, out: &out})
	return out, err
}

func delegateTaskPath(id, action string) string {
	return protocol.PathDelegateTask + "/" + seg(id) + "/" + action
}

// Acquire claims a task. Exactly one claimer wins; the others get a
// *protocol.Error with CodeAlreadyClaimed (or CodeNoCapacity, CodeNotEligible).
func (c *Client) Acquire(ctx context.Context, taskID string) (protocol.AcquireResponse, error) {
	const op = "acquire task"
	if err := requireID(op, "task ID", taskID); err != nil {
		return protocol.AcquireResponse{}, err
	}
	var out protocol.AcquireResponse
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: delegateTaskPath(taskID, "acquire"),
		in: protocol.AcquireRequest{}, out: &out})
	return out, err
}

// Started reports that a task's process started.
func (c *Client) Started(ctx context.Context, taskID string, req protocol.StartedRequest) error {
	const op = "report task started"
	if err := requireID(op, "task ID", taskID); err != nil {
		return err
	}
	return c.do(ctx, &call{op: op, method: http.MethodPost, path: delegateTaskPath(taskID, "started"), in: req})
}

// SendLogs sends numbered log chunks of a task.
func (c *Client) SendLogs(ctx context.Context, taskID string, req protocol.LogsRequest) error {
	const op = "send task logs"
	if err := requireID(op, "task ID", taskID); err != nil {
		return err
	}
	return c.do(ctx, &call{op: op, method: http.MethodPost, path: delegateTaskPath(taskID, "logs"), in: req})
}

// SendLogFrames sends numbered log chunks of a task as log frames
// (protocol.ContentTypeLogFrames): their data is copied, not escaped into
// JSON. A manager that does not read log frames answers with a
// *protocol.Error of CodeBadRequest (or an HTTP 415); SendLogs sends the
// same chunks as JSON.
func (c *Client) SendLogFrames(ctx context.Context, taskID string, req protocol.LogsRequest) error {
	const op = "send task logs"
	if err := requireID(op, "task ID", taskID); err != nil {
		return err
	}
	n := 0
	for _, ch := range req.Chunks {
		n += len(ch.Data) + 32
	}
	body := make([]byte, 0, n)
	for _, ch := range req.Chunks {
		ch.Attempt = 0
		body = protocol.AppendChunkFrame(body, ch)
	}
	return c.SendLogFrameBody(ctx, taskID, req.Epoch, body)
}

// SendLogFrameBody sends log chunks of a task already encoded as log
// frames (protocol.AppendUploadFrame), for the lease at epoch: what
// SendLogFrames sends, without copying the output again. body is not
// kept after the call returned without an error.
func (c *Client) SendLogFrameBody(ctx context.Context, taskID string, epoch int64, body []byte) error {
	const op = "send task logs"
	if err := requireID(op, "task ID", taskID); err != nil {
		return err
	}
	return c.do(ctx, &call{op: op, method: http.MethodPost, path: delegateTaskPath(taskID, "logs"),
		raw: body, rawType: protocol.ContentTypeLogFrames,
		header: http.Header{protocol.HeaderLogEpoch: {strconv.FormatInt(epoch, 10)}}})
}

// Result reports a task's outcome. It is idempotent; a result from a stale
// lease is refused with CodeStaleLease.
func (c *Client) Result(ctx context.Context, taskID string, req protocol.ResultRequest) (protocol.Task, error) {
	const op = "report task result"
	if err := requireID(op, "task ID", taskID); err != nil {
		return protocol.Task{}, err
	}
	var out protocol.Task
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: delegateTaskPath(taskID, "result"), in: req, out: &out})
	return out, err
}

// Deregister ends the delegate's session (on clean shutdown).
func (c *Client) Deregister(ctx context.Context) error {
	return c.do(ctx, &call{op: "deregister", method: http.MethodPost, path: protocol.PathDeregister})
}

// ReportCapabilities sends capability validation results. A nil Results is
// sent as an empty list.
func (c *Client) ReportCapabilities(ctx context.Context, rep protocol.CapabilityReport) error {
	if rep.Results == nil {
		rep.Results = []protocol.CapabilityResult{}
	}
	return c.do(ctx, &call{op: "report capabilities", method: http.MethodPost, path: protocol.PathCapabilities, in: rep})
}

// DelegateConfiguration returns the configuration that applies to the
// calling delegate (nil Configuration when none does).
func (c *Client) DelegateConfiguration(ctx context.Context) (protocol.DelegateConfigurationResponse, error) {
	var out protocol.DelegateConfigurationResponse
	err := c.do(ctx, &call{op: "get delegate configuration", method: http.MethodGet, path: protocol.PathDelegateConfiguration, out: &out})
	return out, err
}

// ReportConfiguration sends the outcome of a configuration run.
func (c *Client) ReportConfiguration(ctx context.Context, res protocol.ConfigurationResult) error {
	return c.do(ctx, &call{op: "report configuration result", method: http.MethodPost,
		path: protocol.PathDelegateConfigurationResult, in: res})
}

// Admin makes one admin API call: in (when not nil) is sent as JSON, the
// answer decoded into out (when not nil). op names the call in errors.
func (c *Client) Admin(ctx context.Context, op, method, path string, in, out any) error {
	return c.do(ctx, &call{op: op, method: method, path: path, in: in, out: out})
}

// DeploymentQuery selects a page of deployments; zero fields select
// everything (the manager's default page size).
type DeploymentQuery struct {
	Service     string
	Environment string
	// Since is a time (RFC 3339) or a duration back from now (24h, 7d).
	Since string
	Limit int
	// Page is the Next of the previous page.
	Page string
}

// ListDeployments returns a page of the account's deployments, newest
// first.
func (c *Client) ListDeployments(ctx context.Context, q DeploymentQuery) (protocol.DeploymentList, error) {
	v := url.Values{}
	for k, s := range map[string]string{"service": q.Service, "environment": q.Environment, "since": q.Since, "page": q.Page} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out protocol.DeploymentList
	err := c.do(ctx, &call{op: "list deployments", method: http.MethodGet, path: protocol.PathDeployments, query: v, out: &out})
	return out, err
}

// GetDeployment returns one deployment with its records.
func (c *Client) GetDeployment(ctx context.Context, id string) (protocol.Deployment, error) {
	var out protocol.Deployment
	err := c.do(ctx, &call{op: "get deployment", method: http.MethodGet, path: protocol.PathDeployments + "/" + url.PathEscape(id), out: &out})
	return out, err
}

// CurrentDeployments returns what runs where: per service and
// environment ("" for all), the current and the previous deployment.
func (c *Client) CurrentDeployments(ctx context.Context, service, environment string) (protocol.CurrentDeployments, error) {
	v := url.Values{}
	for k, s := range map[string]string{"service": service, "environment": environment} {
		if s != "" {
			v.Set(k, s)
		}
	}
	var out protocol.CurrentDeployments
	err := c.do(ctx, &call{op: "current deployments", method: http.MethodGet, path: protocol.PathDeploymentsCurrent, query: v, out: &out})
	return out, err
}

// RollbackDeployment starts the run that re-deploys the previous good
// version of a service in an environment and returns it.
func (c *Client) RollbackDeployment(ctx context.Context, req protocol.RollbackRequest) (protocol.Run, error) {
	var out protocol.Run
	err := c.do(ctx, &call{op: "roll back", method: http.MethodPost, path: protocol.PathDeploymentsRollback, in: req, out: &out})
	return out, err
}

// DeploymentLimits returns the account's deployment limits and their
// usage now.
func (c *Client) DeploymentLimits(ctx context.Context) (protocol.DeploymentLimits, error) {
	var out protocol.DeploymentLimits
	err := c.do(ctx, &call{op: "get deployment limits", method: http.MethodGet, path: protocol.PathLimits, out: &out})
	return out, err
}

// SetDeploymentLimits changes the account's deployment limits and returns
// them with their usage.
func (c *Client) SetDeploymentLimits(ctx context.Context, req protocol.SetLimitsRequest) (protocol.DeploymentLimits, error) {
	var out protocol.DeploymentLimits
	err := c.do(ctx, &call{op: "set deployment limits", method: http.MethodPut, path: protocol.PathLimits, in: req, out: &out})
	return out, err
}

// ApplyPipeline stores a pipeline from its YAML source (a new version when
// the source changed).
func (c *Client) ApplyPipeline(ctx context.Context, req protocol.ApplyPipelineRequest) (protocol.Pipeline, error) {
	var out protocol.Pipeline
	err := c.do(ctx, &call{op: "apply pipeline", method: http.MethodPost, path: protocol.PathPipelines, in: req, out: &out})
	return out, err
}

// DryRunPipeline makes an apply's checks and answers what it would do
// (Plan, Changes), storing nothing. A manager older than dry runs has no
// route for it: NoRoute(err) reports that, and nothing was stored.
func (c *Client) DryRunPipeline(ctx context.Context, req protocol.ApplyPipelineRequest) (protocol.Pipeline, error) {
	var out protocol.Pipeline
	err := c.do(ctx, &call{op: "dry-run pipeline", method: http.MethodPost, path: protocol.PathPipelinesDryRun, in: req, out: &out})
	return out, err
}

// NoRoute reports whether err is a manager's answer that it has no such
// route (404 "no route for ..." or 405): an older manager, which did
// nothing with the request.
func NoRoute(err error) bool {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Status == http.StatusMethodNotAllowed ||
		pe.Status == http.StatusNotFound && pe.Code == protocol.CodeNotFound && strings.HasPrefix(pe.Message, "no route for ")
}

// ListPipelines lists the pipelines the caller may view (without sources).
func (c *Client) ListPipelines(ctx context.Context) (protocol.PipelineList, error) {
	var out protocol.PipelineList
	err := c.do(ctx, &call{op: "list pipelines", method: http.MethodGet, path: protocol.PathPipelines, out: &out})
	return out, err
}

// GetPipeline returns a pipeline of a scope with its source.
func (c *Client) GetPipeline(ctx context.Context, name, org, project string) (protocol.Pipeline, error) {
	const op = "get pipeline"
	if err := requireID(op, "pipeline name", name); err != nil {
		return protocol.Pipeline{}, err
	}
	var out protocol.Pipeline
	err := c.do(ctx, &call{op: op, method: http.MethodGet, path: protocol.PathPipelines + "/" + seg(name), query: secretQuery(org, project), out: &out})
	return out, err
}

// DeletePipeline deletes a pipeline of a scope (its runs stay).
func (c *Client) DeletePipeline(ctx context.Context, name, org, project string) error {
	const op = "delete pipeline"
	if err := requireID(op, "pipeline name", name); err != nil {
		return err
	}
	return c.do(ctx, &call{op: op, method: http.MethodDelete, path: protocol.PathPipelines + "/" + seg(name), query: secretQuery(org, project)})
}

// EnableWebhook gives a pipeline of a scope a webhook, or with rotate a
// new secret for the one it has; the answer is the only one that shows the
// secret.
func (c *Client) EnableWebhook(ctx context.Context, name, org, project string, rotate bool) (protocol.WebhookSecret, error) {
	const op = "enable webhook"
	if err := requireID(op, "pipeline name", name); err != nil {
		return protocol.WebhookSecret{}, err
	}
	var out protocol.WebhookSecret
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathPipelines + "/" + seg(name) + "/webhook", query: secretQuery(org, project),
		in: protocol.EnableWebhookRequest{Rotate: rotate}, out: &out})
	return out, err
}

// DisableWebhook removes a pipeline's webhook.
func (c *Client) DisableWebhook(ctx context.Context, name, org, project string) error {
	const op = "disable webhook"
	if err := requireID(op, "pipeline name", name); err != nil {
		return err
	}
	return c.do(ctx, &call{op: op, method: http.MethodDelete, path: protocol.PathPipelines + "/" + seg(name) + "/webhook", query: secretQuery(org, project)})
}

// RunPipeline starts a run of a pipeline of a scope.
func (c *Client) RunPipeline(ctx context.Context, name, org, project string, req protocol.RunPipelineRequest) (protocol.Run, error) {
	const op = "run pipeline"
	if err := requireID(op, "pipeline name", name); err != nil {
		return protocol.Run{}, err
	}
	var out protocol.Run
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathPipelines + "/" + seg(name) + "/runs", query: secretQuery(org, project), in: req, out: &out})
	return out, err
}

// ListRuns lists pipeline runs, newest first (pipeline "" for all, limit 0
// for the manager's default).
func (c *Client) ListRuns(ctx context.Context, pipeline string, limit int) (protocol.RunList, error) {
	return c.ListRunsPage(ctx, RunQuery{Pipeline: pipeline, Limit: limit})
}

// RunQuery selects a page of runs; zero fields do not filter.
type RunQuery struct {
	Pipeline string
	// InScope keeps the runs of the pipeline of scope Org/Project (a
	// pipeline's name may exist in several scopes); it needs Pipeline.
	InScope      bool
	Org, Project string
	Status       string
	Limit        int
	// Page is the Next of the previous page.
	Page string
}

// ListRunsPage returns a page of runs, newest first; its Next, when set,
// is the Page of the next.
func (c *Client) ListRunsPage(ctx context.Context, rq RunQuery) (protocol.RunList, error) {
	v := url.Values{}
	for k, s := range map[string]string{"pipeline": rq.Pipeline, "status": rq.Status, "page": rq.Page} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if rq.InScope {
		v.Set("org", rq.Org)
		v.Set("project", rq.Project)
	}
	if rq.Limit > 0 {
		v.Set("limit", strconv.Itoa(rq.Limit))
	}
	var out protocol.RunList
	err := c.do(ctx, &call{op: "list runs", method: http.MethodGet, path: protocol.PathRuns, query: v, out: &out})
	return out, err
}

// GetRun returns a run with its steps.
func (c *Client) GetRun(ctx context.Context, id string) (protocol.Run, error) {
	const op = "get run"
	if err := requireID(op, "run ID", id); err != nil {
		return protocol.Run{}, err
	}
	var out protocol.Run
	err := c.do(ctx, &call{op: op, method: http.MethodGet, path: protocol.PathRuns + "/" + seg(id), out: &out})
	return out, err
}

// CancelRun cancels a run: its running steps' tasks are cancelled.
func (c *Client) CancelRun(ctx context.Context, id string) (protocol.Run, error) {
	const op = "cancel run"
	if err := requireID(op, "run ID", id); err != nil {
		return protocol.Run{}, err
	}
	var out protocol.Run
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathRuns + "/" + seg(id) + "/cancel", out: &out})
	return out, err
}

// RerunRun starts a new run of a run's pipeline with the run's definition
// and inputs, req's inputs in place of the run's; the answer's RerunOf
// is id.
func (c *Client) RerunRun(ctx context.Context, id string, req protocol.RerunRequest) (protocol.Run, error) {
	const op = "re-run run"
	if err := requireID(op, "run ID", id); err != nil {
		return protocol.Run{}, err
	}
	var out protocol.Run
	err := c.do(ctx, &call{op: op, method: http.MethodPost, path: protocol.PathRuns + "/" + seg(id) + "/rerun", in: req, out: &out})
	return out, err
}

// CreateSignInLink asks for a one-time sign-in link of the web UI for the
// caller, a user: its Path goes after the manager's URL (SignInURL).
func (c *Client) CreateSignInLink(ctx context.Context) (protocol.SignInLink, error) {
	var out protocol.SignInLink
	err := c.do(ctx, &call{op: "create sign-in link", method: http.MethodPost, path: protocol.PathSignInLinks, out: &out})
	return out, err
}

// SignInURL is the full URL of a sign-in link's path on this manager.
func (c *Client) SignInURL(l protocol.SignInLink) string { return c.base + l.Path }
