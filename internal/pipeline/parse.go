package pipeline

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
)

// Problem is one thing wrong with a pipeline file, at a line (1-based; 0
// when the file as a whole is wrong) and a field path such as
// stages[0].steps[1].timeout.
type Problem struct {
	Line  int
	Field string
	Msg   string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error is what Parse returns for a file it refuses: every problem found,
// in file order (at most maxProblems).
type Error struct {
	Problems []Problem
}

const maxProblems = 50

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

type parser struct {
	problems []Problem
	// lines: the line of each step, by its path (for reference problems).
	lines map[string]int
	// webhookInputLines: triggers.webhook.inputs, checked once inputs:
	// is read.
	webhookInputLines *yaml.Node
}

func (ps *parser) add(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	ps.addLine(line, field, format, args...)
}

func (ps *parser) addLine(line int, field, format string, args ...any) {
	if len(ps.problems) >= maxProblems {
		return
	}
	ps.problems = append(ps.problems, Problem{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Parse reads and validates a pipeline file. A refused file gives an
// *Error that lists its problems with their lines and fields.
func Parse(src []byte) (*Pipeline, error) {
	if len(src) > MaxSourceBytes {
		return nil, &Error{Problems: []Problem{{Msg: fmt.Sprintf("the file has %d bytes: at most %d", len(src), MaxSourceBytes)}}}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, &Error{Problems: []Problem{yamlProblem(err)}}
	}
	ps := &parser{lines: map[string]int{}}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		ps.add(nil, "", "the file is empty: a pipeline needs a name and stages")
		return nil, &Error{Problems: ps.problems}
	}
	if !ps.noAliases(doc.Content[0]) {
		return nil, &Error{Problems: ps.problems}
	}
	p := ps.pipeline(doc.Content[0])
	// The references and workspaces are checked even when the structure
	// has problems, so that one apply reports them all; a problem they
	// find that may only follow from a structural one is left out.
	structural := len(ps.problems)
	ps.references(p)
	ps.workspaces(p)
	if structural > 0 {
		ps.problems = append(ps.problems[:structural:structural], independent(ps.problems[:structural], ps.problems[structural:])...)
	}
	if len(ps.problems) > 0 {
		slices.SortStableFunc(ps.problems, func(a, b Problem) int { return a.Line - b.Line })
		return nil, &Error{Problems: ps.problems}
	}
	return p, nil
}

// independent returns the problems of later that cannot follow from one of
// structural: not in a step with a structural problem, and, for a
// reference to another part of the file (an input, a step, its outputs,
// a workspace), not when that part may be what is broken.
func independent(structural, later []Problem) []Problem {
	var out []Problem
	for _, p := range later {
		if !slices.ContainsFunc(structural, func(s Problem) bool { return follows(p, s) }) {
			out = append(out, p)
		}
	}
	return out
}

func follows(p, s Problem) bool {
	if sp := stepPath(p.Field); sp != "" && (underPath(s.Field, sp) || s.Field != "" && underPath(sp, s.Field)) {
		return true
	}
	crossRef := false
	for _, m := range []string{"no input named", "no stage named", "no step ", "does not declare the output", "empty_dir"} {
		crossRef = crossRef || strings.Contains(p.Msg, m)
	}
	if !crossRef {
		return false
	}
	ss := stepPath(s.Field)
	return ss == "" || ss == s.Field || strings.HasSuffix(s.Field, ".name") || strings.Contains(s.Field, ".outputs") || strings.Contains(s.Field, ".volumes")
}

// stepPath is the step part of a field path (stages[0].steps[1] or
// stages[0].steps[1].parallel[2]), "" when the field is not in a step.
func stepPath(field string) string {
	i := strings.Index(field, ".steps[")
	if i < 0 {
		return ""
	}
	end := i + strings.Index(field[i:], "]") + 1
	if rest := field[end:]; strings.HasPrefix(rest, ".parallel[") {
		end += strings.Index(rest, "]") + 1
	}
	return field[:end]
}

// underPath reports whether field is path or inside it.
func underPath(field, path string) bool {
	return field == path || strings.HasPrefix(field, path) && (field[len(path)] == '.' || field[len(path)] == '[')
}

// yamlProblem turns the YAML library's syntax error ("yaml: line 3: …")
// into a Problem.
func yamlProblem(err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				return Problem{Line: n, Msg: "not valid YAML: " + tail}
			}
		}
	}
	return Problem{Msg: "not valid YAML: " + msg}
}

