package executor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/legate-dev/legate/internal/executor/containers"
	"github.com/legate-dev/legate/internal/protocol"
)

// testWorkspace is a workspace's directory with files, and a secret file
// beside it that no path of the workspace may read.
func testWorkspace(t *testing.T, files map[string]string) (*os.Root, string) {
	t.Helper()
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "secret"), []byte("kind: Secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "_data")
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasPrefix(content, "->"):
			err = os.Symlink(strings.TrimPrefix(content, "->"), p)
		case content == "fifo":
			err = syscall.Mkfifo(p, 0o600)
		case content == "dir":
			err = os.MkdirAll(p, 0o700)
		default:
			err = os.WriteFile(p, []byte(content), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, base
}

var testWS = &protocol.DeployWorkspace{Name: "build", Key: "abc", WrittenBy: []string{"render"}}

// TestReadManifestFiles: files and directories of a workspace are read in
// order; what is missing names the step that should have written it; no
// symlink, "..", FIFO or size leads outside the bounds.
func TestReadManifestFiles(t *testing.T) {
	t.Parallel()
	root, base := testWorkspace(t, map[string]string{
		"k8s/b.yaml":        "kind: B\n",
		"k8s/a.yml":         "kind: A\n",
		"k8s/notes.txt":     "not read",
		"k8s/c.json":        `{"kind":"C"}`,
		"k8s/sub/d.yaml":    "kind: D\n",
		"one.yaml":          "kind: One\n",
		"inner.yaml":        "->one.yaml",
		"abs.yaml":          "->" + "/etc/passwd",
		"up.yaml":           "->../secret",
		"out/x.yaml":        "dir",
		"fifo.yaml":         "fifo",
		"empty.yaml":        "  \n",
		"ctl.yaml":          "kind: \x01\n",
		"nothing/README.md": "no manifest",
	})
	_ = base
	texts, names, err := readManifestFiles(root, []string{"one.yaml", "k8s", "inner.yaml"}, testWS, 100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names, " "); got != "one.yaml k8s/a.yml k8s/b.yaml k8s/c.json inner.yaml" {
		t.Fatalf("read %s", got)
	}
	if texts[0] != "kind: One\n" || texts[4] != "kind: One\n" || texts[3] != `{"kind":"C"}` {
		t.Fatalf("texts %q", texts)
	}
	for _, tc := range []struct {
		files []string
		room  int
		max   int
		want  string
	}{
		{[]string{"k8s/missing.yaml"}, 100, 1 << 20, `kubernetes file k8s/missing.yaml is not in the workspace "build": step render of the stage should have written it there`},
		{[]string{"abs.yaml"}, 100, 1 << 20, `kubernetes file abs.yaml leads outside the workspace "build" (a symlink out of it): refused`},
		{[]string{"up.yaml"}, 100, 1 << 20, `kubernetes file up.yaml leads outside the workspace "build"`},
		{[]string{"../secret"}, 100, 1 << 20, `leads outside the workspace`},
		{[]string{"fifo.yaml"}, 100, 1 << 20, "not a regular file or directory"},
		{[]string{"empty.yaml"}, 100, 1 << 20, "is empty: step render of the stage should have written a manifest there"},
		{[]string{"ctl.yaml"}, 100, 1 << 20, "control character U+0001"},
		{[]string{"nothing"}, 100, 1 << 20, "holds no .yaml, .yml or .json file: step render"},
		{[]string{"k8s"}, 2, 1 << 20, "more than 2 manifests with the inline ones"},
		{[]string{"k8s"}, 100, 10, "larger than 10 bytes in all"},
	} {
		_, _, err := readManifestFiles(root, tc.files, testWS, tc.room, tc.max)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.files, err, tc.want)
		}
	}
}

// TestCopyChart: a chart directory is copied into the task's directory
// (symlinks inside the workspace followed), an archive as one file; a
// symlink out of the workspace, a missing path and too many files fail.
func TestCopyChart(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, map[string]string{
		"charts/web/Chart.yaml":                "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"charts/web/values.yaml":               "image: web:1\n",
		"charts/web/templates/deployment.yaml": "kind: Deployment\n",
		"charts/web/templates/shared.yaml":     "->../../../shared.yaml",
		"shared.yaml":                          "kind: ConfigMap\n",
		"charts/bad/Chart.yaml":                "name: bad\n",
		"charts/bad/templates/leak.yaml":       "->../../../../secret",
		"dist/web-0.1.0.tgz":                   "not really gzip",
		"dist/web.txt":                         "x",
		"loop/Chart.yaml":                      "name: loop\n",
		"loop/again":                           "->..",
	})
	dst := t.TempDir()
	got, err := copyChart(root, "charts/web", testWS, dst)
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(dst, "chart") {
		t.Fatalf("chart at %s", got)
	}
	for name, want := range map[string]string{"Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n", "templates/shared.yaml": "kind: ConfigMap\n"} {
		if b, err := os.ReadFile(filepath.Join(got, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(got, "templates/shared.yaml")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("a symlink was copied as one: %v %v", fi, err)
	}
	dst2 := t.TempDir()
	if got, err := copyChart(root, "dist/web-0.1.0.tgz", testWS, dst2); err != nil || got != filepath.Join(dst2, "chart.tgz") {
		t.Fatalf("archive: %s %v", got, err)
	}
	for _, tc := range []struct{ path, want string }{
		{"charts/missing", `helm chart_path charts/missing is not in the workspace "build": step render of the stage should have written it there`},
		{"charts/bad", `helm chart file charts/bad/templates/leak.yaml leads outside the workspace "build"`},
		{"dist/web.txt", "is a file: give a chart's directory or a .tgz archive"},
		{"loop", "too many levels of symbolic links"},
	} {
		if _, err := copyChart(root, tc.path, testWS, t.TempDir()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.path, err, tc.want)
		}
	}
}

// TestOpenWorkspaceMissing: a workspace this delegate's runtime does not
// have (another delegate made it, or a restart swept it), or a delegate
// without a runtime, fails naming the workspace and the step that made
// it, and not as the delegate's fault: the task is not to run elsewhere
// on an empty workspace.
func TestOpenWorkspaceMissing(t *testing.T) {
	t.Parallel()
	gone := &containers.Runtime{Path: "/bin/false", Name: "podman"}
	for _, c := range []ContainerRuntime{gone, nil} {
		_, err := openWorkspace(t.Context(), c, testWS)
		var fe interface{ DelegateFault() bool }
		if err == nil || !strings.Contains(err.Error(), `the stage workspace "build" (volume legate-ws-abc) is not on this delegate`) ||
			!strings.Contains(err.Error(), "step render of the stage") || errors.As(err, &fe) {
			t.Errorf("runtime %+v: %v", c, err)
		}
	}
}
