package manifest

import (
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestKubernetesAutoscale prints --autoscale with each autoscaler: legate
// autoscaler's Deployment with a Role limited to get and patch of the
// StatefulSet's scale, KEDA's ScaledObject reading the queue signal with a
// bearer key, or an HPA; the StatefulSet then leaves spec.replicas to
// them. Bad bounds and other kinds are refused with what to write.
func TestKubernetesAutoscale(t *testing.T) {
	p := base(KindKubernetes)
	p.Name, p.Tags, p.Autoscale, p.Size = "build", []string{"Linux", "gpu"}, "1:4", SizeSmall
	out, err := Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(out, "\n---\n")
	var sts, role, dep string
	for _, d := range docs {
		switch {
		case strings.Contains(d, `kind: "StatefulSet"`):
			sts = d
		case strings.Contains(d, "\nkind: \"Role\"\n") && strings.Contains(d, "build-abcdef-autoscaler"):
			role = d
		case strings.Contains(d, `kind: "Deployment"`):
			dep = d
		}
	}
	if strings.Contains(sts, "replicas:") {
		t.Errorf("the autoscaled StatefulSet sets spec.replicas (applying again would undo the autoscaler):\n%s", sts)
	}
	_, rules, _ := strings.Cut(role, "rules:")
	for _, want := range []string{`"apps"`, `"statefulsets/scale"`, `"build-abcdef"`, `"get"`, `"patch"`} {
		if !strings.Contains(rules, want) {
			t.Errorf("the autoscaler's role lacks %s:\n%s", want, role)
		}
	}
	if strings.Contains(rules, `"*"`) || strings.Count(rules, "- ") != 6 {
		t.Errorf("the autoscaler's role grants more than get and patch of the StatefulSet's scale:\n%s", rules)
	}
	for _, want := range []string{`- "autoscaler"`, `- "1:4"`, `- "gpu,linux"`, `name: "LEGATE_API_KEY"`, `key: "LEGATE_API_KEY"`,
		`value: "https://legate.example.com"`, `type: "Recreate"`, `serviceAccountName: "build-abcdef-autoscaler"`} {
		if !strings.Contains(dep, want) {
			t.Errorf("the autoscaler's Deployment lacks %s:\n%s", want, dep)
		}
	}
	if !strings.Contains(out, "kubectl create secret generic build-abcdef-autoscaler") {
		t.Errorf("the manifest does not say how to create the API key's Secret:\n%s", out)
	}

	p.AutoscaleWith = protocol.AutoscaleKEDA
	keda, err := Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`kind: "ScaledObject"`, `kind: "TriggerAuthentication"`, `type: "metrics-api"`, `authMode: "bearer"`,
		`valueLocation: "eligible"`, `url: "https://legate.example.com/api/v1/queue?selectors=build%2Cbuild-abcdef-0%2Cbuild-abcdef-1%2Cbuild-abcdef-2%2Cbuild-abcdef-3%2Cgpu%2Clinux"`,
		`parameter: "token"`, `maxReplicaCount: 4`, `targetValue: "4"`} {
		if !strings.Contains(keda, want) {
			t.Errorf("keda lacks %s:\n%s", want, keda)
		}
	}
	if strings.Contains(keda, `kind: "Deployment"`) {
		t.Errorf("keda also prints legate autoscaler")
	}
	p.AutoscaleWith = protocol.AutoscaleHPA
	hpa, err := Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`kind: "HorizontalPodAutoscaler"`, `type: "External"`, `name: "legate_queue_tasks_build_abcdef"`, `maxReplicas: 4`} {
		if !strings.Contains(hpa, want) {
			t.Errorf("hpa lacks %s:\n%s", want, hpa)
		}
	}

	for _, tc := range []struct {
		edit func(*Params)
		want string
	}{
		{func(p *Params) { p.Autoscale = "4:1" }, "want MIN:MAX replicas, such as 1:10"},
		{func(p *Params) { p.Autoscale = "1:500" }, "1 <= MAX <= 200"},
		{func(p *Params) { p.Autoscale = "1" }, "want MIN:MAX replicas"},
		{func(p *Params) { p.AutoscaleWith = "cron" }, "use legate (legate autoscaler, the default), keda"},
		{func(p *Params) { p.Autoscale = "" }, "autoscale-with hpa needs autoscale MIN:MAX"},
		{func(p *Params) { *p = base(KindHelm); p.Autoscale = "1:2" }, "autoscale does not apply to a helm manifest"},
	} {
		q := p
		tc.edit(&q)
		if _, err := Generate(q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", q.Autoscale, err, tc.want)
		}
	}
}
