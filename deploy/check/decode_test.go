package check

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	ecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// k8sObject is one decoded Kubernetes document.
type k8sObject struct {
	Kind string
	Obj  any // a pointer to the k8s.io/api type of Kind
}

// newK8sObject returns an empty object of apiVersion/kind, or an error for
// a kind the artifacts are not expected to hold.
func newK8sObject(apiVersion, kind string) (any, error) {
	type gk struct{ v, k string }
	switch (gk{apiVersion, kind}) {
	case gk{"v1", "Namespace"}:
		return &corev1.Namespace{}, nil
	case gk{"v1", "Secret"}:
		return &corev1.Secret{}, nil
	case gk{"v1", "ConfigMap"}:
		return &corev1.ConfigMap{}, nil
	case gk{"v1", "ServiceAccount"}:
		return &corev1.ServiceAccount{}, nil
	case gk{"v1", "Service"}:
		return &corev1.Service{}, nil
	case gk{"apps/v1", "StatefulSet"}:
		return &appsv1.StatefulSet{}, nil
	case gk{"apps/v1", "Deployment"}:
		return &appsv1.Deployment{}, nil
	case gk{"batch/v1", "CronJob"}:
		return &batchv1.CronJob{}, nil
	case gk{"rbac.authorization.k8s.io/v1", "ClusterRole"}:
		return &rbacv1.ClusterRole{}, nil
	case gk{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding"}:
		return &rbacv1.ClusterRoleBinding{}, nil
	case gk{"rbac.authorization.k8s.io/v1", "Role"}:
		return &rbacv1.Role{}, nil
	case gk{"rbac.authorization.k8s.io/v1", "RoleBinding"}:
		return &rbacv1.RoleBinding{}, nil
	case gk{"networking.k8s.io/v1", "Ingress"}:
		return &networkingv1.Ingress{}, nil
	case gk{"policy/v1", "PodDisruptionBudget"}:
		return &policyv1.PodDisruptionBudget{}, nil
	case gk{"autoscaling/v2", "HorizontalPodAutoscaler"}:
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	case gk{"keda.sh/v1alpha1", "ScaledObject"}:
		return &kedaScaledObject{}, nil
	case gk{"keda.sh/v1alpha1", "TriggerAuthentication"}:
		return &kedaTriggerAuthentication{}, nil
	}
	return nil, fmt.Errorf("unexpected object %s %s", apiVersion, kind)
}

// decodeK8s splits a multi-document YAML stream and decodes each document
// strictly (sigs.k8s.io/yaml UnmarshalStrict: an unknown or misplaced
// field, or a duplicate key, is an error) into its k8s.io/api type.
// Empty documents (a chart template that renders nothing) are skipped.
func decodeK8s(text string) ([]k8sObject, error) {
	var out []k8sObject
	for i, doc := range splitYAMLDocs(text) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("document %d: %v", i, err)
		}
		obj, err := newK8sObject(tm.APIVersion, tm.Kind)
		if err != nil {
			return nil, fmt.Errorf("document %d: %v", i, err)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %v", i, tm.Kind, err)
		}
		out = append(out, k8sObject{Kind: tm.Kind, Obj: obj})
	}
	return out, nil
}

func splitYAMLDocs(text string) []string {
	var docs []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " ") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
	}
	return append(docs, cur.String())
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// strictJSON decodes one JSON value into v, refusing unknown fields and
// trailing data.
func strictJSON(text string, v any) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

// decodeTaskDefinition and decodeService decode ECS JSON strictly into the
// AWS SDK's input types (their field names match case-insensitively, as
// encoding/json does).
func decodeTaskDefinition(text string) (*ecs.RegisterTaskDefinitionInput, error) {
	var in ecs.RegisterTaskDefinitionInput
	if err := strictJSON(text, &in); err != nil {
		return nil, err
	}
	if in.Family == nil || len(in.ContainerDefinitions) == 0 {
		return nil, fmt.Errorf("a task definition needs family and containerDefinitions")
	}
	return &in, nil
}

func decodeService(text string) (*ecs.CreateServiceInput, error) {
	var in ecs.CreateServiceInput
	if err := strictJSON(text, &in); err != nil {
		return nil, err
	}
	if in.ServiceName == nil {
		return nil, fmt.Errorf("a service needs serviceName")
	}
	return &in, nil
}

// composeFile is the subset of the compose specification that legate
// writes; decodeCompose refuses any other key.
type composeFile struct {
	Services map[string]composeService `json:"services"`
}

type composeService struct {
	Image           string            `json:"image"`
	Command         []string          `json:"command"`
	Restart         string            `json:"restart"`
	StopGracePeriod string            `json:"stop_grace_period"`
	Environment     map[string]string `json:"environment"`
	User            string            `json:"user,omitempty"`
	CPUs            string            `json:"cpus,omitempty"`
	MemLimit        string            `json:"mem_limit,omitempty"`
	// NetworkMode is "host" for a same-host trial (--allow-loopback).
	NetworkMode string `json:"network_mode,omitempty"`
	Deploy      *struct {
		Replicas int `json:"replicas"`
	} `json:"deploy,omitempty"`
}

