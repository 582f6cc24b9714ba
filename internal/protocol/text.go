package protocol

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxLabelLen bounds short free text that users name things with: a
// display name, a connector's type.
const MaxLabelLen = 100

// IsControl reports whether r is a character that a terminal may act on
// instead of showing it: the C0 controls (tab and newline included), DEL,
// the C1 controls, Unicode format characters (bidi embeddings, overrides
// and isolates, zero-width characters, the byte order mark, ...) and the
// line and paragraph separators. Text that users read in listings must
// not carry them (the kubectl CVE-2021-25743 class): the manager refuses
// them in names and tags, and the CLI shows any that reach it escaped.
func IsControl(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, 0x80 <= r && r <= 0x9f:
		return true
	case r == '\u2028', r == '\u2029':
		return true
	case r < 0xa0:
		return false
	}
	return unicode.Is(unicode.Cf, r)
}

// HasControl reports whether s contains a control character (IsControl)
// or is not valid UTF-8.
func HasControl(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || IsControl(r) {
			return true
		}
		i += n
	}
	return false
}

// CheckText refuses text that users or delegates create and others read
// in listings (registration fields, selectors, a connector's type, a
// capability, an http task's URL, a user's display name) when it is
// longer than max bytes, is not valid UTF-8, or holds a control character
// — an escape sequence, a newline, a bidi override (IsControl). The error
// names the field, the character and where it is, never quoting the text
// raw.
func CheckText(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s is too long (%d bytes; at most %d)", what, len(s), max)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return fmt.Errorf("%s is not valid UTF-8 (byte %d); use printable text only", what, i)
			}
		}
		if IsControl(r) {
			return fmt.Errorf("%s contains the control or formatting character U+%04X at byte %d; use printable text only", what, r, i)
		}
	}
	return nil
}

// MaxSelectorLen bounds one selector, as a DNS name is bounded.
const MaxSelectorLen = 253

// CheckSelectors checks selectors (normalized or not) with CheckText.
func CheckSelectors(sel []string) error {
	for _, s := range sel {
		if err := CheckText("selector", s, MaxSelectorLen); err != nil {
			return err
		}
	}
	return nil
}

// CheckName refuses the name of a kind of object (org, project,
// connector, configuration) that ValidName refuses, saying what it takes.
func CheckName(kind, name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%s name %q is invalid: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", kind, name)
	}
	return nil
}
