package protocol

import (
	"encoding/json"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const deployDoc = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"

func TestKubernetesSpecValidate(t *testing.T) {
	t.Parallel()
	ok := func() *KubernetesSpec { return &KubernetesSpec{Namespace: "web", Manifests: []string{deployDoc}} }
	tests := []struct {
		name string
		edit func(*KubernetesSpec)
		err  string
	}{
		{"valid", func(*KubernetesSpec) {}, ""},
		{"no namespace", func(k *KubernetesSpec) { k.Namespace = "" }, `kubernetes namespace "" is invalid`},
		{"upper-case namespace", func(k *KubernetesSpec) { k.Namespace = "Web" }, `kubernetes namespace "Web" is invalid`},
		{"long namespace", func(k *KubernetesSpec) { k.Namespace = strings.Repeat("a", 64) }, "is invalid: use 1-63"},
		{"no manifests", func(k *KubernetesSpec) { k.Manifests = nil }, "needs at least one manifest"},
		{"blank manifest", func(k *KubernetesSpec) { k.Manifests = []string{deployDoc, " \n"} }, "kubernetes manifest 1 is empty"},
		{"too many", func(k *KubernetesSpec) { k.Manifests = make([]string, MaxKubernetesManifests+1) }, "101 manifests: at most 100"},
		{"too large", func(k *KubernetesSpec) {
			k.Manifests = []string{strings.Repeat("a", MaxKubernetesManifestBytes/2), strings.Repeat("b", MaxKubernetesManifestBytes/2+1)}
		}, "larger than 1048576 bytes"},
		{"control character", func(k *KubernetesSpec) { k.Manifests = []string{deployDoc + "x: \x1b[2J\n"} }, "manifest 0: contains the control character U+001B"},
		{"invalid UTF-8", func(k *KubernetesSpec) { k.Manifests = []string{deployDoc + "x: \xff\n"} }, "manifest 0: not valid UTF-8"},
		{"replacement character is text", func(k *KubernetesSpec) { k.Manifests = []string{deployDoc + "x: \uFFFD\n"} }, ""},
		{"negative timeout", func(k *KubernetesSpec) { k.TimeoutMS = -1 }, "timeout_ms must be between"},
		{"long timeout", func(k *KubernetesSpec) { k.TimeoutMS = MaxKubernetesTimeoutMS + 1 }, "timeout_ms must be between"},
		{"rollback", func(k *KubernetesSpec) { k.Rollback = "always" }, `kubernetes rollback "always" is invalid: use auto or none`},
		{"unknown strategy", func(k *KubernetesSpec) { k.Strategy = "recreate" }, `kubernetes strategy "recreate" is not supported: use rolling, canary or blue-green`},
		{"rolling with an action", func(k *KubernetesSpec) { k.Action = "start" }, "a rolling deploy takes none"},
		{"canary start", func(k *KubernetesSpec) { k.Strategy, k.Action, k.Canary = "canary", "start", &KubeCanary{Percent: 25} }, ""},
		{"canary promote", func(k *KubernetesSpec) { k.Strategy, k.Action = "canary", "promote" }, ""},
		{"canary abort", func(k *KubernetesSpec) { k.Strategy, k.Action, k.Canary = "canary", "abort", &KubeCanary{Replicas: 2} }, ""},
		{"canary without action", func(k *KubernetesSpec) { k.Strategy = "canary" }, `kubernetes canary action "" is invalid: use start`},
		{"canary start without share", func(k *KubernetesSpec) { k.Strategy, k.Action = "canary", "start" }, "needs canary: {percent: P} or {replicas: N}"},
		{"canary both", func(k *KubernetesSpec) {
			k.Strategy, k.Action, k.Canary = "canary", "start", &KubeCanary{Percent: 5, Replicas: 1}
		}, "one of percent (1-100) or replicas"},
		{"canary 101%", func(k *KubernetesSpec) { k.Strategy, k.Action, k.Canary = "canary", "start", &KubeCanary{Percent: 101} }, "percent must be 1-100"},
		{"canary with blue_green", func(k *KubernetesSpec) {
			k.Strategy, k.Action, k.BlueGreen = "canary", "promote", &KubeBlueGreen{Service: "web"}
		}, "blue_green is for the blue-green strategy"},
		{"blue-green", func(k *KubernetesSpec) {
			k.Strategy, k.Action, k.BlueGreen = "blue-green", "deploy", &KubeBlueGreen{Service: "web"}
		}, ""},
		{"blue-green swap-back", func(k *KubernetesSpec) {
			k.Strategy, k.Action, k.BlueGreen = "blue-green", "swap-back", &KubeBlueGreen{Service: "web"}
		}, ""},
		{"blue-green without service", func(k *KubernetesSpec) { k.Strategy, k.Action = "blue-green", "switch" }, "needs blue_green: {service: NAME}"},
		{"blue-green bad service", func(k *KubernetesSpec) {
			k.Strategy, k.Action, k.BlueGreen = "blue-green", "switch", &KubeBlueGreen{Service: "Web"}
		}, `blue_green service "Web" is invalid`},
		{"blue-green bad action", func(k *KubernetesSpec) {
			k.Strategy, k.Action, k.BlueGreen = "blue-green", "start", &KubeBlueGreen{Service: "web"}
		}, `blue-green action "start" is invalid: use deploy`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := ok()
			tt.edit(k)
			err := k.Validate()
			if tt.err == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.err)
			}
		})
	}
	var none *KubernetesSpec
	if err := none.Validate(); err == nil || !strings.Contains(err.Error(), `needs a "kubernetes" section`) {
		t.Fatalf("nil section: %v", err)
	}
}