func decodeCompose(text string) (*composeFile, error) {
	var c composeFile
	if err := yaml.UnmarshalStrict([]byte(text), &c); err != nil {
		return nil, err
	}
	if len(c.Services) == 0 {
		return nil, fmt.Errorf("no services")
	}
	for name, s := range c.Services {
		if s.Image == "" {
			return nil, fmt.Errorf("service %s has no image", name)
		}
		switch s.Restart {
		case "", "no", "always", "on-failure", "unless-stopped":
		default:
			return nil, fmt.Errorf("service %s: restart %q", name, s.Restart)
		}
	}
	return &c, nil
}

// composeValue undoes compose's "$$" escape of a literal "$".
func composeValue(s string) string { return strings.ReplaceAll(s, "$$", "$") }

// dockerRun is one parsed docker run command.
type dockerRun struct {
	Name    string
	Env     map[string]string
	Image   string
	Args    []string
	Network string
	// Flags are the values of --user, --cpus and --memory.
	Flags map[string]string
}

// parseDockerRuns reads the docker run commands legate prints: words split
// as a POSIX shell does for plain words, single quotes and backslash
// line continuations; only the flags legate writes are accepted.
func parseDockerRuns(text string) ([]dockerRun, error) {
	words, err := shellWords(text)
	if err != nil {
		return nil, err
	}
	var runs []dockerRun
	for _, cmd := range words {
		if len(cmd) < 3 || cmd[0] != "docker" || cmd[1] != "run" {
			return nil, fmt.Errorf("not a docker run command: %q", cmd)
		}
		r := dockerRun{Env: map[string]string{}, Flags: map[string]string{}}
		i := 2
	flags:
		for ; i < len(cmd); i++ {
			switch cmd[i] {
			case "--detach":
			case "--name", "--restart", "--stop-timeout", "--env", "--network", "--user", "--cpus", "--memory":
				if i+1 >= len(cmd) {
					return nil, fmt.Errorf("%s without a value", cmd[i])
				}
				if cmd[i] == "--network" && cmd[i+1] != "host" {
					return nil, fmt.Errorf("--network %q: legate writes only host", cmd[i+1])
				}
				v := cmd[i+1]
				switch cmd[i] {
				case "--name":
					r.Name = v
				case "--user", "--cpus", "--memory":
					if _, dup := r.Flags[cmd[i]]; dup {
						return nil, fmt.Errorf("%s twice", cmd[i])
					}
					r.Flags[cmd[i]] = v
				case "--network":
					r.Network = v
				case "--env":
					k, val, ok := strings.Cut(v, "=")
					if !ok {
						return nil, fmt.Errorf("--env %q is not NAME=VALUE", v)
					}
					if _, dup := r.Env[k]; dup {
						return nil, fmt.Errorf("--env %s twice", k)
					}
					r.Env[k] = val
				}
				i++
			default:
				if strings.HasPrefix(cmd[i], "-") {
					return nil, fmt.Errorf("unexpected docker run flag %q", cmd[i])
				}
				break flags
			}
		}
		if i >= len(cmd) {
			return nil, fmt.Errorf("no image")
		}
		r.Image, r.Args = cmd[i], cmd[i+1:]
		runs = append(runs, r)
	}
	return runs, nil
}

