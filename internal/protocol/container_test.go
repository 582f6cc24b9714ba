package protocol

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func i64(v int64) *int64 { return &v }

func TestContainerSpecValidate(t *testing.T) {
	ok := func() ContainerSpec { return ContainerSpec{Image: "localhost/debian-min:bookworm"} }
	tests := []struct {
		name    string
		edit    func(c *ContainerSpec)
		wantErr string // substring; "" means valid
	}{
		{name: "image only", edit: func(c *ContainerSpec) {}},
		{name: "no image", edit: func(c *ContainerSpec) { c.Image = "" }, wantErr: "container.image: give an image"},
		{name: "image option", edit: func(c *ContainerSpec) { c.Image = "--privileged" }, wantErr: "container.image"},
		{name: "image space", edit: func(c *ContainerSpec) { c.Image = "a b" }, wantErr: "not an image reference"},
		{name: "digest", edit: func(c *ContainerSpec) { c.Image = "alpine@sha256:0123abcd" }},
		{name: "command and script", edit: func(c *ContainerSpec) { c.Command = []string{"id"}; c.Script = "id" }, wantErr: "give one, not both"},
		{name: "empty program", edit: func(c *ContainerSpec) { c.Command = []string{""} }, wantErr: "container.command[0]"},
		{name: "relative working dir", edit: func(c *ContainerSpec) { c.WorkingDir = "src" }, wantErr: "container.working_dir \"src\": must be an absolute path"},
		{name: "cpu negative", edit: func(c *ContainerSpec) { c.Resources = &ContainerResources{CPU: -1} }, wantErr: "container.resources.cpu"},
		{name: "memory tiny", edit: func(c *ContainerSpec) { c.Resources = &ContainerResources{MemoryMiB: 1} }, wantErr: "container.resources.memory_mib"},
		{name: "resources", edit: func(c *ContainerSpec) { c.Resources = &ContainerResources{CPU: 0.5, MemoryMiB: 512} }},
		{name: "uid negative", edit: func(c *ContainerSpec) { c.SecurityContext = &SecurityContext{RunAsUser: i64(-1)} }, wantErr: "container.security_context.run_as_user -1"},
		{name: "gid too big", edit: func(c *ContainerSpec) { c.SecurityContext = &SecurityContext{RunAsGroup: i64(1 << 40)} }, wantErr: "container.security_context.run_as_group"},
		{name: "bad capability", edit: func(c *ContainerSpec) { c.SecurityContext = &SecurityContext{DropCapability: []string{"chown;rm"}} }, wantErr: "container.security_context.drop_capability[0]"},
		{name: "capabilities", edit: func(c *ContainerSpec) {
			c.SecurityContext = &SecurityContext{AddCapability: []string{"cap_net_admin"}, DropCapability: []string{"ALL"}}
		}},
		{name: "volume without type", edit: func(c *ContainerSpec) { c.Volumes = []Volume{{Name: "w", MountPath: "/w"}} }, wantErr: "container.volumes[0]: give exactly one of empty_dir, host_path and efs"},
		{name: "volume two types", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "w", MountPath: "/w", EmptyDir: &EmptyDirVolume{}, HostPath: &HostPathVolume{Path: "/x"}}}
		}, wantErr: "exactly one"},
		{name: "volume bad name", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "a/b", MountPath: "/w", EmptyDir: &EmptyDirVolume{}}}
		}, wantErr: "container.volumes[0].name"},
		{name: "volume on root", edit: func(c *ContainerSpec) { c.Volumes = []Volume{{Name: "w", MountPath: "/", EmptyDir: &EmptyDirVolume{}}} }, wantErr: "mounted on /"},
		{name: "mount path with comma", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "w", MountPath: "/a,rw", EmptyDir: &EmptyDirVolume{}}}
		}, wantErr: "container.volumes[0].mount_path"},
		{name: "two volumes one name", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "w", MountPath: "/a", EmptyDir: &EmptyDirVolume{}}, {Name: "w", MountPath: "/b", EmptyDir: &EmptyDirVolume{}}}
		}, wantErr: "container.volumes[1].name \"w\": used twice"},
		{name: "two volumes one path", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "a", MountPath: "/a", EmptyDir: &EmptyDirVolume{}}, {Name: "b", MountPath: "/a/", EmptyDir: &EmptyDirVolume{}}}
		}, wantErr: "container.volumes[1].mount_path"},
		{name: "empty dir negative", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "w", MountPath: "/w", EmptyDir: &EmptyDirVolume{SizeMiB: -1}}}
		}, wantErr: "container.volumes[0].empty_dir.size_mib -1"},
		{name: "host path relative", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "h", MountPath: "/h", HostPath: &HostPathVolume{Path: "etc"}}}
		}, wantErr: "container.volumes[0].host_path.path"},
		{name: "host path dotdot", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "h", MountPath: "/h", HostPath: &HostPathVolume{Path: "/a/../etc"}}}
		}, wantErr: `must not contain a ".." element`},
		{name: "efs bad id", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "e", MountPath: "/e", EFS: &EFSVolume{FilesystemID: "fs-xyz"}}}
		}, wantErr: "container.volumes[0].efs.filesystem_id"},
		{name: "efs iam without tls", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "e", MountPath: "/e", EFS: &EFSVolume{FilesystemID: "fs-12345678", IAM: true}}}
		}, wantErr: "container.volumes[0].efs.transit_encryption"},
		{name: "efs access point with root dir", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "e", MountPath: "/e", EFS: &EFSVolume{FilesystemID: "fs-12345678", AccessPointID: "fsap-0123456789abcdef0", TransitEncryption: true, RootDirectory: "/cache"}}}
		}, wantErr: "container.volumes[0].efs.root_directory"},
		{name: "efs full", edit: func(c *ContainerSpec) {
			c.Volumes = []Volume{{Name: "e", MountPath: "/e", EFS: &EFSVolume{FilesystemID: "fs-12345678", AccessPointID: "fsap-0123456789abcdef0", TransitEncryption: true, IAM: true}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok()
			tt.edit(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNormalizeCapabilities(t *testing.T) {
	c := ContainerSpec{Image: "x", SecurityContext: &SecurityContext{AddCapability: []string{"cap_net_admin", " sys_time "}, DropCapability: []string{"all"}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := SecurityContext{AddCapability: []string{"NET_ADMIN", "SYS_TIME"}, DropCapability: []string{"ALL"}}
	if diff := cmp.Diff(want, *c.SecurityContext); diff != "" {
		t.Errorf("security context (-want +got):\n%s", diff)
	}
}

func TestCheckPlatform(t *testing.T) {
	vol := func(v Volume) ContainerSpec {
		v.Name, v.MountPath = "v", "/v"
		return ContainerSpec{Image: "x", Volumes: []Volume{v}}
	}
	tests := []struct {
		name     string
		spec     ContainerSpec
		platform string
		wantErr  string
	}{
		{name: "privileged on ec2", spec: ContainerSpec{Image: "x", SecurityContext: &SecurityContext{Privileged: true}}, platform: PlatformEC2},
		{name: "privileged on fargate", spec: ContainerSpec{Image: "x", SecurityContext: &SecurityContext{Privileged: true}}, platform: PlatformFargate,
			wantErr: "container.security_context.privileged: privileged containers are not supported on Fargate"},
		{name: "host path on fargate", spec: vol(Volume{HostPath: &HostPathVolume{Path: "/var/run/docker.sock"}}), platform: PlatformFargate,
			wantErr: "container.volumes[0].host_path: host_path volumes are not supported on Fargate"},
		{name: "host path on a host", spec: vol(Volume{HostPath: &HostPathVolume{Path: "/tmp"}})},
		{name: "empty dir no size on fargate", spec: vol(Volume{EmptyDir: &EmptyDirVolume{}}), platform: PlatformFargate},
		{name: "empty dir below min", spec: vol(Volume{EmptyDir: &EmptyDirVolume{SizeMiB: 21503}}), platform: PlatformFargate,
			wantErr: "container.volumes[0].empty_dir.size_mib 21503: on Fargate a size, when given, must be at least 21504 MiB (21 GiB) and at most 204800 MiB (200 GiB)"},
		{name: "empty dir at min", spec: vol(Volume{EmptyDir: &EmptyDirVolume{SizeMiB: 21504}}), platform: PlatformFargate},
		{name: "empty dir at max", spec: vol(Volume{EmptyDir: &EmptyDirVolume{SizeMiB: 204800}}), platform: PlatformFargate},
		{name: "empty dir above max", spec: vol(Volume{EmptyDir: &EmptyDirVolume{SizeMiB: 204801}}), platform: PlatformFargate, wantErr: "size_mib 204801"},
		{name: "small empty dir on ec2", spec: vol(Volume{EmptyDir: &EmptyDirVolume{SizeMiB: 10}}), platform: PlatformEC2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.CheckPlatform(tt.platform)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckPlatform: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckPlatform = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzContainerSpec decodes arbitrary JSON as a task's container section
// and validates it: no panic, and a spec that passes keeps passing (the
// normalization is idempotent) and survives a JSON round trip.
func FuzzContainerSpec(f *testing.F) {
	f.Add(`{"image":"x","command":["id"],"security_context":{"run_as_user":1000,"drop_capability":["chown"]}}`)
	f.Add(`{"image":"x","volumes":[{"name":"w","mount_path":"/w","empty_dir":{"size_mib":21504}},{"name":"e","mount_path":"/e","efs":{"filesystem_id":"fs-12345678","iam":true,"transit_encryption":true}}]}`)
	f.Add(`{"image":"x","script":"touch /x","volumes":[{"name":"h","mount_path":"/h","host_path":{"path":"/tmp","read_only":true}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		var c ContainerSpec
		if json.Unmarshal([]byte(s), &c) != nil {
			return
		}
		if err := c.Validate(); err != nil {
			if !strings.HasPrefix(err.Error(), "container") && !strings.HasPrefix(err.Error(), "a container") {
				t.Fatalf("error does not name the field: %v", err)
			}
			return
		}
		_ = c.CheckPlatform(PlatformFargate)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back ContainerSpec
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("a valid spec fails after a round trip: %v", err)
		}
		if diff := cmp.Diff(c, back, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-before +after):\n%s", diff)
		}
	})
}
