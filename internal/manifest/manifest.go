// Package manifest generates the install manifests of a delegate —
// Kubernetes, Helm values, docker run or compose, ECS and Fargate task
// definitions and services, systemd units — from one Params value. It is
// the one generator behind `legate manifest` and the manager's
// PathManifests route, so both print the same text for the same request.
// It does no I/O: Generate validates its input (with errors that say what
// to change) and returns the text.
package manifest

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/legate-dev/legate/internal/protocol"
)

// Params is the input of Generate: the wire type of the API route, so the
// CLI, the API and the generator share its field names and documented
// defaults.
type Params = protocol.ManifestRequest

// Kinds of manifests.
const (
	KindKubernetes = "kubernetes"
	KindHelm       = "helm"
	KindDocker     = "docker"
	KindECS        = "ecs"
	KindFargate    = "fargate"
	KindSystemd    = "systemd"
)

// Kinds lists the kinds Generate knows, in the order help texts show them.
func Kinds() []string {
	return []string{KindKubernetes, KindHelm, KindDocker, KindECS, KindFargate, KindSystemd}
}

// Defaults.
const (
	DefaultName      = "legate-delegate"
	DefaultNamespace = "legate-delegate"
	DefaultCluster   = "legate-delegate"
	// HTTPPort is the delegate's health server port (/healthz, /readyz).
	HTTPPort = 3460
	// TokenKey is the key of the token in a Kubernetes Secret.
	TokenKey = "DELEGATE_TOKEN"
	// LabelPrefix prefixes the labels of Kubernetes objects.
	LabelPrefix = "legate.dev/"
	// DrainSeconds is how long a stopping delegate may take to finish its
	// tasks (Kubernetes terminationGracePeriodSeconds, systemd
	// TimeoutStopSec). ECS caps stopTimeout at 120 s.
	DrainSeconds    = 600
	ecsStopTimeout  = 120
	rbacCluster     = "cluster"
	rbacNamespace   = "namespace"
	rbacNone        = "none"
	defaultK8sCPU   = "50m"
	defaultK8sMem   = "64Mi"
	defaultECSCPU   = "256"
	defaultECSMem   = "512"
	maxReplicas     = 1000
	maxValue        = 64 << 10 // an extra env value, INIT_SCRIPT included
	maxEnv          = 100
	maxTags         = 100
	maxDescription  = 1 << 10
	k8sNameMaxLen   = 56 // 63 minus "-" and the six-letter code
	accountCodeSize = 6
)

// Defaults are what the manager knows of every install: the URL
// delegates reach it at (its --public-url) and the image its operators
// published (its --delegate-image, "" when none is set).
type Defaults struct {
	ManagerURL string
	Image      string
}

// Fill gives p the defaults it leaves out.
func (d Defaults) Fill(p Params) Params {
	if p.ManagerURL == "" {
		p.ManagerURL = d.ManagerURL
	}
	if p.Image == "" && strings.ToLower(strings.TrimSpace(p.Kind)) != KindSystemd {
		p.Image = d.Image
	}
	return p
}

// NoImageFix is what to do when no delegate image is known: there is no
// image of legate on a public registry to fall back on.
const NoImageFix = "publish legate's image to a registry your delegates pull from (scripts/image --push REGISTRY/legate:TAG, docs/install.md), " +
	"then start the manager with --delegate-image REGISTRY/legate:TAG (or " + EnvDelegateImage + "), or pass --image"

// EnvDelegateImage is the manager's --delegate-image when the flag is not
// given.
const EnvDelegateImage = "LEGATE_DELEGATE_IMAGE"

// TokenEmbedded reports whether the output of p carries the token's value,
// so that whoever saves it treats the file as a secret.
func TokenEmbedded(p Params) bool { return p.Token != "" && !p.Service }

// Notice is what a caller should tell the user (on stderr, never in the
// manifest's stream) about the output of p: "" when nothing.
func Notice(p Params) string {
	if !TokenEmbedded(p) {
		return ""
	}
	return "the output contains the delegate token's value: store it like a password (or use a reference to the token: " +
		tokenRefHint(p.Kind) + ")"
}

func tokenRefHint(kind string) string {
	switch kind {
	case KindKubernetes, KindHelm:
		return "--token-secret NAME of an existing Secret with the key " + TokenKey
	case KindECS, KindFargate:
		return "--token-secret-arn with a Secrets Manager ARN"
	}
	return "keep the file readable by its owner only"
}