// noAliases refuses anchors and aliases: they are not needed in a pipeline
// and are how a small file expands into a huge one.
func (ps *parser) noAliases(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		ps.add(n, "", "YAML anchors and aliases (& and *) are not supported in a pipeline file")
		return false
	}
	for _, c := range n.Content {
		if !ps.noAliases(c) {
			return false
		}
	}
	return true
}

// fields reads a mapping node: each known key's value goes to its handler
// in file order; unknown and repeated keys are problems.
func (ps *parser) fields(n *yaml.Node, path string, handlers map[string]func(*yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		ps.add(n, path, "expected a mapping (key: value lines), found %s", kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		h, ok := handlers[key]
		if !ok || k.Kind != yaml.ScalarNode {
			known := make([]string, 0, len(handlers))
			for name := range handlers {
				known = append(known, name)
			}
			slices.Sort(known)
			ps.add(k, join(path, key), "unknown field; known fields here: %s", strings.Join(known, ", "))
			continue
		}
		if seen[key] {
			ps.add(k, join(path, key), "given twice")
			continue
		}
		seen[key] = true
		h(v)
	}
}

func hasKey(n *yaml.Node, key string) bool {
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// str reads a scalar string; numbers and booleans are taken as their text
// (version: 1.10 is the text "1.10").
func (ps *parser) str(n *yaml.Node, path string) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		ps.add(n, path, "expected a text value, found %s", kindName(n))
		return ""
	}
	return n.Value
}

