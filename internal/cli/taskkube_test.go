package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestTaskRunKubernetes: task run --type kubernetes (or -f alone) sends
// the namespace, each -f file's text in order (- is stdin), the rollback,
// --timeout as the rollout's with the task's twice that plus a minute,
// and the connector; missing or stray flags are usage errors that say
// what to give; --help explains it.
func TestTaskRunKubernetes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	web := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
	svc := "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
	for name, text := range map[string]string{"web.yaml": web, "svc.yaml": svc} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	webF, svcF := filepath.Join(dir, "web.yaml"), filepath.Join(dir, "svc.yaml")
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  protocol.TaskSpec
	}{
		{"all flags", []string{"--type", "kubernetes", "--namespace", "web", "-f", webF, "--manifest", svcF, "--rollback", "auto", "--timeout", "5m", "--connector", "prod"}, "",
			protocol.TaskSpec{Type: protocol.TaskKubernetes, Connector: "prod", TimeoutMS: 11 * 60 * 1000, Kubernetes: &protocol.KubernetesSpec{
				Namespace: "web", Manifests: []string{web, svc}, Rollback: protocol.RollbackAuto, TimeoutMS: 5 * 60 * 1000, Strategy: protocol.StrategyRolling}}},
		{"-f implies the type; stdin; defaults", []string{"--namespace", "web", "-f", "-"}, svc,
			protocol.TaskSpec{Type: protocol.TaskKubernetes, TimeoutMS: 21 * 60 * 1000, Kubernetes: &protocol.KubernetesSpec{
				Namespace: "web", Manifests: []string{svc}, Rollback: protocol.RollbackNone, Strategy: protocol.StrategyRolling}}},
	} {
		m := newFakeManager(t, outcomeSpec{status: protocol.StatusSucceeded})
		r := runCLI(t.Context(), m.env(), tc.stdin, append([]string{"task", "run"}, tc.args...)...)
		if r.err != nil {
			t.Fatalf("%s: err = %v, stderr = %q", tc.name, r.err, r.stderr)
		}
		specs := m.submitted()
		if len(specs) != 1 {
			t.Fatalf("%s: %d tasks submitted, want 1", tc.name, len(specs))
		}
		if d := cmp.Diff(tc.want, specs[0]); d != "" {
			t.Errorf("%s: spec (-want +got):\n%s", tc.name, d)
		}
	}

	m := newFakeManager(t, outcomeSpec{status: protocol.StatusSucceeded})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--type", "kubernetes", "-f", webF}, "needs --namespace NS"},
		{[]string{"--type", "kubernetes", "--namespace", "web"}, "needs at least one -f MANIFEST.yaml"},
		{[]string{"--namespace", "web", "-f", webF, "--script", "echo"}, "--script is not for kubernetes tasks"},
		{[]string{"--namespace", "web", "-f", webF, "--rollback", "sometimes"}, "use auto or none"},
		{[]string{"--namespace", "Web", "-f", webF}, "kubernetes namespace \"Web\" is invalid"},
		{[]string{"--namespace", "web", "-f", webF + ".none"}, "-f " + webF + ".none"},
		{[]string{"--namespace", "web", "-f", webF, "--timeout", "25h"}, "at most 24h0m0s"},
		{[]string{"--namespace", "web", "--script", "echo"}, "--namespace is for kubernetes tasks"},
		{[]string{"--namespace", "web", "-f", "-", "-f", "-"}, "stdin) given twice"},
	} {
		r := runCLI(t.Context(), m.env(), "", append([]string{"task", "run"}, tc.args...)...)
		if cliCode(t, r.err) != ExitUsage || !strings.Contains(errText(r.err), tc.want) {
			t.Errorf("%v: %v, want a usage error saying %q", tc.args, r.err, tc.want)
		}
	}
	if n := len(m.submitted()); n != 0 {
		t.Errorf("%d tasks submitted by the refused commands", n)
	}
	r := runCLI(t.Context(), m.env(), "", "task", "run", "--help")
	for _, want := range []string{"--namespace NS -f MANIFEST", "A kubernetes task (--type kubernetes, or -f MANIFEST)", "--rollback auto", "kubernetes connector"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("task run --help lacks %q", want)
		}
	}
}
