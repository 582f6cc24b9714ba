// Package config reads a delegate's configuration from the environment
// variables of both seed generations (ACCOUNT_ID, DELEGATE_TOKEN,
// MANAGER_HOST_AND_PORT, ... and HARNESS_ACCOUNT_ID, HARNESS_TOKEN,
// HARNESS_URL, ...), so that a task definition or manifest copied from the
// seed documents works unchanged, and validates it with errors that name
// the variable to fix.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/legate-dev/legate/internal/protocol"
)

// Defaults.
const (
	DefaultName = "legate-delegate"
	DefaultType = "SHELL"
)

// Delegate is a delegate's configuration.
type Delegate struct {
	AccountID string
	Token     string
	// ManagerURLs are one or more base URLs, "http://" or "https://", with
	// no trailing slash.
	ManagerURLs []string
	// Name defaults to DefaultName.
	Name string
	// Hostname is DELEGATE_HOSTNAME; "" means the caller detects it.
	Hostname string
	// Tags are normalized with protocol.SplitTags.
	Tags []string
	// Type is DELEGATE_TYPE upper-cased; it defaults to DefaultType.
	Type string
	// DeployMode is DEPLOY_MODE (informational).
	DeployMode string
	// NextGen is NEXT_GEN.
	NextGen bool
	// LogStreamingURL is LOG_STREAMING_SERVICE_URL: accepted and not used
	// (logs go to the manager).
	LogStreamingURL string
	// PollForTasks is POLL_FOR_TASKS: use long polling, not the WebSocket.
	PollForTasks bool
	// HTTPReports is DELEGATE_HTTP_REPORTS: report tasks started and their
	// results (and acquire) over HTTP even when the manager takes them
	// over the WebSocket (protocol.WSReportsVersion).
	HTTPReports bool
	// Capacity is DELEGATE_TASK_CAPACITY; 0 means unlimited.
	Capacity int
	// Once is DELEGATE_ONCE: register, run exactly one task, report it,
	// deregister and exit (a one-shot delegate; docs/elastic.md).
	Once bool
	// OnceTimeout is DELEGATE_ONCE_TIMEOUT: how long a one-shot delegate
	// waits for its task; 0 = DefaultOnceTimeout (see OnceWait).
	OnceTimeout time.Duration
	// CPUThreshold and MemoryThreshold are DELEGATE_CPU_THRESHOLD and
	// DELEGATE_MEMORY_THRESHOLD in percent of the machine; above them the
	// delegate takes no new tasks. 0 turns the check off.
	CPUThreshold    int
	MemoryThreshold int
	// AllowMixedScopes is LEGATE_ALLOW_MIXED_SCOPES: without a task
	// sandbox, still run tasks of different scopes at the same time.
	AllowMixedScopes bool
	// ContainerPrivileged is LEGATE_CONTAINER_ALLOW_PRIVILEGED: run
	// container tasks that ask for privileged mode (refused by default).
	ContainerPrivileged bool
	// ContainerHostPaths is LEGATE_CONTAINER_HOST_PATHS: the host
	// directories (absolute, cleaned) container tasks may mount, each with
	// what lies under it; none by default.
	ContainerHostPaths []string
	// Description is DELEGATE_DESCRIPTION.
	Description string
	// InitScript is INIT_SCRIPT (or INIT): script text that the delegate runs with
	// bash in its working directory before it connects.
	InitScript string
	// IP is DELEGATE_IP: overrides the detected IP address the delegate
	// registers with (part of a VM-style delegate's identity). Not in the
	// documented set; for hosts with several addresses and for tests.
	IP string
	// IdentityByHostname is true when DELEGATE_TYPE is KUBERNETES or
	// HELM_DELEGATE or KUBERNETES_SERVICE_HOST is set, or the delegate
	// runs in an ECS task (EC2 or Fargate: ECS sets
	// ECS_CONTAINER_METADATA_URI_V4): the instance is identified by
	// hostname alone.
	IdentityByHostname bool

	// Upgrades (docs/upgrades.md).

	// AutoUpgrade is AUTO_UPGRADE (default true); false: the watcher that
	// runs the delegate supervises it but does not upgrade it.
	AutoUpgrade bool
	// WatcherSlot is LEGATE_WATCHER_SLOT, which legate watcher sets for
	// the delegates it runs (the version the process runs): it tells
	// apart the processes of one delegate on one host during a switch.
	// Empty: no watcher runs the delegate.
	WatcherSlot string

	// Logging.

	// LogLevel is LOGGING_LEVEL; default info.
	LogLevel slog.Level

	// HTTP.

	// HTTPPort is DELEGATE_HTTP_PORT, the port of the health and metrics
	// server (/healthz, /readyz, /metrics); 0 turns it off. ReadEnv
	// defaults it to DefaultHTTPPort; a Delegate built in code has 0.
	HTTPPort int

	// Proxy.

	// Proxy is PROXY_HOST and friends, or HTTP(S)_PROXY; see Proxy.
	Proxy Proxy

	// TLS.

	// TLS is SHARED_CA_CERTS_PATH, DELEGATE_CLIENT_CERTIFICATE_PATH and
	// friends, TRUST_ALL_CERTIFICATES; see TLS.
	TLS TLS
}

