package executor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// fakeHelm writes a helm that logs each call (its arguments, its
// environment, the mode and text of its values and kubeconfig files) to
// a file and answers as script says for the subcommand in $1, and returns
// its path and the log's.
func fakeHelm(t *testing.T, script string) (bin, log string) {
	t.Helper()
	dir := t.TempDir()
	bin, log = filepath.Join(dir, "helm"), filepath.Join(dir, "log")
	text := `#!/bin/sh
{
  echo "call: $*"
  env | sort | sed 's/^/env: /'
  for a in "$@"; do
    case "$a" in --values=*) f=${a#--values=}; echo "values: $(stat -c %a "$f") $(cat "$f")";; esac
  done
  [ -n "$KUBECONFIG" ] && [ -f "$KUBECONFIG" ] && echo "kubeconfig: $(stat -c %a "$KUBECONFIG") $(cat "$KUBECONFIG")"
} >>` + log + `
` + script
	if err := os.WriteFile(bin, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

func helmSpec(values string) protocol.TaskSpec {
	return protocol.TaskSpec{Type: protocol.TaskHelm, Helm: &protocol.HelmSpec{Release: "web", Namespace: "web",
		Repo: "https://charts.example.com", Chart: "web", Version: "1.2.3", Values: json.RawMessage(values), Rollback: protocol.RollbackAuto}}
}

// TestHelmTaskEnvironment: helm gets the kubernetes child's variables
// only, its homes and HOME in a directory of the task's own that is gone
// afterwards, the values in a 0600 file (nothing of them on the command
// line), a 0600 kubeconfig of the task's cluster in place of the
// delegate's credentials, and the release and chart after "--".
func TestHelmTaskEnvironment(t *testing.T) {
	t.Parallel()
	bin, log := fakeHelm(t, `case "$1" in
history) echo "Error: release: not found" >&2; exit 1;;
get) [ "$2" = metadata ] && echo '{"chart":"web","version":"1.2.3","appVersion":"1.0","revision":1}'; [ "$2" = manifest ] && printf 'kind: Deployment\nmetadata: {name: web}\nspec: {template: {spec: {containers: [{image: "web:1"}]}}}\n---\nkind: Service\nmetadata: {name: web}\n';;
esac
exit 0
`)
	spec := helmSpec(`{"password": "s3cret-value"}`)
	spec.Helm.Cluster = &protocol.KubeCluster{Server: "https://k.example.com:6443", Token: "the-token"}
	env := []string{"KUBECONFIG=/delegate/kubeconfig", "KUBERNETES_SERVICE_HOST=10.0.0.1", "HOME=/home/delegate", "HELM_DRIVER=sql", "PATH=/usr/bin:/bin"}
	var out buffer
	o := Run(t.Context(), spec, Options{Helm: bin, KubeEnv: env}, &out)
	if o.Status != protocol.StatusSucceeded || o.Outputs[protocol.OutputDeployStatus] != protocol.DeploySucceeded {
		t.Fatalf("%+v\n%s", o, out.String())
	}
	rec, err := protocol.ParseDeployRecord(o.Outputs[protocol.OutputDeployRecord])
	if err != nil || rec.Cluster != "https://k.example.com:6443" || rec.ReleaseRevision != 1 || len(rec.Workloads) != 1 || rec.Workloads[0].Images[0] != "web:1" {
		t.Fatalf("record %+v %v", rec, err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	t.Logf("log:\n%s", text)
	var home string
	for _, line := range strings.Split(text, "\n") {
		if h, ok := strings.CutPrefix(line, "env: HOME="); ok {
			home = h
		}
	}
	dir := filepath.Dir(home)
	if !strings.HasPrefix(filepath.Base(dir), "legate-helm-") {
		t.Fatalf("HOME is %q, want the task's directory", home)
	}
	for _, want := range []string{
		"call: upgrade --install --namespace=web --values=" + dir + "/values.yaml --wait --timeout=5m0s --repo=https://charts.example.com --version=1.2.3 -- web web",
		"env: HELM_CACHE_HOME=" + dir + "/cache", "env: HELM_CONFIG_HOME=" + dir + "/config", "env: HELM_DATA_HOME=" + dir + "/data",
		"env: KUBECONFIG=" + dir + "/kubeconfig", "env: PATH=/usr/bin:/bin",
		`values: 600 {"password": "s3cret-value"}`,
		`kubeconfig: 600 {"apiVersion":"v1","clusters":[{"cluster":{"server":"https://k.example.com:6443"},"name":"legate"}]`,
		`"users":[{"name":"legate","user":{"token":"the-token"}}]`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	for _, not := range []string{"HELM_DRIVER", "/home/delegate", "/delegate/kubeconfig", "KUBERNETES_SERVICE_HOST"} {
		if strings.Contains(text, not) {
			t.Errorf("helm got %q", not)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "call: ") && (strings.Contains(line, "s3cret") || strings.Contains(line, "the-token")) {
			t.Errorf("a secret on the command line: %s", line)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the task's directory is still there: %v", err)
	}
}

// TestHelmTaskWithoutHelm: a delegate without helm fails the task as its
// own fault, saying to install helm 3 or set LEGATE_HELM, and does not
// offer helm tasks (available).
func TestHelmTaskWithoutHelm(t *testing.T) {
	t.Setenv(HelmEnv, "")
	t.Setenv("PATH", t.TempDir())
	var out buffer
	o := Run(t.Context(), helmSpec(""), Options{}, &out)
	if o.Status != protocol.StatusFailed || !o.DelegateFault || !strings.Contains(o.Error, "install helm 3 on its PATH, or set LEGATE_HELM") {
		t.Fatalf("%+v", o)
	}
	if err := (helmType{}).available(Options{}); err == nil || !strings.Contains(err.Error(), "install helm 3") {
		t.Fatalf("available without helm: %v", err)
	}
	t.Setenv(HelmEnv, "/nonexistent/helm")
	if err := (helmType{}).available(Options{}); err == nil || !strings.Contains(err.Error(), `LEGATE_HELM "/nonexistent/helm" is not an executable file`) {
		t.Fatalf("available with a wrong LEGATE_HELM: %v", err)
	}
	bin, _ := fakeHelm(t, "exit 0")
	t.Setenv(HelmEnv, bin)
	if err := (helmType{}).available(Options{}); err != nil {
		t.Fatalf("available with LEGATE_HELM: %v", err)
	}
}

// TestHelmTaskFailures: a failed upgrade without rollback stays failed;
// with rollback auto it is rolled back to the revision deployed before
// (not a failed one after it); a rollback that fails too says both; a
// cluster that does not answer before anything changed is the
// delegate's fault.
func TestHelmTaskFailures(t *testing.T) {
	t.Parallel()
	history := `history) echo '[{"revision":3,"status":"superseded"},{"revision":4,"status":"deployed"},{"revision":5,"status":"failed"}]';;`
	tests := []struct {
		name, script, rollback, status, err string
		calls                               []string
	}{
		{"no rollback", history + `upgrade) echo "Error: UPGRADE FAILED: boom" >&2; exit 1;;`, protocol.RollbackNone, protocol.DeployFailed,
			"helm upgrade: UPGRADE FAILED: boom", []string{"history", "upgrade", "get metadata"}},
		{"rolled back", history + `upgrade) echo "Error: UPGRADE FAILED: boom" >&2; exit 1;;`, protocol.RollbackAuto, protocol.DeployRolledBack,
			"rolled back: release web to revision 4: helm upgrade: UPGRADE FAILED: boom", []string{"history", "upgrade", "rollback --namespace=web --wait --timeout=5m0s -- web 4", "get metadata"}},
		{"rollback fails", history + `upgrade) echo "Error: UPGRADE FAILED: boom" >&2; exit 1;; rollback) echo "Error: no" >&2; exit 1;;`, protocol.RollbackAuto, protocol.DeployFailed,
			"helm upgrade: UPGRADE FAILED: boom; the rollback to revision 4 failed too: helm rollback: no", []string{"history", "upgrade", "rollback", "get metadata"}},
		{"unreachable", `history) echo "Error: Kubernetes cluster unreachable: Get \"https://k:6443/version\": dial tcp: connection refused" >&2; exit 1;;`, protocol.RollbackAuto, protocol.DeployFailed,
			`helm history: Kubernetes cluster unreachable: Get "https://k:6443/version": dial tcp: connection refused`, []string{"history"}},
		{"nothing deployed", `history) echo '[{"revision":1,"status":"failed"}]';; upgrade) exit 1;;`, protocol.RollbackAuto, protocol.DeployFailed,
			"helm upgrade: exit status 1", []string{"history", "upgrade", "get metadata"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bin, log := fakeHelm(t, "case \"$1\" in\n"+tt.script+"\nesac\nexit 0\n")
			spec := helmSpec(`{}`)
			spec.Helm.Rollback = tt.rollback
			var out buffer
			o := Run(t.Context(), spec, Options{Helm: bin, KubeEnv: []string{}}, &out)
			if o.Status != protocol.StatusFailed || o.Outputs[protocol.OutputDeployStatus] != tt.status || o.Error != tt.err || o.DelegateFault != (tt.name == "unreachable") {
				t.Fatalf("%+v\n%s", o, out.String())
			}
			b, _ := os.ReadFile(log)
			var calls []string
			for _, line := range strings.Split(string(b), "\n") {
				if c, ok := strings.CutPrefix(line, "call: "); ok {
					calls = append(calls, c)
				}
			}
			if len(calls) < len(tt.calls) {
				t.Fatalf("calls %q, want %q", calls, tt.calls)
			}
			for i, want := range tt.calls {
				if !strings.HasPrefix(calls[i], want) {
					t.Fatalf("call %d is %q, want %q…", i, calls[i], want)
				}
			}
		})
	}
}

// TestHelmTaskCancelled: a cancelled task stops the helm command running
// (its whole process group), runs no rollback, and reports failed.
func TestHelmTaskCancelled(t *testing.T) {
	t.Parallel()
	bin, log := fakeHelm(t, `case "$1" in
history) echo "Error: release: not found" >&2; exit 1;;
upgrade) echo upgrading; sleep 1000; exit 0;;
esac
exit 0
`)
	ctx, cancel := context.WithCancel(t.Context())
	out := &watchWriter{marker: "upgrading", seen: make(chan struct{})}
	go func() {
		<-out.seen
		cancel()
	}()
	o := Run(ctx, helmSpec(`{}`), Options{Helm: bin, KubeEnv: []string{}}, out)
	if o.Status != protocol.StatusCancelled || o.Outputs[protocol.OutputDeployStatus] != protocol.DeployFailed {
		t.Fatalf("%+v\n%s", o, out.String())
	}
	b, _ := os.ReadFile(log)
	if strings.Contains(string(b), "call: rollback") || strings.Contains(string(b), "call: uninstall") {
		t.Fatalf("a cancelled task ran a rollback:\n%s", b)
	}
	if !strings.Contains(out.String(), "stopped helm; what it applied stays, and no rollback ran") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// watchWriter is a buffer that closes seen once marker was written.
type watchWriter struct {
	buffer
	marker string
	seen   chan struct{}
	once   sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	n, err := w.buffer.Write(p)
	if strings.Contains(w.buffer.String(), w.marker) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}
