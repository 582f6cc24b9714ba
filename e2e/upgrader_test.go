package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeKubernetes is a fake of the Kubernetes API (no cluster runs here):
// it serves one StatefulSet, GET and strategic-merge PATCH of its
// delegate container's image, to one ServiceAccount token, and records
// the patches.
type fakeKubernetes struct {
	mu      sync.Mutex
	image   string
	patches []string
	deny    bool
}

func (k *fakeKubernetes) serve(t *testing.T, path, token string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"kind":"Status","code":401}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path != path {
			http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
			return
		}
		if k.deny {
			http.Error(w, `{"kind":"Status","message":"statefulsets.apps is forbidden","code":403}`, http.StatusForbidden)
			return
		}
		switch r.Method {
		case http.MethodGet:
		case http.MethodPatch:
			if ct := r.Header.Get("Content-Type"); ct != "application/strategic-merge-patch+json" {
				http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
				return
			}
			b, _ := io.ReadAll(r.Body)
			var patch struct {
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct{ Name, Image string } `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(b, &patch); err != nil || len(patch.Spec.Template.Spec.Containers) != 1 ||
				patch.Spec.Template.Spec.Containers[0].Name != "delegate" {
				http.Error(w, "bad patch "+string(b), http.StatusUnprocessableEntity)
				return
			}
			k.image = patch.Spec.Template.Spec.Containers[0].Image
			k.patches = append(k.patches, string(b))
		default:
			http.Error(w, "method", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "StatefulSet", "spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []map[string]string{{"name": "delegate", "image": k.image}}}}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (k *fakeKubernetes) state() (string, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.image, len(k.patches)
}

// TestUpgraderPatchesTheStatefulSet runs legate upgrader (what the
// CronJob of legate manifest kubernetes --upgrade auto runs) against a
// real manager and a fake Kubernetes API: it patches the StatefulSet's
// image to the version the group wants, does nothing when it runs it
// already or the group is held, and fails loudly when its ServiceAccount
// may not patch.
func TestUpgraderPatchesTheStatefulSet(t *testing.T) {
	c := startCluster(t)
	tok := c.token("k8s")
	const sts = "/apis/apps/v1/namespaces/legate-delegate/statefulsets/k8s-abcdef"
	k := &fakeKubernetes{image: "registry.example.com:5000/legate:v1.90.0"}
	api := k.serve(t, sts, "sa-token")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("sa-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() (int, string) {
		t.Helper()
		p := start(t, "upgrader", []string{"ACCOUNT_ID=" + c.account, "DELEGATE_TOKEN=" + tok, "MANAGER_HOST_AND_PORT=" + c.url,
			"DELEGATE_NAME=k8s", "DELEGATE_TYPE=KUBERNETES", "UPGRADER_NAMESPACE=legate-delegate", "UPGRADER_STATEFULSET=k8s-abcdef",
			"UPGRADER_KUBERNETES_API=" + api.URL, "UPGRADER_KUBERNETES_TOKEN_FILE=" + tokenFile}, "upgrader")
		return p.wait(30 * time.Second), p.out.String()
	}

	c.mustCLI("delegates", "upgrade", "pin", "k8s", "v1.90.1")
	if code, out := run(); code != 0 {
		t.Fatalf("upgrader: exit %d\n%s", code, out)
	}
	if img, n := k.state(); img != "registry.example.com:5000/legate:v1.90.1" || n != 1 {
		t.Fatalf("after the first run: image %s, %d patches", img, n)
	}
	// Up to date: nothing to patch.
	if code, out := run(); code != 0 || !strings.Contains(out, "it runs the version the manager wants") {
		t.Fatalf("upgrader on the wanted version: exit %d\n%s", code, out)
	}
	// Held: nothing to patch either.
	c.mustCLI("delegates", "upgrade", "pin", "k8s", "v1.90.2")
	c.mustCLI("delegates", "upgrade", "hold", "k8s")
	if code, out := run(); code != 0 || !strings.Contains(out, "held back") {
		t.Fatalf("upgrader of a held group: exit %d\n%s", code, out)
	}
	if img, n := k.state(); img != "registry.example.com:5000/legate:v1.90.1" || n != 1 {
		t.Fatalf("a held group was patched: image %s, %d patches", img, n)
	}
	// Released to a pin it does not run, but its ServiceAccount may not patch.
	c.mustCLI("delegates", "upgrade", "pin", "k8s", "v1.90.2")
	k.mu.Lock()
	k.deny = true
	k.mu.Unlock()
	if code, out := run(); code == 0 || !strings.Contains(out, "HTTP 403") {
		t.Fatalf("upgrader without the right to patch: exit %d\n%s", code, out)
	}
	// Released, the group wants the manager's own version, which is not
	// a release newer than v1.90.1: the upgrader does not go back to it.
	// An administrator's pin of an older version does (a rollback).
	k.mu.Lock()
	k.deny = false
	k.mu.Unlock()
	c.mustCLI("delegates", "upgrade", "release", "k8s")
	if code, out := run(); code != 0 || !strings.Contains(out, "no administrator pinned it") {
		t.Fatalf("upgrader told to go back unpinned: exit %d\n%s", code, out)
	}
	if img, n := k.state(); img != "registry.example.com:5000/legate:v1.90.1" || n != 1 {
		t.Fatalf("the upgrader went back unpinned: image %s, %d patches", img, n)
	}
	c.mustCLI("delegates", "upgrade", "pin", "k8s", "v1.90.0")
	if code, out := run(); code != 0 {
		t.Fatalf("upgrader rolling back to a pin: exit %d\n%s", code, out)
	}
	if img, n := k.state(); img != "registry.example.com:5000/legate:v1.90.0" || n != 2 {
		t.Fatalf("after a pinned rollback: image %s, %d patches", img, n)
	}
}