func (ps *parser) strList(n *yaml.Node, path string) []string {
	if n.Kind != yaml.SequenceNode {
		ps.add(n, path, "expected a list, found %s", kindName(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		out = append(out, ps.str(c, fmt.Sprintf("%s[%d]", path, i)))
	}
	return out
}

// strMap reads a mapping of texts, each key checked by checkKey.
func (ps *parser) strMap(n *yaml.Node, path string, checkKey func(string) error) map[string]string {
	if n.Kind != yaml.MappingNode {
		ps.add(n, path, "expected a mapping, found %s", kindName(n))
		return nil
	}
	out := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kp := join(path, k.Value)
		if k.Kind != yaml.ScalarNode {
			ps.add(k, path, "expected a text key, found %s", kindName(k))
			continue
		}
		if err := checkKey(k.Value); err != nil {
			ps.add(k, kp, "%v", err)
			continue
		}
		if _, dup := out[k.Value]; dup {
			ps.add(k, kp, "given twice")
			continue
		}
		out[k.Value] = ps.str(v, kp)
	}
	return out
}

func (ps *parser) integer(n *yaml.Node, path string, lo, hi int) int {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		ps.add(n, path, "expected a whole number, found %s", kindName(n))
		return 0
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < lo || v > hi {
		ps.add(n, path, "%s is out of range: %d to %d", n.Value, lo, hi)
		return 0
	}
	return v
}

// checkName: 1 to MaxNameLen letters, digits, '_' or '-', starting with a
// letter or digit. No '.': names are joined by dots in expressions.
func checkName(kind, name string) error {
	ok := name != "" && len(name) <= MaxNameLen && isAlnum(name[0])
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = isAlnum(c) || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("%s name %q is invalid: use 1-%d letters, digits, '_' or '-', starting with a letter or digit", kind, name, MaxNameLen)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// checkOutputKey: an environment-variable-like name, since outputs are
// written as KEY=VALUE lines.
func checkOutputKey(k string) error {
	ok := k != "" && len(k) <= MaxNameLen && !(k[0] >= '0' && k[0] <= '9')
	for i := 0; ok && i < len(k); i++ {
		ok = isAlnum(k[i]) || k[i] == '_'
	}
	if !ok {
		return fmt.Errorf("output key %q is invalid: use 1-%d letters, digits or '_', not starting with a digit", k, MaxNameLen)
	}
	return nil
}

func checkEnvName(k string) error {
	ok := k != "" && len(k) <= 256 && !(k[0] >= '0' && k[0] <= '9')
	for i := 0; ok && i < len(k); i++ {
		ok = isAlnum(k[i]) || k[i] == '_'
	}
	if !ok {
		return fmt.Errorf("environment variable name %q is invalid: use letters, digits or '_', not starting with a digit", k)
	}
	if k == OutputEnv {
		return fmt.Errorf("%s is set by the delegate (the file for the step's outputs)", OutputEnv)
	}
	return nil
}

// OutputEnv is the environment variable that holds the path of the file a
// step writes its outputs to, as KEY=VALUE lines.
const OutputEnv = protocol.OutputEnv

func anyKey(string) error { return nil }

func (ps *parser) pipeline(n *yaml.Node) *Pipeline {
	p := &Pipeline{}
	var stagesNode *yaml.Node
	ps.fields(n, "", map[string]func(*yaml.Node){
		"name":        func(v *yaml.Node) { p.Name = ps.str(v, "name") },
		"description": func(v *yaml.Node) { p.Description = ps.str(v, "description") },
		"inputs":      func(v *yaml.Node) { p.Inputs = ps.inputs(v) },
		"triggers":    func(v *yaml.Node) { ps.triggers(v, p) },
		"priority": func(v *yaml.Node) {
			if v.Kind != yaml.ScalarNode {
				ps.add(v, "priority", "expected low, normal, high, urgent or a number, found %s", kindName(v))
				return
			}
			var err error
			if p.Priority, err = protocol.ParsePriority(v.Value); err != nil {
				ps.add(v, "priority", "%v", err)
			}
		},
		"stages": func(v *yaml.Node) {
			stagesNode = v
			p.Stages = ps.stages(v)
		},
	})
	if n.Kind != yaml.MappingNode {
		return p
	}
	if p.Name == "" {
		ps.add(n, "name", "a pipeline needs a name")
	} else if err := checkName("pipeline", p.Name); err != nil {
		ps.add(n, "name", "%v", err)
	}
	if stagesNode == nil {
		ps.add(n, "stages", "a pipeline needs at least one stage")
	}
	ps.checkWebhookInputs(p)
	return p
}

func (ps *parser) inputs(n *yaml.Node) []Input {
	if n.Kind != yaml.MappingNode {
		ps.add(n, "inputs", "expected a mapping of input names, found %s", kindName(n))
		return nil
	}
	if len(n.Content)/2 > MaxInputs {
		ps.add(n, "inputs", "%d inputs: at most %d", len(n.Content)/2, MaxInputs)
		return nil
	}
	var out []Input
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := "inputs." + k.Value
		if err := checkName("input", k.Value); err != nil || k.Kind != yaml.ScalarNode {
			ps.add(k, path, "%v", err)
			continue
		}
		if seen[k.Value] {
			ps.add(k, path, "given twice")
			continue
		}
		seen[k.Value] = true
		in := Input{Name: k.Value}
		switch {
		case v.Kind == yaml.ScalarNode && v.Tag != "!!null":
			d := v.Value
			in.Default = &d
		case v.Kind == yaml.ScalarNode: // null: required
		default:
			ps.fields(v, path, map[string]func(*yaml.Node){
				"default": func(d *yaml.Node) {
					s := ps.str(d, path+".default")
					in.Default = &s
				},
				"description": func(d *yaml.Node) { in.Description = ps.str(d, path+".description") },
			})
		}
		out = append(out, in)
	}
	return out
}

func (ps *parser) stages(n *yaml.Node) []Stage {
	if n.Kind != yaml.SequenceNode {
		ps.add(n, "stages", "expected a list of stages, found %s", kindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		ps.add(n, "stages", "a pipeline needs at least one stage")
	}
	if len(n.Content) > MaxStages {
		ps.add(n, "stages", "%d stages: at most %d", len(n.Content), MaxStages)
		return nil
	}
	var out []Stage
	seen := map[string]bool{}
	for i, c := range n.Content {
		path := fmt.Sprintf("stages[%d]", i)
		st := Stage{}
		var stepsNode *yaml.Node
		ps.fields(c, path, map[string]func(*yaml.Node){
			"name":           func(v *yaml.Node) { st.Name = ps.str(v, path+".name") },
			"infrastructure": func(v *yaml.Node) { st.Infrastructure = ps.connectorName(v, path+".infrastructure") },
			"environment":    func(v *yaml.Node) { st.Environment = ps.label(v, path+".environment") },
			"service":        func(v *yaml.Node) { st.Service = ps.label(v, path+".service") },
			"steps": func(v *yaml.Node) {
				stepsNode = v
				st.Items = ps.items(v, path+".steps")
			},
		})
		if c.Kind != yaml.MappingNode {
			continue
		}
		switch err := checkName("stage", st.Name); {
		case st.Name == "":
			ps.add(c, path+".name", "a stage needs a name")
		case err != nil:
			ps.add(c, path+".name", "%v", err)
		case seen[st.Name]:
			ps.add(c, path+".name", "a stage named %q comes earlier: stage names must be unique", st.Name)
		}
		seen[st.Name] = true
		if stepsNode == nil {
			ps.add(c, path+".steps", "a stage needs at least one step")
		}
		out = append(out, st)
	}
	return out
}

// connectorName: the manager's rule for connector names (1-63 letters,
// digits, '.', '_' or '-'); existence is checked when a run starts.
func (ps *parser) connectorName(n *yaml.Node, path string) string {
	s := ps.str(n, path)
	ok := s != "" && len(s) <= 63 && isAlnum(s[0])
	for i := 0; ok && i < len(s); i++ {
		ok = isAlnum(s[i]) || s[i] == '.' || s[i] == '_' || s[i] == '-'
	}
	if !ok && s != "" {
		ps.add(n, path, "connector name %q is invalid: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", s)
	} else if s == "" && n.Kind == yaml.ScalarNode {
		ps.add(n, path, "empty: name a connector or leave the field out")
	}
	return s
}

// label: a free text of one line (environment and service names).
func (ps *parser) label(n *yaml.Node, path string) string {
	s := ps.str(n, path)
	if s == "" && n.Kind == yaml.ScalarNode {
		ps.add(n, path, "empty: give a name or leave the field out")
	}
	if len(s) > 128 || strings.ContainsAny(s, "\n\r\x00") {
		ps.add(n, path, "expected one line of at most 128 characters")
	}
	return s
}

func (ps *parser) items(n *yaml.Node, path string) []Item {
	if n.Kind != yaml.SequenceNode {
		ps.add(n, path, "expected a list of steps, found %s", kindName(n))
		return nil
	}
	if len(n.Content) == 0 {
		ps.add(n, path, "a stage needs at least one step")
	}
	var out []Item
	count := 0
	seen := map[string]bool{}
	for i, c := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if hasKey(c, "parallel") {
			var group []Step
			ps.fields(c, ip, map[string]func(*yaml.Node){
				"parallel": func(v *yaml.Node) {
					if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
						ps.add(v, ip+".parallel", "expected a list of at least one step, found %s", kindName(v))
						return
					}
					for j, sc := range v.Content {
						group = append(group, ps.step(sc, fmt.Sprintf("%s.parallel[%d]", ip, j), seen))
					}
				},
			})
			count += len(group)
			out = append(out, Item{Parallel: true, Steps: group})
			continue
		}
		count++
		out = append(out, Item{Steps: []Step{ps.step(c, ip, seen)}})
	}
	if count > MaxStepsPerStage {
		ps.add(n, path, "%d steps: at most %d in a stage", count, MaxStepsPerStage)
	}
	return out
}

