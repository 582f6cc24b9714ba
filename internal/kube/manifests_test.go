package kube

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseManifests(t *testing.T) {
	t.Parallel()
	dep := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
	tests := []struct {
		name string
		in   []string
		refs []string
		err  string
	}{
		{"several documents", []string{"---\n" + dep + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: web}\n---\n", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"}}`},
			[]string{"deployment/web", "configmap/c", "service/s"}, ""},
		{"other namespace", []string{dep, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: kube-system}\n"}, nil,
			`manifest 1, document 0 (configmap/c): names the namespace "kube-system", but this step deploys to "web"`},
		{"empty namespace named", []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ''}\n"}, nil, `names the namespace ""`},
		{"no name", []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: c-}\n"}, nil, "needs metadata.name"},
		{"no kind", []string{"apiVersion: v1\nmetadata: {name: c}\n"}, nil, "needs apiVersion and kind"},
		{"a list", []string{"apiVersion: v1\nkind: List\nmetadata: {name: l}\nitems: []\n"}, nil, "a List is not applied as one object"},
		{"not a mapping", []string{"- a\n- b\n"}, nil, "a Kubernetes object is a mapping"},
		{"alias", []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: &n c}\ndata: {a: *n}\n"}, nil, "anchors and aliases"},
		{"duplicate key", []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: x, a: y}\n"}, nil, ""},
		{"bad YAML", []string{"a: [\n"}, nil, "manifest 0, document 0: not valid YAML or JSON"},
		{"nothing", []string{"---\n---\n"}, nil, "the manifests hold no document"},
		{"bad name", []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ../x}\n"}, nil, "is not a valid name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			objs, err := ParseManifests("web", tt.in)
			if tt.name == "duplicate key" {
				if err == nil || !(strings.Contains(err.Error(), "given twice") || strings.Contains(err.Error(), "already defined")) {
					t.Fatalf("err = %v, want a duplicate key refused", err)
				}
				return
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var refs []string
			for _, o := range objs {
				refs = append(refs, o.Ref())
			}
			if strings.Join(refs, " ") != strings.Join(tt.refs, " ") {
				t.Fatalf("refs = %v, want %v", refs, tt.refs)
			}
		})
	}
}

// TestObjectBody: the namespace is the step's for a namespaced kind and
// gone for a cluster-wide one; scalars keep their YAML types, and a date
// stays the text it was written as.
func TestObjectBody(t *testing.T) {
	t.Parallel()
	objs, err := ParseManifests("web", []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, annotations: {date: 2024-01-02, n: '3'}}\ndata: {a: 'x: y'}\nreplicas: 3\nflag: true\nnone: null\n"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := objs[0].body(Resource{Namespaced: true}, "web")
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"apiVersion":"v1","data":{"a":"x: y"},"flag":true,"kind":"ConfigMap","metadata":{"annotations":{"date":"2024-01-02","n":"3"},"name":"c","namespace":"web"},"none":null,"replicas":3}`
	if got := strings.TrimSpace(string(b)); got != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
	b, _ = objs[0].body(Resource{Namespaced: false}, "web")
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["metadata"].(map[string]any)["namespace"]; ok {
		t.Fatalf("a cluster-wide object keeps a namespace: %s", b)
	}
}

// FuzzParseManifests: any text gives objects or an error, never a panic;
// an accepted object names the step's namespace or none, and its body is
// JSON that keeps its kind and name.
func FuzzParseManifests(f *testing.F) {
	f.Add("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n---\n{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"s\"}}\n")
	f.Add("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: other}\n")
	f.Add("a: &x [*x]\n")
	f.Fuzz(func(t *testing.T, text string) {
		objs, err := ParseManifests("web", []string{text})
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.Namespace != "" && o.Namespace != "web" {
				t.Fatalf("accepted the namespace %q", o.Namespace)
			}
			b, err := o.body(Resource{Namespaced: true}, "web")
			if err != nil {
				t.Fatalf("body: %v", err)
			}
			var back struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(b, &back); err != nil || back.Kind != o.Kind || back.Metadata.Name != o.Name || back.Metadata.Namespace != "web" {
				t.Fatalf("body %s: %v", b, err)
			}
		}
	})
}
