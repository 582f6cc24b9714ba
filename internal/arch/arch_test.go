package arch

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/legate-dev/legate/"

// forbidden lists, per package, the project packages it must not import.
var forbidden = map[string][]string{
	"internal/protocol":   {"internal/"},
	"internal/store":      {"internal/manager", "internal/delegate", "internal/client", "internal/cli", "internal/executor", "internal/assign"},
	"internal/client":     {"internal/manager", "internal/store", "internal/delegate", "internal/cli", "internal/executor"},
	"internal/delegate":   {"internal/manager", "internal/store", "internal/cli"},
	"internal/executor":   {"internal/manager", "internal/store", "internal/delegate", "internal/client", "internal/cli"},
	"internal/mask":       {"internal/"},
	"internal/atomicfile": {"internal/"},
	// seal: crypto and key files only (it may use atomicfile).
	"internal/seal":      {"internal/manager", "internal/store", "internal/delegate", "internal/client", "internal/cli", "internal/executor", "internal/protocol", "internal/config"},
	"internal/logfile":   {"internal/"},
	"internal/metrics":   {"internal/"}, // standard library only, see below
	"internal/assign":    {"internal/manager", "internal/store", "internal/delegate", "internal/client", "internal/cli", "internal/executor"},
	"internal/config":    {"internal/manager", "internal/store", "internal/delegate", "internal/client", "internal/cli", "internal/executor"},
	"internal/manager":   {"internal/delegate", "internal/cli", "internal/executor"},
	"internal/cli":       {"internal/manager", "internal/store", "internal/delegate"},
	"internal/pgtest":    {"internal/"}, // a test helper: imports nothing from the project
	"internal/promtest":  {"internal/"}, // a test helper: imports nothing from the project
	"internal/transport": {"internal/manager", "internal/store", "internal/delegate", "internal/client", "internal/cli", "internal/executor"},
	"internal/certtest":  {"internal/"}, // test helpers
	"internal/proxytest": {"internal/"},
	"internal/envguard":  {"internal/"}, // process start-up: standard library only
	"internal/retention": {"internal/"}, // the store it needs is an interface of its own
	"internal/leaktest":  {"internal/"}, // a test helper: imports nothing from the project
	"internal/backoff":   {"internal/"}, // retry pacing: standard library only
	"internal/access":    {"internal/"}, // decisions only: no HTTP, no SQL, nothing of the project
	// manifest: a pure generator over the protocol's request type.
	"internal/manifest": {"internal/manager", "internal/store", "internal/delegate", "internal/client", "internal/cli", "internal/executor", "internal/transport", "internal/config"},
	// pipeline: definitions, expressions and the planner; no HTTP, no SQL.
	"internal/pipeline":  {"internal/manager", "internal/store", "internal/delegate", "internal/client", "internal/cli", "internal/executor", "internal/transport", "internal/seal", "internal/access", "internal/config"},
	"internal/secretref": {"internal/manager", "internal/store", "internal/delegate", "internal/client", "internal/cli", "internal/executor", "internal/seal", "internal/access"}, // references only: values come from the caller
	// The manager's services: each reaches the manager, and the other
	// services, only through interfaces of its own.
	"internal/secrets":  {"internal/manager", "internal/delegate", "internal/client", "internal/cli", "internal/executor", "internal/webui", "internal/transport", "internal/dispatch", "internal/identity", "internal/pipeline", "internal/upgrades"},
	"internal/upgrades": {"internal/manager", "internal/delegate", "internal/client", "internal/cli", "internal/executor", "internal/webui", "internal/transport", "internal/dispatch", "internal/identity", "internal/pipeline", "internal/secrets", "internal/watcher", "internal/upgrader"},
}

type pkgInfo struct {
	hasDoc  bool
	imports map[string]bool
}

func loadPackages(t *testing.T) map[string]*pkgInfo {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]*pkgInfo{}
	fset := token.NewFileSet()
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			p := pkgs[rel]
			if p == nil {
				p = &pkgInfo{imports: map[string]bool{}}
				pkgs[rel] = p
			}
			if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
				p.hasDoc = true
			}
			for _, imp := range f.Imports {
				s, _ := strconv.Unquote(imp.Path.Value)
				p.imports[s] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return pkgs
}

// TestLeaktestInTestsOnly: the goroutine-leak check is imported by test
// files alone, so goleak is never linked into a binary.
func TestLeaktestInTestsOnly(t *testing.T) {
	for name, p := range loadPackages(t) {
		if p.imports[module+"internal/leaktest"] || p.imports["go.uber.org/goleak"] && name != "internal/leaktest" {
			t.Errorf("%s imports the leak check outside its _test.go files", name)
		}
	}
}

func TestEveryPackageHasADocComment(t *testing.T) {
	for name, p := range loadPackages(t) {
		if !p.hasDoc {
			t.Errorf("package %s has no package doc comment", name)
		}
	}
}

func TestImportRules(t *testing.T) {
	pkgs := loadPackages(t)
	for name, rules := range forbidden {
		p := pkgs[name]
		if p == nil {
			t.Errorf("package %s is gone; update the rules", name)
			continue
		}
		for imp := range p.imports {
			for _, bad := range rules {
				full := module + bad
				hit := imp == full || strings.HasPrefix(imp, full+"/")
				if strings.HasSuffix(bad, "/") {
					hit = strings.HasPrefix(imp, full)
				}
				if hit {
					t.Errorf("%s imports %s, which DESIGN §9 forbids", name, imp)
				}
			}
		}
	}
	// protocol and metrics are standard library only (metrics replaces
	// client_golang to keep the delegate small), and so is envguard, which
	// runs before anything else at a delegate's start, and backoff, which
	// every client's retry loop uses, and plot, which draws the
	// benchmarks' curves without a charting dependency, and promtest, whose
	// parser keeps Prometheus's libraries out of go.mod (the e2e module
	// checks it against Prometheus's own).
	for _, name := range []string{"internal/protocol", "internal/metrics", "internal/envguard", "internal/backoff", "internal/plot", "internal/promtest"} {
		for imp := range pkgs[name].imports {
			if strings.Contains(strings.Split(imp, "/")[0], ".") {
				t.Errorf("%s imports %s; it must use the standard library only", name, imp)
			}
		}
	}
}
