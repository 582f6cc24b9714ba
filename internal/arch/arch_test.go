package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/legate-dev/legate/"

// layout is the house: every package of the product, and the project
// packages it may import (non-test files). A package missing here, or an
// import not listed, fails TestImportRules; ARCHITECTURE.md has one row
// per package with the same list (TestArchitectureDoc), so the picture
// and the code cannot drift apart. nil: nothing of the project.
var layout = map[string][]string{
	// Wire and rules: the standard library only.
	"internal/protocol": nil,
	// A wedged delegate told from an idle one (pure, and its metric).
	"internal/unresponsive": {"internal/metrics", "internal/protocol"},
	// Leaves: one job each, nothing of the project (or another leaf).
	"internal/access":     nil, // permission decisions: no HTTP, no SQL
	"internal/atomicfile": nil,
	"internal/backoff":    nil,
	"internal/buildinfo":  nil,
	"internal/envguard":   nil,
	"internal/logfile":    nil,
	"internal/mask":       nil,
	"internal/metrics":    nil,
	"internal/plot":       nil,
	"internal/release":    nil,
	"internal/retention":  nil, // the store it needs is an interface of its own
	"internal/logbus":     {"internal/store"},
	"internal/duplicate":  nil,
	"internal/admit":      nil,
	"internal/cluster":    nil, // the store it needs is an interface of its own
	"internal/seal":       {"internal/atomicfile"},
	"internal/secretref":  {"internal/protocol"},
	"internal/assign":     {"internal/protocol"},
	"internal/config":     {"internal/protocol"},
	"internal/manifest":   {"internal/protocol"},
	"internal/pipeline":   {"internal/protocol", "internal/secretref"}, // definitions: no HTTP, no SQL
	"internal/transport":  {"internal/config"},
	// Test helpers: nothing of the project.
	"internal/arch":       nil,
	"internal/certtest":   nil,
	"internal/k8stest":    nil,
	"internal/leaktest":   nil,
	"internal/pgtest":     nil,
	"internal/promtest":   nil,
	"internal/podmantest": nil,
	"internal/promserver": nil,
	"internal/proxytest":  nil,
	"internal/testport":   nil,
	// Durable state.
	"internal/store": {"internal/backoff", "internal/protocol", "internal/seal", "internal/secretref"},
	// The manager's shared parts and its services.
	"internal/api":             {"internal/access", "internal/admit", "internal/protocol", "internal/store"},
	"internal/events":          {"internal/store"},
	"internal/manager":         {"internal/access", "internal/admit", "internal/api", "internal/cluster", "internal/dispatch", "internal/events", "internal/identity", "internal/metrics", "internal/pipeline/engine", "internal/protocol", "internal/queue", "internal/retention", "internal/scopes", "internal/secrets", "internal/store", "internal/unresponsive", "internal/upgrades", "internal/webui"},
	"internal/queue":           {"internal/access", "internal/api", "internal/metrics", "internal/protocol", "internal/store"},
	"internal/autoscaler":      {"internal/client", "internal/kube", "internal/protocol"},
	"internal/scopes":          {"internal/access", "internal/api", "internal/protocol", "internal/secretref", "internal/store"},
	"internal/dispatch":        {"internal/access", "internal/api", "internal/assign", "internal/cluster", "internal/duplicate", "internal/events", "internal/logbus", "internal/manifest", "internal/metrics", "internal/protocol", "internal/secretref", "internal/store", "internal/unresponsive"},
	"internal/secrets":         {"internal/access", "internal/api", "internal/protocol", "internal/seal", "internal/secretref", "internal/store"},
	"internal/upgrades":        {"internal/access", "internal/api", "internal/protocol", "internal/release", "internal/store"},
	"internal/identity":        {"internal/access", "internal/api", "internal/atomicfile", "internal/cluster", "internal/protocol", "internal/store"},
	"internal/pipeline/engine": {"internal/access", "internal/api", "internal/events", "internal/metrics", "internal/pipeline", "internal/protocol", "internal/store"},
	// The web UI talks to the manager only through the API (client).
	"internal/webui": {"internal/access", "internal/client", "internal/manifest", "internal/plot", "internal/protocol"},
	// Clients of the manager's API.
	"internal/client":   {"internal/backoff", "internal/protocol"},
	"internal/executor": {"internal/executor/containers", "internal/executor/pipe", "internal/kube", "internal/protocol"},
	"internal/kube":     nil, // stdlib and YAML only: no client-go in the delegate
	"internal/delegate": {"internal/atomicfile", "internal/backoff", "internal/client", "internal/config", "internal/executor", "internal/executor/containers", "internal/mask", "internal/metrics", "internal/protocol", "internal/secretref", "internal/transport"},
	"internal/watcher":  {"internal/atomicfile", "internal/backoff", "internal/protocol", "internal/release"},
	"internal/upgrader": {"internal/protocol", "internal/release"},
	"internal/cli":      {"internal/atomicfile", "internal/buildinfo", "internal/client", "internal/manifest", "internal/protocol", "internal/release", "internal/secretref", "internal/transport"},
	"internal/bench":    {"internal/backoff", "internal/client", "internal/plot", "internal/protocol"},
	// The binary wires everything.
	"cmd/legate": {"*"},

	// The container runtimes a container task runs on, and the output pipe
	// of a task's process: not the executor, which drives their runs
	// through an interface of its own.
	"internal/executor/containers": {"internal/executor/pipe", "internal/kube", "internal/protocol"},
	"internal/executor/pipe":       nil,
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
// files alone, so goleak is never linked into a binary; so are the test
// helpers that start servers (podman's service).
func TestLeaktestInTestsOnly(t *testing.T) {
	for name, p := range loadPackages(t) {
		if p.imports[module+"internal/leaktest"] || p.imports["go.uber.org/goleak"] && name != "internal/leaktest" {
			t.Errorf("%s imports the leak check outside its _test.go files", name)
		}
		if p.imports[module+"internal/podmantest"] {
			t.Errorf("%s imports podmantest outside its _test.go files", name)
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
	for name := range layout {
		if pkgs[name] == nil {
			t.Errorf("package %s is gone; update the layout", name)
		}
	}
	for name, p := range pkgs {
		allowed, ok := layout[name]
		if !ok {
			t.Errorf("package %s has no entry in the layout: say what it may import (and add its row to ARCHITECTURE.md)", name)
			continue
		}
		if slices.Contains(allowed, "*") {
			continue
		}
		for imp := range p.imports {
			rel, ok := strings.CutPrefix(imp, module)
			if ok && !slices.Contains(allowed, rel) {
				t.Errorf("%s imports %s, which its layout entry does not allow (DESIGN §9)", name, rel)
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

// TestArchitectureDoc: ARCHITECTURE.md has one row per package of the
// layout, saying what it may import exactly as the layout does.
func TestArchitectureDoc(t *testing.T) {
	b, err := os.ReadFile("../../ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`internal/") && !strings.HasPrefix(strings.TrimSpace(cells[1]), "`cmd/") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		var imports []string
		switch may := strings.TrimSpace(cells[3]); may {
		case "—":
		case "everything":
			imports = []string{"*"}
		default:
			for _, s := range strings.Split(may, ",") {
				imports = append(imports, "internal/"+strings.Trim(strings.TrimSpace(s), "`"))
			}
		}
		if _, dup := doc[name]; dup {
			t.Errorf("ARCHITECTURE.md has two rows for %s", name)
		}
		doc[name] = imports
	}
	for name, want := range layout {
		got, ok := doc[name]
		if !ok {
			t.Errorf("ARCHITECTURE.md has no row for %s", name)
			continue
		}
		w := slices.Sorted(slices.Values(want))
		slices.Sort(got)
		if !slices.Equal(w, got) {
			t.Errorf("ARCHITECTURE.md says %s may import %v; the layout says %v", name, got, w)
		}
	}
	for name := range doc {
		if _, ok := layout[name]; !ok {
			t.Errorf("ARCHITECTURE.md has a row for %s, which the layout does not have", name)
		}
	}
}

// tables are the functions allowed past maxFuncLines because they are a
// table (a list of literal entries, such as a route table), by
// "package path.function". None today.
var tables = map[string]bool{}

const maxFuncLines = 100

// TestFunctionLength: no function of the product (non-test files) is
// longer than maxFuncLines lines, tables aside: split it into named steps.
func TestFunctionLength(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
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
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				if n > maxFuncLines && !tables[filepath.Dir(rel)+"."+fd.Name.Name] {
					t.Errorf("%s: %s is %d lines long (at most %d outside tables): split it into named steps", rel, fd.Name.Name, n, maxFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
