package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// role update --add-permission/--remove-permission sends the edit for the
// manager to apply in its own write, never the whole list read before
// (which would undo a concurrent edit), and never reads the role first.
func TestRoleUpdateSendsTheEdit(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var reqs []string
	var got protocol.UpdateRoleRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		reqs = append(reqs, r.Method+" "+r.URL.Path)
		if r.Method != http.MethodPatch {
			writeError(w, http.StatusInternalServerError, protocol.CodeInternal, "unexpected "+r.Method)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(protocol.Role{Name: "runner", Permissions: []string{"task:view", "audit:view"}})
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{EnvURL: srv.URL, EnvAPIKey: testKey}
	r := runCLI(t.Context(), env, "", "role", "update", "runner", "--add-permission", "audit:view", "--remove-permission", "pipeline:*")
	if r.err != nil {
		t.Fatalf("err = %v, stderr = %q", r.err, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"PATCH " + protocol.PathRoles + "/runner"}; !slices.Equal(reqs, want) {
		t.Errorf("requests %q, want %q", reqs, want)
	}
	if got.Permissions != nil || !slices.Equal(got.AddPermissions, []string{"audit:view"}) || !slices.Equal(got.RemovePermissions, []string{"pipeline:*"}) {
		t.Errorf("sent %+v, want only the permissions to add and remove", got)
	}
	if !strings.Contains(r.stdout, "Updated role runner: task:view, audit:view") {
		t.Errorf("stdout %q", r.stdout)
	}
}
