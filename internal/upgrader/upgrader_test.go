package upgrader

import "testing"

func TestSplitImage(t *testing.T) {
	for _, c := range []struct{ in, repo, tag string }{
		{"ghcr.io/legate-dev/legate:v1.2.3", "ghcr.io/legate-dev/legate", "v1.2.3"},
		{"registry:5000/legate:v1", "registry:5000/legate", "v1"},
		{"registry:5000/legate", "registry:5000/legate", ""},
		{"legate@sha256:abc", "legate", ""},
		{"legate:v1@sha256:abc", "legate", "v1"},
	} {
		if repo, tag := splitImage(c.in); repo != c.repo || tag != c.tag {
			t.Errorf("splitImage(%q) = %q, %q; want %q, %q", c.in, repo, tag, c.repo, c.tag)
		}
	}
}