// Environment variables with a name in each seed generation (first
// generation first).
const (
	envAccountID  = "ACCOUNT_ID"
	envAccountID2 = "HARNESS_ACCOUNT_ID"
	envToken      = "DELEGATE_TOKEN"
	envToken2     = "HARNESS_TOKEN"
	envTokenOld   = "ACCOUNT_SECRET" // older alias of DELEGATE_TOKEN
	envURL        = "MANAGER_HOST_AND_PORT"
	envURL2       = "HARNESS_URL"
	envName       = "DELEGATE_NAME"
	envName2      = "HARNESS_NAME"
	envTags       = "DELEGATE_TAGS"
	envTags2      = "HARNESS_TAGS"
)

// Descriptions used in error messages ("set it to ...").
const (
	accountWhat = "your account ID"
	tokenWhat   = "your delegate token"
	urlWhat     = "your manager URL, such as https://legate.example.com"
	nameWhat    = "the name of your delegate"
)

// FromEnv reads the variables of both seed generations through lookup
// (os.LookupEnv in production), applies defaults and validates the result:
// it is ReadEnv followed by Validate.
func FromEnv(lookup func(string) (string, bool)) (Delegate, error) {
	d, err := ReadEnv(lookup)
	if err != nil {
		return Delegate{}, err
	}
	if err := d.Validate(); err != nil {
		return Delegate{}, err
	}
	return d, nil
}

// ReadEnv reads the variables like FromEnv but requires none of them: a
// caller that fills in missing settings from flags calls Validate after.
// Every variable that is set is still checked. Values are trimmed; an empty
// value counts as unset. A setting given under both generations' names with
// different values is an error, as is a placeholder left over from the seed
// examples. The error is one line and names the variable.
func ReadEnv(lookup func(string) (string, bool)) (Delegate, error) {
	e := vars(lookup)
	var d Delegate
	for _, read := range []func(*Delegate) error{
		e.readConnection,
		e.readIdentity,
		e.readWork,
		func(d *Delegate) error { return readLogging(d, e.get) },
		func(d *Delegate) error { return readHTTP(e.get, d) },
		func(d *Delegate) error { return readOnce(e.get, d) },
		func(d *Delegate) (err error) { d.Proxy, err = readProxy(lookup); return err },
		func(d *Delegate) (err error) { d.TLS, err = readTLS(lookup); return err },
	} {
		if err := read(&d); err != nil {
			return Delegate{}, err
		}
	}
	return d, nil
}

// vars looks up environment variables (os.LookupEnv in production).
type vars func(string) (string, bool)

// get returns the trimmed value of a variable, "" when unset.
func (e vars) get(name string) string {
	v, _ := e(name)
	return strings.TrimSpace(v)
}

