package webui

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

var funcs = template.FuncMap{
	"ago":     ago,
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"clock":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"join":    strings.Join,
	// priority names a task's priority level ("high") or gives its number.
	"priority": protocol.PriorityName,
	"connKind": func(c string) string {
		switch c {
		case "websocket":
			return "WebSocket"
		case "polling":
			return "polling"
		}
		return c
	},
	"statusWord":  func(s string) string { return strings.ReplaceAll(s, "_", " ") },
	"delegateURL": delegateURL,
	"scopeLabel":  protocol.ScopeLabel,
}

// ago says how long before now t was, coarsely ("12s ago"); the page's
// script keeps it current.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}