func (ps *parser) step(n *yaml.Node, path string, seen map[string]bool) Step {
	ps.lines[path] = n.Line
	s := Step{}
	var kinds stepKinds
	ps.fields(n, path, map[string]func(*yaml.Node){
		"name": func(v *yaml.Node) { s.Name = ps.str(v, path+".name") },
		"shell": func(v *yaml.Node) {
			kinds.shell = v
			s.Shell = ps.str(v, path+".shell")
		},
		"http": func(v *yaml.Node) {
			kinds.http = v
			s.HTTP = ps.http(v, path+".http")
		},
		"container": func(v *yaml.Node) {
			kinds.container = v
			s.Container = ps.container(v, path+".container")
		},
		"kubernetes": func(v *yaml.Node) {
			kinds.kubernetes = v
			s.Kubernetes = ps.kubernetes(v, path+".kubernetes")
		},
		"helm": func(v *yaml.Node) {
			kinds.helm = v
			s.Helm = ps.helm(v, path+".helm")
		},
		"verify": func(v *yaml.Node) {
			kinds.verify = v
			s.Verify = ps.verify(v, path+".verify")
		},
		"connector":         func(v *yaml.Node) { s.Connector = ps.connectorName(v, path+".connector") },
		"delegateSelectors": func(v *yaml.Node) { s.DelegateSelectors = ps.selectors(v, path+".delegateSelectors") },
		"timeout":           func(v *yaml.Node) { s.Timeout = ps.timeout(v, path+".timeout") },
		"retries":           func(v *yaml.Node) { s.Retries = ps.integer(v, path+".retries", 0, MaxRetries) },
		"env":               func(v *yaml.Node) { s.Env = ps.strMap(v, path+".env", checkEnvName) },
		"secrets":           func(v *yaml.Node) { s.Secrets = ps.secrets(v, path+".secrets") },
		"when":              func(v *yaml.Node) { s.When = ps.when(v, path+".when") },
		"outputs":           func(v *yaml.Node) { s.Outputs = ps.outputs(v, path+".outputs") },
		"unsafeExpressions": func(v *yaml.Node) { s.UnsafeExpressions = ps.boolean(v, path+".unsafeExpressions") },
	})
	if n.Kind != yaml.MappingNode {
		return s
	}
	if s.When == "" {
		s.When = WhenSuccess
	}
	switch err := checkName("step", s.Name); {
	case s.Name == "":
		ps.add(n, path+".name", "a step needs a name")
	case err != nil:
		ps.add(n, path+".name", "%v", err)
	case seen[s.Name]:
		ps.add(n, path+".name", "a step named %q comes earlier in this stage: step names must be unique within a stage", s.Name)
	}
	seen[s.Name] = true
	s.Type = ps.stepType(n, path, kinds, s.Shell)
	if s.Type == protocol.TaskKubernetes && (len(s.Env) > 0 || len(s.Secrets) > 0) {
		ps.add(n, path, "a kubernetes step takes no env or secrets (its deploy runs no script): put values into the manifests with expressions, and keep secret values in the cluster's Secrets")
	}
	if s.Type == protocol.TaskHelm && (len(s.Env) > 0 || len(s.Secrets) > 0) {
		ps.add(n, path, "a helm step takes no env or secrets (it runs no script): put values into values: with expressions, and keep secret values in the cluster's Secrets")
	}
	if s.Type == protocol.TaskVerify {
		ps.verifyStep(n, path, &s)
	}
	for k := range s.Secrets {
		if _, dup := s.Env[k]; dup {
			ps.add(n, path+".secrets."+k, "%s is also set in env: give it in one place", k)
		}
	}
	return s
}

