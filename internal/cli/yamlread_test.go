package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// readYAML is a small, strict YAML reader for the tests of the -o yaml
// writer. It reads the block subset the writer produces — block mappings
// and sequences (indented by two), plain, double-quoted and literal block
// scalars, [] and {} — and refuses everything else. It resolves plain
// scalars as YAML 1.2's core schema does (null, true, false, numbers) and
// refuses plain scalars that a YAML 1.1 reader would resolve differently
// (yes, off, 0x1f, 1_000, 2026-11-22, .inf …), duplicate keys, tabs in
// indentation, comments, and anything after the value. Values are nil,
// bool, json.Number, string, []any and object, as decodeOrdered returns.
func readYAML(doc string) (any, error) {
	if doc == "" || !strings.HasSuffix(doc, "\n") {
		return nil, fmt.Errorf("document does not end with a line break")
	}
	r := &yamlReader{lines: strings.Split(strings.TrimSuffix(doc, "\n"), "\n")}
	v, err := r.node(-1)
	if err != nil {
		return nil, err
	}
	if r.i != len(r.lines) {
		return nil, r.errf("unexpected line after the document")
	}
	return v, nil
}

type yamlReader struct {
	lines []string
	i     int
}

func (r *yamlReader) errf(format string, args ...any) error {
	line := ""
	if r.i < len(r.lines) {
		line = r.lines[r.i]
	}
	return fmt.Errorf("line %d %q: %s", r.i+1, line, fmt.Sprintf(format, args...))
}

// indentOf counts the leading spaces of a line; a tab among them is an
// error.
func indentOf(line string) (int, error) {
	n := len(line) - len(strings.TrimLeft(line, " "))
	if n < len(line) && line[n] == '\t' {
		return 0, fmt.Errorf("tab in indentation")
	}
	return n, nil
}

// node reads the block node that starts on the current line, which must be
// indented more than parent.
func (r *yamlReader) node(parent int) (any, error) {
	if r.i >= len(r.lines) {
		return nil, r.errf("missing value")
	}
	line := r.lines[r.i]
	col, err := indentOf(line)
	if err != nil {
		return nil, r.errf("%v", err)
	}
	if col <= parent || col == len(line) {
		return nil, r.errf("expected a value indented more than %d", parent)
	}
	rest := line[col:]
	switch {
	case strings.HasPrefix(rest, "- "):
		return r.sequence(col)
	case isEntry(rest):
		return r.mapping(col)
	}
	if parent >= 0 {
		return nil, r.errf("a scalar on its own line")
	}
	r.i++
	return r.inline(rest, parent)
}

// isEntry reports whether s starts a mapping entry ("key:", "key: …" or
// an explicit "? key").
func isEntry(s string) bool {
	_, _, err := splitEntry(s)
	return err == nil || strings.HasPrefix(s, "? ")
}

// splitEntry splits "key: value" (or "key:") into the key and the value
// text.
func splitEntry(s string) (key, value string, err error) {
	if strings.HasPrefix(s, `"`) {
		k, n, err := unquote(s)
		if err != nil {
			return "", "", err
		}
		s = s[n:]
		if !strings.HasPrefix(s, ":") {
			return "", "", fmt.Errorf("no ':' after a quoted key")
		}
		key, s = k, s[1:]
	} else {
		i := strings.Index(s, ": ")
		switch {
		case i >= 0:
		case strings.HasSuffix(s, ":"):
			i = len(s) - 1
		default:
			return "", "", fmt.Errorf("not a mapping entry")
		}
		k, err := plainString(s[:i])
		if err != nil {
			return "", "", err
		}
		key, s = k, s[i+1:]
	}
	switch {
	case s == "":
		return key, "", nil
	case strings.HasPrefix(s, " ") && len(s) > 1 && s[1] != ' ':
		return key, s[1:], nil
	}
	return "", "", fmt.Errorf("want one space after ':'")
}

