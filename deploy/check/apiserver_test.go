package check

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"

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
				dryRun(t, withoutKEDA(out))
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
			"replicas 3":           func(v map[string]any) { v["replicas"] = 3 },
			"upgrade self-managed": func(v map[string]any) { v["upgrade"] = "self-managed" },
			"run as root, limits": func(v map[string]any) {
				v["runAsRoot"] = true
				v["resources"] = map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"cpu": "500m", "memory": "512Mi"}}
			},
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

// TestDefaultSpecsInstallTheUpgrader applies, for real, the default spec
// of legate manifest kubernetes and the delegate chart's default render
// (automatic upgrades) to the API server of scripts/k8s-ensure, and checks
// the cluster: the StatefulSet rolls out (kwok makes its pods Ready), the
// hourly upgrader CronJob is there (never two at once), and its
// ServiceAccount may get and patch that StatefulSet and nothing else.
func TestDefaultSpecsInstallTheUpgrader(t *testing.T) {
	k := k8stest.Require(t)
	for _, tc := range []struct {
		name   string
		render func(t *testing.T, ns string) string
	}{
		{"kubernetes", func(t *testing.T, ns string) string {
			p := params(manifest.KindKubernetes)
			// A Role in its namespace: nothing cluster-wide outlives the test.
			p.Namespace, p.RBAC = ns, "namespace"
			out, err := manifest.Generate(p)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}},
		{"chart", func(t *testing.T, ns string) string {
			out, err := renderChart(delegateChart, map[string]any{"accountId": testAccount, "managerUrl": testURL,
				"token": testToken, "name": "prod-east", "rbac": "namespace", "image": testImage}, ns)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := k.Namespace(t)
			k.Kubectl(t, tc.render(t, ns), "apply", "-f", "-")
			const sts = "prod-east-gcwwxt"
			const upgrader = sts + "-upgrader"
			k.WaitRolledOut(t, 2*time.Minute, ns, sts)

			var cj batchv1.CronJob
			if err := json.Unmarshal([]byte(k.Kubectl(t, "", "get", "cronjob", upgrader, "-n", ns, "-o", "json")), &cj); err != nil {
				t.Fatal(err)
			}
			pod := cj.Spec.JobTemplate.Spec.Template.Spec
			if cj.Spec.Schedule != manifest.UpgraderSchedule || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent ||
				pod.ServiceAccountName != upgrader || len(pod.Containers) != 1 || pod.Containers[0].Args[0] != "upgrader" {
				t.Errorf("CronJob %s: schedule %q, concurrency %q, ServiceAccount %q, containers %+v", upgrader,
					cj.Spec.Schedule, cj.Spec.ConcurrencyPolicy, pod.ServiceAccountName, pod.Containers)
			}
			env := map[string]string{}
			for _, e := range pod.Containers[0].Env {
				env[e.Name] = e.Value
			}
			if env["UPGRADER_NAMESPACE"] != ns || env["UPGRADER_STATEFULSET"] != sts || env["MANAGER_HOST_AND_PORT"] != testURL {
				t.Errorf("the upgrader's environment: %v", env)
			}

			// What the cluster lets the upgrader's ServiceAccount do.
			as := "system:serviceaccount:" + ns + ":" + upgrader
			for _, c := range []struct {
				verb, resource string
				want           bool
			}{
				{"get", "statefulsets/" + sts, true},
				{"patch", "statefulsets/" + sts, true},
				{"delete", "statefulsets/" + sts, false},
				{"update", "statefulsets/" + sts, false},
				{"patch", "statefulsets/other", false},
				{"create", "statefulsets", false},
				{"get", "secrets", false},
				{"create", "pods", false},
			} {
				cmd := k.KubectlCommand("", "auth", "can-i", c.verb, c.resource, "-n", ns, "--as", as)
				out, _ := cmd.Output() // exit 1 for "no"
				if got := strings.TrimSpace(string(out)) == "yes"; got != c.want {
					t.Errorf("%s may %s %s: %q, want %v", as, c.verb, c.resource, strings.TrimSpace(string(out)), c.want)
				}
			}
		})
	}
}

// TestAutoscaleSpecInstalls applies, for real, legate manifest kubernetes
// --autoscale and checks the cluster: the autoscaler's Deployment runs
// legate autoscaler with the API key from its Secret, and its
// ServiceAccount may get and patch the scale of its StatefulSet and
// nothing else (not the StatefulSet itself, not another one's scale).
func TestAutoscaleSpecInstalls(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	p := params(manifest.KindKubernetes)
	p.Namespace, p.RBAC, p.Autoscale = ns, "namespace", "1:3"
	out, err := manifest.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	k.Kubectl(t, out, "apply", "--server-side", "--field-manager", "legate-check", "--validate=strict", "-f", "-")
	const sts = "prod-east-gcwwxt"
	const autoscaler = sts + "-autoscaler"
	var d appsv1.Deployment
	if err := json.Unmarshal([]byte(k.Kubectl(t, "", "get", "deployment", autoscaler, "-n", ns, "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != autoscaler || len(pod.Containers) != 1 || pod.Containers[0].Args[0] != "autoscaler" ||
		d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("Deployment %s: ServiceAccount %q, strategy %q, containers %+v", autoscaler, pod.ServiceAccountName, d.Spec.Strategy.Type, pod.Containers)
	}
	var key bool
	for _, e := range pod.Containers[0].Env {
		key = key || (e.Name == "LEGATE_API_KEY" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
			e.ValueFrom.SecretKeyRef.Name == autoscaler && e.ValueFrom.SecretKeyRef.Key == manifest.AutoscalerKeyKey)
	}
	if !key {
		t.Errorf("the autoscaler's LEGATE_API_KEY does not come from the Secret %s: %+v", autoscaler, pod.Containers[0].Env)
	}
	if got := k.GetStatefulSet(t, ns, sts).Spec.Replicas; got != 1 {
		t.Errorf("a new autoscaled StatefulSet: %d replicas, want 1 (the default, spec.replicas left to the autoscaler)", got)
	}
	as := "system:serviceaccount:" + ns + ":" + autoscaler
	for _, c := range []struct {
		verb, resource, sub string
		want                bool
	}{
		{"get", "statefulsets/" + sts, "scale", true},
		{"patch", "statefulsets/" + sts, "scale", true},
		{"update", "statefulsets/" + sts, "scale", false},
		{"patch", "statefulsets/other", "scale", false},
		{"get", "statefulsets/" + sts, "", false},
		{"patch", "statefulsets/" + sts, "", false},
		{"get", "secrets", "", false},
		{"create", "pods", "", false},
	} {
		args := []string{"auth", "can-i", c.verb, c.resource, "-n", ns, "--as", as}
		if c.sub != "" {
			args = append(args, "--subresource", c.sub)
		}
		out, _ := k.KubectlCommand("", args...).Output() // exit 1 for "no"
		if got := strings.TrimSpace(string(out)) == "yes"; got != c.want {
			t.Errorf("%s may %s %s (%s): %q, want %v", as, c.verb, c.resource, c.sub, strings.TrimSpace(string(out)), c.want)
		}
	}
}

// withoutKEDA drops KEDA's objects (keda.sh), whose CRDs the local API
// server does not have: decode_test.go checks their fields strictly.
func withoutKEDA(yaml string) string {
	var kept []string
	for _, doc := range splitYAMLDocs(yaml) {
		if !strings.Contains(doc, "apiVersion: \"keda.sh/") {
			kept = append(kept, doc)
		}
	}
	return strings.Join(kept, "---\n")
}
