package manager

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legate-dev/legate/internal/api"
)

// docRow is what docs/security.md says of one endpoint.
type docRow struct {
	Access   api.CallerKind
	Body     int64
	CredBody int64
	// Permission is the route's rule as rule.doc writes it ("—" for
	// routes without an API key).
	Permission string
}

// TestSecurityDocListsEveryRoute walks the route table and the endpoint
// table of docs/security.md: every route needs a row with its caller and
// body limit, and every row a route.
func TestSecurityDocListsEveryRoute(t *testing.T) {
	b, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseEndpointTable(string(b))
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{metrics: &managerMetrics{}}
	code := map[string]docRow{}
	for _, rt := range m.routes() {
		key := rt.Method + " " + rt.Pattern
		if _, dup := code[key]; dup {
			t.Errorf("route %s is declared twice", key)
		}
		perm := "—"
		if rt.Access() == api.AccessAPIKey {
			perm = rt.Rule.Doc()
		}
		code[key] = docRow{Access: rt.Access(), Body: rt.Body, CredBody: rt.CredBody, Permission: perm}
	}
	if diff := cmp.Diff(code, doc); diff != "" {
		t.Errorf("docs/security.md's endpoint table differs from the routes (-routes +docs):\n%s", diff)
	}
}

// parseEndpointTable reads the rows of the table under "## Endpoints":
// | Method | Path | Who may call | Permission | What it checks | Body limit |.
func parseEndpointTable(doc string) (map[string]docRow, error) {
	_, section, ok := strings.Cut(doc, "\n## Endpoints\n")
	if !ok {
		return nil, fmt.Errorf("no \"## Endpoints\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]docRow{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| Method") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 6 {
			return nil, fmt.Errorf("row %q: want 6 cells, got %d", line, len(cells))
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		perm := cells[3]
		cells = append(cells[:3], cells[4:]...)
		key := cells[0] + " " + strings.Trim(cells[1], "`")
		if _, dup := rows[key]; dup {
			return nil, fmt.Errorf("endpoint %s has two rows", key)
		}
		var r docRow
		switch who := cells[2]; {
		case strings.HasPrefix(who, string(api.AccessNone)):
			r.Access = api.AccessNone
		case strings.HasPrefix(who, string(api.AccessDelegate)):
			r.Access = api.AccessDelegate
		case strings.HasPrefix(who, string(api.AccessAPIKey)):
			r.Access = api.AccessAPIKey
		default:
			return nil, fmt.Errorf("row %s: who may call %q: start with %q, %q or %q", key, who, api.AccessNone, api.AccessDelegate, api.AccessAPIKey)
		}
		if cells[3] == "" {
			return nil, fmt.Errorf("row %s: say what it checks (— for nothing)", key)
		}
		// "N KiB" or "N KiB (M MiB with credentials in headers)".
		limit, cred, hasCred := strings.Cut(cells[4], " (")
		n, err := parseLimit(limit)
		if err != nil {
			return nil, fmt.Errorf("row %s: %w", key, err)
		}
		r.Body = n
		if hasCred {
			cred, ok := strings.CutSuffix(cred, " with credentials in headers)")
			if !ok {
				return nil, fmt.Errorf("row %s: body limit %q: want \"N KiB (M MiB with credentials in headers)\"", key, cells[4])
			}
			if r.CredBody, err = parseLimit(cred); err != nil {
				return nil, fmt.Errorf("row %s: %w", key, err)
			}
		}
		r.Permission = perm
		rows[key] = r
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("the endpoint table has no rows")
	}
	return rows, nil
}

// parseLimit reads "none", "N KiB" or "N MiB".
func parseLimit(s string) (int64, error) {
	if s == "none" {
		return 0, nil
	}
	num, unit, _ := strings.Cut(s, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("body limit %q: want none, N KiB or N MiB", s)
	}
	switch unit {
	case "KiB":
		return n << 10, nil
	case "MiB":
		return n << 20, nil
	}
	return 0, fmt.Errorf("body limit %q: want none, N KiB or N MiB", s)
}
