package check

import (
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/manifest"
)

// TestArtifactsAcceptedByTheRealAPIServer sends every variant of legate
// manifest kubernetes and renders of both charts to the real API server
// of scripts/k8s-ensure (internal/k8stest) as a server-side dry run with
// strict validation: its admission, defaulting and validation, with the
// schemas of the server's own version, accept every object (an unknown or
// duplicated field, a bad quantity or an invalid name is refused).
// Nothing is created; e2e/kubernetes_test.go installs them for real.
func TestArtifactsAcceptedByTheRealAPIServer(t *testing.T) {
	k := k8stest.Require(t)
	dryRun := func(t *testing.T, yaml string) {
		t.Helper()
		// kubectl apply -f, as the manifests' help says. (Not
		// --server-side: the API server reads a server-side apply's body
		// as YAML, which refuses the control characters of the "controls
		// in a value" variant, escaped in the manifest but sent raw.)
		out := k.Kubectl(t, yaml, "apply", "--dry-run=server", "--validate=strict", "-f", "-")
		if strings.TrimSpace(out) == "" {
			t.Fatalf("the API server took nothing of:\n%s", yaml)
		}
	}
	t.Run("kubernetes", func(t *testing.T) {
		for name, edit := range matrix(manifest.KindKubernetes) {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				p := params(manifest.KindKubernetes)
				edit(&p)
				// Its namespace must exist: objects in one that does not
				// are refused, dry run or not.
				p.Namespace = k.Namespace(t)
				out, err := manifest.Generate(p)
				if err != nil {
					t.Fatal(err)
				}
				dryRun(t, out)
			})
		}
	})
	t.Run("delegate chart", func(t *testing.T) {
		for name, edit := range map[string]func(map[string]any){
			"defaults":        func(map[string]any) {},
			"rbac namespace":  func(v map[string]any) { v["rbac"] = "namespace" },
			"rbac none":       func(v map[string]any) { v["rbac"] = "none" },
			"existing secret": func(v map[string]any) { delete(v, "token"); v["existingSecret"] = "legate-token" },
			"proxy and CA": func(v map[string]any) {
				v["proxy"] = map[string]any{"host": "proxy.internal", "port": 3128, "scheme": "http", "user": "u",
					"passwordSecret": map[string]any{"name": "proxy-pass"}, "noProxy": "10.0.0.0/8", "manager": "false"}
				v["caBundle"] = map[string]any{"secret": "corp-ca", "key": "root.pem"}
			},
			"replicas 3": func(v map[string]any) { v["replicas"] = 3 },
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ns := k.Namespace(t)
				v := map[string]any{"accountId": testAccount, "managerUrl": testURL, "token": testToken, "name": "prod", "tags": []any{"a", "b"}, "image": testImage}
				edit(v)
				out, err := renderChart(delegateChart, v, ns)
				if err != nil {
					t.Fatal(err)
				}
				dryRun(t, out)
			})
		}
	})
	t.Run("manager chart", func(t *testing.T) {
		for name, v := range map[string]map[string]any{
			"defaults":    {"database": map[string]any{"existingSecret": "pg"}},
			"replicas 3":  {"database": map[string]any{"existingSecret": "pg"}, "replicas": 3, "publicUrl": "https://legate.example.com"},
			"ingress TLS": {"database": map[string]any{"existingSecret": "pg"}, "ingress": map[string]any{"enabled": true, "host": "legate.example.com", "tlsSecret": "legate-tls", "className": "nginx", "annotations": map[string]any{"a": "b"}}},
			"keys":        {"database": map[string]any{"existingSecret": "pg"}, "masterKey": map[string]any{"existingSecret": "mk"}, "adminKey": map[string]any{"existingSecret": "ak"}},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				v["image"] = testImage
				out, err := renderChart(managerChart, v, k.Namespace(t))
				if err != nil {
					t.Fatal(err)
				}
				dryRun(t, out)
			})
		}
	})
}