// stepKinds are the nodes of a step's shell, http, container,
// kubernetes and helm fields (nil: not given).
type stepKinds struct {
	shell, http, container, kubernetes, helm, verify *yaml.Node
}

// stepType is the type of a step from which of shell, http, container and
// kubernetes it gives (exactly one of them): "" when it gives none or more
// than one.
func (ps *parser) stepType(n *yaml.Node, path string, k stepKinds, shell string) string {
	given := 0
	for _, x := range []*yaml.Node{k.shell, k.http, k.container, k.kubernetes, k.helm, k.verify} {
		if x != nil {
			given++
		}
	}
	switch {
	case given > 1:
		ps.add(n, path, "a step is one of shell, http, container, kubernetes, helm or verify, not more (a container step's script goes in container.script)")
	case k.kubernetes != nil:
		return protocol.TaskKubernetes
	case k.helm != nil:
		return protocol.TaskHelm
	case k.verify != nil:
		return protocol.TaskVerify
	case k.container != nil:
		return protocol.TaskContainer
	case k.shell != nil:
		if strings.TrimSpace(shell) == "" {
			ps.add(k.shell, path+".shell", "the script is empty")
		}
		return "shell"
	case k.http != nil:
		return "http"
	default:
		ps.add(n, path, "a step needs shell: (a script), http: (a request), container: (an image to run), kubernetes: (manifests to deploy), helm: (a chart to install) or verify: (metrics to watch)")
	}
	return ""
}