func (r *yamlReader) mapping(col int) (any, error) {
	obj := object{}
	seen := map[string]bool{}
	for r.i < len(r.lines) {
		line := r.lines[r.i]
		ind, err := indentOf(line)
		if err != nil {
			return nil, r.errf("%v", err)
		}
		if ind < col {
			break
		}
		if ind > col {
			return nil, r.errf("unexpected indentation in a mapping at %d", col)
		}
		var key, value string
		var v any
		if k, ok := strings.CutPrefix(line[col:], "? "); ok {
			key, v, err = r.explicit(k, col)
		} else {
			key, value, err = splitEntry(line[col:])
		}
		if err != nil {
			return nil, r.errf("%v", err)
		}
		if seen[key] {
			return nil, r.errf("duplicate key %q", key)
		}
		seen[key] = true
		switch {
		case strings.HasPrefix(line[col:], "? "):
		case value == "":
			r.i++
			v, err = r.node(col)
		default:
			r.i++
			v, err = r.inline(value, col)
		}
		if err != nil {
			return nil, err
		}
		obj = append(obj, member{key, v})
	}
	return obj, nil
}

// explicit reads an explicit key, "? key" (the writer's library writes
// multi-line keys and keys over 128 bytes so), and its value, ": value" on
// the next line, where a collection may start as after "- ".
func (r *yamlReader) explicit(k string, col int) (string, any, error) {
	var key string
	if strings.HasPrefix(k, `"`) {
		q, n, err := unquote(k)
		if err != nil || n != len(k) {
			return "", nil, fmt.Errorf("explicit key %q: %v", k, err)
		}
		key = q
	} else {
		p, err := plainString(k)
		if err != nil {
			return "", nil, err
		}
		key = p
	}
	r.i++
	if r.i >= len(r.lines) {
		return "", nil, fmt.Errorf("no value after the explicit key %q", key)
	}
	rest, ok := strings.CutPrefix(r.lines[r.i], strings.Repeat(" ", col)+": ")
	if !ok || rest == "" || rest[0] == ' ' {
		return "", nil, fmt.Errorf("want \": value\" after the explicit key %q", key)
	}
	if strings.HasPrefix(rest, "- ") || isEntry(rest) {
		r.lines[r.i] = strings.Repeat(" ", col+2) + rest
		v, err := r.node(col)
		return key, v, err
	}
	r.i++
	v, err := r.inline(rest, col)
	return key, v, err
}

func (r *yamlReader) sequence(col int) (any, error) {
	arr := []any{}
	for r.i < len(r.lines) {
		line := r.lines[r.i]
		ind, err := indentOf(line)
		if err != nil {
			return nil, r.errf("%v", err)
		}
		if ind < col {
			break
		}
		if ind > col || !strings.HasPrefix(line[col:], "- ") {
			return nil, r.errf("want a sequence item at %d", col)
		}
		rest := line[col+2:]
		var v any
		if strings.HasPrefix(rest, "- ") || isEntry(rest) {
			// A nested collection starts on the item's line: read it as if
			// the dash were a space.
			r.lines[r.i] = strings.Repeat(" ", col+2) + rest
			v, err = r.node(col)
		} else {
			r.i++
			v, err = r.inline(rest, col)
		}
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
	}
	return arr, nil
}

// inline reads a value written after "key: " or "- " (the current line is
// already consumed): a scalar, [] or {}, or a literal block header whose
// lines follow, indented more than parent.
func (r *yamlReader) inline(s string, parent int) (any, error) {
	switch s {
	case "[]":
		return []any{}, nil
	case "{}":
		return object{}, nil
	case "|", "|-", "|+":
		return r.literal(s[1:], parent)
	}
	if strings.HasPrefix(s, `"`) {
		v, n, err := unquote(s)
		if err != nil {
			return nil, r.errf("%v", err)
		}
		if n != len(s) {
			return nil, r.errf("text after a quoted scalar")
		}
		return v, nil
	}
	v, err := plainValue(s)
	if err != nil {
		return nil, r.errf("%v", err)
	}
	return v, nil
}

// literal reads the lines of a literal block scalar and applies its
// chomping ("", "-" or "+").
func (r *yamlReader) literal(chomp string, parent int) (any, error) {
	var lines []string
	m := -1
	for r.i < len(r.lines) {
		line := r.lines[r.i]
		if line == "" {
			lines = append(lines, "")
			r.i++
			continue
		}
		ind := len(line) - len(strings.TrimLeft(line, " ")) // a tab after the indentation is text
		if m < 0 {
			if ind <= parent || ind == len(line) {
				break
			}
			m = ind
		}
		if ind < m {
			break
		}
		lines = append(lines, line[m:])
		r.i++
	}
	body := lines
	for len(body) > 0 && body[len(body)-1] == "" {
		body = body[:len(body)-1]
	}
	trailing := len(lines) - len(body)
	if m < 0 {
		return nil, r.errf("empty literal block")
	}
	s := strings.Join(body, "\n")
	for _, c := range s {
		if c != '\n' && c != '\t' && !yamlPrintable(c) {
			return nil, r.errf("unprintable %U in a literal block", c)
		}
	}
	switch chomp {
	case "-":
		return s, nil
	case "":
		return s + "\n", nil
	}
	return s + "\n" + strings.Repeat("\n", trailing), nil
}