// checked reads a setting that has a name in each generation (see pick)
// and checks it when set; "" when none is set.
func (e vars) checked(secret bool, check func(name, v string) error, names ...string) (string, error) {
	name, v, err := pick(e, secret, names...)
	if err != nil || v == "" {
		return "", err
	}
	if err := check(name, v); err != nil {
		return "", err
	}
	return v, nil
}

// readConnection reads what the delegate connects with: its account,
// token and manager URL(s).
func (e vars) readConnection(d *Delegate) error {
	var err error
	if d.AccountID, err = e.checked(false, checkAccountID, envAccountID, envAccountID2); err != nil {
		return err
	}
	if d.Token, err = e.checked(true, checkToken, envToken, envToken2, envTokenOld); err != nil {
		return err
	}
	_, err = e.checked(false, func(name, v string) (err error) {
		d.ManagerURLs, err = parseURLs(name, v)
		return err
	}, envURL, envURL2)
	return err
}

// readIdentity reads what identifies the delegate and what its tasks
// select it by: name, tags, hostname, type and IP.
func (e vars) readIdentity(d *Delegate) error {
	var err error
	if d.Name, err = e.checked(false, checkName, envName, envName2); err != nil {
		return err
	}
	if d.Name == "" {
		d.Name = DefaultName
	}
	name, v, err := pick(e, false, envTags, envTags2)
	if err != nil {
		return err
	}
	if placeholder(v) {
		return placeholderErr(name, v, "a comma-separated list of tags, or leave it empty")
	}
	d.Tags = protocol.SplitTags(v)
	if err := checkTags(name, d.Tags); err != nil {
		return err
	}
	d.Hostname = e.get("DELEGATE_HOSTNAME")
	if err := checkHostname("DELEGATE_HOSTNAME", d.Hostname); err != nil {
		return err
	}
	d.Type = strings.ToUpper(e.get("DELEGATE_TYPE"))
	if d.Type == "" {
		d.Type = DefaultType
	} else if err := checkType("DELEGATE_TYPE", d.Type); err != nil {
		return err
	}
	d.IP = e.get("DELEGATE_IP")
	if d.IP != "" && net.ParseIP(d.IP) == nil {
		return fmt.Errorf("DELEGATE_IP=%q: not an IP address", d.IP)
	}
	d.IdentityByHostname = d.Type == "KUBERNETES" || d.Type == "HELM_DELEGATE" ||
		e.get("KUBERNETES_SERVICE_HOST") != "" || onECS(e)
	return nil
}

// readWork reads how the delegate takes and runs tasks (polling,
// capacity, load thresholds, INIT_SCRIPT) and the settings it only shows.
func (e vars) readWork(d *Delegate) error {
	d.DeployMode = e.get("DEPLOY_MODE")
	if placeholder(d.DeployMode) {
		return placeholderErr("DEPLOY_MODE", d.DeployMode, "the deploy mode, or leave it empty")
	}
	var err error
	if d.NextGen, err = parseBool("NEXT_GEN", e.get("NEXT_GEN")); err != nil {
		return err
	}
	if d.PollForTasks, err = parseBool("POLL_FOR_TASKS", e.get("POLL_FOR_TASKS")); err != nil {
		return err
	}
	if d.HTTPReports, err = parseBool("DELEGATE_HTTP_REPORTS", e.get("DELEGATE_HTTP_REPORTS")); err != nil {
		return err
	}
	if d.Capacity, err = parseCapacity("DELEGATE_TASK_CAPACITY", e.get("DELEGATE_TASK_CAPACITY")); err != nil {
		return err
	}
	if d.CPUThreshold, err = parsePercent("DELEGATE_CPU_THRESHOLD", e.get("DELEGATE_CPU_THRESHOLD")); err != nil {
		return err
	}
	if d.MemoryThreshold, err = parsePercent("DELEGATE_MEMORY_THRESHOLD", e.get("DELEGATE_MEMORY_THRESHOLD")); err != nil {
		return err
	}
	if err := d.containerPolicy(e.get); err != nil {
		return err
	}
	// Not used by legate, so never a reason to refuse to start.
	d.LogStreamingURL = e.get("LOG_STREAMING_SERVICE_URL")
	d.Description = e.get("DELEGATE_DESCRIPTION")
	if d.InitScript, err = e.initScript(); err != nil {
		return err
	}
	auto := e.get("AUTO_UPGRADE")
	if auto == "" {
		auto = "true"
	}
	if d.AutoUpgrade, err = parseBool("AUTO_UPGRADE", auto); err != nil {
		return err
	}
	d.WatcherSlot = e.get("LEGATE_WATCHER_SLOT")
	if len(d.WatcherSlot) > 64 {
		return fmt.Errorf("LEGATE_WATCHER_SLOT: at most 64 characters")
	}
	return nil
}

