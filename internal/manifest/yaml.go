package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The YAML here is written by hand, without a YAML library: a small tree
// of ordered mappings, sequences and scalars printed in block style. Every
// string is printed as a JSON string, which is a valid YAML double-quoted
// scalar with the same value (JSON's escapes are a subset of YAML's), so
// no value can change type ("yes", "1.0", "null") or break the document.
// deploy/check decodes the output with a real YAML decoder and fuzzes it.

// mapping is a YAML mapping whose keys keep their order.
type mapping []field

type field struct {
	key string
	val any // string, int, bool, mapping, seq
}

// seq is a YAML sequence.
type seq []any

// yamlDocs prints documents separated by "---".
func yamlDocs(docs ...mapping) string {
	var b strings.Builder
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		writeMapping(&b, d, 0)
	}
	return b.String()
}

func writeMapping(b *strings.Builder, m mapping, indent int) {
	for _, f := range m {
		b.WriteString(strings.Repeat(" ", indent))
		writeKeyValue(b, f, indent)
	}
}

// writeKeyValue prints "key: value" (the indentation of its line is
// already written).
func writeKeyValue(b *strings.Builder, f field, indent int) {
	b.WriteString(yamlKey(f.key))
	b.WriteString(":")
	switch v := f.val.(type) {
	case mapping:
		if len(v) == 0 {
			b.WriteString(" {}\n")
			return
		}
		b.WriteString("\n")
		writeMapping(b, v, indent+2)
	case seq:
		if len(v) == 0 {
			b.WriteString(" []\n")
			return
		}
		b.WriteString("\n")
		writeSeq(b, v, indent+2)
	default:
		b.WriteString(" ")
		b.WriteString(yamlScalar(v))
		b.WriteString("\n")
	}
}

func writeSeq(b *strings.Builder, s seq, indent int) {
	pad := strings.Repeat(" ", indent)
	for _, item := range s {
		b.WriteString(pad)
		b.WriteString("- ")
		switch v := item.(type) {
		case mapping:
			if len(v) == 0 {
				b.WriteString("{}\n")
				continue
			}
			writeKeyValue(b, v[0], indent+2)
			writeMapping(b, v[1:], indent+2)
		case seq:
			if len(v) == 0 {
				b.WriteString("[]\n")
				continue
			}
			// A sequence in a sequence: flow style, scalars only here.
			parts := make([]string, len(v))
			for i, x := range v {
				parts[i] = yamlScalar(x)
			}
			b.WriteString("[" + strings.Join(parts, ", ") + "]\n")
		default:
			b.WriteString(yamlScalar(v))
			b.WriteString("\n")
		}
	}
}

// yamlKey prints a key plainly when that is unambiguous, else quoted.
func yamlKey(k string) string {
	if plainKey(k) {
		return k
	}
	return yamlString(k)
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

func yamlScalar(v any) string {
	switch v := v.(type) {
	case string:
		return yamlString(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	}
	panic("manifest: unsupported YAML value") // a bug in this package
}

// yamlString quotes s as a YAML double-quoted scalar: as a JSON string,
// which YAML reads as the same string, with the characters a YAML document
// may not hold as they are (DEL and the C1 controls, NEL among them, which
// YAML 1.1 parsers read as a line break) escaped as \uXXXX. JSON escapes
// the C0 controls and U+2028/U+2029 already.
func yamlString(s string) string {
	q := jsonString(s)
	if !strings.ContainsFunc(q, yamlEscaped) {
		return q
	}
	var b strings.Builder
	for _, r := range q {
		if yamlEscaped(r) {
			fmt.Fprintf(&b, `\u%04X`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func yamlEscaped(r rune) bool {
	return (r >= 0x7f && r <= 0x9f) || r == 0xfffe || r == 0xffff
}

// jsonString quotes s as a JSON string without HTML escaping. Invalid
// UTF-8 has been refused before a value gets here.
func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(buf.String(), "\n")
}

// toJSON prints a tree as indented JSON, keys in their order.
func toJSON(v any) string {
	var b strings.Builder
	writeJSON(&b, v, 0)
	b.WriteString("\n")
	return b.String()
}

func writeJSON(b *strings.Builder, v any, indent int) {
	pad := strings.Repeat("  ", indent+1)
	end := strings.Repeat("  ", indent)
	switch v := v.(type) {
	case mapping:
		if len(v) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, f := range v {
			b.WriteString(pad + jsonString(f.key) + ": ")
			writeJSON(b, f.val, indent+1)
			if i < len(v)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(end + "}")
	case seq:
		if len(v) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, x := range v {
			b.WriteString(pad)
			writeJSON(b, x, indent+1)
			if i < len(v)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(end + "]")
	default:
		b.WriteString(yamlScalar(v))
	}
}