// selectors reads a step's delegateSelectors: a list of 1 to 128
// characters each.
func (ps *parser) selectors(v *yaml.Node, path string) []string {
	sels := ps.strList(v, path)
	for i, sel := range sels {
		if strings.TrimSpace(sel) == "" || len(sel) > 128 {
			ps.add(v.Content[i], fmt.Sprintf("%s[%d]", path, i), "a selector is 1 to 128 characters")
		}
	}
	return sels
}

// timeout reads a step's timeout: a duration from 1s to MaxTimeout (0
// when empty or invalid).
func (ps *parser) timeout(v *yaml.Node, path string) time.Duration {
	txt := ps.str(v, path)
	d, err := time.ParseDuration(txt)
	switch {
	case txt == "":
	case err != nil:
		ps.add(v, path, "%q is not a duration: write e.g. 90s, 10m or 2h", txt)
	case d < time.Second || d > MaxTimeout:
		ps.add(v, path, "%s is out of range: 1s to %s", txt, MaxTimeout)
	default:
		return d
	}
	return 0
}

// secrets reads a step's secrets: environment variable names to names of
// secrets.
func (ps *parser) secrets(v *yaml.Node, path string) map[string]string {
	m := ps.strMap(v, path, checkEnvName)
	for i := 0; i+1 < len(v.Content); i += 2 {
		name := v.Content[i+1].Value
		if err := secretref.ValidName(name); err != nil {
			ps.add(v.Content[i+1], join(path, v.Content[i].Value), "%v", err)
		}
	}
	return m
}

// when reads a step's when ("" when invalid).
func (ps *parser) when(v *yaml.Node, path string) When {
	switch w := When(ps.str(v, path)); w {
	case WhenSuccess, WhenFailure, WhenAlways:
		return w
	default:
		ps.add(v, path, "%q: write success (the default), failure or always", string(w))
	}
	return ""
}

// outputs reads a step's outputs: a list of output keys, each once.
func (ps *parser) outputs(v *yaml.Node, path string) []string {
	outs := ps.strList(v, path)
	dup := map[string]bool{}
	for i, k := range outs {
		if err := checkOutputKey(k); err != nil {
			ps.add(v.Content[i], fmt.Sprintf("%s[%d]", path, i), "%v", err)
		} else if dup[k] {
			ps.add(v.Content[i], fmt.Sprintf("%s[%d]", path, i), "%q is listed twice", k)
		}
		dup[k] = true
	}
	return outs
}

func (ps *parser) http(n *yaml.Node, path string) *HTTP {
	h := &HTTP{}
	ps.fields(n, path, map[string]func(*yaml.Node){
		"method":       func(v *yaml.Node) { h.Method = strings.ToUpper(ps.str(v, path+".method")) },
		"url":          func(v *yaml.Node) { h.URL = ps.str(v, path+".url") },
		"headers":      func(v *yaml.Node) { h.Headers = ps.strMap(v, path+".headers", anyKey) },
		"body":         func(v *yaml.Node) { h.Body = ps.str(v, path+".body") },
		"expectStatus": func(v *yaml.Node) { h.ExpectStatus = ps.integer(v, path+".expectStatus", 100, 599) },
	})
	if n.Kind != yaml.MappingNode {
		return h
	}
	if h.Method == "" {
		h.Method = "GET"
	}
	for _, c := range h.Method {
		if c < 'A' || c > 'Z' {
			ps.add(n, path+".method", "%q is not an HTTP method", h.Method)
			break
		}
	}
	if h.URL == "" {
		ps.add(n, path+".url", "an http step needs a url")
	} else if !strings.Contains(h.URL, exprOpen) {
		u, err := url.Parse(h.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ps.add(n, path+".url", "%q is not an http:// or https:// URL", h.URL)
		}
	}
	return h
}

