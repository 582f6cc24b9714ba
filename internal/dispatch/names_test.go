package dispatch

import (
	"regexp"
	"strings"
	"testing"
)

// TestNameChecksMatchTheirPatterns: the hand-written name checks accept
// exactly what their documented patterns accept.
func TestNameChecksMatchTheirPatterns(t *testing.T) {
	token := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	env := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	cases := []string{"", "a", "A", "0", "_", ".", "-", "a.b", "a_b", "a-b", "_a", "a b", "ä", "a\n", "PATH", "MY_VAR2", "2VAR",
		strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 62), "x/y", "x:y"}
	for _, s := range cases {
		if got, want := isTokenName(s), token.MatchString(s); got != want {
			t.Errorf("isTokenName(%q) = %v, want %v", s, got, want)
		}
		if got, want := isEnvName(s), env.MatchString(s); got != want {
			t.Errorf("isEnvName(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzNameChecks(f *testing.F) {
	token := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	env := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	for _, s := range []string{"", "a", "a.b-c_d", "_X1", "9a", strings.Repeat("z", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isTokenName(s), token.MatchString(s); got != want {
			t.Errorf("isTokenName(%q) = %v, want %v", s, got, want)
		}
		if got, want := isEnvName(s), env.MatchString(s); got != want {
			t.Errorf("isEnvName(%q) = %v, want %v", s, got, want)
		}
	})
}
