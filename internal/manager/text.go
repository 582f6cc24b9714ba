package manager

import (
	"fmt"
	"unicode/utf8"

	"github.com/legate-dev/legate/internal/protocol"
)

// Limits of free text users name things with.
const (
	// maxSelectorLen bounds one selector, as a DNS name is bounded.
	maxSelectorLen = 253
	// maxLabelLen bounds short free text such as a connector's type.
	maxLabelLen = 100
)

// checkText refuses text that users or delegates create and others read
// in listings (registration fields, selectors, a connector's type, a
// capability, an http task's URL) when it is longer than max bytes, is not
// valid UTF-8, or holds a control character — an escape sequence, a
// newline, a bidi override (protocol.IsControl). The error names the
// field, the character and where it is, never quoting the text raw.
func checkText(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s is too long (%d bytes; at most %d)", what, len(s), max)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return fmt.Errorf("%s is not valid UTF-8 (byte %d); use printable text only", what, i)
			}
		}
		if protocol.IsControl(r) {
			return fmt.Errorf("%s contains the control or formatting character U+%04X at byte %d; use printable text only", what, r, i)
		}
	}
	return nil
}

// checkSelectors checks selectors (normalized or not) with checkText.
func checkSelectors(sel []string) error {
	for _, s := range sel {
		if err := checkText("selector", s, maxSelectorLen); err != nil {
			return err
		}
	}
	return nil
}
