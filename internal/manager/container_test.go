package manager

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
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