// initScript reads INIT_SCRIPT or INIT, seed 001's name for it: both
// run the same way. Both set to different scripts is refused rather than
// one of them being dropped without a word; the scripts themselves are
// left out of the message (they may be long).
func (e vars) initScript() (string, error) {
	script, init := e.get("INIT_SCRIPT"), e.get("INIT")
	switch {
	case script == "":
		return init, nil
	case init != "" && init != script:
		return "", fmt.Errorf("INIT_SCRIPT and INIT are both set, to different scripts; set only one (INIT is another name for INIT_SCRIPT)")
	}
	return script, nil
}

// UpgradeMode is what the delegate registers as its upgrade mode:
// protocol.UpgradeAuto or UpgradeOff under a watcher, UpgradeManual
// otherwise.
func (d Delegate) UpgradeMode() string {
	switch {
	case d.WatcherSlot == "":
		return protocol.UpgradeManual
	case d.AutoUpgrade:
		return protocol.UpgradeAuto
	}
	return protocol.UpgradeOff
}

// Validate checks a Delegate (also one built from flags) and returns one
// error naming the first missing or malformed setting by its environment
// variable name(s).
func (d Delegate) Validate() error {
	if err := checkAccountID(envAccountID, d.AccountID); err != nil {
		return err
	}
	if err := checkToken(envToken, d.Token); err != nil {
		return err
	}
	if len(d.ManagerURLs) == 0 {
		return missingURL()
	}
	for _, u := range d.ManagerURLs {
		norm, err := parseURL(envURL, u)
		if err != nil {
			return err
		}
		if norm != u {
			return fmt.Errorf("%s=%q: must be written as %q (lower-case scheme, no trailing slash)", envURL, u, norm)
		}
	}
	if d.Name == "" {
		return fmt.Errorf("missing %s (or %s): the delegate name", envName, envName2)
	}
	if err := checkName(envName, d.Name); err != nil {
		return err
	}
	if err := checkTags(envTags, d.Tags); err != nil {
		return err
	}
	if err := checkHostname("DELEGATE_HOSTNAME", d.Hostname); err != nil {
		return err
	}
	if d.Type == "" {
		return errors.New("missing DELEGATE_TYPE: the delegate type, such as SHELL or DOCKER")
	}
	if err := checkType("DELEGATE_TYPE", d.Type); err != nil {
		return err
	}
	if d.Capacity < 0 {
		return fmt.Errorf("DELEGATE_TASK_CAPACITY=%d: not a non-negative integer", d.Capacity)
	}
	if d.CPUThreshold < 0 || d.CPUThreshold > 100 {
		return fmt.Errorf("DELEGATE_CPU_THRESHOLD=%d: must be a percentage from 0 (off) to 100", d.CPUThreshold)
	}
	if d.MemoryThreshold < 0 || d.MemoryThreshold > 100 {
		return fmt.Errorf("DELEGATE_MEMORY_THRESHOLD=%d: must be a percentage from 0 (off) to 100", d.MemoryThreshold)
	}
	if err := d.validateOnce(); err != nil {
		return err
	}
	if err := d.TLS.Validate(); err != nil {
		return err
	}
	return nil
}

