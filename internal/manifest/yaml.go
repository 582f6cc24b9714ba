package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The generators build a small tree of ordered mappings, sequences and
// scalars; yamlDocs writes it with the YAML library that reads pipelines,
// toJSON with encoding/json. Every string value is double-quoted, so no
// value can change type ("yes", "1.0", "null") or break the document;
// keys are plain when no YAML 1.1 or 1.2 reader could take them for
// something else. deploy/check decodes the output with real decoders and
// fuzzes it.

// mapping is a YAML mapping whose keys keep their order.
type mapping []field

type field struct {
	key string
	val any // string, int, bool, mapping, seq
}

// seq is a YAML sequence.
type seq []any

// yamlDocs prints documents separated by "---". comment, if any, is the
// first document's head comment: lines that each start with "#".
func yamlDocs(comment string, docs ...mapping) string {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for i, d := range docs {
		n := node(d)
		if i == 0 && comment != "" && len(n.Content) > 0 {
			n.Content[0].HeadComment = strings.TrimSuffix(comment, "\n")
		}
		if err := enc.Encode(n); err != nil {
			panic("manifest: " + err.Error()) // a bug in this package
		}
	}
	if err := enc.Close(); err != nil {
		panic("manifest: " + err.Error())
	}
	return b.String()
}

// node converts a tree to YAML nodes.
func node(v any) *yaml.Node {
	switch v := v.(type) {
	case mapping:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, f := range v {
			k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: f.key}
			if !plainKey(f.key) {
				k.Style = yaml.DoubleQuotedStyle
			}
			n.Content = append(n.Content, k, node(f.val))
		}
		return n
	case seq:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, x := range v {
			n.Content = append(n.Content, node(x))
		}
		return n
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Style: yaml.DoubleQuotedStyle}
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	}
	panic("manifest: unsupported YAML value") // a bug in this package
}

// plainKey: a letter or '_' first, then letters, digits and "_./-", and
// not a word YAML 1.1 reads as a boolean or null.
func plainKey(k string) bool {
	if k == "" {
		return false
	}
	switch strings.ToLower(k) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		letter := ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || c == '_'
		if i == 0 && !letter {
			return false
		}
		if !letter && !('0' <= c && c <= '9') && c != '.' && c != '/' && c != '-' {
			return false
		}
	}
	return true
}

// MarshalJSON writes m as a JSON object with its keys in order.
func (m mapping) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // Encode's line breaks are whitespace
	enc.SetEscapeHTML(false)
	b.WriteByte('{')
	for i, f := range m {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := enc.Encode(f.key); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := enc.Encode(f.val); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// toJSON prints a tree as indented JSON, keys in their order, with DEL,
// the C1 controls (NEL among them, a line break to YAML 1.1 readers) and
// U+FFFE and U+FFFF escaped as in the YAML: JSON may hold them raw, but
// the text then carries control characters. They occur in strings only.
func toJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		panic("manifest: " + err.Error()) // a bug in this package
	}
	s := b.String()
	if !strings.ContainsFunc(s, jsonEscaped) {
		return s
	}
	b.Reset()
	for _, r := range s {
		if jsonEscaped(r) {
			fmt.Fprintf(&b, `\u%04X`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func jsonEscaped(r rune) bool { return (r >= 0x7f && r <= 0x9f) || r == 0xfffe || r == 0xffff }
