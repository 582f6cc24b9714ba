package protocol

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// CheckConfiguration validates a script and selectors and returns the
// selectors normalized.
func CheckConfiguration(script string, selectors []string) ([]string, string) {
	if strings.TrimSpace(script) == "" {
		return nil, "the configuration script is empty"
	}
	if len(script) > MaxConfigurationScript {
		return nil, "the configuration script is " + strconv.Itoa(len(script)) + " bytes; at most " +
			strconv.Itoa(MaxConfigurationScript) + " are allowed (install from a file the script downloads instead)"
	}
	sel := NormalizeSelectors(selectors)
	if len(sel) > MaxConfigurationSelectors {
		return nil, "too many selectors (at most " + strconv.Itoa(MaxConfigurationSelectors) + ")"
	}
	for _, s := range sel {
		if len(s) > MaxSelectorLen || strings.ContainsRune(s, ',') || HasControl(s) {
			return nil, "selector " + strconv.Quote(s) + " is invalid: at most 253 characters, no commas or control characters"
		}
	}
	return sel, ""
}

// Truncate cuts s to at most n bytes, on a UTF-8 boundary: a character
// the cut splits is left out whole, one it does not split is kept.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				s = s[:i]
			}
			break
		}
	}
	return s
}
