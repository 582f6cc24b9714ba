package protocol

import (
	"unicode"
	"unicode/utf8"
)

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