// pick returns the one value set (non-empty after trimming) among names and
// the name it came from. Several names with the same value are fine;
// different values are an error. Secret values are not echoed.
func pick(lookup func(string) (string, bool), secret bool, names ...string) (name, value string, err error) {
	var setNames, setValues []string
	for _, n := range names {
		v, ok := lookup(n)
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			continue
		}
		setNames = append(setNames, n)
		setValues = append(setValues, v)
	}
	if len(setNames) == 0 {
		return "", "", nil
	}
	for i := 1; i < len(setValues); i++ {
		if setValues[i] != setValues[0] {
			if secret {
				return "", "", fmt.Errorf("%s and %s are both set, to different values; set only one", setNames[0], setNames[i])
			}
			return "", "", fmt.Errorf("%s=%q and %s=%q are both set, to different values; set only one",
				setNames[0], setValues[0], setNames[i], setValues[i])
		}
	}
	return setNames[0], setValues[0], nil
}

func missingURL() error {
	return fmt.Errorf("missing %s (or %s): the manager URL to connect to, such as https://legate.example.com", envURL, envURL2)
}

func placeholderErr(name, v, what string) error {
	return fmt.Errorf("%s is still the placeholder %q from the example; set it to %s", name, v, what)
}

// placeholder reports whether v looks like a placeholder copied from the
// seed examples: "<ACCOUNT_ID>", "PUT_YOUR_ACCOUNT_ID", "YOUR_AWS_REGION",
// "${HARNESS_TOKEN}", "{{ .Values.token }}", or a value containing a
// "<NAME>" part such as "https://<HOST>".
func placeholder(v string) bool {
	if v == "" {
		return false
	}
	u := strings.ToUpper(v)
	if strings.Contains(u, "PUT_YOUR_") || strings.HasPrefix(u, "YOUR_") {
		return true
	}
	if strings.HasPrefix(v, "${") && strings.HasSuffix(v, "}") {
		return true
	}
	if strings.HasPrefix(v, "{{") && strings.HasSuffix(v, "}}") {
		return true
	}
	// A "<NAME>" part: a letter, then letters, digits, '_', '-' or '.'.
	for rest := v; ; {
		i := strings.IndexByte(rest, '<')
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
		j := strings.IndexByte(rest, '>')
		if j < 0 {
			return false
		}
		inner := rest[:j]
		if inner != "" && isAlnum(rune(inner[0])) && (inner[0] < '0' || inner[0] > '9') &&
			strings.IndexFunc(inner, func(r rune) bool {
				return !(isAlnum(r) || r == '_' || r == '-' || r == '.')
			}) < 0 {
			return true
		}
	}
}

func isAlnum(r rune) bool {
	return r < unicode.MaxASCII && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
}

// hasSpaceOrControl reports whether s contains white space or control
// characters (or invalid UTF-8).
func hasSpaceOrControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar
	}) >= 0
}

func checkAccountID(name, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("missing %s (or %s): the account ID to register with", envAccountID, envAccountID2)
	case placeholder(v):
		return placeholderErr(name, v, accountWhat)
	case len(v) > 256 || hasSpaceOrControl(v):
		return fmt.Errorf("%s=%q: not an account ID (no spaces or control characters, at most 256 bytes)", name, v)
	}
	return nil
}

func checkToken(name, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("missing %s (or %s): the delegate token to register with", envToken, envToken2)
	case placeholder(v):
		return placeholderErr(name, v, tokenWhat)
	case len(v) > 4096 || hasSpaceOrControl(v):
		// Never echo a token.
		return fmt.Errorf("%s is malformed: it contains spaces or control characters or is longer than 4096 bytes", name)
	}
	return nil
}

// parseURLs splits a comma-separated list of manager URLs, normalizes each
// and drops duplicates.
func parseURLs(name, v string) ([]string, error) {
	if placeholder(v) {
		return nil, placeholderErr(name, v, urlWhat)
	}
	var out []string
	seen := map[string]bool{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		u, err := parseURL(name, part)
		if err != nil {
			return nil, err
		}
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s=%q: no URL in the list", name, v)
	}
	return out, nil
}