// Generate validates p, fills in its defaults and returns the manifest.
func Generate(p Params) (string, error) {
	p, err := normalize(p)
	if err != nil {
		return "", err
	}
	switch p.Kind {
	case KindKubernetes:
		return kubernetes(p), nil
	case KindHelm:
		return helmValues(p), nil
	case KindDocker:
		if p.Compose {
			return compose(p), nil
		}
		return dockerRun(p), nil
	case KindECS, KindFargate:
		if p.Service {
			return ecsService(p), nil
		}
		return ecsTaskDefinition(p), nil
	case KindSystemd:
		return systemd(p), nil
	}
	panic("manifest: kind not handled: " + p.Kind) // normalize checked it
}

// normalize checks every field and fills in the defaults.
func normalize(p Params) (Params, error) {
	p.Kind = strings.ToLower(strings.TrimSpace(p.Kind))
	known := false
	for _, k := range Kinds() {
		known = known || k == p.Kind
	}
	if !known {
		return p, fmt.Errorf("unknown manifest kind %q: use one of %s", p.Kind, strings.Join(Kinds(), ", "))
	}
	k8s := p.Kind == KindKubernetes || p.Kind == KindHelm
	aws := p.Kind == KindECS || p.Kind == KindFargate
	if err := checkApplies(p, k8s, aws); err != nil {
		return p, err
	}
	if p.Image == "" && p.Kind != KindSystemd {
		return p, fmt.Errorf("no delegate image: %s", NoImageFix)
	}
	if err := normalizeOptions(&p); err != nil {
		return p, err
	}
	if err := checkAccountID(p.AccountID, k8s); err != nil {
		return p, err
	}
	u, err := checkManagerURL(p.ManagerURL)
	if err != nil {
		return p, err
	}
	p.ManagerURL = u
	if err := checkReachable(u, p.AllowLoopback); err != nil {
		return p, err
	}
	if err := checkTokenRef(p); err != nil {
		return p, err
	}
	if err := normalizeDelegate(&p); err != nil {
		return p, err
	}
	if k8s {
		if err := normalizeK8s(&p); err != nil {
			return p, err
		}
	}
	if aws {
		if err := normalizeAWS(&p); err != nil {
			return p, err
		}
	}
	return p, nil
}

// checkApplies refuses settings that do not apply to the kind, rather
// than dropping them.
func checkApplies(p Params, k8s, aws bool) error {
	type setting struct {
		set     bool
		name    string
		applies bool
	}
	for _, s := range []setting{
		{p.Image != "", "image", p.Kind != KindSystemd},
		{p.Namespace != "", "namespace", k8s},
		{p.RBAC != "", "rbac", k8s},
		{p.Upgrade != "", "upgrade", !p.Service},
		{p.Size != "", "size", !p.Service},
		{p.RunAsRoot, "run-as-root", !p.Service},
		{p.Hostname != "", "hostname", aws && !p.Service},
		{p.TokenSecret != "", "token-secret", k8s},
		{p.Compose, "compose", p.Kind == KindDocker},
		{p.Service, "service", aws},
		{p.TokenSecretARN != "", "token-secret-arn", aws},
		{p.Region != "", "region", aws},
		{p.ExecutionRoleARN != "", "execution-role-arn", aws},
		{p.Cluster != "", "cluster", aws},
		{len(p.Subnets) > 0, "subnet", p.Kind == KindFargate},
		{len(p.SecurityGroups) > 0, "security-group", p.Kind == KindFargate},
		{p.AssignPublicIP, "assign-public-ip", p.Kind == KindFargate},
		{p.CPU != "", "cpu", k8s || aws},
		{p.Memory != "", "memory", k8s || aws},
		{p.Autoscale != "", "autoscale", p.Kind == KindKubernetes},
		{p.AutoscaleWith != "", "autoscale-with", p.Kind == KindKubernetes},
	} {
		if s.set && !s.applies {
			if p.Service && aws && strings.Contains(" upgrade size run-as-root hostname ", " "+s.name+" ") {
				return fmt.Errorf("%s does not apply to the service JSON (service): give it to the task definition", s.name)
			}
			return fmt.Errorf("%s does not apply to a %s manifest", s.name, p.Kind)
		}
	}
	return nil
}

