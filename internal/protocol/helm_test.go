package protocol

import (
	"bytes"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHelmSpecValidate(t *testing.T) {
	t.Parallel()
	ok := func() *HelmSpec {
		return &HelmSpec{Release: "web", Namespace: "web", Repo: "https://charts.example.com", Chart: "web", Version: "1.2.3",
			Values: json.RawMessage(`{"image": {"tag": "1"}}`)}
	}
	tests := []struct {
		name string
		edit func(*HelmSpec)
		err  string
	}{
		{"valid", func(*HelmSpec) {}, ""},
		{"oci", func(h *HelmSpec) { h.Repo, h.Chart = "", "oci://registry.example.com/charts/web" }, ""},
		{"archive", func(h *HelmSpec) { h.Repo, h.Chart, h.Version = "", "https://example.com/web-1.2.3.tgz", "" }, ""},
		{"null values", func(h *HelmSpec) { h.Values = json.RawMessage("null") }, ""},
		{"no release", func(h *HelmSpec) { h.Release = "" }, `helm release "" is invalid`},
		{"upper-case release", func(h *HelmSpec) { h.Release = "Web" }, `helm release "Web" is invalid: use 1-53`},
		{"long release", func(h *HelmSpec) { h.Release = strings.Repeat("a", 54) }, "is invalid: use 1-53"},
		{"release as an option", func(h *HelmSpec) { h.Release = "-x" }, "is invalid"},
		{"no namespace", func(h *HelmSpec) { h.Namespace = "" }, `helm namespace "" is invalid`},
		{"no chart", func(h *HelmSpec) { h.Chart = "" }, "a helm task needs a chart"},
		{"chart as an option", func(h *HelmSpec) { h.Chart = "--post-renderer=/bin/sh" }, "must not start with '-'"},
		{"chart path with a repo", func(h *HelmSpec) { h.Chart = "a/web" }, "give the chart's name in it"},
		{"chart with a space", func(h *HelmSpec) { h.Chart = "web x" }, "must not hold spaces"},
		{"local path", func(h *HelmSpec) { h.Repo, h.Chart = "", "./web" }, "give repo with the chart's name, an oci:// reference"},
		{"repo scheme", func(h *HelmSpec) { h.Repo = "ftp://charts.example.com" }, "use a http or https URL"},
		{"repo credentials", func(h *HelmSpec) { h.Repo = "https://u:p@charts.example.com" }, "holds credentials"},
		{"oci credentials", func(h *HelmSpec) { h.Repo, h.Chart = "", "oci://u:p@r.example.com/web" }, "holds credentials"},
		{"archive with a version", func(h *HelmSpec) { h.Repo, h.Chart = "", "https://example.com/web-1.2.3.tgz" }, "version does not apply"},
		{"version as an option", func(h *HelmSpec) { h.Version = "--devel" }, "must not start with '-'"},
		{"version control character", func(h *HelmSpec) { h.Version = "1\n2" }, "control or formatting character"},
		{"values not a mapping", func(h *HelmSpec) { h.Values = json.RawMessage(`[1]`) }, "helm values must be a mapping"},
		{"values too large", func(h *HelmSpec) {
			h.Values = json.RawMessage(`{"a":"` + strings.Repeat("x", MaxHelmValuesBytes) + `"}`)
		}, "helm values are"},
		{"negative timeout", func(h *HelmSpec) { h.TimeoutMS = -1 }, "helm timeout_ms must be between"},
		{"long timeout", func(h *HelmSpec) { h.TimeoutMS = MaxHelmTimeoutMS + 1 }, "helm timeout_ms must be between"},
		{"rollback", func(h *HelmSpec) { h.Rollback = "always" }, `helm rollback "always" is invalid: use auto`},
		{"cluster", func(h *HelmSpec) { h.Cluster = &KubeCluster{Server: "http://k", Token: "t"} }, "kubernetes cluster server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := ok()
			tt.edit(h)
			err := h.Validate()
			if tt.err == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if h.Rollback != RollbackNone {
					t.Fatalf("rollback not normalized: %q", h.Rollback)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.err)
			}
		})
	}
	var none *HelmSpec
	if err := none.Validate(); err == nil || !strings.Contains(err.Error(), `needs a "helm" section`) {
		t.Fatalf("nil section: %v", err)
	}
}

