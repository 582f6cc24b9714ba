package access

import (
	"os"
	"strings"
	"testing"
)

// TestPermissionsDocumented: docs/access.md's permission table has one row
// per resource with exactly its actions, and says what each resource's
// permissions allow, not that they are still to come.
func TestPermissionsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/access.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "## Permissions\n")
	if !ok {
		t.Fatal("docs/access.md has no Permissions section")
	}
	table, _, _ = strings.Cut(table, "\n\n\n")
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(line, "| ") {
			continue
		}
		rows[strings.TrimSpace(cells[1])] = []string{strings.TrimSpace(cells[2]), strings.TrimSpace(strings.Join(cells[3:len(cells)-1], "|"))}
	}
	for _, r := range resources {
		row, ok := rows[r.kind]
		if !ok {
			t.Errorf("no row for %s", r.kind)
			continue
		}
		if want := strings.Join(r.actions, ", "); row[0] != want {
			t.Errorf("%s: actions %q, want %q", r.kind, row[0], want)
		}
		if strings.Contains(row[1], "to come") {
			t.Errorf("%s: the notes say its permissions are still to come: %q", r.kind, row[1])
		}
	}
}
