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

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
		// A tab or newline in a value would break the columns.
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(cells[i])
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
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
