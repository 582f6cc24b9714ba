package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runBinary runs the legate binary without a manager and returns what it
// printed and its exit status.
func runBinary(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(baseEnv(), env...)
	cmd.Dir = t.TempDir()
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := cliResult{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("legate %v: %v", args, err)
	}
	return r
}

// TestMistypedCommandsExitNonZero: a mistyped subcommand or flag exits 2
// with a suggestion on stderr and nothing on stdout; a group command alone
// prints its help and exits 0.
func TestMistypedCommandsExitNonZero(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args       []string
		wantCode   int
		wantStderr string // contained
	}{
		{[]string{"task", "lst"}, 2, `legate: unknown command "lst" for "legate task"; did you mean "list"?`},
		{[]string{"tsk"}, 2, `did you mean "task"?`},
		{[]string{"manager", "rotat-key"}, 2, `did you mean "rotate-key"?`},
		{[]string{"delegate", "ls"}, 2, `did you mean "legate delegates ls"?`},
		{[]string{"task", "run", "--scirpt", "echo"}, 2, `unknown flag: --scirpt; did you mean --script?`},
		{[]string{"task"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runBinary(t, nil, tt.args...)
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, tt.wantCode, tt.wantStderr)
			}
			if tt.wantCode != 0 && r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if tt.wantCode == 0 && !strings.Contains(r.stdout, "Available Commands:") {
				t.Errorf("stdout = %q, want the help", r.stdout)
			}
		})
	}
}

// TestVersion: legate version and --version print the version, the commit
// and the Go version without a manager; with one, legate version adds the
// manager's version, which is the same build's.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}, {"version", "--client"}} {
		r := runBinary(t, nil, args...)
		lines := strings.Split(r.stdout, "\n")
		if r.code != 0 || !strings.HasPrefix(lines[0], "legate ") || !strings.Contains(r.stdout, "\ncommit: ") ||
			!strings.Contains(r.stdout, "\ngo: go1.") || r.stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	c := startCluster(t, "--delegate-image", "registry.example.com/legate:v1")
	out := c.mustCLI("version")
	version := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "legate ")
	// The manager's URL for delegates and their image: those of its specs.
	if want := "manager: " + version + " at " + c.url + "\n  public URL: " + c.url + "\n  delegate image: registry.example.com/legate:v1\n"; !strings.HasSuffix(out, want) {
		t.Errorf("legate version with a manager:\n%s\nwant it to end with %q", out, want)
	}
}

// TestCompletion: the completion scripts exist for each shell, and the
// binary completes names from a real manager.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := runBinary(t, nil, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, "__complete") {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", shell, r.code, len(r.stdout), r.stderr)
		}
	}
	c := startCluster(t)
	c.token("ci")
	r := c.cli("__complete", "token", "revoke", "")
	if r.code != 0 || r.stdout != "ci\taccount\n:4\n" {
		t.Errorf("__complete token revoke: exit %d, stdout %q", r.code, r.stdout)
	}
}