// checkTokenRef checks the delegate token: its value or one reference to
// it (a Kubernetes Secret, an AWS secret), given once.
func checkTokenRef(p Params) error {
	refs := 0
	for _, s := range []string{p.Token, p.TokenSecret, p.TokenSecretARN} {
		if s != "" {
			refs++
		}
	}
	switch {
	case refs == 0 && p.Service:
		// A service names the task definition; the token is in that.
	case refs == 0:
		return fmt.Errorf("no delegate token: give its value (token), or create one (legate manifest --new-token NAME), or %s", tokenRefHint(p.Kind))
	case refs > 1:
		return fmt.Errorf("give the token once: its value or a reference to it, not both")
	}
	if p.Token != "" {
		if err := checkToken(p.Token); err != nil {
			return err
		}
	}
	if p.TokenSecret != "" && !dnsSubdomain(p.TokenSecret) {
		return fmt.Errorf("token-secret %q is not a Kubernetes Secret name: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters", p.TokenSecret)
	}
	if p.TokenSecretARN != "" {
		if err := checkARN("token-secret-arn", p.TokenSecretARN, "secretsmanager"); err != nil {
			return err
		}
	}
	return nil
}

// normalizeDelegate checks and defaults what every kind says of the
// delegate: name, tags, replicas, image, description, environment.
func normalizeDelegate(p *Params) error {
	if p.Name == "" {
		p.Name = DefaultName
	}
	if err := checkName(p.Kind, p.Name); err != nil {
		return err
	}
	if len(p.Tags) > maxTags {
		return fmt.Errorf("%d tags: at most %d", len(p.Tags), maxTags)
	}
	tags := make([]string, 0, len(p.Tags))
	for _, t := range p.Tags {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if len(t) > 128 || strings.Contains(t, ",") || !utf8.ValidString(t) || hasControl(t) {
			return fmt.Errorf("tag %q: use 1-128 characters without commas or control characters", t)
		}
		tags = append(tags, t)
	}
	p.Tags = tags
	switch {
	case p.Replicas == 0:
		p.Replicas = 1
	case p.Replicas < 0 || p.Replicas > maxReplicas:
		return fmt.Errorf("replicas %d: use 1 to %d (replicas with one name are one delegate: that is how it is highly available)", p.Replicas, maxReplicas)
	}
	if p.Image != "" {
		if err := CheckImage(p.Image); err != nil {
			return err
		}
	}
	if len(p.Description) > maxDescription || !utf8.ValidString(p.Description) || hasControl(p.Description) {
		return fmt.Errorf("description: use at most %d characters, without control characters or line breaks", maxDescription)
	}
	return checkEnv(*p)
}

// normalizeK8s checks and defaults the Kubernetes settings (Kubernetes
// manifests and Helm values).
func normalizeK8s(p *Params) error {
	if p.Namespace == "" {
		p.Namespace = DefaultNamespace
	}
	if !dnsLabel(p.Namespace, 63) {
		return fmt.Errorf("namespace %q is not a Kubernetes namespace name: use lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters", p.Namespace)
	}
	switch p.RBAC {
	case "":
		p.RBAC = rbacCluster
	case rbacCluster, rbacNamespace, rbacNone:
	default:
		return fmt.Errorf("rbac %q: use cluster (a ClusterRole over every namespace), namespace (a Role in the delegate's namespace only) or none", p.RBAC)
	}
	if p.CPU == "" {
		p.CPU = defaultK8sCPU
	}
	if p.Memory == "" {
		p.Memory = defaultK8sMem
	}
	if !quantity(p.CPU) {
		return fmt.Errorf("cpu %q is not a Kubernetes quantity such as 50m, 0.5 or 1", p.CPU)
	}
	if !quantity(p.Memory) {
		return fmt.Errorf("memory %q is not a Kubernetes quantity such as 64Mi or 1Gi", p.Memory)
	}
	return normalizeAutoscale(p)
}

