package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Triggers say how a pipeline may start besides a manual run.
//
//	triggers:
//	  webhook:
//	    inputs:
//	      version: release.tag_name   # a dotted path into the JSON payload
//
// Whether a pipeline has a webhook at all is the manager's to say (legate
// pipeline webhook enable); the file only says how a delivery's payload
// becomes the run's inputs.
type Triggers struct {
	Webhook WebhookTrigger
}

// WebhookTrigger maps the JSON payload of a webhook delivery to inputs.
type WebhookTrigger struct {
	// Inputs maps an input to a dotted path into the payload
	// (release.tag_name; a number indexes a list: commits.0.id). An input
	// not mapped takes the payload's top-level field of its own name.
	Inputs map[string]string
}

// Limits of a payload path.
const (
	maxPathLen      = 256
	maxPathSegments = 32
)

// checkPayloadPath: dot-separated segments of letters, digits, '_' and '-'.
func checkPayloadPath(p string) error {
	segs := strings.Split(p, ".")
	ok := p != "" && len(p) <= maxPathLen && len(segs) <= maxPathSegments
	for _, s := range segs {
		if !ok {
			break
		}
		ok = s != ""
		for i := 0; ok && i < len(s); i++ {
			ok = isAlnum(s[i]) || s[i] == '_' || s[i] == '-'
		}
	}
	if !ok {
		return fmt.Errorf("payload path %q is invalid: use field names joined by dots (release.tag_name; a number indexes a list: commits.0.id), at most %d fields and %d characters", p, maxPathSegments, maxPathLen)
	}
	return nil
}

func (ps *parser) triggers(n *yaml.Node, p *Pipeline) {
	ps.fields(n, "triggers", map[string]func(*yaml.Node){
		"webhook": func(w *yaml.Node) {
			ps.fields(w, "triggers.webhook", map[string]func(*yaml.Node){
				"inputs": func(in *yaml.Node) {
					p.Triggers.Webhook.Inputs = ps.strMap(in, "triggers.webhook.inputs", anyKey)
					if in.Kind != yaml.MappingNode {
						return
					}
					for i := 0; i+1 < len(in.Content); i += 2 {
						k, v := in.Content[i], in.Content[i+1]
						path, ok := p.Triggers.Webhook.Inputs[k.Value]
						if !ok || v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
							continue
						}
						if err := checkPayloadPath(path); err != nil {
							ps.add(v, "triggers.webhook.inputs."+k.Value, "%v", err)
						}
					}
					ps.webhookInputLines = in
				},
			})
		},
	})
}

// checkWebhookInputs: every mapped input is declared (after inputs: is read,
// wherever it is in the file).
func (ps *parser) checkWebhookInputs(p *Pipeline) {
	n := ps.webhookInputLines
	if n == nil {
		return
	}
	declared := map[string]bool{}
	for _, in := range p.Inputs {
		declared[in.Name] = true
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && !declared[k.Value] {
			ps.add(k, "triggers.webhook.inputs."+k.Value, "no input named %q: declare it under inputs:", k.Value)
		}
	}
}

// PayloadError is what WebhookInputs returns for a payload it cannot use:
// the sender's to fix.
type PayloadError struct{ Msg string }

func (e *PayloadError) Error() string { return e.Msg }

// MaxPayloadDepth bounds how deeply a payload's JSON may nest.
const MaxPayloadDepth = 64

// WebhookInputs returns the inputs a webhook delivery gives a run: each
// declared input takes the value at its path (triggers.webhook.inputs) or,
// unmapped, the payload's top-level field of its name; a text as it is, a
// number as written, a boolean as true or false. A field that is absent or
// null leaves the input to its default (ResolveInputs then fills it in or
// says it is missing). The payload must be a JSON object; a value at a
// path that is an object or a list is a *PayloadError, as is anything that
// is not JSON.
func (p *Pipeline) WebhookInputs(payload []byte) (map[string]string, error) {
	if err := checkDepth(payload); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, &PayloadError{"the body is not JSON (" + jsonProblem(err) + "): send the payload as application/json"}
	}
	// Only JSON's own whitespace may follow the value: bytes.TrimSpace
	// would also drop \f, \v and Unicode spaces, which JSON refuses.
	if rest := bytes.Trim(payload[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, &PayloadError{fmt.Sprintf("the body goes on after its JSON value (at byte %d): send one JSON object", dec.InputOffset())}
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, &PayloadError{fmt.Sprintf("the body is JSON %s, not an object: send a JSON object whose fields give the inputs", jsonKind(doc))}
	}
	out := map[string]string{}
	for _, in := range p.Inputs {
		path, mapped := p.Triggers.Webhook.Inputs[in.Name]
		var v any
		var found bool
		if mapped {
			v, found = lookup(root, path)
		} else {
			path = in.Name
			v, found = root[in.Name]
		}
		if !found || v == nil {
			continue
		}
		switch x := v.(type) {
		case string:
			out[in.Name] = x
		case json.Number:
			out[in.Name] = x.String()
		case bool:
			out[in.Name] = strconv.FormatBool(x)
		default:
			hint := ""
			if !mapped {
				hint = fmt.Sprintf(" (map the input to a field inside it in the pipeline: triggers: {webhook: {inputs: {%s: %s.FIELD}}})", in.Name, path)
			}
			return nil, &PayloadError{fmt.Sprintf("input %s: the payload's %s is %s, not a text, number or boolean%s", in.Name, path, jsonKind(v), hint)}
		}
	}
	return out, nil
}

// lookup follows a dotted path through objects (by key) and lists (by index).
func lookup(v any, path string) (any, bool) {
	for _, seg := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a text"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	}
	return err.Error()
}

// checkDepth refuses JSON nested deeper than MaxPayloadDepth before it is
// decoded (encoding/json would build the whole tree).
func checkDepth(b []byte) error {
	depth, inStr, esc := 0, false, false
	for _, c := range b {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			if depth++; depth > MaxPayloadDepth {
				return &PayloadError{fmt.Sprintf("the payload nests more than %d levels deep", MaxPayloadDepth)}
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}