// references checks every expression of every step: inputs that exist,
// outputs declared by a step that has ended before this one starts (an
// earlier stage, or an earlier item of the same stage).
func (ps *parser) references(p *Pipeline) {
	inputs := map[string]bool{}
	for _, in := range p.Inputs {
		inputs[in.Name] = true
	}
	// done: the outputs of the steps that end before the current item.
	done := map[StepRef][]string{}
	stageIdx := map[string]int{}
	for si, st := range p.Stages {
		stageIdx[st.Name] = si
		for ii, it := range st.Items {
			for ji, s := range it.Steps {
				path := fmt.Sprintf("stages[%d].steps[%d]", si, ii)
				if it.Parallel {
					path += fmt.Sprintf(".parallel[%d]", ji)
				}
				for _, f := range stepTexts(&s) {
					refs, err := Refs(f.text)
					if err != nil {
						ps.addLine(ps.lines[path], path+"."+f.name, "%v", err)
						continue
					}
					if msg := checkFormsSecret(f.text); msg != "" {
						ps.addLine(ps.lines[path], path+"."+f.name, "%s", msg)
						continue
					}
					bad := false
					for _, r := range refs {
						if msg := checkRef(r, inputs, done, stageIdx, StepRef{st.Name, s.Name}); msg != "" {
							ps.addLine(ps.lines[path], path+"."+f.name, "${{ %s }}: %s", r, msg)
							bad = true
						}
					}
					if !bad && !s.UnsafeExpressions {
						if msg := checkUnsafe(f, refs); msg != "" {
							ps.addLine(ps.lines[path], path+"."+f.name, "%s", msg)
						}
					}
				}
			}
			for _, s := range it.Steps {
				done[StepRef{st.Name, s.Name}] = s.Outputs
			}
		}
	}
}

// checkFormsSecret says why text could form a reference to a stored secret
// only once its expressions are expanded ("" when it cannot): an expression
// right before "{secrets." (a value ending in "$" completes "${secrets.X}")
// or inside a reference's name. Such a reference would name a secret that
// no check of the pipeline's text sees: a webhook's deliveries, acting with
// the rights of whoever enabled it, could then read any secret those rights
// reach. The pipeline's text names its secrets itself.
func checkFormsSecret(text string) string {
	if strings.Contains(text, exprClose+"{secrets.") {
		return "an expression right before {secrets. could complete a reference to a stored secret from a value: write ${secrets.NAME} in the pipeline itself (or the secrets: map of the step)"
	}
	for rest := text; ; {
		i := strings.Index(rest, "${secrets.")
		if i < 0 {
			return ""
		}
		rest = rest[i+len("${secrets."):]
		name, _, _ := strings.Cut(rest, "}")
		if strings.Contains(name, exprOpen) {
			return "a stored secret's name cannot come from an expression: write ${secrets.NAME} with the name itself"
		}
	}
}

func checkRef(r Ref, inputs map[string]bool, done map[StepRef][]string, stageIdx map[string]int, self StepRef) string {
	if r.Input != "" {
		if !inputs[r.Input] {
			return fmt.Sprintf("no input named %q: declare it under inputs:", r.Input)
		}
		return ""
	}
	outs, ok := done[r.Step]
	if !ok {
		if _, known := stageIdx[r.Step.Stage]; !known && r.Step.Stage != self.Stage {
			return fmt.Sprintf("no stage named %q before this step", r.Step.Stage)
		}
		if r.Step == self {
			return "a step cannot use its own outputs"
		}
		return fmt.Sprintf("no step %q in stage %q that ends before this step starts (only earlier steps, not later ones or steps of the same parallel group)", r.Step.Step, r.Step.Stage)
	}
	if !slices.Contains(outs, r.Key) {
		return fmt.Sprintf("step %s does not declare the output %q: add it to its outputs:", r.Step, r.Key)
	}
	return ""
}

