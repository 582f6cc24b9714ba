package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/legate-dev/legate/internal/protocol"
)

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row writes one row. Cells are stored data: a tab or newline in one
// would break the columns (they become spaces), and any other control
// character is escaped.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
		cells[i] = escape(strings.NewReplacer("\t", " ", "\n", " ").Replace(cells[i]))
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// escape renders the characters of s that a terminal could act on
// (protocol.IsControl: C0 controls, DEL, C1 controls, bidi and other
// format characters, line and paragraph separators) and bytes that are
// not UTF-8 visibly, as \x1b, \u202e or \U000e0001 (\xff for a stray
// byte); everything else, plain text, stays as it is. Every printer of
// text that comes from the manager's stored data (names, hostnames, tags,
// descriptions, errors, outputs, URLs) goes through it, so that stored
// data cannot recolour, rewrite or hide what the terminal shows (the
// kubectl CVE-2021-25743 class). It is never applied to a task's own
// output (task logs, task run: those are the task's bytes, as with
// kubectl logs) nor to --json.
func escape(s string) string { return escapeText(s, false) }

// escapeLines is escape for multi-line text printed as a block: newlines
// and tabs stay, every other control character is escaped.
func escapeLines(s string) string { return escapeText(s, true) }

func escapeText(s string, keepLines bool) string {
	keep := func(c byte) bool { return keepLines && (c == '\n' || c == '\t') }
	i := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !keep(c) {
				break
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || protocol.IsControl(r) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	const hex = "0123456789abcdef"
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !keep(c) {
				b.WriteString(`\x`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			} else {
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		case protocol.IsControl(r):
			if r <= 0xffff {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// age renders how long ago t was, e.g. "3s ago".
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

func agePtr(now time.Time, t *time.Time) string {
	if t == nil {
		return "never"
	}
	return age(now, *t)
}

// duration renders a duration compactly: "350ms", "1.2s", "1m30s".
func duration(d time.Duration) string {
	switch {
	case d < 0:
		return ""
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// taskDuration is how long a task ran (so far); "" if it never started.
func taskDuration(now time.Time, t protocol.Task) string {
	if t.StartedAt == nil {
		return ""
	}
	end := now
	if t.FinishedAt != nil {
		end = *t.FinishedAt
	} else if protocol.Terminal(t.Status) {
		return ""
	}
	return duration(end.Sub(*t.StartedAt))
}

func exitCode(t protocol.Task) string {
	if t.ExitCode == nil {
		return ""
	}
	return strconv.Itoa(*t.ExitCode)
}

func (a *app) timestamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.In(a.loc).Format("2006-01-02 15:04:05 MST") + " (" + age(a.now(), *t) + ")"
}

// isNetError reports whether err comes from the network rather than from
// an answer of the manager.
func isNetError(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne)
}

// scope renders a scope as the CLI shows it: "account", "org/ORG" or
// "project/ORG/PROJECT".
func scope(org, project string) string {
	switch {
	case org == "":
		return "account"
	case project == "":
		return "org/" + org
	}
	return "project/" + org + "/" + project
}

// timeLeft renders a remaining time, truncated, e.g. "5h59m left",
// "4m12s left", "42s left" or "expired".
func timeLeft(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return "expired"
	case d < time.Minute:
		return fmt.Sprintf("%ds left", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds left", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	return fmt.Sprintf("%dh%dm left", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// checkScopeFlags refuses --project without --org.
func checkScopeFlags(org, project string) error {
	if project != "" && org == "" {
		return usagef("--project %s needs --org: a project belongs to an organization", project)
	}
	return nil
}
