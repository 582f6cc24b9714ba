package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestPipelineApplyDryRunOnAnOlderManager: a manager older than dry runs
// ignores the field and stores the file; pipeline apply --dry-run must not
// then print a plan as if nothing had been stored, but say what happened.
func TestPipelineApplyDryRunOnAnOlderManager(t *testing.T) {
	t.Parallel()
	var applies atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != protocol.PathPipelines {
			http.NotFound(w, r)
			return
		}
		applies.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(protocol.Pipeline{Name: "web", Version: 1, Changed: true})
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(file, []byte("name: web\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{EnvURL: srv.URL, EnvAPIKey: testKey}

	r := runCLI(t.Context(), env, "", "pipeline", "apply", "--dry-run", "-f", file)
	if code := exitCodeOf(t, r.err); code != ExitFailure || !strings.Contains(r.stderr, "does not know dry runs") || !strings.Contains(r.stderr, "APPLIED") {
		t.Errorf("dry run on an older manager: exit %d, stderr %q; want 1 and that it applied the file", code, r.stderr)
	}
	// Without --dry-run: applied once, as before.
	applies.Store(0)
	r = runCLI(t.Context(), env, "", "pipeline", "apply", "-f", file)
	if r.err != nil || !strings.Contains(r.stdout, "pipeline web created (version 1") || applies.Load() != 1 {
		t.Errorf("apply on an older manager: %v, stdout %q, %d applies; want it created by one apply", r.err, r.stdout, applies.Load())
	}
}
