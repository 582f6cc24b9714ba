package check

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestDelegateChartRenders renders the delegate chart with the Helm SDK
// for a matrix of values and decodes the result strictly.
func TestDelegateChartRenders(t *testing.T) {
	t.Parallel()
	base := func() map[string]any {
		return map[string]any{"accountId": testAccount, "managerUrl": testURL, "token": testToken, "name": "prod", "tags": []any{"a", "b"}, "image": testImage}
	}
	for name, edit := range map[string]func(map[string]any){
		"defaults":        func(map[string]any) {},
		"rbac namespace":  func(v map[string]any) { v["rbac"] = "namespace" },
		"rbac none":       func(v map[string]any) { v["rbac"] = "none" },
		"existing secret": func(v map[string]any) { delete(v, "token"); v["existingSecret"] = "legate-token" },
		"proxy": func(v map[string]any) {
			v["proxy"] = map[string]any{"host": "proxy.internal", "port": 3128, "scheme": "http", "user": "u",
				"passwordSecret": map[string]any{"name": "proxy-pass"}, "noProxy": "10.0.0.0/8", "manager": "false"}
		},
		"ca bundle configmap": func(v map[string]any) { v["caBundle"] = map[string]any{"configMap": "corp-ca"} },
		"ca bundle secret":    func(v map[string]any) { v["caBundle"] = map[string]any{"secret": "corp-ca", "key": "root.pem"} },
		"replicas 3":          func(v map[string]any) { v["replicas"] = 3 },
		"extra env": func(v map[string]any) {
			v["extraEnv"] = []any{map[string]any{"name": "INIT_SCRIPT", "value": "echo \"hi\"\nexit 0"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v := base()
			edit(v)
			out, err := renderChart(delegateChart, v, "legate-delegate")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodeK8s(out); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			env, err := envOf("chart", out)
			if err != nil {
				t.Fatal(err)
			}
			if env["DELEGATE_NAME"] != "prod" || env["DELEGATE_TAGS"] != "a,b" || env["MANAGER_HOST_AND_PORT"] != testURL || env["ACCOUNT_ID"] != testAccount {
				t.Errorf("env %v", env)
			}
			switch name {
			case "proxy":
				if env["PROXY_HOST"] != "proxy.internal" || env["PROXY_PORT"] != "3128" || env["PROXY_PASSWORD"] != "valueFrom:secret/proxy-pass/PROXY_PASSWORD" {
					t.Errorf("proxy env %v", env)
				}
			case "ca bundle secret":
				if env["SHARED_CA_CERTS_PATH"] != "/etc/legate/ca/root.pem" {
					t.Errorf("SHARED_CA_CERTS_PATH %q", env["SHARED_CA_CERTS_PATH"])
				}
			case "extra env":
				if env["INIT_SCRIPT"] != "echo \"hi\"\nexit 0" {
					t.Errorf("INIT_SCRIPT %q", env["INIT_SCRIPT"])
				}
			}
		})
	}
}

func TestDelegateChartRefuses(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]map[string]any{
		"no token":     {"accountId": testAccount, "managerUrl": testURL},
		"both tokens":  {"accountId": testAccount, "managerUrl": testURL, "token": "t", "existingSecret": "s"},
		"bad rbac":     {"accountId": testAccount, "managerUrl": testURL, "token": "t", "rbac": "admin"},
		"no URL":       {"accountId": testAccount, "token": "t"},
		"short acct":   {"accountId": "ab", "managerUrl": testURL, "token": "t"},
		"bad name":     {"accountId": testAccount, "managerUrl": testURL, "token": "t", "name": "Prod_1"},
		"two CA kinds": {"accountId": testAccount, "managerUrl": testURL, "token": "t", "caBundle": map[string]any{"configMap": "a", "secret": "b"}},
		"bad upgrade":  {"accountId": testAccount, "managerUrl": testURL, "token": "t", "upgrade": "nightly"},
		"no image":     {"accountId": testAccount, "managerUrl": testURL, "token": "t"},
	} {
		if name != "no image" {
			v["image"] = testImage
		}
		_, err := renderChart(delegateChart, v, "ns")
		if err == nil {
			t.Errorf("%s: rendered", name)
		}
		if name == "no image" && (err == nil || !strings.Contains(err.Error(), "scripts/image --push")) {
			t.Errorf("no image: %v, want the fix", err)
		}
	}
}

