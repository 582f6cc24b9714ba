package protocol

import (
	"sort"
	"strings"
)

// NormalizeSelector trims and lower-cases a selector or tag; matching is
// case-insensitive and ignores surrounding space.
func NormalizeSelector(s string) string {
	return strings.ToLower(strings.TrimSpace(s))
}

// NormalizeSelectors normalizes, drops empty entries, de-duplicates and
// sorts a list of selectors or tags.
func NormalizeSelectors(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		n := NormalizeSelector(s)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SplitTags parses a comma-separated tag list such as DELEGATE_TAGS.
func SplitTags(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return NormalizeSelectors(strings.Split(s, ","))
}

// MissingSelectors returns the task selectors that a delegate with the given
// tags, name and hostname does not have. A delegate's selectors are its tags
// plus, implicitly, its name and hostname. Empty means the delegate matches.
func MissingSelectors(taskSelectors, tags []string, name, hostname string) []string {
	have := make(map[string]bool, len(tags)+2)
	for _, t := range tags {
		have[NormalizeSelector(t)] = true
	}
	have[NormalizeSelector(name)] = true
	have[NormalizeSelector(hostname)] = true
	var missing []string
	for _, s := range taskSelectors {
		n := NormalizeSelector(s)
		if n != "" && !have[n] {
			missing = append(missing, n)
		}
	}
	return missing
}
