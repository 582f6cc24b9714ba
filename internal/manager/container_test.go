package manager

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/pipeline/engine"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// TestSubmitContainerTask submits container tasks over HTTP: a bad
// container section is refused with a message that names the field; a
// good one is queued and shown back, capabilities normalized.
func TestSubmitContainerTask(t *testing.T) {
	tm := startTestManager(t, Config{})
	a := tm.client(t, tm.admin.APIKey)
	uid := int64(1000)
	for _, tc := range []struct {
		name string
		spec protocol.TaskSpec
		want string // "" = accepted
	}{
		{"no container section", protocol.TaskSpec{Type: protocol.TaskContainer}, `a container task needs a "container" section`},
		{"no image", protocol.TaskSpec{Container: &protocol.ContainerSpec{Script: "id"}}, "container.image: give an image"},
		{"bad capability", protocol.TaskSpec{Container: &protocol.ContainerSpec{Image: "x", SecurityContext: &protocol.SecurityContext{AddCapability: []string{"NET ADMIN"}}}},
			"container.security_context.add_capability[0]"},
		{"volume with two types", protocol.TaskSpec{Container: &protocol.ContainerSpec{Image: "x", Volumes: []protocol.Volume{{Name: "v", MountPath: "/v",
			EmptyDir: &protocol.EmptyDirVolume{}, EFS: &protocol.EFSVolume{FilesystemID: "fs-12345678"}}}}}, "container.volumes[0]: give exactly one of empty_dir, host_path and efs"},
		{"good", protocol.TaskSpec{Container: &protocol.ContainerSpec{Image: "localhost/debian-min:bookworm", Command: []string{"id"},
			SecurityContext: &protocol.SecurityContext{RunAsUser: &uid, DropCapability: []string{"cap_chown"}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task, err := a.SubmitTask(context.Background(), tc.spec)
			if tc.want == "" {
				if err != nil || task.Status != protocol.StatusQueued || task.Type != protocol.TaskContainer {
					t.Fatalf("got %+v, %v; want a queued container task", task, err)
				}
				want := &protocol.SecurityContext{RunAsUser: &uid, DropCapability: []string{"CHOWN"}}
				if diff := cmp.Diff(want, task.Container.SecurityContext); diff != "" {
					t.Errorf("security context (-want +got):\n%s", diff)
				}
				return
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(pe.Message, tc.want) {
				t.Fatalf("got %+v (task %s %s); want bad_request %q", err, task.ID, task.Status, tc.want)
			}
		})
	}
}

const testWorkspacePipeline = `name: ws
stages:
  - name: build
    steps:
      - name: write
        container:
          image: localhost/debian-min:bookworm
          script: echo built > /ws/a
          volumes: [{name: ws, mount_path: /ws, empty_dir: {}}]
      - name: read
        container:
          image: localhost/debian-min:bookworm
          script: cat /ws/a
          volumes: [{name: ws, mount_path: /ws, empty_dir: {}}, {name: own, mount_path: /own, empty_dir: {}}]
`

// TestStageWorkspacePlacement: the steps of a stage that share an
// empty_dir get one workspace key; the first creates it, the last removes
// it, and the later step is sent to the delegate that ran the first (its
// name and hostname as selectors). A submitted task cannot set a
// workspace.
func TestStageWorkspacePlacement(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	acct := tm.admin.AccountID
	if _, _, err := tm.st.ApplyPipeline(ctx, store.Pipeline{AccountID: acct, Name: "ws", Source: testWorkspacePipeline, UpdatedBy: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	del := tm.client(t, "")
	resp, err := del.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: acct, Token: tok.Value,
		Name: "Runner-1", Hostname: "host-a", IP: "127.0.0.1", Version: "test", ContainerRuntime: "podman"})
	if err != nil {
		t.Fatal(err)
	}
	del.SetSecret(resp.Session)
	f := runFixture{tm: tm, del: del}
	run, err := tm.m.engine.StartRun(ctx, engine.RunStart{AccountID: acct, Pipeline: "ws", Trigger: "manual", TriggeredBy: "user admin"})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := tm.st.GetRun(ctx, acct, run.ID); r.Status != store.RunRunning {
		t.Fatalf("run %s: %s %+v", r.Status, r.Error, r.Steps)
	}
	first := f.finish(t, f.stepTask(t, run.ID, "build", "write"), protocol.StatusSucceeded, nil)
	ws := first.Container.Volumes[0].EmptyDir.Workspace
	if ws == nil || !ws.Create || ws.Remove || len(ws.Key) != 24 || len(first.Selectors) != 0 {
		t.Fatalf("first step: workspace %+v, selectors %v", ws, first.Selectors)
	}
	second := f.finish(t, f.stepTask(t, run.ID, "build", "read"), protocol.StatusSucceeded, nil)
	want := &protocol.Workspace{Key: ws.Key, Remove: true}
	if diff := cmp.Diff(want, second.Container.Volumes[0].EmptyDir.Workspace); diff != "" {
		t.Errorf("second step's workspace (-want +got):\n%s", diff)
	}
	if w := second.Container.Volumes[1].EmptyDir.Workspace; w != nil {
		t.Errorf("a step's own empty_dir is a workspace: %+v", w)
	}
	if diff := cmp.Diff([]string{"host-a", "runner-1"}, second.Selectors); diff != "" {
		t.Errorf("second step's selectors (-want +got):\n%s", diff)
	}
	if r := f.waitRun(t, run.ID); r.Status != store.RunSucceeded {
		t.Errorf("run %s", r.Status)
	}

	st, b := tm.api(t, tm.admin.APIKey, "POST", protocol.PathTasks,
		`{"type":"container","container":{"image":"i","volumes":[{"name":"w","mount_path":"/w","empty_dir":{"workspace":{"key":"abc"}}}]}}`)
	if st != 400 || !strings.Contains(b, "container.volumes[0].empty_dir.workspace: set by the manager") {
		t.Errorf("a submitted task with a workspace: %d %s", st, b)
	}
}