// TestManagerChartRenders renders the manager chart for a matrix of
// values (ingress on and off, TLS, replicas, an existing master key).
func TestManagerChartRenders(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]map[string]any{
		"defaults":    {"database": map[string]any{"existingSecret": "pg"}},
		"replicas 3":  {"database": map[string]any{"existingSecret": "pg"}, "replicas": 3, "publicUrl": "https://legate.example.com"},
		"ingress":     {"database": map[string]any{"existingSecret": "pg"}, "ingress": map[string]any{"enabled": true, "host": "legate.example.com"}},
		"ingress TLS": {"database": map[string]any{"existingSecret": "pg"}, "ingress": map[string]any{"enabled": true, "host": "legate.example.com", "tlsSecret": "legate-tls", "className": "nginx", "annotations": map[string]any{"a": "b"}}},
		"master key":  {"database": map[string]any{"existingSecret": "pg"}, "masterKey": map[string]any{"existingSecret": "mk"}},
		"admin key":   {"database": map[string]any{"existingSecret": "pg"}, "adminKey": map[string]any{"existingSecret": "ak"}},
		"delegates":   {"database": map[string]any{"existingSecret": "pg"}, "delegateImage": "registry.example.com/legate-delegate:v1"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v["image"] = testImage
			out, err := renderChart(managerChart, v, "legate")
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeK8s(out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var dep *appsv1.Deployment
			var ing *networkingv1.Ingress
			for _, o := range objs {
				switch x := o.Obj.(type) {
				case *appsv1.Deployment:
					dep = x
				case *networkingv1.Ingress:
					ing = x
				}
			}
			if dep == nil || dep.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Fatalf("no Deployment with a /readyz probe:\n%s", out)
			}
			// The DSN and the admin key come from Secrets, into the
			// environment (not the arguments: the process list shows those).
			c := dep.Spec.Template.Spec.Containers[0]
			if strings.Contains(strings.Join(c.Args, " "), "--db") {
				t.Errorf("args %v carry the DSN", c.Args)
			}
			// Install specs name the chart's image unless told another.
			wantImage := testImage
			if name == "delegates" {
				wantImage = "registry.example.com/legate-delegate:v1"
			}
			if !strings.Contains(strings.Join(c.Args, " "), "--delegate-image="+wantImage) || c.Image != testImage {
				t.Errorf("image %s, args %v: want %s and --delegate-image=%s", c.Image, c.Args, testImage, wantImage)
			}
			wantAdmin := "test-legate-manager-admin-key"
			if name == "admin key" {
				wantAdmin = "ak"
			}
			fromSecret := map[string]string{}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					fromSecret[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
				}
			}
			if fromSecret["LEGATE_DB"] != "pg/dsn" || fromSecret["LEGATE_ADMIN_API_KEY"] != wantAdmin+"/LEGATE_API_KEY" {
				t.Errorf("environment from Secrets %v; want LEGATE_DB from pg/dsn and LEGATE_ADMIN_API_KEY from %s/LEGATE_API_KEY", fromSecret, wantAdmin)
			}
			var adminSecret *corev1.Secret
			for _, o := range objs {
				if s, ok := o.Obj.(*corev1.Secret); ok && s.Name == wantAdmin {
					adminSecret = s
				}
			}
			if name == "admin key" {
				if adminSecret != nil {
					t.Errorf("rendered an admin key Secret besides the existing one")
				}
			} else if adminSecret == nil || !strings.HasPrefix(string(adminSecret.Data["LEGATE_API_KEY"]), "lgk_") || len(adminSecret.Data["LEGATE_API_KEY"]) < 36 {
				t.Errorf("admin key Secret %v: want one with LEGATE_API_KEY lgk_...", adminSecret)
			}
			if wantIng := strings.HasPrefix(name, "ingress"); (ing != nil) != wantIng {
				t.Errorf("ingress %v, want %v", ing != nil, wantIng)
			}
			if name == "ingress TLS" && (len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "legate-tls") {
				t.Errorf("ingress TLS %+v", ing.Spec.TLS)
			}
		})
	}
	if _, err := renderChart(managerChart, map[string]any{"image": testImage}, "legate"); err == nil {
		t.Error("rendered without a database secret")
	}
	if _, err := renderChart(managerChart, map[string]any{"database": map[string]any{"existingSecret": "pg"}}, "legate"); err == nil || !strings.Contains(err.Error(), "scripts/image --push") {
		t.Errorf("without an image: %v, want the fix", err)
	}
}
