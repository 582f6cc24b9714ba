package containers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// The delegate's policy refuses what a container asks of the host before
// the runtime is called (there is none here): privileged mode, added
// capabilities and host paths, each refusal naming its setting.
func TestContainerHostPolicy(t *testing.T) {
	allowed := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink("/", filepath.Join(allowed, "root-link")); err != nil {
		t.Fatal(err)
	}
	hostVol := func(p string) []protocol.Volume {
		return []protocol.Volume{{Name: "h", MountPath: "/h", HostPath: &protocol.HostPathVolume{Path: p}}}
	}
	tests := []struct {
		name    string
		policy  Runtime
		spec    protocol.ContainerSpec
		wantErr string // "" = passes the policy (and then fails: no runtime)
	}{
		{name: "privileged, the attack", spec: protocol.ContainerSpec{SecurityContext: &protocol.SecurityContext{Privileged: true}, Volumes: hostVol("/")},
			wantErr: "container.security_context.privileged: this delegate does not run privileged containers or add capabilities beyond the runtime's defaults (its operator may allow them with LEGATE_CONTAINER_ALLOW_PRIVILEGED=true)"},
		{name: "host path / with privileged allowed", policy: Runtime{AllowPrivileged: true},
			spec:    protocol.ContainerSpec{SecurityContext: &protocol.SecurityContext{Privileged: true}, Volumes: hostVol("/")},
			wantErr: "container.volumes[0].host_path /: this delegate mounts no host path (its operator may list the directories allowed in LEGATE_CONTAINER_HOST_PATHS, such as /data,/cache)"},
		{name: "added capability", spec: protocol.ContainerSpec{SecurityContext: &protocol.SecurityContext{AddCapability: []string{"cap_sys_admin"}}},
			wantErr: "container.security_context.add_capability SYS_ADMIN: this delegate does not run privileged"},
		{name: "default capability", spec: protocol.ContainerSpec{SecurityContext: &protocol.SecurityContext{DropCapability: []string{"ALL"}, AddCapability: []string{"CHOWN"}}}},
		{name: "outside the allowed paths", policy: Runtime{HostPaths: []string{allowed}}, spec: protocol.ContainerSpec{Volumes: hostVol(outside)},
			wantErr: "not under a directory this delegate allows (LEGATE_CONTAINER_HOST_PATHS=" + allowed + ")"},
		{name: "a link out", policy: Runtime{HostPaths: []string{allowed}}, spec: protocol.ContainerSpec{Volumes: hostVol(filepath.Join(allowed, "root-link"))},
			wantErr: "host_path / : not under"},
		{name: "under an allowed path", policy: Runtime{HostPaths: []string{allowed}}, spec: protocol.ContainerSpec{Volumes: hostVol(filepath.Join(allowed, "sub"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.policy
			c.Path, c.Name = "/nonexistent/podman", "podman"
			tt.spec.Image = "img"
			_, err := runTask(context.Background(), &c, taskOf("t_1", protocol.TaskSpec{Type: protocol.TaskContainer, Container: &tt.spec}), nil)
			if tt.wantErr == "" {
				if err == nil || strings.Contains(err.Error(), "LEGATE_CONTAINER") || !isFault(err) {
					t.Fatalf("refused by the policy, or not at the runtime: %v", err)
				}
				return
			}
			if err == nil || isFault(err) || !strings.Contains(err.Error(), strings.ReplaceAll(tt.wantErr, "/ :", "/:")) {
				t.Fatalf("got %v (fault %v), want an error with %q", err, isFault(err), tt.wantErr)
			}
		})
	}
}
