package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/pipeline/engine"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

const testDeployWorkspacePipeline = `name: wsdeploy
stages:
  - name: build
    steps:
      - name: render
        container:
          image: localhost/debian-min:bookworm
          script: mkdir -p /ws/k8s
          volumes: [{name: ws, mount_path: /ws, empty_dir: {}}]
      - name: apply
        kubernetes: {namespace: web, workspace: ws, files: [k8s/deployment.yaml]}
      - name: chart
        helm: {release: web, namespace: web, workspace: ws, chart_path: charts/web}
  - name: skipped
    steps:
      - name: render
        when: failure
        container:
          image: localhost/debian-min:bookworm
          script: mkdir -p /ws/k8s
          volumes: [{name: ws, mount_path: /ws, empty_dir: {}}]
      - name: apply
        when: always
        kubernetes: {namespace: web, workspace: ws, files: [k8s/deployment.yaml]}
`

// TestDeployStepWorkspacePlacement: a kubernetes and a helm step that
// read the workspace a container step of their stage wrote get its key
// and are sent to the delegate that ran that step, exactly as a container
// step would; the last removes it. When the step that writes it was
// skipped, the deploy step fails saying so. A submitted task cannot name
// a workspace.
func TestDeployStepWorkspacePlacement(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	acct := tm.admin.AccountID
	if _, _, err := tm.st.ApplyPipeline(ctx, store.Pipeline{AccountID: acct, Name: "wsdeploy", Source: testDeployWorkspacePipeline, UpdatedBy: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	del := tm.client(t, "")
	resp, err := del.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: acct, Token: tok.Value,
		Name: "Runner-1", Hostname: "host-a", IP: "127.0.0.1", Version: "test", ContainerRuntime: "podman",
		TaskTypes: protocol.TaskTypes()})
	if err != nil {
		t.Fatal(err)
	}
	del.SetSecret(resp.Session)
	f := runFixture{tm: tm, del: del}
	run, err := tm.m.engine.StartRun(ctx, engine.RunStart{AccountID: acct, Pipeline: "wsdeploy", Trigger: "manual", TriggeredBy: "user admin"})
	if err != nil {
		t.Fatal(err)
	}
	first := f.finish(t, f.stepTask(t, run.ID, "build", "render"), protocol.StatusSucceeded, nil)
	ws := first.Container.Volumes[0].EmptyDir.Workspace
	if ws == nil || !ws.Create || ws.Remove {
		t.Fatalf("the writer's workspace: %+v", ws)
	}
	apply := f.finish(t, f.stepTask(t, run.ID, "build", "apply"), protocol.StatusSucceeded, nil)
	if diff := cmp.Diff(&protocol.DeployWorkspace{Name: "ws", Key: ws.Key, WrittenBy: []string{"render"}}, apply.Kubernetes.Workspace); diff != "" {
		t.Errorf("kubernetes step's workspace (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"host-a", "runner-1"}, apply.Selectors); diff != "" {
		t.Errorf("kubernetes step's selectors (-want +got):\n%s", diff)
	}
	chart := f.finish(t, f.stepTask(t, run.ID, "build", "chart"), protocol.StatusSucceeded, nil)
	if diff := cmp.Diff(&protocol.DeployWorkspace{Name: "ws", Key: ws.Key, Remove: true, WrittenBy: []string{"render", "apply"}}, chart.Helm.Workspace); diff != "" {
		t.Errorf("helm step's workspace (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"host-a", "runner-1"}, chart.Selectors); diff != "" {
		t.Errorf("helm step's selectors (-want +got):\n%s", diff)
	}
	r := f.waitRun(t, run.ID)
	var got string
	for _, s := range r.Steps {
		if s.Stage == "skipped" && s.Step == "apply" {
			got = s.Status + ": " + s.Error
		}
	}
	if r.Status != store.RunFailed || !strings.Contains(got, `the workspace "ws" of stage skipped was never written: none of the steps before this one that use it (render) ran`) {
		t.Errorf("run %s; the step whose workspace was not written: %q", r.Status, got)
	}

	for _, body := range []string{
		`{"type":"kubernetes","kubernetes":{"namespace":"web","files":["a.yaml"],"workspace":{"name":"ws","key":"abc"}}}`,
		`{"type":"helm","helm":{"release":"web","namespace":"web","chart_path":"web","workspace":{"name":"ws","key":"abc"}}}`,
	} {
		st, b := tm.api(t, tm.admin.APIKey, "POST", protocol.PathTasks, body)
		if st != 400 || !strings.Contains(b, ".workspace: set by the manager") {
			t.Errorf("a submitted task with a workspace: %d %s", st, b)
		}
	}
}