// parseURL checks one manager URL and returns it without trailing slashes
// and with a lower-case scheme.
func parseURL(name, raw string) (string, error) {
	if placeholder(raw) {
		return "", placeholderErr(name, raw, urlWhat)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		return "", fmt.Errorf("%s=%q: must start with http:// or https://", name, raw)
	}
	s := scheme + "://" + strings.TrimRight(rest, "/")
	if hasSpaceOrControl(s) {
		return "", fmt.Errorf("%s=%q: must not contain spaces or control characters", name, raw)
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("%s=%q: not a valid URL: %v", name, raw, err)
	}
	switch {
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%s=%q: has no host", name, raw)
	case u.User != nil:
		return "", fmt.Errorf("%s=%q: must not contain credentials", name, raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(s, "?#"):
		return "", fmt.Errorf("%s=%q: must not have a query or fragment", name, raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%s=%q: port %q out of range", name, raw, p)
		}
	}
	return s, nil
}

// checkName checks a delegate name: 1–63 letters, digits, '-', '_' or '.'.
func checkName(name, v string) error {
	if placeholder(v) {
		return placeholderErr(name, v, nameWhat)
	}
	if len(v) > 63 || v == "" || strings.IndexFunc(v, func(r rune) bool {
		return !(isAlnum(r) || r == '-' || r == '_' || r == '.')
	}) >= 0 {
		return fmt.Errorf("%s=%q: must be 1-63 letters, digits, '-', '_' or '.'", name, v)
	}
	return nil
}

func checkHostname(name, v string) error {
	if v == "" {
		return nil
	}
	if placeholder(v) {
		return placeholderErr(name, v, "the delegate's host name, or leave it unset to detect it")
	}
	if len(v) > 253 || strings.IndexFunc(v, func(r rune) bool {
		return !(isAlnum(r) || r == '-' || r == '_' || r == '.')
	}) >= 0 {
		return fmt.Errorf("%s=%q: must be at most 253 letters, digits, '-', '_' or '.'", name, v)
	}
	return nil
}

func checkType(name, v string) error {
	if placeholder(v) {
		return placeholderErr(name, v, "the delegate type, such as SHELL or DOCKER")
	}
	if len(v) > 63 || v == "" || strings.IndexFunc(v, func(r rune) bool {
		return !(isAlnum(r) || r == '-' || r == '_')
	}) >= 0 {
		return fmt.Errorf("%s=%q: must be 1-63 letters, digits, '-' or '_' (such as SHELL or DOCKER)", name, v)
	}
	return nil
}

func checkTags(name string, tags []string) error {
	for _, t := range tags {
		if t == "" || len(t) > 128 || strings.Contains(t, ",") || strings.IndexFunc(t, func(r rune) bool {
			return unicode.IsControl(r) || r == unicode.ReplacementChar
		}) >= 0 {
			return fmt.Errorf("%s: tag %q must be 1-128 characters without commas or control characters", name, t)
		}
	}
	return nil
}

// parseBool accepts true or false in any case; empty means false.
func parseBool(name, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "":
		return false, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q: must be true or false", name, v)
}

// parsePercent reads a threshold: empty or 0 is off, else 1..100.
func parsePercent(name, v string) (int, error) {
	n, err := parseCapacity(name, v)
	if err != nil || n > 100 {
		return 0, fmt.Errorf("%s=%q: must be a percentage from 0 (off) to 100", name, v)
	}
	return n, nil
}

func parseCapacity(name, v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	bad := fmt.Errorf("%s=%q: not a non-negative integer", name, v)
	if strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, bad
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, bad
	}
	return n, nil
}

// onECS reports whether the delegate runs in an ECS task: the ECS agent
// (EC2) and Fargate give every container its task metadata endpoint. An
// ECS delegate is identified by the hostname chosen for its task
// definition (its IP changes when the task is replaced), as a Kubernetes
// delegate is by its pod's.
func onECS(e vars) bool {
	return e.get("ECS_CONTAINER_METADATA_URI_V4") != "" || e.get("ECS_CONTAINER_METADATA_URI") != ""
}
