package manager

import (
	"fmt"

	"github.com/legate-dev/legate/internal/protocol"
)

// Limits of free text users name things with.
const (
	// maxSelectorLen bounds one selector, as a DNS name is bounded.
	maxSelectorLen = 253
	// maxLabelLen bounds short free text such as a connector's type.
	maxLabelLen = 100
)

// checkText refuses free text that users create and others read in
// listings (selectors, a connector's type, a capability, an http task's
// URL) when it holds a control character — an escape sequence, a
// newline, a bidi override (protocol.HasControl) — or is longer than max
// bytes. The message quotes the text with its control characters escaped.
func checkText(what, s string, max int) error {
	if protocol.HasControl(s) {
		return fmt.Errorf("%s %q holds a control character (an escape sequence, a newline, a bidi override or the like); use printable text", what, s)
	}
	if len(s) > max {
		return fmt.Errorf("%s is %d bytes long; at most %d are allowed", what, len(s), max)
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