// checkUnsafe says why the expressions refs of field f may not be there
// ("" when they may): in a script or a container's command a value would
// run as code (a webhook payload's field, an output a step wrote), and in
// the scheme or host of an HTTP URL it would choose where the request,
// with its headers, goes. The message shows the safe form.
func checkUnsafe(f text, refs []Ref) string {
	if len(refs) == 0 {
		return ""
	}
	const optIn = "or, if every value it can take is trusted, mark the step unsafeExpressions: true"
	r := refs[0]
	env := envNameOf(r)
	switch {
	case f.name == "shell" || f.name == "container.script":
		return fmt.Sprintf("${{ %s }} in a script runs its value as code (a webhook payload's field, a step's output): pass it as an environment variable — env: {%s: \"${{ %s }}\"} — and write \"$%s\" in the script, %s", r, env, r, env, optIn)
	case strings.HasPrefix(f.name, "container.command["):
		return fmt.Sprintf("${{ %s }} in a container's command can run its value as code or options: pass it as an environment variable — env: {%s: \"${{ %s }}\"} — and use \"$%s\" in container.script, %s", r, env, r, env, optIn)
	case f.name == "http.url":
		if authority := urlAuthority(f.text); strings.Contains(strings.ReplaceAll(authority, exprEscape, ""), exprOpen) {
			return fmt.Sprintf("an expression in the scheme or host of a URL (%s) lets a value choose where the request and its headers go: write the host in the pipeline and expressions only in the path or query, %s", strconv.QuoteToASCII(authority), optIn)
		}
	}
	return ""
}

// urlAuthority is the scheme and host part of a URL's text: up to the
// first "/" after "://" (all of it without one).
func urlAuthority(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return u
	}
	if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
		return u[:i+3+j]
	}
	return u
}

// envNameOf suggests the environment variable to pass r in: its input's
// name or output's key in capitals, '-' as '_'.
func envNameOf(r Ref) string {
	n := r.Input
	if n == "" {
		n = r.Key
	}
	n = strings.ToUpper(strings.ReplaceAll(n, "-", "_"))
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		n = "V_" + n
	}
	return n
}

// text is one field of a step where expressions may appear.
type text struct {
	name string
	text string
	set  func(*Step, string)
}

// stepTexts lists the fields of s that may hold expressions, sorted by name
// for a stable order.
func stepTexts(s *Step) []text {
	var out []text
	if s.Type == "shell" {
		out = append(out, text{"shell", s.Shell, func(t *Step, v string) { t.Shell = v }})
	}
	if c := s.Container; c != nil {
		for i := range c.Command {
			out = append(out, text{fmt.Sprintf("container.command[%d]", i), c.Command[i], func(t *Step, v string) { t.Container.Command[i] = v }})
		}
		out = append(out, text{"container.script", c.Script, func(t *Step, v string) { t.Container.Script = v }})
	}
	if s.HTTP != nil {
		out = append(out,
			text{"http.url", s.HTTP.URL, func(t *Step, v string) { t.HTTP.URL = v }},
			text{"http.body", s.HTTP.Body, func(t *Step, v string) { t.HTTP.Body = v }})
		for _, k := range sortedKeys(s.HTTP.Headers) {
			out = append(out, text{"http.headers." + k, s.HTTP.Headers[k], func(t *Step, v string) { t.HTTP.Headers[k] = v }})
		}
	}
	if s.Kubernetes != nil {
		out = append(out, text{"kubernetes.namespace", s.Kubernetes.Namespace, func(t *Step, v string) { t.Kubernetes.Namespace = v }})
		out = append(out, manifestTexts(s.Kubernetes)...)
	}
	if s.Helm != nil {
		out = append(out, helmTexts(s.Helm)...)
	}
	if s.Verify != nil {
		out = append(out, verifyTexts(s.Verify)...)
	}
	for _, k := range sortedKeys(s.Env) {
		out = append(out, text{"env." + k, s.Env[k], func(t *Step, v string) { t.Env[k] = v }})
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
