package cli

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// TestUnknownCommandsAndFlagsSuggest runs mistyped command lines: each
// fails with a usage error (main exits 2) that names the closest command or
// flag and where help is. Before Finish, "task lst" printed the help and
// succeeded.
func TestUnknownCommandsAndFlagsSuggest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // the whole message
	}{
		{[]string{"task", "lst"}, "unknown command \"lst\" for \"legate task\"; did you mean \"list\"?\nRun 'legate task --help' for its commands."},
		{[]string{"tsk", "list"}, "unknown command \"tsk\" for \"legate\"; did you mean \"task\"?\nRun 'legate --help' for its commands."},
		{[]string{"task", "l"}, "unknown command \"l\" for \"legate task\"; did you mean \"list\" or \"logs\"?\nRun 'legate task --help' for its commands."},
		{[]string{"task", "xyzzy"}, "unknown command \"xyzzy\" for \"legate task\"\nRun 'legate task --help' for its commands."},
		{[]string{"apikey", "revok", "ci"}, "unknown command \"revok\" for \"legate apikey\"; did you mean \"revoke\"?\nRun 'legate apikey --help' for its commands."},
		{[]string{"completion", "bsh"}, "unknown command \"bsh\" for \"legate completion\"; did you mean \"bash\" or \"zsh\"?\nRun 'legate completion --help' for its commands."},
		{[]string{"task", "run", "--scirpt", "x"}, "unknown flag: --scirpt; did you mean --script?\nRun 'legate task run --help' for its flags."},
		{[]string{"task", "run", "-scirpt", "x"}, "unknown shorthand flag: 's' in -scirpt; did you mean --script?\nRun 'legate task run --help' for its flags."},
		{[]string{"task", "list", "--jsn"}, "unknown flag: --jsn; did you mean --json?\nRun 'legate task list --help' for its flags."},
		{[]string{"task", "list", "--ur", "x"}, "unknown flag: --ur; did you mean --url?\nRun 'legate task list --help' for its flags."},
		{[]string{"task", "list", "--frobnicate"}, "unknown flag: --frobnicate\nRun 'legate task list --help' for its flags."},
		{[]string{"task", "run", "--timeout", "soon"}, "invalid argument \"soon\" for \"--timeout\" flag: time: invalid duration \"soon\"\nRun 'legate task run --help' for its flags."},
		{[]string{"task", "get"}, "accepts 1 arg(s), received 0 (usage: legate task get ID [flags])\nRun 'legate task get --help' for usage."},
		{[]string{"help", "tsk"}, "unknown command \"tsk\" for \"legate\"; did you mean \"task\"?\nRun 'legate --help' for its commands."},
		{[]string{"help", "task", "lst"}, "unknown command \"lst\" for \"legate task\"; did you mean \"list\"?\nRun 'legate task --help' for its commands."},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t.Context(), map[string]string{}, "", tt.args...)
			var ue usageError
			if !errors.As(r.err, &ue) {
				t.Fatalf("err = %v (%T), want a usage error; stdout %q", r.err, r.err, r.stdout)
			}
			if d := cmp.Diff(tt.want, r.err.Error()); d != "" {
				t.Errorf("message (-want +got):\n%s", d)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing (no help on a mistake)", r.stdout)
			}
		})
	}
}

// TestGroupHelp: a group command without arguments prints its help and
// succeeds; its usage line is the group's "[command]" form only, while a
// leaf keeps its own.
func TestGroupHelp(t *testing.T) {
	t.Parallel()
	r := runCLI(t.Context(), map[string]string{}, "", "task")
	if r.err != nil {
		t.Fatalf("err = %v", r.err)
	}
	if !strings.Contains(r.stdout, "Usage:\n  legate task [command]\n") || !strings.Contains(r.stdout, "Available Commands:") {
		t.Errorf("help of task:\n%s", r.stdout)
	}
	r = runCLI(t.Context(), map[string]string{}, "", "task", "get", "--help")
	if r.err != nil || !strings.Contains(r.stdout, "Usage:\n  legate task get ID [flags]\n") {
		t.Errorf("help of task get: err %v\n%s", r.err, r.stdout)
	}
}

func TestClosest(t *testing.T) {
	t.Parallel()
	cs := []candidate{{"list", "list"}, {"ls", "list"}, {"logs", "logs"}, {"get", "get"}, {"run", "run"}}
	tests := []struct {
		typed string
		want  []string
	}{
		{"lst", []string{"list"}},
		{"LIST", []string{"list"}},
		{"lo", []string{"list", "logs"}}, // via "ls" and "logs"
		{"rnu", []string{"run"}},
		{"zzzzzz", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, closest(tt.typed, cs)); d != "" {
			t.Errorf("closest(%q) (-want +got):\n%s", tt.typed, d)
		}
	}
}

// TestSiblingSuggestion: "legate delegate ls" (the delegate process takes
// no arguments) points at "legate delegates ls".
func TestSiblingSuggestion(t *testing.T) {
	t.Parallel()
	root := &cobra.Command{Use: "legate", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(&cobra.Command{Use: "delegate", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }})
	addCommands(root, &app{getenv: func(string) string { return "" }})
	Finish(root)
	root.SetArgs([]string{"delegate", "ls"})
	root.SetOut(io.Discard)
	err := root.Execute()
	want := "unknown command \"ls\" for \"legate delegate\"; did you mean \"legate delegates ls\"?\nRun 'legate delegate --help' for usage."
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}