func TestCheckPayloadHelm(t *testing.T) {
	t.Parallel()
	h := &HelmSpec{Release: "web", Namespace: "web", Chart: "oci://r.example.com/web"}
	spec := TaskSpec{Helm: h}
	if err := spec.CheckPayload(); err != nil {
		t.Fatal(err)
	}
	want := TaskSpec{Type: TaskHelm, Helm: &HelmSpec{Release: "web", Namespace: "web", Chart: "oci://r.example.com/web", Rollback: RollbackNone}}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Fatalf("untyped helm task (-want +got):\n%s", diff)
	}
	shell := TaskSpec{Type: TaskShell, Shell: &ShellSpec{Script: "true"}, Helm: h}
	if err := shell.CheckPayload(); err != nil || shell.Helm != nil {
		t.Fatalf("a shell task keeps its helm section: %v %+v", err, shell.Helm)
	}
	kube := TaskSpec{Type: TaskKubernetes, Kubernetes: &KubernetesSpec{Namespace: "web", Manifests: []string{deployDoc}}, Helm: h}
	if err := kube.CheckPayload(); err != nil || kube.Helm != nil {
		t.Fatalf("a kubernetes task keeps its helm section: %v %+v", err, kube.Helm)
	}
}

// FuzzHelmSpec decodes arbitrary JSON as a task's helm section and
// validates it: no panic, errors name the section, and a spec that passes
// puts nothing on helm's command line that reads as an option, keeps
// passing and survives a JSON round trip.
func FuzzHelmSpec(f *testing.F) {
	f.Add(`{"release":"web","namespace":"web","repo":"https://c.example.com","chart":"web","version":"1.2.3","values":{"a":[1,{"b":null}]},"timeout_ms":60000,"rollback":"auto"}`)
	f.Add(`{"release":"a.b","namespace":"a-1","chart":"oci://r.example.com/x/web","values":null}`)
	f.Add(`{"release":"-x","namespace":"web","chart":"https://u:p@e.com/a.tgz","version":"-1","values":[],"rollback":"x","timeout_ms":-5}`)
	f.Add(`{"release":"web","namespace":"web","chart_path":"charts/web","workspace":{"name":"build","key":"0a1b","written_by":["package"]}}`)
	f.Add(`{"release":"web","namespace":"web","chart_path":"../web.tgz","chart":"web","workspace":{"name":"","key":""}}`)
	f.Add(`{"release":"web","namespace":"web","chart_path":"web.tgz"}`)
	f.Fuzz(func(t *testing.T, s string) {
		var h HelmSpec
		if json.Unmarshal([]byte(s), &h) != nil {
			return
		}
		if err := h.Validate(); err != nil {
			if !strings.Contains(err.Error(), "helm") && !strings.Contains(err.Error(), "kubernetes cluster") {
				t.Fatalf("error does not name the section: %v", err)
			}
			return
		}
		for _, arg := range []string{h.Release, h.Namespace, h.Repo, h.Chart, h.Version} {
			if strings.HasPrefix(arg, "-") || strings.ContainsAny(arg, " \n") {
				t.Fatalf("accepted the argument %q", arg)
			}
		}
		if h.Workspace != nil && (h.ChartPath == "" || h.Chart != "" || h.Repo != "" || h.Version != "" || !validWorkspaceKey(h.Workspace.Key)) ||
			h.Workspace == nil && h.ChartPath != "" ||
			h.ChartPath != "" && (strings.HasPrefix(h.ChartPath, "/") || slices.Contains(strings.Split(h.ChartPath, "/"), "..") || path.Clean(h.ChartPath) != h.ChartPath) {
			t.Fatalf("accepted chart_path %q with workspace %+v, chart %q", h.ChartPath, h.Workspace, h.Chart)
		}
		if len(h.Values) > MaxHelmValuesBytes || h.Rollback != RollbackAuto && h.Rollback != RollbackNone {
			t.Fatalf("accepted values of %d bytes, rollback %q", len(h.Values), h.Rollback)
		}
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		var back HelmSpec
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("a valid spec fails after a round trip: %v", err)
		}
		// Marshal compacts the values' JSON: compare them compacted.
		var compact bytes.Buffer
		if len(h.Values) > 0 {
			_ = json.Compact(&compact, h.Values)
			h.Values = compact.Bytes()
		}
		if diff := cmp.Diff(h, back); diff != "" {
			t.Fatalf("round trip (-before +after):\n%s", diff)
		}
	})
}
