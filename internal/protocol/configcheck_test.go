package protocol

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTruncateKeepsUTF8: a cut never splits a character.
func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	for n := 0; n <= len(s)+1; n++ {
		got := Truncate(s, n)
		if len(got) > n || !utf8.ValidString(got) || !strings.HasPrefix(s, got) || len(got) < n-1 && len(got) < len(s) {
			t.Errorf("Truncate(%d) = %q", n, got)
		}
	}
}

func TestCheckConfiguration(t *testing.T) {
	if _, msg := CheckConfiguration("  ", nil); msg != "the configuration script is empty" {
		t.Errorf("empty: %q", msg)
	}
	if sel, msg := CheckConfiguration("echo", []string{" Linux ", "linux"}); msg != "" || len(sel) != 1 {
		t.Errorf("selectors %v, %q", sel, msg)
	}
	if _, msg := CheckConfiguration("echo", []string{"a,b"}); !strings.Contains(msg, "is invalid") {
		t.Errorf("a comma: %q", msg)
	}
}
