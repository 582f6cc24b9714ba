package containers

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestRunArgs(t *testing.T) {
	uid, gid := int64(1000), int64(2000)
	rt := &Runtime{Name: "podman", GlobalFlags: []string{"--runtime", "/usr/sbin/runc"}, RunFlags: []string{"--ulimit", "nofile=1024:1024"}, Owner: "o1", EFSRoot: "/mnt/efs"}
	run := containerRun{
		Name:    "legate-r1",
		Labels:  map[string]string{LabelOwner: "o1", LabelTask: "t_1", LabelRun: "r1"},
		Volumes: map[string]string{"ws": "legate-r1-ws"},
		Env:     []string{"LEGATE_TASK_ID=t_1", "A=1", "TOKEN"},
	}
	head := []string{"--runtime", "/usr/sbin/runc", "run", "--name", "legate-r1",
		"--label", "dev.legate.owner=o1", "--label", "dev.legate.run=r1", "--label", "dev.legate.task=t_1",
		"--ulimit", "nofile=1024:1024", "--env", "LEGATE_TASK_ID=t_1", "--env", "A=1", "--env", "TOKEN"}
	tests := []struct {
		name    string
		spec    protocol.ContainerSpec
		want    []string // after head
		wantErr string
	}{
		{name: "image only", spec: protocol.ContainerSpec{Image: "img"}, want: []string{"--", "img"}},
		{name: "command", spec: protocol.ContainerSpec{Image: "img", Command: []string{"id", "-u"}, WorkingDir: "/src"},
			want: []string{"--workdir", "/src", "--entrypoint", "id", "--", "img", "-u"}},
		{name: "script", spec: protocol.ContainerSpec{Image: "img", Script: "echo hi; id"},
			want: []string{"--entrypoint", "/bin/sh", "--", "img", "-c", `eval "$LEGATE_SCRIPT"`}},
		{name: "resources", spec: protocol.ContainerSpec{Image: "img", Resources: &protocol.ContainerResources{CPU: 0.5, MemoryMiB: 512}},
			want: []string{"--cpus", "0.5", "--memory", "512m", "--", "img"}},
		{name: "security context", spec: protocol.ContainerSpec{Image: "img", SecurityContext: &protocol.SecurityContext{
			Privileged: true, ReadOnlyRootFilesystem: true, RunAsUser: &uid, RunAsGroup: &gid,
			AddCapability: []string{"NET_ADMIN"}, DropCapability: []string{"ALL"}}},
			want: []string{"--privileged", "--read-only", "--user", "1000:2000", "--cap-drop", "ALL", "--cap-add", "NET_ADMIN", "--", "img"}},
		{name: "user only", spec: protocol.ContainerSpec{Image: "img", SecurityContext: &protocol.SecurityContext{RunAsUser: &uid}},
			want: []string{"--user", "1000", "--", "img"}},
		{name: "group only", spec: protocol.ContainerSpec{Image: "img", SecurityContext: &protocol.SecurityContext{RunAsGroup: &gid}},
			want: []string{"--user", "0:2000", "--", "img"}},
		{name: "volumes", spec: protocol.ContainerSpec{Image: "img", Volumes: []protocol.Volume{
			{Name: "ws", MountPath: "/ws/", EmptyDir: &protocol.EmptyDirVolume{SizeMiB: 100}},
			{Name: "sock", MountPath: "/var/run/docker.sock", HostPath: &protocol.HostPathVolume{Path: "/var/run/docker.sock"}},
			{Name: "ro", MountPath: "/data", HostPath: &protocol.HostPathVolume{Path: "/srv/data/", ReadOnly: true}},
			{Name: "cache", MountPath: "/cache", EFS: &protocol.EFSVolume{FilesystemID: "fs-12345678", RootDirectory: "/builds/cache"}},
			{Name: "ap", MountPath: "/ap", EFS: &protocol.EFSVolume{FilesystemID: "fs-12345678", AccessPointID: "fsap-0123456789abcdef0", TransitEncryption: true}},
		}}, want: []string{"--volume", "legate-r1-ws:/ws", "--volume", "/var/run/docker.sock:/var/run/docker.sock",
			"--volume", "/srv/data:/data:ro", "--volume", "/mnt/efs/fs-12345678/builds/cache:/cache", "--volume", "/mnt/efs/fs-12345678:/ap", "--", "img"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runArgs(rt, &tt.spec, run)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(append(append([]string{}, head...), tt.want...), got); diff != "" {
				t.Errorf("runArgs (-want +got):\n%s", diff)
			}
		})
	}
	noEFS := *rt
	noEFS.EFSRoot = ""
	_, err := runArgs(&noEFS, &protocol.ContainerSpec{Image: "img", Volumes: []protocol.Volume{{Name: "e", MountPath: "/e", EFS: &protocol.EFSVolume{FilesystemID: "fs-12345678"}}}}, run)
	if err == nil || err.Error() != "container.volumes[0].efs: this delegate has no EFS mount root (set LEGATE_EFS_ROOT to the directory where EFS file systems are mounted)" {
		t.Errorf("runArgs without an EFS root: %v", err)
	}
}

func TestDetectPlatform(t *testing.T) {
	tests := []struct {
		env     map[string]string
		want    string
		wantErr bool
	}{
		{env: nil, want: ""},
		{env: map[string]string{"DELEGATE_PLATFORM": "Fargate"}, want: protocol.PlatformFargate},
		{env: map[string]string{"DELEGATE_PLATFORM": "ec2", "AWS_EXECUTION_ENV": "AWS_ECS_FARGATE"}, want: protocol.PlatformEC2},
		{env: map[string]string{"ECS_CONTAINER_METADATA_URI_V4": "http://169.254.170.2/v4/x", "AWS_EXECUTION_ENV": "AWS_ECS_FARGATE"}, want: protocol.PlatformFargate},
		{env: map[string]string{"ECS_CONTAINER_METADATA_URI_V4": "http://169.254.170.2/v4/x", "AWS_EXECUTION_ENV": "AWS_ECS_EC2"}, want: protocol.PlatformEC2},
		{env: map[string]string{"DELEGATE_PLATFORM": "lambda"}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := DetectPlatform(func(k string) string { return tt.env[k] })
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("DetectPlatform(%v) = %q, %v; want %q (error %v)", tt.env, got, err, tt.want, tt.wantErr)
		}
	}
}
