package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/legate-dev/legate/internal/protocol"
)

// This file writes -o yaml: the JSON value of an API object as a YAML
// document, without a YAML library. The JSON text is decoded into an
// ordered tree (objects keep their field order, as -o json prints them) and
// written in block style. Strings are written plain only when no YAML 1.1
// or 1.2 reader could take them for something else (a number, a boolean,
// null, an indicator); multi-line strings become literal blocks ("|")
// when that is exact, and everything else is double-quoted with escapes.
// Control and format characters never appear raw: they are escaped in
// double quotes, which keeps stored text from driving the terminal.

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

// yamlFromJSON converts one JSON text into a YAML document.
func yamlFromJSON(data []byte) ([]byte, error) {
	v, err := decodeOrdered(data)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	writeYAML(&b, v)
	return b.Bytes(), nil
}

// member is one field of a JSON object; object keeps the fields in order.
type member struct {
	key string
	val any
}

type object []member

// decodeOrdered decodes one JSON text into nil, bool, json.Number, string,
// []any and object values. A key repeated in an object keeps its first
// position and its last value (encoding/json keeps the last value too).
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// maxYAMLDepth bounds the nesting of a value written as YAML: block style
// indents every level, so the document grows with the square of the depth.
// API objects nest a few levels.
const maxYAMLDepth = 64

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxYAMLDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // nil, bool, json.Number or string
	}
	switch d {
	case '{':
		obj := object{}
		index := map[string]int{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if i, dup := index[key]; dup {
				obj[i].val = v
				continue
			}
			index[key] = len(obj)
			obj = append(obj, member{key, v})
		}
		_, err := dec.Token() // '}'
		return obj, err
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// writeYAML writes v as a whole document.
func writeYAML(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case object:
		if len(x) > 0 {
			writeObject(b, x, 0, false)
			return
		}
	case []any:
		if len(x) > 0 {
			writeArray(b, x, 0, false)
			return
		}
	}
	writeInline(b, v, 2) // a literal block's lines indented: never "---" at column 0
}

// writeObject writes the members of a non-empty object at indentation
// ind; with inline, the first member continues the current line (after
// "- ").
func writeObject(b *bytes.Buffer, obj object, ind int, inline bool) {
	for i, m := range obj {
		if i > 0 || !inline {
			b.WriteString(strings.Repeat(" ", ind))
		}
		b.WriteString(yamlKey(m.key))
		b.WriteByte(':')
		switch x := m.val.(type) {
		case object:
			if len(x) > 0 {
				b.WriteByte('\n')
				writeObject(b, x, ind+2, false)
				continue
			}
		case []any:
			if len(x) > 0 {
				b.WriteByte('\n')
				writeArray(b, x, ind+2, false)
				continue
			}
		}
		b.WriteByte(' ')
		writeInline(b, m.val, ind+2)
	}
}

// writeArray writes the items of a non-empty array at indentation ind.
func writeArray(b *bytes.Buffer, arr []any, ind int, inline bool) {
	for i, v := range arr {
		if i > 0 || !inline {
			b.WriteString(strings.Repeat(" ", ind))
		}
		b.WriteString("- ")
		switch x := v.(type) {
		case object:
			if len(x) > 0 {
				writeObject(b, x, ind+2, true)
				continue
			}
		case []any:
			if len(x) > 0 {
				writeArray(b, x, ind+2, true)
				continue
			}
		}
		writeInline(b, v, ind+2)
	}
}

// writeInline writes a scalar or an empty collection and ends the line; a
// literal block's lines are indented by ind.
func writeInline(b *bytes.Buffer, v any, ind int) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		b.WriteString(yamlNumber(string(x)))
	case string:
		if literalOK(x) {
			writeLiteral(b, x, ind)
			return
		}
		b.WriteString(yamlScalar(x))
	case object:
		b.WriteString("{}")
	case []any:
		b.WriteString("[]")
	}
	b.WriteByte('\n')
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

// writeLiteral writes s as a literal block scalar whose lines are indented
// by ind, with the chomping indicator that keeps its final line breaks
// exactly: "|-" for none, "|" for one, "|+" for more.
func writeLiteral(b *bytes.Buffer, s string, ind int) {
	body := strings.TrimRight(s, "\n")
	switch trailing := len(s) - len(body); {
	case trailing == 0:
		b.WriteString("|-\n")
	case trailing == 1:
		b.WriteString("|\n")
	default:
		b.WriteString("|+\n")
		body = s[:len(s)-1] // the kept empty lines are written as lines
	}
	pad := strings.Repeat(" ", ind)
	for line := range strings.SplitSeq(body, "\n") {
		if line != "" {
			b.WriteString(pad)
			b.WriteString(line)
		}
		b.WriteByte('\n')
	}
}

// literalOK reports whether s can be written as a literal block exactly:
// it has a line break, at least one line with text, its first line with
// text starts with neither a space nor a tab (the block's indentation is
// taken from it), and every character is printable in YAML and no
// terminal control (a tab is allowed), with "\n" as the only line break.
func literalOK(s string) bool {
	if !strings.Contains(s, "\n") {
		return false
	}
	first := strings.TrimLeft(s, "\n")
	if first == "" || first[0] == ' ' || first[0] == '\t' {
		return false
	}
	for _, r := range s {
		if r == '\n' || r == '\t' {
			continue
		}
		if !yamlPrintable(r) || protocol.IsControl(r) || r == '\r' {
			return false
		}
	}
	return true
}

// yamlPrintable is YAML's c-printable without the line breaks: what may
// appear raw in a document (tab, space to '~', NEL excluded, the BMP from
// U+00A0 without surrogates, U+FFFE and U+FFFF, and the planes above).
func yamlPrintable(r rune) bool {
	switch {
	case r == '\t', r >= 0x20 && r <= 0x7e:
		return true
	case r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd && r != 0xfeff, r >= 0x10000 && r <= 0x10ffff:
		return r != 0x2028 && r != 0x2029 // line breaks in YAML 1.1
	}
	return false
}

// yamlKey writes a mapping key: plain when safe, else double-quoted.
func yamlKey(s string) string { return yamlScalar(s) }

// yamlScalar writes a string on one line: plain when plainOK, else
// double-quoted.
func yamlScalar(s string) string {
	if plainOK(s) {
		return s
	}
	return yamlQuote(s)
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
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if !yamlPrintable(r) || protocol.IsControl(r) {
				return false
			}
			continue
		}
		if !strings.ContainsRune(" -_./:@+,()=", r) {
			return false
		}
	}
	return !yamlReserved(s)
}

// yamlReserved reports whether a plain s would not read as a string in
// YAML 1.1 or 1.2 (booleans, null); numbers are excluded by plainOK's
// first character.
func yamlReserved(s string) bool {
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~":
		return true
	}
	return false
}

// yamlQuote writes s double-quoted. Only '"' and '\' and what is not
// printable text are escaped: line breaks as \n, control and format
// characters (protocol.IsControl) as \xXX, \uXXXX or \UXXXXXXXX.
func yamlQuote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			switch {
			case yamlPrintable(r) && !protocol.IsControl(r):
				b.WriteRune(r)
			case r < 0x100:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