func TestCheckPayloadKubernetes(t *testing.T) {
	t.Parallel()
	k := &KubernetesSpec{Namespace: "web", Manifests: []string{deployDoc}}
	spec := TaskSpec{Kubernetes: k}
	if err := spec.CheckPayload(); err != nil {
		t.Fatal(err)
	}
	want := TaskSpec{Type: TaskKubernetes, Kubernetes: &KubernetesSpec{Namespace: "web", Manifests: []string{deployDoc}, Rollback: RollbackNone, Strategy: StrategyRolling}}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Fatalf("untyped kubernetes task (-want +got):\n%s", diff)
	}
	shell := TaskSpec{Type: TaskShell, Shell: &ShellSpec{Script: "true"}, Kubernetes: k}
	if err := shell.CheckPayload(); err != nil || shell.Kubernetes != nil {
		t.Fatalf("a shell task keeps its kubernetes section: %v %+v", err, shell.Kubernetes)
	}
	bare := TaskSpec{Type: TaskKubernetes}
	if err := bare.CheckPayload(); err == nil {
		t.Fatal("a kubernetes task without its section passes")
	}
}

// FuzzKubernetesSpec decodes arbitrary JSON as a task's kubernetes
// section and validates it: no panic, errors name the field, and a spec
// that passes stays within the limits, keeps passing and survives a JSON
// round trip.
func FuzzKubernetesSpec(f *testing.F) {
	f.Add(`{"namespace":"web","manifests":["` + strings.ReplaceAll(deployDoc, "\n", `\n`) + `"],"timeout_ms":60000,"rollback":"auto"}`)
	f.Add(`{"namespace":"a-1","manifests":["{\"kind\":\"ConfigMap\"}","---\nkind: x\n---\n"],"strategy":"rolling"}`)
	f.Add(`{"namespace":"-x","manifests":[""],"rollback":"none","timeout_ms":-5}`)
	f.Add(`{"namespace":"web","manifests":["a: b"],"strategy":"canary","action":"start","canary":{"percent":25}}`)
	f.Add(`{"namespace":"web","manifests":["a: b"],"strategy":"canary","action":"promote","canary":{"replicas":2,"percent":3}}`)
	f.Add(`{"namespace":"web","manifests":["a: b"],"strategy":"blue-green","action":"swap-back","blue_green":{"service":"web"}}`)
	f.Add(`{"namespace":"web","manifests":["a: b"],"strategy":"blue-green","action":"deploy","blue_green":{"service":"-"},"canary":{}}`)
	f.Add(`{"namespace":"web","files":["k8s/a.yaml","."],"workspace":{"name":"build","key":"abc123","remove":true,"written_by":["render"]}}`)
	f.Add(`{"namespace":"web","manifests":["a: b"],"files":["../x","/etc/passwd","a//b",""],"workspace":{"name":"b/x","key":"ABC"}}`)
	f.Add(`{"namespace":"web","files":["k8s"]}`)
	f.Fuzz(func(t *testing.T, s string) {
		var k KubernetesSpec
		if json.Unmarshal([]byte(s), &k) != nil {
			return
		}
		if err := k.Validate(); err != nil {
			if !strings.Contains(err.Error(), "kubernetes") {
				t.Fatalf("error does not name the section: %v", err)
			}
			return
		}
		total := 0
		for _, m := range k.Manifests {
			total += len(m)
		}
		if total > MaxKubernetesManifestBytes || len(k.Manifests) > MaxKubernetesManifests || len(k.Manifests)+len(k.Files) == 0 {
			t.Fatalf("accepted %d manifests of %d bytes", len(k.Manifests), total)
		}
		if (k.Workspace == nil) != (len(k.Files) == 0) || len(k.Files) > MaxKubernetesManifests {
			t.Fatalf("accepted files %q with workspace %+v", k.Files, k.Workspace)
		}
		for _, f := range k.Files {
			if f == "" || strings.HasPrefix(f, "/") || slices.Contains(strings.Split(f, "/"), "..") || path.Clean(f) != f {
				t.Fatalf("accepted the workspace path %q", f)
			}
		}
		if k.Rollback != RollbackAuto && k.Rollback != RollbackNone || k.Strategy != StrategyRolling && k.Strategy != StrategyCanary && k.Strategy != StrategyBlueGreen {
			t.Fatalf("not normalized: rollback %q strategy %q", k.Rollback, k.Strategy)
		}
		switch {
		case k.Strategy == StrategyRolling && (k.Action != "" || k.Canary != nil || k.BlueGreen != nil),
			k.Strategy == StrategyCanary && (k.BlueGreen != nil || k.Action == CanaryStart && k.Canary == nil),
			k.Strategy == StrategyBlueGreen && (k.Canary != nil || k.BlueGreen == nil || k.BlueGreen.Service == ""),
			k.Canary != nil && (k.Canary.Percent > 100 || k.Canary.Replicas > MaxKubeCanaryReplicas || (k.Canary.Percent > 0) == (k.Canary.Replicas > 0)):
			t.Fatalf("accepted a strategy's fields that do not fit: %+v", k)
		}
		b, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		var back KubernetesSpec
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("a valid spec fails after a round trip: %v", err)
		}
		if diff := cmp.Diff(k, back); diff != "" {
			t.Fatalf("round trip (-before +after):\n%s", diff)
		}
	})
}
