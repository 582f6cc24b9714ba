package dispatch

import "github.com/legate-dev/legate/internal/protocol"

// Limits of free text users name things with.
const (
	// maxSelectorLen bounds one selector, as a DNS name is bounded.
	maxSelectorLen = 253
	// maxLabelLen bounds short free text such as a connector's type.
	maxLabelLen = protocol.MaxLabelLen
)

// checkText is protocol.CheckText: it refuses text that users or
// delegates create and others read in listings when it is too long, is
// not valid UTF-8 or holds a control character.
func checkText(what, s string, max int) error { return protocol.CheckText(what, s, max) }

// checkSelectors checks selectors (normalized or not) with checkText.
func checkSelectors(sel []string) error {
	for _, s := range sel {
		if err := checkText("selector", s, maxSelectorLen); err != nil {
			return err
		}
	}
	return nil
}
