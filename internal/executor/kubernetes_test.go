package executor

import (
	"encoding/base64"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// fakeKubeAPI serves discovery of v1 ConfigMaps and accepts their applies
// (TLS, on loopback), and returns the environment of a child whose
// kubeconfig points at it.
func fakeKubeAPI(t *testing.T) (applies func() []string, env []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1":
			io.WriteString(w, `{"resources":[{"name":"configmaps","kind":"ConfigMap","namespaced":true}]}`)
		case r.Method == http.MethodPatch && r.Header.Get("Authorization") == "Bearer tok":
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			got = append(got, r.URL.Path+" "+string(b))
			mu.Unlock()
			io.WriteString(w, `{"metadata":{"generation":1}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"reason":"NotFound","message":"not here"}`)
		}
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	text := "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n" +
		"clusters: [{name: k, cluster: {server: '" + srv.URL + "', certificate-authority-data: " + base64.StdEncoding.EncodeToString(ca) + "}}]\n" +
		"users: [{name: u, user: {token: tok}}]\n"
	if err := os.WriteFile(kc, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}, []string{"KUBECONFIG=" + kc}
}

// outputRecord takes the deploy_record output out of o (so that the rest
// compares whole) and decodes it.
func outputRecord(t *testing.T, o Outcome) protocol.DeployRecord {
	t.Helper()
	s, ok := o.Outputs[protocol.OutputDeployRecord]
	if !ok {
		t.Fatalf("no %s output: %+v", protocol.OutputDeployRecord, o)
	}
	delete(o.Outputs, protocol.OutputDeployRecord)
	rec, err := protocol.ParseDeployRecord(s)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func kubeSpec(manifests ...string) protocol.TaskSpec {
	return protocol.TaskSpec{Type: protocol.TaskKubernetes, Kubernetes: &protocol.KubernetesSpec{Namespace: "web", Manifests: manifests}}
}

// TestKubernetesChild: the deploy runs in a child process (the test binary
// re-executed with kubernetesArg), which applies, streams its progress as
// the task's output and reports the deploy's status.
func TestKubernetesChild(t *testing.T) {
	t.Parallel()
	applies, env := fakeKubeAPI(t)
	var out buffer
	o := Run(t.Context(), kubeSpec("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: v}\n"), Options{KubeEnv: env}, &out)
	rec := outputRecord(t, o)
	if rec.Type != protocol.TaskKubernetes || rec.Strategy != protocol.StrategyRolling || rec.Namespace != "web" || !strings.HasPrefix(rec.Cluster, "https://127.0.0.1:") || len(rec.Workloads) != 0 {
		t.Fatalf("deploy record %+v", rec)
	}
	want := Outcome{Status: protocol.StatusSucceeded, Outputs: map[string]string{protocol.OutputDeployStatus: protocol.DeploySucceeded}}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Fatalf("outcome (-want +got):\n%s\noutput:\n%s", diff, out.String())
	}
	if got := applies(); len(got) != 1 || !strings.HasPrefix(got[0], `/api/v1/namespaces/web/configmaps/c {"apiVersion":"v1","data":{"k":"v"}`) {
		t.Fatalf("applies %q", got)
	}
	for _, line := range []string{"configmap/c applied in namespace web (generation 1)\n", "deployed to namespace web\n"} {
		if !strings.Contains(out.String(), line) {
			t.Fatalf("output lacks %q:\n%s", line, out.String())
		}
	}
}

// TestKubernetesChildFails: a refused deploy fails with the child's
// message and the failed deploy status; missing credentials are the
// delegate's fault.
func TestKubernetesChildFails(t *testing.T) {
	t.Parallel()
	_, env := fakeKubeAPI(t)
	var out buffer
	o := Run(t.Context(), kubeSpec("apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n"), Options{KubeEnv: env}, &out)
	if rec := outputRecord(t, o); rec.Namespace != "web" || rec.Strategy != protocol.StrategyRolling || rec.Cluster == "" {
		t.Fatalf("deploy record of a refused deploy: %+v", rec)
	}
	want := Outcome{Status: protocol.StatusFailed, Error: "manifest 0, document 0 (widget/w): the cluster has no kind Widget in apiVersion v1",
		Outputs: map[string]string{protocol.OutputDeployStatus: protocol.DeployFailed}}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Fatalf("outcome (-want +got):\n%s\noutput:\n%s", diff, out.String())
	}
	if !strings.Contains(out.String(), "error: "+want.Error) {
		t.Fatalf("the output does not say why:\n%s", out.String())
	}

	o = Run(t.Context(), kubeSpec("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"), Options{KubeEnv: []string{"HOME=" + t.TempDir()}}, &out)
	if o.Status != protocol.StatusFailed || !o.DelegateFault || !strings.Contains(o.Error, "no Kubernetes credentials") {
		t.Fatalf("without credentials: %+v", o)
	}
	if rec := outputRecord(t, o); rec.Namespace != "web" || rec.Cluster != "" {
		t.Fatalf("deploy record without credentials: %+v", rec)
	}
	unreachable := filepath.Join(t.TempDir(), "kubeconfig")
	text := "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\n"
	if err := os.WriteFile(unreachable, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	o = Run(t.Context(), kubeSpec("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"), Options{KubeEnv: []string{"KUBECONFIG=" + unreachable}}, &out)
	if o.Status != protocol.StatusFailed || !o.DelegateFault || !strings.Contains(o.Error, "connection refused") {
		t.Fatalf("an API that does not answer: %+v", o)
	}
	if o := Run(t.Context(), protocol.TaskSpec{Type: protocol.TaskKubernetes}, Options{}, &out); o.Status != protocol.StatusFailed || !strings.Contains(o.Error, `no "kubernetes" section`) {
		t.Fatalf("without a section: %+v", o)
	}
}

// TestKubernetesRecordBound: a deploy record of more workloads than its
// bound holds keeps the first ones and stays within the bound.
func TestKubernetesRecordBound(t *testing.T) {
	t.Parallel()
	rec := &protocol.DeployRecord{Type: protocol.TaskKubernetes, Namespace: "web"}
	for i := range 500 {
		rec.Workloads = append(rec.Workloads, protocol.DeployedWorkload{Kind: "Deployment", Name: strings.Repeat("w", 60) + strconv.Itoa(i), Images: []string{strings.Repeat("i", 100)}})
	}
	out := kubeOutputs(protocol.KubernetesSpec{Namespace: "web"}, protocol.DeploySucceeded, rec)
	got, err := protocol.ParseDeployRecord(out[protocol.OutputDeployRecord])
	if err != nil || len(out[protocol.OutputDeployRecord]) > protocol.MaxDeployRecordBytes || len(got.Workloads) == 0 || len(got.Workloads) >= 500 ||
		got.Workloads[0].Name != rec.Workloads[0].Name {
		t.Fatalf("record of %d bytes, %d workloads: %v", len(out[protocol.OutputDeployRecord]), len(got.Workloads), err)
	}
}