func normalizeAWS(p *Params) error {
	if p.Region == "" && !p.Service {
		return fmt.Errorf("no AWS region for the awslogs log driver: set region (the CLI reads AWS_REGION)")
	}
	if p.Region != "" && !awsRegion(p.Region) {
		return fmt.Errorf("region %q is not an AWS region such as us-east-1", p.Region)
	}
	if p.ExecutionRoleARN != "" {
		if err := checkARN("execution-role-arn", p.ExecutionRoleARN, "iam"); err != nil {
			return err
		}
	}
	if p.ExecutionRoleARN == "" && (p.Kind == KindFargate || p.TokenSecretARN != "") && !p.Service {
		why := "Fargate needs it to pull the image and write logs"
		if p.Kind == KindECS {
			why = "ECS needs it to read the token's secret"
		}
		return fmt.Errorf("no task execution role: set execution-role-arn (such as arn:aws:iam::123456789012:role/ecsTaskExecutionRole); %s", why)
	}
	if p.Cluster == "" {
		p.Cluster = DefaultCluster
	}
	if !awsName(p.Cluster) {
		return fmt.Errorf("cluster %q: use 1-255 letters, digits, '-' or '_'", p.Cluster)
	}
	if p.Kind == KindFargate && p.Service && len(p.Subnets) == 0 {
		return fmt.Errorf("a Fargate service needs its network: set subnet (at least one, with a route to the manager) and security-group")
	}
	for _, s := range append(append([]string{}, p.Subnets...), p.SecurityGroups...) {
		if s == "" || len(s) > 255 || strings.IndexFunc(s, func(r rune) bool { return !(r < 128 && (isAlnum(byte(r)) || r == '-')) }) >= 0 {
			return fmt.Errorf("subnet or security group %q: use an ID such as subnet-0123abcd or sg-0123abcd", s)
		}
	}
	if p.CPU == "" {
		p.CPU = defaultECSCPU
	}
	if p.Memory == "" {
		p.Memory = defaultECSMem
	}
	cpu, err1 := strconv.Atoi(p.CPU)
	mem, err2 := strconv.Atoi(p.Memory)
	if err1 != nil || cpu < 128 || cpu > 16384 {
		return fmt.Errorf("cpu %q: use CPU units, 1024 per vCPU (256, 512, 1024, ...)", p.CPU)
	}
	if err2 != nil || mem < 128 || mem > 122880 {
		return fmt.Errorf("memory %q: use MiB (512, 1024, ...)", p.Memory)
	}
	if p.Kind == KindFargate && !fargateSize(cpu, mem) {
		return fmt.Errorf("cpu %d with memory %d MiB is not a Fargate task size: use 256 with 512-2048, 512 with 1024-4096, 1024 with 2048-8192, 2048 with 4096-16384 (steps of 1024), 4096 with 8192-30720", cpu, mem)
	}
	return nil
}

// fargateSize reports whether cpu/memory is a task size Fargate accepts.
func fargateSize(cpu, mem int) bool {
	switch cpu {
	case 256:
		return mem == 512 || mem == 1024 || mem == 2048
	case 512:
		return mem >= 1024 && mem <= 4096 && mem%1024 == 0
	case 1024:
		return mem >= 2048 && mem <= 8192 && mem%1024 == 0
	case 2048:
		return mem >= 4096 && mem <= 16384 && mem%1024 == 0
	case 4096:
		return mem >= 8192 && mem <= 30720 && mem%1024 == 0
	}
	return false
}

// reservedEnv says which setting to use instead of an extra variable
// that the manifest sets itself; the other generation's names are
// reserved too, since the delegate refuses two different values.
func reservedEnv(name string) (string, bool) {
	switch name {
	case "ACCOUNT_ID", "HARNESS_ACCOUNT_ID":
		return "the account", true
	case "DELEGATE_TOKEN", "HARNESS_TOKEN", "ACCOUNT_SECRET":
		return "token", true
	case "MANAGER_HOST_AND_PORT", "HARNESS_URL":
		return "manager-url", true
	case "DELEGATE_NAME", "HARNESS_NAME":
		return "name", true
	case "DELEGATE_TAGS", "HARNESS_TAGS":
		return "tags", true
	case "DELEGATE_TYPE":
		return "the kind", true
	case "DELEGATE_DESCRIPTION":
		return "description", true
	}
	return "", false
}

func checkEnv(p Params) error {
	if len(p.Env) > maxEnv {
		return fmt.Errorf("%d environment variables: at most %d", len(p.Env), maxEnv)
	}
	seen := map[string]bool{}
	for _, e := range p.Env {
		if err := checkEnvName(e.Name); err != nil {
			return err
		}
		if use, ok := reservedEnv(e.Name); ok {
			return fmt.Errorf("env %s is set by the manifest: use %s instead", e.Name, use)
		}
		if seen[e.Name] {
			return fmt.Errorf("env %s is given twice", e.Name)
		}
		seen[e.Name] = true
		if len(e.Value) > maxValue || !utf8.ValidString(e.Value) || strings.ContainsRune(e.Value, 0) {
			return fmt.Errorf("env %s: the value must be valid UTF-8 without NUL bytes, at most %d bytes", e.Name, maxValue)
		}
		if p.Kind == KindSystemd && hasControl(e.Value) {
			return fmt.Errorf("env %s: a systemd environment file cannot hold line breaks or control characters (for INIT_SCRIPT, put the script in a file and run it from a one-line INIT_SCRIPT)", e.Name)
		}
	}
	return nil
}

