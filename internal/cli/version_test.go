package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestVersion: legate version prints the build and the manager's version;
// --client and --version print only the build, without a manager.
func TestVersion(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	build := "legate v1.2.3\ncommit: 0123456789abcdef (with uncommitted changes)\ngo: go1.26.0 linux/amd64\n"
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"with a manager", m.env(), []string{"version"}, build + "manager: v9.9.9 at " + m.srv.URL + "\n"},
		{"--client", m.env(), []string{"version", "--client"}, build},
		{"no manager configured", map[string]string{}, []string{"version"}, build},
		{"--version", map[string]string{}, []string{"--version"}, build},
		{"-v", map[string]string{}, []string{"-v"}, build},
		{"-o yaml", m.env(), []string{"version", "-o", "yaml"}, "client:\n  version: v1.2.3\n  commit: \"0123456789abcdef\"\n  modified: true\n" +
			"  go_version: go1.26.0\n  platform: linux/amd64\nmanager:\n  url: " + m.srv.URL + "\n  version: v9.9.9\n"},
	}
	for _, tt := range tests {
		r := runCLI(t.Context(), tt.env, "", tt.args...)
		if d := cmp.Diff(tt.want, r.stdout); r.err != nil || d != "" || r.stderr != "" {
			t.Errorf("%s: err %v, stderr %q (-want +got):\n%s", tt.name, r.err, r.stderr, d)
		}
	}
	// A manager that cannot be reached: the build, and why on stderr; the
	// command still succeeds.
	env := m.env()
	m.srv.Close()
	r := runCLI(t.Context(), env, "", "version")
	if r.err != nil || r.stdout != build || r.stderr != "legate: the manager's version is unknown: manager at "+m.srv.URL+" unreachable (connection refused)\n" {
		t.Errorf("manager down: err %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}
}
