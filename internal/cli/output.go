package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Output formats of -o.
const (
	formatJSON = "json" // the API object, indented
	formatYAML = "yaml" // the same value as YAML
	formatWide = "wide" // the table with the columns it leaves out
	formatName = "name" // one name (or ID) per line, for scripts
)

// outputFlags are -o/--output and --json, which stays as the alias of
// -o json. add registers them on a command and checks them before it runs.
type outputFlags struct {
	format  string // after the check: "" (text), or one of formats
	asJSON  bool
	formats []string
}

// formatHelp says what each format prints, for the flag's help.
var formatHelp = map[string]string{
	formatJSON: "json",
	formatYAML: "yaml",
	formatWide: "wide (more columns)",
	formatName: "name (one per line)",
}

// add registers -o (accepting formats) and --json on cmd, with completion
// of the formats, and a check of both before cmd runs.
func (o *outputFlags) add(cmd *cobra.Command, formats ...string) {
	o.formats = formats
	help := make([]string, len(formats))
	for i, f := range formats {
		help[i] = formatHelp[f]
	}
	list := strings.Join(help[:len(help)-1], ", ") + " or " + help[len(help)-1]
	fl := cmd.Flags()
	fl.StringVarP(&o.format, "output", "o", "", "output format: "+list)
	fl.BoolVar(&o.asJSON, "json", false, "print JSON (the same as -o json)")
	_ = cmd.RegisterFlagCompletionFunc("output", fixed(formats...))
	pre := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if err := o.check(); err != nil {
			return err
		}
		if pre != nil {
			return pre(cmd, args)
		}
		return nil
	}
}

// check validates the flags and folds --json into format.
func (o *outputFlags) check() error {
	o.format = strings.ToLower(strings.TrimSpace(o.format))
	if o.asJSON {
		if o.format != "" && o.format != formatJSON {
			return usagef("--json is -o json: it cannot go with -o %s", o.format)
		}
		o.format = formatJSON
	}
	if o.format == "" || slices.Contains(o.formats, o.format) {
		return nil
	}
	return usagef("-o %s: want %s", o.format, strings.Join(o.formats, ", "))
}

// is reports whether format f was chosen.
func (o *outputFlags) is(f string) bool { return o.format == f }

// structured reports whether the output is the object itself (JSON or
// YAML) rather than text.
func (o *outputFlags) structured() bool { return o.format == formatJSON || o.format == formatYAML }

// print writes v as JSON or YAML, as chosen.
func (o *outputFlags) print(w io.Writer, v any) error {
	if o.format == formatYAML {
		return printYAML(w, v)
	}
	return printJSON(w, v)
}

// printNames writes one name per line (-o name). Names are stored data:
// escaped like every other printed field.
func printNames(w io.Writer, names ...string) error {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(escape(n))
		b.WriteByte('\n')
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// absTime renders a time for a wide table, e.g. 2026-11-22T12:00:00Z.
func (a *app) absTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.In(a.loc).Format(time.RFC3339)
}
