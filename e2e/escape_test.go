package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// Text that reaches the manager's store from what runs on a delegate — here
// the output of a configuration script that prints what a hostile server
// sent it: clear the screen, set the window title, reverse the text — is
// shown by the CLI with its control characters escaped, while the task's
// own output (task logs) passes through unchanged.
func TestE2EStoredControlCharactersAreEscaped(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	tok := c.token("esc")
	script := filepath.Join(t.TempDir(), "hostile.sh")
	body := "printf 'fetched: \\033[2J\\033]0;pwned\\007\\342\\200\\256gpj.exe\\r\\n'\n"
	if err := os.WriteFile(script, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("configuration", "create", "hostile", "--script", script)
	c.delegate("esc", "esc-host", c.seed004Env(tok, "esc", "")...)
	in := c.waitConfigured("esc", "esc-host", "hostile", 1)
	if want := "fetched: \x1b[2J\x1b]0;pwned\x07\u202egpj.exe\r\n"; in.ConfigurationResult.Output != want {
		t.Fatalf("stored output %q, want %q (--json shows it exactly)", in.ConfigurationResult.Output, want)
	}

	out := c.mustCLI("delegates", "describe", "esc")
	if protocol.HasControl(strings.ReplaceAll(out, "\n", "")) {
		t.Errorf("describe prints raw control characters:\n%q", out)
	}
	if !strings.Contains(out, `fetched: \x1b[2J\x1b]0;pwned\x07\u202egpj.exe\x0d`) {
		t.Errorf("describe does not show the output escaped:\n%s", out)
	}

	task, _ := c.runJSON("--selector", "esc", "--script", "printf 'colour \\033[32mgreen\\033[0m\\n'")
	if got := c.mustCLI("task", "logs", task.ID); got != "colour \x1b[32mgreen\x1b[0m\n" {
		t.Errorf("task logs changed the task's own output: %q", got)
	}
}