// unquote reads a double-quoted scalar at the start of s and returns it
// with the number of bytes it took.
func unquote(s string) (string, int, error) {
	var b strings.Builder
	i := 1
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), i + 1, nil
		case c == '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("unfinished escape")
			}
			e := s[i+1]
			i += 2
			simple := map[byte]string{'0': "\x00", 'a': "\a", 'b': "\b", 't': "\t", '\t': "\t", 'n': "\n", 'v': "\v",
				'f': "\f", 'r': "\r", 'e': "\x1b", ' ': " ", '"': `"`, '/': "/", '\\': `\`,
				'N': "\u0085", '_': "\u00a0", 'L': "\u2028", 'P': "\u2029"}
			if v, ok := simple[e]; ok {
				b.WriteString(v)
				continue
			}
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if n == 0 || i+n > len(s) {
				return "", 0, fmt.Errorf("bad escape \\%c", e)
			}
			cp, err := strconv.ParseUint(s[i:i+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(cp)) {
				return "", 0, fmt.Errorf("bad escape \\%c%s", e, s[i:i+n])
			}
			b.WriteRune(rune(cp))
			i += n
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if !yamlPrintable(r) || r == utf8.RuneError && size == 1 {
				return "", 0, fmt.Errorf("raw %U in a quoted scalar", r)
			}
			b.WriteString(s[i : i+size])
			i += size
		}
	}
	return "", 0, fmt.Errorf("no closing quote")
}

var (
	jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
	// numberish is what some YAML 1.1 or 1.2 reader may take for a number
	// or a timestamp: a digit first, or a sign or dot and then a digit,
	// or .inf and .nan.
	numberish = regexp.MustCompile(`^([-+]?\.?[0-9]|[-+]?\.(inf|Inf|INF)$|\.(nan|NaN|NAN)$)`)
)

// plainValue resolves a plain scalar.
func plainValue(s string) (any, error) {
	switch s {
	case "null", "Null", "NULL", "~":
		return nil, nil
	case "true", "True", "TRUE":
		return true, nil
	case "false", "False", "FALSE":
		return false, nil
	}
	if jsonNumber.MatchString(s) {
		return json.Number(s), nil
	}
	return plainString(s)
}

// plainString checks a plain scalar that must read as a string.
func plainString(s string) (string, error) {
	if s == "" || s != strings.TrimSpace(s) {
		return "", fmt.Errorf("plain scalar %q: empty or with spaces around", s)
	}
	if strings.Contains(s, ": ") || strings.HasSuffix(s, ":") || strings.Contains(s, " #") {
		return "", fmt.Errorf("plain scalar %q: a ': ' or ' #' changes its meaning", s)
	}
	if strings.ContainsRune("-?:,[]{}#&*!|>'\"%@`", rune(s[0])) {
		if !(strings.ContainsRune("-?:", rune(s[0])) && len(s) > 1 && s[1] != ' ') {
			return "", fmt.Errorf("plain scalar %q starts with an indicator", s)
		}
	}
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "=", "<<":
		return "", fmt.Errorf("plain scalar %q: a YAML 1.1 reader takes it for something else", s)
	}
	if numberish.MatchString(s) {
		return "", fmt.Errorf("plain scalar %q: a YAML reader may take it for a number or a time", s)
	}
	for _, r := range s {
		if !yamlPrintable(r) || r == '\t' {
			return "", fmt.Errorf("plain scalar %q: unprintable %U", s, r)
		}
	}
	return s, nil
}

// member is one field of a JSON object; object keeps the fields in order.
type member struct {
	key string
	val any
}

type object []member

// decodeOrdered decodes one JSON text into nil, bool, json.Number, string,
// []any and object values, the values readYAML returns. A key repeated in
// an object keeps its first position and its last value, as the writer
// does.
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