func checkEnvName(n string) error {
	if n == "" || len(n) > 256 {
		return fmt.Errorf("env name %q: use letters, digits and '_', not starting with a digit", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(isAlnum(c) || c == '_') || (i == 0 && '0' <= c && c <= '9') {
			return fmt.Errorf("env name %q: use letters, digits and '_', not starting with a digit", n)
		}
	}
	return nil
}

// ParseEnv reads a --env value, NAME=VALUE (VALUE may be empty and may
// contain '='), and checks the name.
func ParseEnv(s string) (protocol.EnvVar, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return protocol.EnvVar{}, fmt.Errorf("env %q: want NAME=VALUE", s)
	}
	if err := checkEnvName(name); err != nil {
		return protocol.EnvVar{}, err
	}
	return protocol.EnvVar{Name: name, Value: value}, nil
}

func checkAccountID(id string, k8s bool) error {
	if id == "" {
		return fmt.Errorf("no account ID (the manager sets it from the API key)")
	}
	ok := len(id) <= 63 && isAlnum(id[0]) && isAlnum(id[len(id)-1])
	for i := 0; ok && i < len(id); i++ {
		ok = isAlnum(id[i]) || id[i] == '-' || id[i] == '_' || id[i] == '.'
	}
	if !ok {
		return fmt.Errorf("account ID %q: want 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", id)
	}
	if k8s && len(AccountCode(id)) < accountCodeSize {
		return fmt.Errorf("account ID %q: a Kubernetes delegate's name carries the first six letters or digits of the account ID, and it has fewer", id)
	}
	return nil
}

// AccountCode is the six-letter code of an account that Kubernetes
// delegates carry in their StatefulSet name (and so in their pods' host
// names): the first six letters or digits of the account ID, lowercased,
// so that delegates of two accounts never collide. The Helm chart computes
// the same code.
func AccountCode(accountID string) string {
	var b strings.Builder
	for i := 0; i < len(accountID) && b.Len() < accountCodeSize; i++ {
		c := accountID[i]
		if isAlnum(c) {
			b.WriteByte(lower(c))
		}
	}
	return b.String()
}

func checkManagerURL(raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("no manager URL: set it to the URL delegates reach the manager at, such as https://legate.example.com")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || !utf8.ValidString(raw) || hasControl(raw) || strings.ContainsAny(raw, " \"'\\`$"):
		return "", fmt.Errorf("manager URL %q is not a URL such as https://legate.example.com", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("manager URL %q must start with http:// or https://", raw)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("manager URL %q has no host", raw)
	case u.User != nil:
		return "", fmt.Errorf("manager URL %q must not contain credentials", raw)
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(raw, "?#"):
		return "", fmt.Errorf("manager URL %q must not have a query or fragment", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("manager URL %q: port out of range", raw)
		}
	}
	return strings.TrimRight(raw, "/"), nil
}

// checkReachable refuses a manager URL that, seen from a delegate in a
// container or on another host, names the delegate itself or nothing:
// loopback, unspecified or link-local, unless allowed for a trial on the
// manager's own host.
func checkReachable(managerURL string, allow bool) error {
	u, err := url.Parse(managerURL)
	if err != nil || allow || !LoopbackHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("manager URL %s is on loopback (or unspecified, or link-local): in a container or on another host it is the delegate itself, not the manager; "+
		"start the manager with --public-url set to the URL delegates reach it at (such as https://legate.example.com), or pass --manager-url; "+
		"for a trial on the manager's own host, pass --allow-loopback", managerURL)
}

// LoopbackHost reports whether host (a URL's hostname) is localhost (or a
// name under it), a loopback, unspecified or link-local address.
func LoopbackHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast()
}

func checkToken(t string) error {
	if len(t) > 512 || strings.IndexFunc(t, func(r rune) bool {
		return r > 126 || r <= ' ' || r == '"' || r == '\'' || r == '\\' || r == '$' || r == '`'
	}) >= 0 {
		return fmt.Errorf("the token is not a delegate token (printable ASCII without spaces or quotes, at most 512 characters): copy it again from legate token create")
	}
	return nil
}

