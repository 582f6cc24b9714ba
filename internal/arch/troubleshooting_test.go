package arch

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// minFragment is the shortest piece of a quoted message that is looked
// for: shorter ones ("to it", "on") would be found anywhere.
const minFragment = 6

// logMsg finds the message of a quoted log line: msg="…" or msg=word.
var logMsg = regexp.MustCompile(`\bmsg=(?:"([^"]*)"|(\S+))`)

// TestTroubleshootingMessagesExist: every message docs/troubleshooting.md
// quotes in a ```message block is still what legate says. Each line is
// cut at "…" (where a value goes) and every piece must be in the
// product's Go source; a log line's msg is looked for whole. A message
// reworded in the code fails here until the page says it the new way.
func TestTroubleshootingMessagesExist(t *testing.T) {
	b, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	source := productSource(t)
	quoted := 0
	for _, line := range messageLines(string(b)) {
		for _, f := range fragments(line) {
			quoted++
			if !strings.Contains(source, f) {
				t.Errorf("docs/troubleshooting.md quotes %q (in %q), which no Go source of the product says any more: quote the message as the code has it now", f, line)
			}
		}
	}
	if quoted < 40 {
		t.Errorf("only %d quoted pieces found in docs/troubleshooting.md's message blocks: is the block syntax (```message) still used?", quoted)
	}
}

// messageLines returns the lines of the ```message blocks of a page.
func messageLines(page string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(page, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```message":
			in = true
		case in && trimmed == "```":
			in = false
		case in && trimmed != "":
			out = append(out, trimmed)
		}
	}
	return out
}

// fragments returns the pieces of a quoted line to look for.
func fragments(line string) []string {
	if m := logMsg.FindStringSubmatch(line); m != nil {
		return []string{m[1] + m[2]}
	}
	var out []string
	for _, f := range strings.Split(line, "…") {
		f = strings.Trim(f, ` "():;,`)
		if len(f) >= minFragment {
			out = append(out, f)
		}
	}
	return out
}

// productSource is the text of every non-test Go file under internal/
// and cmd/.
func productSource(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, dir := range []string{"../../internal", "../../cmd"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b.Write(src)
			b.WriteByte('\n')
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
