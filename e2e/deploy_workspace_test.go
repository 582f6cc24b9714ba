package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/protocol"
)

// wsManifest is the manifest the render step writes into the workspace;
// its annotation holds an expression that must reach the cluster as it
// is (files are applied without substitution).
const wsManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: files
  annotations:
    legate.dev/note: "${{ inputs.namespace }}"
spec:
  replicas: 1
  selector: {matchLabels: {app: files}}
  template:
    metadata:
      labels: {app: files}
    spec:
      containers:
        - {name: web, image: "files:1"}
`

// wsRenderScript writes, by the mode in $MODE, the manifest (or nothing:
// missing; or a symlink to a file of the delegate's host: symlink) and
// the chart web into the workspace at /ws.
func wsRenderScript() string {
	var b strings.Builder
	b.WriteString("set -e\nmkdir -p /ws/k8s\n")
	b.WriteString("case \"$MODE\" in\n  missing) ;;\n  symlink) ln -s ../../../../../../../../../etc/passwd /ws/k8s/deployment.yaml ;;\n")
	// The expression is written as DOLLAR{{ … }} and made one by sed, as
	// the manager refuses an expression in a script.
	manifest := strings.ReplaceAll(wsManifest, "${{", "DOLLAR{{")
	b.WriteString("  *) cat > /ws/k8s/deployment.yaml <<'LEGATE_EOF'\n" + manifest + "LEGATE_EOF\n  sed -i 's/DOLLAR/$/' /ws/k8s/deployment.yaml ;;\nesac\n")
	chart := k8stest.WebChart("0.3.0", "3.0")
	names := make([]string, 0, len(chart))
	for name := range chart {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := "/ws/charts/web/" + name
		b.WriteString("mkdir -p " + filepath.Dir(p) + "\ncat > " + p + " <<'LEGATE_EOF'\n" + chart[name] + "\nLEGATE_EOF\n")
	}
	// The same chart as an archive, as helm package lays it out.
	b.WriteString("mkdir -p /ws/dist && tar -C /ws/charts -czf /ws/dist/web-0.3.0.tgz web\n")
	return b.String()
}

// wsDeployPipeline: a container step renders a manifest and a chart (a
// directory and an archive) into the stage's workspace build; a
// kubernetes step applies the manifest file, and helm steps install the
// chart's directory and its archive, from it.
func wsDeployPipeline(t *testing.T) string {
	t.Helper()
	p := map[string]any{
		"name":   "ship-ws",
		"inputs": map[string]any{"namespace": map[string]any{}, "mode": map[string]any{"default": "ok"}},
		"stages": []any{map[string]any{
			"name": "deploy", "environment": "prod", "service": "web",
			"steps": []any{
				map[string]any{"name": "render", "env": map[string]any{"MODE": "${{ inputs.mode }}"},
					"container": map[string]any{"image": containerImage, "script": wsRenderScript(),
						"volumes": []any{map[string]any{"name": "build", "mount_path": "/ws", "empty_dir": map[string]any{}}}}},
				map[string]any{"name": "manifests", "kubernetes": map[string]any{"namespace": "${{ inputs.namespace }}", "timeout": "60s",
					"workspace": "build", "files": []any{"k8s/deployment.yaml"}}},
				map[string]any{"name": "chart", "helm": map[string]any{"release": "web", "namespace": "${{ inputs.namespace }}", "timeout": "60s",
					"workspace": "build", "chart_path": "charts/web", "values": map[string]any{"image": "web:ws"}},
					"outputs": []any{"deploy_status", "deploy_record"}},
				map[string]any{"name": "archive", "helm": map[string]any{"release": "web-tgz", "namespace": "${{ inputs.namespace }}", "timeout": "60s",
					"workspace": "build", "chart_path": "dist/web-0.3.0.tgz", "values": map[string]any{"image": "web:tgz"}}},
			},
		}},
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDeployFromAWorkspaceOnARealCluster: through a real manager and a
// real delegate process with podman, a container step writes a manifest
// and a chart into its stage's workspace; the next steps deploy them to
// the real control plane of scripts/k8s-ensure (checked in the cluster:
// the Deployment of the file, with its expression left as it is, and the
// helm releases of the chart's directory and archive), and the last
// removes the workspace. A
// missing file fails the step naming the path and the step that should
// have written it; a symlink out of the volume is refused, and nothing of
// what it points to reaches the output. Without podman or a cluster it
// skips (under CI=true it fails).
func TestDeployFromAWorkspaceOnARealCluster(t *testing.T) {
	t.Parallel()
	flags := podmanOrSkip(t)
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "legate")
	c := startCluster(t)
	work := t.TempDir()
	env := append(append(c.seed004Env(c.token("k8s"), "k8s", "k8s"), containerDelegateEnv(flags)...),
		"DELEGATE_HOSTNAME=ws-deployer", "KUBECONFIG="+cr.Kubeconfig, "LEGATE_HELM="+filepath.Join(k.Bin, "helm"))
	start(t, "delegate ws-deployer", env, "delegate", "--workdir", work)
	c.waitConnected("ws-deployer", "")
	file := filepath.Join(t.TempDir(), "ship-ws.yaml")
	if err := os.WriteFile(file, []byte(wsDeployPipeline(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.mustCLI("pipeline", "apply", "-f", file)

	r := c.cli("pipeline", "run", "ship-ws", "--input", "namespace="+ns)
	if r.code != 0 || !strings.Contains(r.stdout, "read 1 manifest file(s) from the workspace build: k8s/deployment.yaml") ||
		!strings.Contains(r.stdout, "deployment/files: rolled out") || !strings.Contains(r.stdout, "helm: release web deployed") {
		t.Fatalf("deploy from the workspace: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var d struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/files", nil, &d)
	if d.Spec.Template.Spec.Containers[0].Image != "files:1" || d.Metadata.Annotations["legate.dev/note"] != "${{ inputs.namespace }}" {
		t.Fatalf("the cluster's Deployment of the file: %+v", d)
	}
	d = struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}{}
	k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/web", nil, &d)
	if d.Spec.Template.Spec.Containers[0].Image != "web:ws" {
		t.Fatalf("the cluster's Deployment of the chart: %+v", d)
	}
	d.Spec.Template.Spec.Containers = nil
	k.Do(t, http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/web-tgz", nil, &d)
	if len(d.Spec.Template.Spec.Containers) != 1 || d.Spec.Template.Spec.Containers[0].Image != "web:tgz" {
		t.Fatalf("the cluster's Deployment of the chart's archive: %+v", d)
	}
	if list := k.Helm(t, "list", "--namespace", ns); strings.Count(list, "web-0.3.0") != 2 {
		t.Fatalf("helm list:\n%s", list)
	}
	// The delegate's owner label: its host name and working directory.
	sum := sha256.Sum256([]byte("ws-deployer\x00" + work))
	owner := "label=dev.legate.owner=" + hex.EncodeToString(sum[:8])
	if out, err := exec.Command("podman", append(flags, "volume", "ls", "--quiet", "--filter", owner)...).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("volumes left after the run: %q %v", out, err)
	}

	r = c.cli("pipeline", "run", "ship-ws", "--input", "namespace="+ns, "--input", "mode=missing")
	want := `kubernetes file k8s/deployment.yaml is not in the workspace "build": step render of the stage should have written it there`
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, want) {
		t.Fatalf("missing file: exit %d, want %q\nstdout: %s\nstderr: %s", r.code, want, r.stdout, r.stderr)
	}
	r = c.cli("pipeline", "run", "ship-ws", "--input", "namespace="+ns, "--input", "mode=symlink")
	want = `kubernetes file k8s/deployment.yaml leads outside the workspace "build" (a symlink out of it): refused`
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, want) || strings.Contains(r.stdout+r.stderr, "root:x:0:0") {
		t.Fatalf("symlink out of the workspace: exit %d, want %q\nstdout: %s\nstderr: %s", r.code, want, r.stdout, r.stderr)
	}
	var runs protocol.RunList
	if err := json.Unmarshal([]byte(c.mustCLI("run", "list", "-o", "json")), &runs); err != nil || len(runs.Runs) != 3 {
		t.Fatalf("runs: %+v %v", runs, err)
	}
	var run protocol.Run
	if err := json.Unmarshal([]byte(c.mustCLI("run", "get", runs.Runs[0].ID, "-o", "json")), &run); err != nil {
		t.Fatal(err)
	}
	if run.Status != protocol.RunFailed || len(run.Steps) < 2 || run.Steps[1].Step != "manifests" || !strings.Contains(run.Steps[1].Error, "leads outside the workspace") {
		t.Fatalf("the run with the symlink: %+v", run)
	}
}
