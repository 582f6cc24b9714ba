package cli

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// The tables, wide tables and name lists of the lists that share no code
// with a get: users, groups, roles, bindings, pipelines and runs. Every
// list takes -o json|yaml|wide|name (listFormats); TestEveryListTakesEveryFormat
// keeps it so.

// listFormats are the -o formats of every list command.
func listFormats() []string { return []string{formatJSON, formatYAML, formatWide, formatName} }

// printList prints v (the API object) as JSON or YAML, names one per line
// for -o name, or calls table with whether -o wide was chosen.
func printList(w io.Writer, out *outputFlags, v any, names func() []string, table func(wide bool) error) error {
	switch {
	case out.structured():
		return out.print(w, v)
	case out.is(formatName):
		return printNames(w, names()...)
	}
	return table(out.is(formatWide))
}

func (a *app) printUsers(w io.Writer, out *outputFlags, l protocol.UserList) error {
	return printList(w, out, l, func() []string {
		names := make([]string, len(l.Users))
		for i, u := range l.Users {
			names[i] = u.Name
		}
		return names
	}, func(wide bool) error {
		header := []string{"NAME", "KIND", "STATUS", "GROUPS", "BINDINGS"}
		if wide {
			header = append(header, "DISPLAY", "PASSWORD", "CREATED-AT")
		}
		t := newTable(w, header...)
		for _, u := range l.Users {
			var bs []string
			for _, b := range u.Bindings {
				bs = append(bs, b.Role+"@"+scopeText(b.Org, b.Project))
			}
			status := "enabled"
			if u.Disabled {
				status = "disabled"
			}
			row := []string{u.Name, strings.ReplaceAll(u.Kind, "_", " "), status, strings.Join(u.Groups, ","), strings.Join(bs, ",")}
			if wide {
				pw := ""
				if u.Kind == protocol.PrincipalUser {
					pw = map[bool]string{true: "set", false: "none"}[u.HasPassword]
				}
				row = append(row, u.Display, pw, a.absTime(&u.CreatedAt))
			}
			t.row(row...)
		}
		return t.flush()
	})
}

func (a *app) printGroups(w io.Writer, out *outputFlags, l protocol.GroupList) error {
	return printList(w, out, l, func() []string {
		names := make([]string, len(l.Groups))
		for i, g := range l.Groups {
			names[i] = g.Name
		}
		return names
	}, func(wide bool) error {
		header := []string{"NAME", "MEMBERS"}
		if wide {
			header = append(header, "CREATED-AT")
		}
		t := newTable(w, header...)
		for _, g := range l.Groups {
			row := []string{g.Name, strings.Join(g.Members, ",")}
			if wide {
				row = append(row, a.absTime(&g.CreatedAt))
			}
			t.row(row...)
		}
		return t.flush()
	})
}

func (a *app) printRoles(w io.Writer, out *outputFlags, l protocol.RoleList) error {
	return printList(w, out, l, func() []string {
		names := make([]string, len(l.Roles))
		for i, r := range l.Roles {
			names[i] = r.Name
		}
		return names
	}, func(wide bool) error {
		header := []string{"NAME", "BUILT-IN", "PERMISSIONS"}
		if wide {
			header = append(header, "DESCRIPTION", "CREATED-AT")
		}
		t := newTable(w, header...)
		for _, r := range l.Roles {
			row := []string{r.Name, yesNo(r.Builtin), strings.Join(r.Permissions, ",")}
			if wide {
				row = append(row, r.Description, a.absTime(&r.CreatedAt))
			}
			t.row(row...)
		}
		return t.flush()
	})
}

// bindingArgs names a binding as the arguments of legate role unbind:
// ROLE --user NAME [--org ORG [--project PROJECT]] (a binding has no name
// of its own), so that -o name feeds unbind.
func bindingArgs(b protocol.Binding) string {
	s := b.Role + " --" + strings.ReplaceAll(b.SubjectKind, "_", "-") + " " + b.Subject
	if b.Org != "" {
		s += " --org " + b.Org
	}
	if b.Project != "" {
		s += " --project " + b.Project
	}
	return s
}

func (a *app) printBindings(w io.Writer, out *outputFlags, l protocol.BindingList) error {
	return printList(w, out, l, func() []string {
		names := make([]string, len(l.Bindings))
		for i, b := range l.Bindings {
			names[i] = bindingArgs(b)
		}
		return names
	}, func(wide bool) error {
		header := []string{"ROLE", "SUBJECT", "SCOPE"}
		if wide {
			header = append(header, "CREATED-AT")
		}
		t := newTable(w, header...)
		for _, b := range l.Bindings {
			row := []string{b.Role, strings.ReplaceAll(b.SubjectKind, "_", " ") + " " + b.Subject, scopeText(b.Org, b.Project)}
			if wide {
				row = append(row, a.absTime(&b.CreatedAt))
			}
			t.row(row...)
		}
		return t.flush()
	})
}

// pipelineTable writes pipeline list's table; wide adds who last applied
// each and the absolute times.
func (a *app) pipelineTable(w io.Writer, ps []protocol.Pipeline, wide bool) error {
	now := a.now()
	header := []string{"NAME", "SCOPE", "VERSION", "UPDATED", "DESCRIPTION"}
	if wide {
		header = append(header, "UPDATED-BY", "CREATED-AT", "UPDATED-AT")
	}
	t := newTable(w, header...)
	for _, p := range ps {
		row := []string{p.Name, scope(p.Org, p.Project), strconv.FormatInt(p.Version, 10), age(now, p.UpdatedAt), p.Description}
		if wide {
			row = append(row, p.UpdatedBy, a.absTime(&p.CreatedAt), a.absTime(&p.UpdatedAt))
		}
		t.row(row...)
	}
	return t.flush()
}

// runTable writes run list's table; wide adds the trigger, the absolute
// times and the error of a failed run.
func (a *app) runTable(w io.Writer, runs []protocol.Run, wide bool) error {
	now := a.now()
	header := []string{"ID", "PIPELINE", "VERSION", "STATUS", "STARTED", "DURATION", "TRIGGERED BY", "SCOPE"}
	if wide {
		header = append(header, "TRIGGER", "CREATED-AT", "FINISHED-AT", "ERROR")
	}
	t := newTable(w, header...)
	for _, r := range runs {
		end := now
		if r.FinishedAt != nil {
			end = *r.FinishedAt
		}
		row := []string{r.ID, r.Pipeline, strconv.FormatInt(r.Version, 10), r.Status, age(now, r.CreatedAt), duration(max(end.Sub(r.CreatedAt), 0)),
			r.TriggeredBy, scope(r.Org, r.Project)}
		if wide {
			trigger := r.Trigger
			if r.RerunOf != "" {
				trigger += " of " + r.RerunOf
			}
			row = append(row, trigger, a.absTime(&r.CreatedAt), a.absTime(r.FinishedAt), r.Error)
		}
		t.row(row...)
	}
	return t.flush()
}

// queueNames are task queue's rows for -o name: each selector set, as
// its SELECTORS column shows it.
func queueNames(sets ...protocol.QueueSignal) []string {
	names := make([]string, len(sets))
	for i, s := range sets {
		names[i] = setName(s)
	}
	return names
}

// waitingSince is when the longest-waiting task of a queue was queued,
// for -o wide ("" when none waits).
func (a *app) waitingSince(oldest int64) string {
	if oldest == 0 {
		return ""
	}
	t := a.now().Add(-time.Duration(oldest) * time.Second)
	return a.absTime(&t)
}