func checkARN(what, arn, service string) error {
	parts := strings.SplitN(arn, ":", 6)
	if len(arn) > 2048 || len(parts) != 6 || parts[0] != "arn" || parts[2] != service || parts[5] == "" || strings.IndexFunc(arn, func(r rune) bool { return r <= ' ' || r > 126 || r == '"' }) >= 0 {
		return fmt.Errorf("%s %q is not an ARN of %s (arn:aws:%s:REGION:ACCOUNT:...)", what, arn, service, service)
	}
	return nil
}

func checkName(kind, name string) error {
	switch kind {
	case KindKubernetes, KindHelm:
		if !dnsLabel(name, k8sNameMaxLen) {
			return fmt.Errorf("name %q cannot name Kubernetes objects: use lowercase letters, digits and '-', starting and ending with a letter or digit, at most %d characters (the StatefulSet adds '-' and the account's six-letter code)", name, k8sNameMaxLen)
		}
	case KindECS, KindFargate:
		if len(name) > 63 || !awsName(name) {
			return fmt.Errorf("name %q cannot name an ECS task family, container or service: use 1-63 letters, digits, '-' or '_'", name)
		}
	default:
		ok := len(name) <= 63 && isAlnum(name[0])
		for i := 0; ok && i < len(name); i++ {
			ok = isAlnum(name[i]) || name[i] == '-' || name[i] == '_' || name[i] == '.'
		}
		if !ok {
			return fmt.Errorf("name %q: use 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit", name)
		}
	}
	return nil
}

// dnsLabel: RFC 1123 label as Kubernetes checks it, at most max long.
func dnsLabel(s string, max int) bool {
	if s == "" || len(s) > max || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-') {
			return false
		}
	}
	return true
}

// dnsSubdomain: RFC 1123 subdomain (labels separated by dots), at most 253.
func dnsSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !dnsLabel(l, 63) {
			return false
		}
	}
	return true
}

func awsName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(isAlnum(s[i]) || s[i] == '-' || s[i] == '_') {
			return false
		}
	}
	return true
}

func awsRegion(s string) bool {
	if len(s) < 3 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-') {
			return false
		}
	}
	return true
}

// quantity: a Kubernetes resource quantity as people write them: a
// decimal number and an optional suffix.
func quantity(s string) bool {
	num := strings.TrimRight(s, "kKMGTPEimu")
	suffix := s[len(num):]
	switch suffix {
	case "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei":
	default:
		return false
	}
	if num == "" || len(num) > 20 || num[0] == '.' || num[len(num)-1] == '.' || strings.Count(num, ".") > 1 {
		return false
	}
	for i := 0; i < len(num); i++ {
		if !('0' <= num[i] && num[i] <= '9') && num[i] != '.' {
			return false
		}
	}
	return true
}

// CheckImage checks an image reference's characters (the registry decides
// the rest).
func CheckImage(s string) error {
	if !validImage(s) {
		return fmt.Errorf("image %q is not an image reference such as registry.example.com/legate:v1.2.3", s)
	}
	return nil
}

// validImage: an image reference's characters, starting with a letter or
// digit (the registry decides the rest).
func validImage(s string) bool {
	if len(s) > 512 || s == "" || !isAlnum(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || strings.IndexByte("._-/:@", c) >= 0) {
			return false
		}
	}
	return true
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) >= 0
}

func isAlnum(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// delegateEnv is the environment every manifest gives the delegate, in
// order; the token is left out (each kind passes it its own way), the
// extra variables come last.
func delegateEnv(p Params, typ string) []protocol.EnvVar {
	env := []protocol.EnvVar{
		{Name: "ACCOUNT_ID", Value: p.AccountID},
		{Name: "MANAGER_HOST_AND_PORT", Value: p.ManagerURL},
		{Name: "DELEGATE_NAME", Value: p.Name},
		{Name: "DELEGATE_TYPE", Value: typ},
	}
	if len(p.Tags) > 0 {
		env = append(env, protocol.EnvVar{Name: "DELEGATE_TAGS", Value: strings.Join(p.Tags, ",")})
	}
	if p.Description != "" {
		env = append(env, protocol.EnvVar{Name: "DELEGATE_DESCRIPTION", Value: p.Description})
	}
	if p.Kind == KindFargate && p.Hostname != "" {
		// awsvpc takes no container hostname: the delegate's own override.
		env = append(env, protocol.EnvVar{Name: "DELEGATE_HOSTNAME", Value: p.Hostname})
	}
	env = append(env, sizeEnv(p)...)
	return append(env, p.Env...)
}
