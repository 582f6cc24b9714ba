package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// fakePipelines is a manager's pipeline routes over a real socket: it
// stores what its apply route accepts. old leaves out the dry-run route,
// as a manager older than dry runs; refuse names a pipeline whose apply
// it refuses (403), as after a permission was taken away.
type fakePipelines struct {
	mu     sync.Mutex
	stored []string
	dry    int
}

func (f *fakePipelines) storedNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stored...)
}

func startFakePipelines(t *testing.T, old, catchAll bool, refuse string) (*fakePipelines, string) {
	t.Helper()
	f := &fakePipelines{}
	nameOf := func(r *http.Request) (string, bool) {
		// An old manager's decoder ignores fields it does not know.
		var req protocol.ApplyPipelineRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			return "", false
		}
		name, ok := strings.CutPrefix(strings.SplitN(req.Source, "\n", 2)[0], "name: ")
		return name, ok
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+protocol.PathPipelines, func(w http.ResponseWriter, r *http.Request) {
		name, ok := nameOf(r)
		if !ok {
			writeJSON(w, 400, protocol.ErrorBody{Error: protocol.Error{Code: protocol.CodeBadRequest, Message: "bad"}})
			return
		}
		if name == refuse {
			writeJSON(w, 403, protocol.ErrorBody{Error: protocol.Error{Code: protocol.CodeForbidden, Message: "missing permission pipeline:edit"}})
			return
		}
		f.mu.Lock()
		f.stored = append(f.stored, name)
		f.mu.Unlock()
		writeJSON(w, 201, protocol.Pipeline{Name: name, Version: 1, Changed: true, Plan: protocol.PlanCreated})
	})
	mux.HandleFunc("GET "+protocol.PathPipelines+"/{name}", http.NotFound)
	mux.HandleFunc("DELETE "+protocol.PathPipelines+"/{name}", http.NotFound)
	if !old {
		mux.HandleFunc("POST "+protocol.PathPipelinesDryRun, func(w http.ResponseWriter, r *http.Request) {
			name, _ := nameOf(r)
			f.mu.Lock()
			f.dry++
			f.mu.Unlock()
			writeJSON(w, 200, protocol.Pipeline{Name: name, Version: 1, Changed: true, Plan: protocol.PlanCreated, DryRun: true})
		})
	}
	if catchAll {
		// The manager's answer for a path it has no route for.
		mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 404, protocol.ErrorBody{Error: protocol.Error{Code: protocol.CodeNotFound, Message: "no route for " + r.Method + " " + r.URL.Path}})
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(protocol.HeaderProtocolVersion, "4")
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func pipelineFiles(t *testing.T, names ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var args []string
	for _, n := range names {
		file := filepath.Join(dir, n+".yaml")
		if err := os.WriteFile(file, []byte("name: "+n+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", file)
	}
	return args
}

// TestPipelineApplyDryRunOnAnOlderManager: a manager older than dry runs
// stores what its apply route accepts; pipeline apply --dry-run must
// store nothing there (one file or several) and say that the manager does
// not support dry runs. A plain apply still stores the files.
func TestPipelineApplyDryRunOnAnOlderManager(t *testing.T) {
	t.Parallel()
	for _, catchAll := range []bool{true, false} { // 404 "no route", or the mux's 405
		f, url := startFakePipelines(t, true, catchAll, "")
		env := map[string]string{EnvURL: url, EnvAPIKey: testKey}
		for _, files := range [][]string{pipelineFiles(t, "web"), pipelineFiles(t, "web", "api")} {
			r := runCLI(t.Context(), env, "", append([]string{"pipeline", "apply", "--dry-run"}, files...)...)
			if code := exitCodeOf(t, r.err); code != ExitFailure || !strings.Contains(r.stderr, "does not support dry runs") || !strings.Contains(r.stderr, "nothing was stored") {
				t.Errorf("dry run on an older manager (catch-all %v): exit %d, stderr %q; want 1 and that nothing was stored", catchAll, code, r.stderr)
			}
			if got := f.storedNames(); len(got) != 0 {
				t.Fatalf("dry run on an older manager (catch-all %v) stored %v", catchAll, got)
			}
		}
		// Without --dry-run: each file applied once.
		r := runCLI(t.Context(), env, "", append([]string{"pipeline", "apply"}, pipelineFiles(t, "web", "api")...)...)
		if got := f.storedNames(); r.err != nil || !strings.Contains(r.stdout, "pipeline web created (version 1") || strings.Join(got, ",") != "web,api" {
			t.Errorf("apply on an older manager: %v, stdout %q, stored %v; want web and api created once", r.err, r.stdout, got)
		}
	}
}

// TestPipelineApplyNamesTheFilesAlreadyApplied: the files of a plain
// apply pass their dry runs together, then the second one's apply is
// refused: the first stays applied, and the CLI prints it and names it.
func TestPipelineApplyNamesTheFilesAlreadyApplied(t *testing.T) {
	t.Parallel()
	f, url := startFakePipelines(t, false, true, "api")
	env := map[string]string{EnvURL: url, EnvAPIKey: testKey}
	r := runCLI(t.Context(), env, "", append([]string{"pipeline", "apply"}, pipelineFiles(t, "web", "api", "db")...)...)
	if code := exitCodeOf(t, r.err); code == 0 || !strings.Contains(r.stderr, "api.yaml: ") ||
		!strings.Contains(r.stderr, "the files before it stay applied: ") || !strings.Contains(r.stderr, "web.yaml; not applied: ") ||
		!strings.Contains(r.stderr, "api.yaml, ") || !strings.Contains(r.stderr, "db.yaml") {
		t.Errorf("apply refused at the second file: exit %d, stderr %q; want web.yaml named as applied, api.yaml and db.yaml as not", code, r.stderr)
	}
	if !strings.Contains(r.stdout, "pipeline web created (version 1") {
		t.Errorf("stdout %q, want the applied pipeline web", r.stdout)
	}
	f.mu.Lock()
	dry := f.dry
	f.mu.Unlock()
	if got := f.storedNames(); strings.Join(got, ",") != "web" || dry != 3 {
		t.Errorf("stored %v after %d dry runs; want web only, after 3", got, dry)
	}
}