// shellWords splits text into commands of words as a POSIX shell does
// for what legate writes: plain words, single-quoted strings (which may
// span lines), a backslash quoting the next character, a backslash-newline
// joining lines, and a newline ending a command. Other shell syntax is
// refused.
func shellWords(text string) ([][]string, error) {
	var cmds [][]string
	var words []string
	var cur strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(text[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote")
			}
			cur.WriteString(text[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '\\':
			if i+1 >= len(text) {
				return nil, fmt.Errorf("trailing backslash")
			}
			if text[i+1] == '\n' {
				endWord()
			} else {
				cur.WriteByte(text[i+1])
				inWord = true
			}
			i++
		case c == ' ' || c == '\t':
			endWord()
		case c == '\n':
			endWord()
			if len(words) > 0 {
				cmds = append(cmds, words)
				words = nil
			}
		case strings.IndexByte("\"$`;&|<>(){}*?[#~", c) >= 0:
			return nil, fmt.Errorf("shell metacharacter %q outside quotes", c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	endWord()
	if len(words) > 0 {
		cmds = append(cmds, words)
	}
	return cmds, nil
}

// systemdInstall is the parsed systemd output: the heredocs of the
// install script, the unit's sections and the environment file's values.
type systemdInstall struct {
	Files   map[string]string            // path -> content written by the script
	Unit    map[string]map[string]string // section -> key -> value
	EnvFile map[string]string
}

// unitKeys are the keys legate's unit may use, per section.
var unitKeys = map[string][]string{
	"Unit":    {"Description", "Wants", "After", "Documentation"},
	"Service": {"Type", "User", "EnvironmentFile", "StateDirectory", "WorkingDirectory", "ExecStart", "Restart", "RestartSec", "KillMode", "KillSignal", "TimeoutStopSec", "LimitNOFILE", "CPUQuota", "MemoryMax"},
	"Install": {"WantedBy"},
}

// parseSystemd reads the install script: the files its quoted heredocs
// write (cat > PATH <<'EOF' ... EOF), then the unit (known sections and
// keys only, each once, ExecStart and EnvironmentFile present) and the
// environment file (NAME="value" with systemd's escapes in double quotes).
func parseSystemd(script string) (*systemdInstall, error) {
	s := &systemdInstall{Files: map[string]string{}}
	lines := strings.Split(script, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "cat > ") {
			continue
		}
		rest := strings.TrimPrefix(l, "cat > ")
		path, delim, ok := strings.Cut(rest, " <<'")
		if !ok || !strings.HasSuffix(delim, "'") {
			return nil, fmt.Errorf("heredoc line %q", l)
		}
		delim = strings.TrimSuffix(delim, "'")
		var body strings.Builder
		for i++; i < len(lines) && lines[i] != delim; i++ {
			body.WriteString(lines[i] + "\n")
		}
		if i == len(lines) {
			return nil, fmt.Errorf("heredoc %s not closed", delim)
		}
		s.Files[path] = body.String()
	}
	var unitText, envText string
	var envPath string
	for p, c := range s.Files {
		switch {
		case strings.HasSuffix(p, ".service"):
			unitText = c
		case strings.HasSuffix(p, ".env"):
			envText, envPath = c, p
		}
	}
	if unitText == "" || envText == "" {
		return nil, fmt.Errorf("the script writes no unit or no environment file")
	}
	unit, err := parseUnit(unitText)
	if err != nil {
		return nil, fmt.Errorf("unit: %v", err)
	}
	s.Unit = unit
	if unit["Service"]["EnvironmentFile"] != envPath {
		return nil, fmt.Errorf("unit: EnvironmentFile=%s, but the script writes %s", unit["Service"]["EnvironmentFile"], envPath)
	}
	if s.EnvFile, err = parseEnvFile(envText); err != nil {
		return nil, fmt.Errorf("environment file: %v", err)
	}
	return s, nil
}

func parseUnit(text string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	section := ""
	for n, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
			continue
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
			if _, ok := unitKeys[section]; !ok {
				return nil, fmt.Errorf("line %d: unknown section [%s]", n+1, section)
			}
			if out[section] != nil {
				return nil, fmt.Errorf("line %d: section [%s] twice", n+1, section)
			}
			out[section] = map[string]string{}
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("line %d: %q is not KEY=VALUE in a section", n+1, l)
		}
		known := false
		for _, x := range unitKeys[section] {
			known = known || x == k
		}
		if !known {
			return nil, fmt.Errorf("line %d: %s= is not a key of [%s]", n+1, k, section)
		}
		if _, dup := out[section][k]; dup {
			return nil, fmt.Errorf("line %d: %s= twice", n+1, k)
		}
		out[section][k] = v
	}
	for _, need := range []struct{ s, k string }{{"Service", "ExecStart"}, {"Service", "EnvironmentFile"}, {"Install", "WantedBy"}} {
		if out[need.s][need.k] == "" {
			return nil, fmt.Errorf("no %s= in [%s]", need.k, need.s)
		}
	}
	return out, nil
}

// parseEnvFile reads NAME="value" lines as systemd does for double-quoted
// values: a backslash escapes '"', '\', '`' and '$'.
func parseEnvFile(text string) (map[string]string, error) {
	out := map[string]string{}
	for n, l := range strings.Split(text, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" || !strings.HasPrefix(v, `"`) || !strings.HasSuffix(v, `"`) || len(v) < 2 {
			return nil, fmt.Errorf("line %d: %q is not NAME=\"VALUE\"", n+1, l)
		}
		inner := v[1 : len(v)-1]
		var b bytes.Buffer
		for i := 0; i < len(inner); i++ {
			c := inner[i]
			switch {
			case c == '\\':
				if i+1 >= len(inner) || strings.IndexByte("\"\\`$", inner[i+1]) < 0 {
					return nil, fmt.Errorf("line %d: a backslash that escapes nothing", n+1)
				}
				b.WriteByte(inner[i+1])
				i++
			case c == '"' || c == '$' || c == '`':
				return nil, fmt.Errorf("line %d: unescaped %q", n+1, c)
			default:
				b.WriteByte(c)
			}
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("line %d: %s twice", n+1, k)
		}
		out[k] = b.String()
	}
	return out, nil
}
