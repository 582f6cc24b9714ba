package protocol

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseDeployRecord(t *testing.T) {
	want := DeployRecord{Type: TaskKubernetes, Strategy: StrategyRolling, Namespace: "web",
		Workloads: []DeployedWorkload{{Kind: "Deployment", Name: "web", Images: []string{"web:2"}, Revision: "3"}}}
	b, _ := json.Marshal(want)
	got, err := ParseDeployRecord(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("record (-want +got):\n%s", d)
	}
	for _, bad := range []struct{ in, msg string }{
		{`{"namespace":"web"}`, "no type"},
		{`{"type":`, "deploy record"},
		{`{"type":"helm","release_revision":"x"}`, "deploy record"},
		{`{"type":"helm","chart":"` + strings.Repeat("x", MaxDeployRecordBytes) + `"}`, "at most"},
	} {
		if _, err := ParseDeployRecord(bad.in); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("ParseDeployRecord(%.40q) = %v, want an error with %q", bad.in, err, bad.msg)
		}
	}
}

func TestKubeClusterValidate(t *testing.T) {
	ca := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	if err := (&KubeCluster{Server: "https://10.0.0.1:6443", CAPEM: ca, Token: "${secrets.kube}"}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		c   KubeCluster
		msg string
	}{
		{KubeCluster{Server: "http://10.0.0.1", Token: "t"}, "https://HOST"},
		{KubeCluster{Server: "https://u:p@h", Token: "t"}, "https://HOST"},
		{KubeCluster{Server: "https://h", Token: " "}, "no token"},
		{KubeCluster{Server: "https://h", Token: "a\nb"}, "line break"},
		{KubeCluster{Server: "https://h", Token: "t", CAPEM: "junk"}, "not PEM"},
	} {
		if err := bad.c.Validate(); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("Validate(%+v) = %v, want an error with %q", bad.c, err, bad.msg)
		}
	}
}

func FuzzDeployRecord(f *testing.F) {
	f.Add(`{"type":"kubernetes","namespace":"web","workloads":[{"kind":"Deployment","name":"web","images":["a:1"],"revision":"2"}]}`)
	f.Add(`{"type":"helm","release":"web","chart":"web","chart_version":"1.2.0","release_revision":4,"rolled_back_to":"3"}`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseDeployRecord(s)
		if err != nil {
			return
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxDeployRecordBytes {
			return // escaping (of '<', say) made it longer
		}
		again, err := ParseDeployRecord(string(b))
		if err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
		if d := cmp.Diff(r, again, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip (-first +again):\n%s", d)
		}
	})
}
