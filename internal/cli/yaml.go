package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/legate-dev/legate/internal/protocol"
)

// This file writes -o yaml: the JSON value of an API object as a YAML
// document, with the YAML library that reads pipelines. The JSON text is
// decoded into a yaml.Node tree (objects keep their field order, as -o
// json prints them) whose string styles are chosen here rather than by the
// library, which follows YAML 1.2 alone and would write yes, on or 1:20
// plain: strings are plain only when no YAML 1.1 or 1.2 reader could take
// them for something else (a number, a boolean, null, an indicator),
// multi-line strings become literal blocks ("|") when that is exact, and
// everything else is double-quoted. Control and format characters never
// appear raw, which keeps stored text from driving the terminal: the
// library escapes the controls, escapeFormat the rest.

// printYAML writes v, anything encoding/json encodes, as YAML.
func printYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode YAML: %w", err)
	}
	y, err := yamlFromJSON(b)
	if err != nil {
		return fmt.Errorf("encode YAML: %w", err)
	}
	if _, err := w.Write(y); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// yamlFromJSON converts one JSON text into a YAML document. A key repeated
// in an object keeps its first position and its last value (encoding/json
// keeps the last value too).
func yamlFromJSON(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := jsonNode(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return escapeFormat(b.Bytes()), nil
}

// maxYAMLDepth bounds the nesting of a value written as YAML: block style
// indents every level, so the document grows with the square of the depth.
// API objects nest a few levels.
const maxYAMLDepth = 64

// jsonNode decodes the next JSON value of dec as a node.
func jsonNode(dec *json.Decoder, depth int) (*yaml.Node, error) {
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxYAMLDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(x)}, nil
	case json.Number:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: yamlNumber(string(x))}, nil // untagged: written as it is
	case string:
		return stringNode(x, true), nil
	}
	n := &yaml.Node{Kind: yaml.SequenceNode}
	if tok == json.Delim('{') {
		n.Kind = yaml.MappingNode
	}
	index := map[string]int{} // of a key's node in n.Content
	for dec.More() {
		if n.Kind == yaml.SequenceNode {
			v, err := jsonNode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
			continue
		}
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := kt.(string)
		v, err := jsonNode(dec, depth+1)
		if err != nil {
			return nil, err
		}
		if i, dup := index[key]; dup {
			n.Content[i+1] = v
			continue
		}
		index[key] = len(n.Content)
		n.Content = append(n.Content, stringNode(key, false), v)
	}
	_, err = dec.Token() // '}' or ']'
	return n, err
}

// stringNode is a string in the style chosen for it: plain when plainOK,
// a literal block when literalOK and block (not for keys), else
// double-quoted. (The library may still quote a plain or literal string it
// cannot write so: never the other way.)
func stringNode(s string, block bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
	switch {
	case plainOK(s):
		n.Style = 0
	case block && literalOK(s):
		n.Style = yaml.LiteralStyle
	}
	return n
}

// yamlNumber writes a JSON number so that YAML 1.1 readers, whose floats
// need a '.' and a signed exponent, read it as a number too: 1e5 becomes
// 1.0e+5. Integers and plain decimals are left as they are.
func yamlNumber(n string) string {
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return n
	}
	mant, exp := n[:i], n[i+1:]
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	if exp != "" && exp[0] != '+' && exp[0] != '-' {
		exp = "+" + exp
	}
	return mant + n[i:i+1] + exp
}

// literalOK reports whether s can be written as a literal block exactly
// and without an indentation indicator ("|2-"): it has a line break, it
// starts with text, not a space, a tab or a line break (the block's
// indentation is taken from its first line), and it holds no control or
// format character but tabs and "\n" (escapeFormat relies on it).
func literalOK(s string) bool {
	return strings.Contains(s, "\n") && !strings.ContainsRune(" \t\n", rune(s[0])) && !strings.ContainsFunc(s, isEscaped)
}

// plainOK reports whether s can be written without quotes and read back as
// the same string by YAML 1.1 and 1.2 readers. It is deliberately narrow:
// a letter, '/' or '_' first (so no number, no indicator, no .inf), then
// letters, digits and a few punctuation characters, no ": " and no ':' at
// the end (a mapping), no space at either end, and not a word that some
// reader resolves to a boolean or null (yes, No, ON, y, ~, null…).
func plainOK(s string) bool {
	if s == "" || len(s) > 1024 || s[len(s)-1] == ' ' || s[len(s)-1] == ':' || strings.Contains(s, ": ") {
		return false
	}
	r0, _ := utf8.DecodeRuneInString(s)
	if !unicode.IsLetter(r0) && r0 != '/' && r0 != '_' {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune(" -_./:@+,()=", r) {
			return false
		}
	}
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		return false
	}
	return true
}

// isEscaped reports whether r is a control or format character
// (protocol.IsControl) other than a tab or "\n".
func isEscaped(r rune) bool { return r != '\n' && r != '\t' && protocol.IsControl(r) }

// escapeFormat escapes, as \uXXXX or \UXXXXXXXX, what the library writes
// raw though protocol.IsControl says it may drive a terminal: the format
// characters such as U+202E, which reverses the text after it (the
// library escapes C0, DEL, C1, U+2028, U+2029 and U+FEFF itself). It is
// exact because stringNode writes such characters in double quotes only,
// where the escape reads as the character, and nothing but scalars holds
// text; tabs stay raw in literal blocks.
func escapeFormat(y []byte) []byte {
	if !bytes.ContainsFunc(y, isEscaped) {
		return y
	}
	var b bytes.Buffer
	for _, r := range string(y) {
		switch {
		case !isEscaped(r):
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.Bytes()
}
