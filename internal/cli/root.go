package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// groupAnnotation marks a command that only groups subcommands (legate
// task, legate org …): Finish makes it runnable so that it can refuse an
// unknown subcommand, and the usage template hides its own use line.
const groupAnnotation = "legate.group"

// Finish completes root once every subcommand has been added, with the
// habits of kubectl and gh:
//   - an unknown subcommand ("legate task lst") fails with exit status 2
//     and suggests the closest one, at every level; a group command
//     without arguments prints its help;
//   - an unknown flag suggests the closest defined flag;
//   - every flag error ends with the command to run for help;
//   - the completion command exists before the walk, so it gets the same.
func Finish(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	strictHelp(root)
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Long += `
Besides commands and flags, the scripts complete what the manager knows:
task IDs (the ` + strconv.Itoa(completionTaskLimit) + ` most recent), run IDs (the ` + strconv.Itoa(completionRunLimit) + ` most recent), delegate,
token, API key, organization, project, connector, configuration and
pipeline names, users and service accounts, and selectors. They ask the
manager set by ` + EnvURL + ` and ` + EnvAPIKey + ` (or --url and --api-key on
the command line) and offer nothing when it does not answer within ` + completionTimeout.String() + `.`
			c.Example = `  source <(legate completion bash)
  legate completion zsh > "${fpath[1]}/_legate"
  legate completion fish > ~/.config/fish/completions/legate.fish`
		}
	}
	root.SetFlagErrorFunc(flagError)
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(),
		"{{if .Runnable}}", `{{if and .Runnable (not (index .Annotations "`+groupAnnotation+`"))}}`, 1))
	walk(root, func(c *cobra.Command) {
		if !c.HasSubCommands() {
			if check := c.Args; check != nil {
				c.Args = func(cmd *cobra.Command, args []string) error {
					if err := check(cmd, args); err != nil {
						return argsError(cmd, args, err)
					}
					return nil
				}
			}
			return
		}
		if !c.Runnable() {
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[groupAnnotation] = "true"
			c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
			c.Args = nil
		}
		check := c.Args
		if check == nil {
			check = cobra.NoArgs
		}
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			if err != nil && len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return err
		}
	})
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// unknownCommand is the error for an argument that names no subcommand of
// cmd, with the closest names.
func unknownCommand(cmd *cobra.Command, arg string) error {
	msg := fmt.Sprintf("unknown command %q for %q", arg, cmd.CommandPath())
	if s := suggestCommands(cmd, arg); len(s) > 0 {
		msg += "; did you mean " + quoteList(s) + "?"
	}
	return usageError{msg + "\nRun '" + cmd.CommandPath() + " --help' for its commands."}
}

// argsError explains wrong arguments of a command without subcommands.
// When the first argument names a subcommand of a sibling with a similar
// name ("legate delegate ls"), it suggests that ("legate delegates ls").
func argsError(cmd *cobra.Command, args []string, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "arg(s)") { // cobra's count checks
		msg += " (usage: " + cmd.UseLine() + ")"
	}
	if len(args) > 0 && cmd.HasParent() {
		for _, sib := range cmd.Parent().Commands() {
			if sib == cmd || !sib.IsAvailableCommand() || len(closest(cmd.Name(), []candidate{{sib.Name(), sib.Name()}})) == 0 {
				continue
			}
			if sub, _, ferr := sib.Find(args[:1]); ferr == nil && sub != sib {
				msg += "; did you mean \"" + sib.CommandPath() + " " + args[0] + "\"?"
				break
			}
		}
	}
	return usageError{msg + "\nRun '" + cmd.CommandPath() + " --help' for usage."}
}

// flagError adds to a flag parsing error the closest flag, for an unknown
// one, and where help is.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		typed := ne.GetSpecifiedName()
		if sh := ne.GetSpecifiedShortnames(); len(sh) > 1 {
			typed = sh // "-scirpt" was meant as --script
		}
		if s := suggestFlags(cmd.Flags(), typed); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
	}
	return usageError{msg + "\nRun '" + cmd.CommandPath() + " --help' for its flags."}
}

// suggestFlags returns the visible flags closest to typed, as "--name".
func suggestFlags(fs *pflag.FlagSet, typed string) []string {
	var names []candidate
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, candidate{f.Name, f.Name})
		}
	})
	out := closest(strings.TrimLeft(typed, "-"), names)
	for i, n := range out {
		out[i] = "--" + n
	}
	return out
}

// suggestCommands returns the available subcommands of cmd closest to
// typed, by name or alias.
func suggestCommands(cmd *cobra.Command, typed string) []string {
	var names []candidate
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		for _, n := range append([]string{c.Name()}, c.Aliases...) {
			names = append(names, candidate{n, c.Name()})
		}
		for _, n := range c.SuggestFor {
			names = append(names, candidate{n, c.Name()})
		}
	}
	return closest(typed, names)
}

// candidate is a name to compare with what was typed and the suggestion
// it stands for (a command for its alias).
type candidate struct{ name, suggest string }

// closest returns the suggestions whose names are nearest to typed: at most
// two edits away (case-insensitive), or starting with it, which counts as
// one edit. Only the nearest are kept, at most three, without repeats.
func closest(typed string, cs []candidate) []string {
	typed = strings.ToLower(typed)
	if typed == "" {
		return nil
	}
	best := 3
	var out []string
	for _, c := range cs {
		name := strings.ToLower(c.name)
		d := levenshtein(typed, name)
		if strings.HasPrefix(name, typed) {
			d = min(d, 1)
		}
		if d >= len(name) {
			continue // nothing in common
		}
		switch {
		case d < best:
			best, out = d, []string{c.suggest}
		case d == best && !slices.Contains(out, c.suggest):
			out = append(out, c.suggest)
		}
	}
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}

// levenshtein is the edit distance between a and b (in bytes: flag names
// are ASCII).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// quoteList renders names as "a", "a" or "b", "a", "b" or "c".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// strictHelp makes "legate help TOPIC" refuse a topic that names no
// command, with the closest names, as an unknown command is refused
// (cobra prints the root's help and succeeds).
func strictHelp(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() != "help" || c.Run == nil {
			continue
		}
		show := c.Run
		c.Run = nil
		c.RunE = func(cmd *cobra.Command, args []string) error {
			cur := root
			for _, arg := range args {
				next := subcommand(cur, arg)
				if next == nil {
					return unknownCommand(cur, arg)
				}
				cur = next
			}
			show(cmd, args)
			return nil
		}
	}
}

// subcommand returns the subcommand of c named (or aliased) name, nil if
// none.
func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}
