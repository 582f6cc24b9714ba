package protocol

import (
	"fmt"
	"path"
	"strings"
)

// ContainerSpec is what runs in a task container: the payload of a
// container task (TaskSpec.Container) and, unchanged, of a pipeline step
// that names an image. Its security context and volumes have exactly the
// fields of the ECS/Fargate seed. The task's Env and SecretEnv are the
// container's environment. Since v4.
type ContainerSpec struct {
	// Image is the image reference (registry/name:tag or @sha256:…). The
	// delegate's runtime must have it or be able to pull it.
	Image string `json:"image"`
	// Command replaces the image's entrypoint and command when set
	// (argv, not a shell line). At most one of Command and Script.
	Command []string `json:"command,omitempty"`
	// Script is run with `sh -c` in the container. Neither Command nor
	// Script: the image's own entrypoint and command run.
	Script string `json:"script,omitempty"`
	// WorkingDir is the absolute working directory in the container;
	// empty means the image's.
	WorkingDir string `json:"working_dir,omitempty"`
	// Resources limits CPU and memory; nil means no limit.
	Resources *ContainerResources `json:"resources,omitempty"`
	// SecurityContext nil means the runtime's defaults.
	SecurityContext *SecurityContext `json:"security_context,omitempty"`
	// Volumes are mounted into the container.
	Volumes []Volume `json:"volumes,omitempty"`
}

// ContainerResources are the limits of a task container.
type ContainerResources struct {
	// CPU is in cores (0.5 = half a core); 0 means no limit.
	CPU float64 `json:"cpu,omitempty"`
	// MemoryMiB is the memory limit in MiB; 0 means no limit.
	MemoryMiB int64 `json:"memory_mib,omitempty"`
}

// SecurityContext is the seed's security context of a task container.
type SecurityContext struct {
	// Privileged runs the container with extended privileges (EC2 only).
	Privileged bool `json:"privileged,omitempty"`
	// ReadOnlyRootFilesystem mounts the container's root read-only.
	ReadOnlyRootFilesystem bool `json:"read_only_root_filesystem,omitempty"`
	// RunAsUser is the UID the process runs as; nil means the image's user.
	RunAsUser *int64 `json:"run_as_user,omitempty"`
	// RunAsGroup is the GID the process runs as; nil means the image's
	// (with RunAsUser set: the user's primary group, GID 0 if unknown).
	RunAsGroup *int64 `json:"run_as_group,omitempty"`
	// AddCapability lists Linux capabilities to add (NET_ADMIN, or
	// CAP_NET_ADMIN; any case), or ALL.
	AddCapability []string `json:"add_capability,omitempty"`
	// DropCapability lists Linux capabilities to drop, or ALL.
	DropCapability []string `json:"drop_capability,omitempty"`
}

// Volume is one volume mounted into a task container: exactly one of
// EmptyDir, HostPath and EFS.
type Volume struct {
	// Name identifies the volume in the task (and, for a pipeline step,
	// the empty_dir the steps of one stage share); letters, digits, '-',
	// '_' and '.', at most 63.
	Name string `json:"name"`
	// MountPath is the absolute path in the container.
	MountPath string `json:"mount_path"`
	// EmptyDir is ephemeral storage that lives as long as the task.
	EmptyDir *EmptyDirVolume `json:"empty_dir,omitempty"`
	// HostPath bind-mounts a path of the delegate's host (EC2 only).
	HostPath *HostPathVolume `json:"host_path,omitempty"`
	// EFS mounts an Amazon EFS file system.
	EFS *EFSVolume `json:"efs,omitempty"`
}

// EmptyDirVolume is the seed's empty_dir volume.
type EmptyDirVolume struct {
	// SizeMiB is its size; 0 means unspecified. On Fargate a given size
	// must be from FargateMinEmptyDirMiB to FargateMaxEmptyDirMiB.
	SizeMiB int64 `json:"size_mib,omitempty"`
	// Workspace is set by the manager alone, on the task of a pipeline
	// step whose stage shares this empty_dir (a submitted task is refused
	// when it sets it). Since v4.
	Workspace *Workspace `json:"workspace,omitempty"`
}

// Workspace says that an empty_dir is a pipeline stage's shared workspace:
// one runtime volume on the delegate for every step of the stage that
// names it, kept between those steps, which the manager sends to the
// delegate that created it.
type Workspace struct {
	// Key names the volume on the delegate (legate-ws-KEY): the manager
	// derives it from the account, run, stage and volume name; 1 to 64
	// lower-case letters and digits.
	Key string `json:"key"`
	// Create: this step is the first of the stage to use it and creates
	// it; a later step finds it, or fails saying the workspace is not on
	// this delegate.
	Create bool `json:"create,omitempty"`
	// Remove: this step is the last of the stage to use it and removes it
	// when it ends.
	Remove bool `json:"remove,omitempty"`
}

// HostPathVolume is the seed's host_path volume.
type HostPathVolume struct {
	// Path is the absolute path on the host.
	Path string `json:"path"`
	// ReadOnly mounts it read-only.
	ReadOnly bool `json:"read_only,omitempty"`
}

// EFSVolume is the seed's EFS volume.
type EFSVolume struct {
	// FilesystemID is the file system's ID (fs-12345678).
	FilesystemID string `json:"filesystem_id"`
	// RootDirectory is the directory of the file system mounted; empty
	// means "/". Must be empty or "/" with an access point.
	RootDirectory string `json:"root_directory,omitempty"`
	// TransitEncryption enables TLS for data in transit; required by
	// AccessPointID and IAM.
	TransitEncryption bool `json:"transit_encryption,omitempty"`
	// AccessPointID is the access point (fsap-…) used.
	AccessPointID string `json:"access_point_id,omitempty"`
	// IAM uses the task's IAM role to authorize the mount.
	IAM bool `json:"iam,omitempty"`
}

// Platform rules of the seed for Fargate: no privileged containers, no
// host paths, and an empty_dir size, when given, from 21 GiB to 200 GiB.
const (
	FargateMinEmptyDirMiB = 21504  // 21 GiB
	FargateMaxEmptyDirMiB = 204800 // 200 GiB
)

// Platforms a delegate may run on (RegisterRequest.Platform).
const (
	PlatformFargate = "fargate"
	PlatformEC2     = "ec2"
)

// Limits of a ContainerSpec.
const (
	maxContainerVolumes = 32
	maxContainerArgs    = 256
	maxContainerText    = 4096
	maxContainerScript  = 1 << 20
	maxCapabilities     = 64
	maxID               = 1<<31 - 1
)

// Validate checks c and says which field is wrong and how to fix it. It
// normalizes capabilities (upper case, without the CAP_ prefix). It is the
// check the manager applies at submit and the delegate again before it runs
// anything.
func (c *ContainerSpec) Validate() error {
	if c == nil {
		return fmt.Errorf(`a container task needs a "container" section with an image`)
	}
	if err := checkImage(c.Image); err != nil {
		return err
	}
	if len(c.Command) > 0 && c.Script != "" {
		return fmt.Errorf("container.command and container.script: give one, not both")
	}
	if len(c.Command) > maxContainerArgs {
		return fmt.Errorf("container.command: at most %d arguments", maxContainerArgs)
	}
	for i, a := range c.Command {
		if err := checkField(fmt.Sprintf("container.command[%d]", i), a, maxContainerText); err != nil {
			return err
		}
	}
	if len(c.Command) > 0 && c.Command[0] == "" {
		return fmt.Errorf("container.command[0]: the program must not be empty")
	}
	if len(c.Script) > maxContainerScript {
		return fmt.Errorf("container.script: larger than 1 MiB")
	}
	if strings.ContainsRune(c.Script, 0) {
		return fmt.Errorf("container.script: contains NUL")
	}
	if c.WorkingDir != "" {
		if err := checkAbsPath("container.working_dir", c.WorkingDir); err != nil {
			return err
		}
	}
	if r := c.Resources; r != nil {
		if r.CPU < 0 || r.CPU > 1024 || r.CPU != r.CPU {
			return fmt.Errorf("container.resources.cpu %v: use 0 (no limit) or up to 1024 cores, such as 0.5", r.CPU)
		}
		if r.MemoryMiB < 0 || (r.MemoryMiB > 0 && r.MemoryMiB < 6) || r.MemoryMiB > 1<<24 {
			return fmt.Errorf("container.resources.memory_mib %d: use 0 (no limit) or 6 to %d MiB", r.MemoryMiB, 1<<24)
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if err := sc.validate(); err != nil {
			return err
		}
	}
	if len(c.Volumes) > maxContainerVolumes {
		return fmt.Errorf("container.volumes: at most %d", maxContainerVolumes)
	}
	names := map[string]bool{}
	mounts := map[string]bool{}
	for i := range c.Volumes {
		v := &c.Volumes[i]
		f := fmt.Sprintf("container.volumes[%d]", i)
		if err := v.validate(f); err != nil {
			return err
		}
		if names[v.Name] {
			return fmt.Errorf("%s.name %q: used twice", f, v.Name)
		}
		names[v.Name] = true
		mp := path.Clean(v.MountPath)
		if mounts[mp] {
			return fmt.Errorf("%s.mount_path %q: another volume is mounted there", f, v.MountPath)
		}
		mounts[mp] = true
	}
	return nil
}

func (sc *SecurityContext) validate() error {
	for _, id := range []struct {
		name string
		v    *int64
	}{{"run_as_user", sc.RunAsUser}, {"run_as_group", sc.RunAsGroup}} {
		if id.v != nil && (*id.v < 0 || *id.v > maxID) {
			return fmt.Errorf("container.security_context.%s %d: use 0 to %d", id.name, *id.v, int64(maxID))
		}
	}
	for _, l := range []struct {
		name string
		caps []string
	}{{"add_capability", sc.AddCapability}, {"drop_capability", sc.DropCapability}} {
		if len(l.caps) > maxCapabilities {
			return fmt.Errorf("container.security_context.%s: at most %d", l.name, maxCapabilities)
		}
		for i, c := range l.caps {
			n, ok := NormalizeCapability(c)
			if !ok {
				return fmt.Errorf("container.security_context.%s[%d] %q: not a Linux capability name (such as NET_ADMIN, CHOWN or ALL)", l.name, i, truncate(c, 64))
			}
			l.caps[i] = n
		}
	}
	return nil
}

func (v *Volume) validate(f string) error {
	if v.Name == "" || len(v.Name) > 63 {
		return fmt.Errorf("%s.name: give a name of 1 to 63 letters, digits, '-', '_' or '.'", f)
	}
	for i := 0; i < len(v.Name); i++ {
		c := v.Name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%s.name %q: use letters, digits, '-', '_' or '.'", f, truncate(v.Name, 64))
		}
	}
	if err := checkAbsPath(f+".mount_path", v.MountPath); err != nil {
		return err
	}
	if path.Clean(v.MountPath) == "/" {
		return fmt.Errorf("%s.mount_path: a volume cannot be mounted on /", f)
	}
	n := 0
	for _, set := range []bool{v.EmptyDir != nil, v.HostPath != nil, v.EFS != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%s: give exactly one of empty_dir, host_path and efs", f)
	}
	switch {
	case v.EmptyDir != nil:
		if v.EmptyDir.SizeMiB < 0 {
			return fmt.Errorf("%s.empty_dir.size_mib %d: must not be negative", f, v.EmptyDir.SizeMiB)
		}
		if w := v.EmptyDir.Workspace; w != nil && !validWorkspaceKey(w.Key) {
			return fmt.Errorf("%s.empty_dir.workspace.key %q: use 1 to 64 lower-case letters and digits", f, truncate(w.Key, 64))
		}
	case v.HostPath != nil:
		if err := checkAbsPath(f+".host_path.path", v.HostPath.Path); err != nil {
			return err
		}
	case v.EFS != nil:
		e := v.EFS
		if !isAWSID(e.FilesystemID, "fs-") {
			return fmt.Errorf("%s.efs.filesystem_id %q: use an EFS file system ID such as fs-12345678", f, truncate(e.FilesystemID, 64))
		}
		if e.AccessPointID != "" && !isAWSID(e.AccessPointID, "fsap-") {
			return fmt.Errorf("%s.efs.access_point_id %q: use an EFS access point ID such as fsap-0123456789abcdef0", f, truncate(e.AccessPointID, 64))
		}
		if e.RootDirectory != "" {
			if err := checkAbsPath(f+".efs.root_directory", e.RootDirectory); err != nil {
				return err
			}
		}
		if e.AccessPointID != "" && e.RootDirectory != "" && path.Clean(e.RootDirectory) != "/" {
			return fmt.Errorf("%s.efs.root_directory: must be empty or / with an access_point_id (the access point sets the directory)", f)
		}
		if (e.IAM || e.AccessPointID != "") && !e.TransitEncryption {
			return fmt.Errorf("%s.efs.transit_encryption: must be true with iam or an access_point_id", f)
		}
	}
	return nil
}

func validWorkspaceKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// SetsWorkspace names the first volume of c that sets empty_dir.workspace
// (what only the manager may set), or "".
func (c *ContainerSpec) SetsWorkspace() string {
	if c == nil {
		return ""
	}
	for i, v := range c.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Workspace != nil {
			return fmt.Sprintf("container.volumes[%d].empty_dir.workspace", i)
		}
	}
	return ""
}

// NormalizeCapability returns a Linux capability name in upper case
// without its CAP_ prefix, and whether it is one (ALL included).
func NormalizeCapability(s string) (string, bool) {
	n := strings.ToUpper(strings.TrimSpace(s))
	n = strings.TrimPrefix(n, "CAP_")
	if n == "" || len(n) > 32 {
		return "", false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !('A' <= c && c <= 'Z' || c == '_' || (i > 0 && '0' <= c && c <= '9')) {
			return "", false
		}
	}
	return n, true
}

func checkImage(s string) error {
	if s == "" {
		return fmt.Errorf("container.image: give an image, such as alpine:3.20")
	}
	if len(s) > 512 {
		return fmt.Errorf("container.image: longer than 512 bytes")
	}
	if s[0] == '-' {
		return fmt.Errorf("container.image %q: must not start with '-'", truncate(s, 64))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-/:@", c) >= 0) {
			return fmt.Errorf("container.image %q: not an image reference (letters, digits and . _ - / : @)", truncate(s, 64))
		}
	}
	return nil
}

func checkField(f, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s: longer than %d bytes", f, max)
	}
	if strings.ContainsRune(s, 0) {
		return fmt.Errorf("%s: contains NUL", f)
	}
	return nil
}

// checkAbsPath requires a clean enough absolute path a runtime accepts in
// a mount or working directory option (no ',' or ':' that would split it).
func checkAbsPath(f, p string) error {
	if err := checkField(f, p, maxContainerText); err != nil {
		return err
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%s %q: must be an absolute path", f, truncate(p, 64))
	}
	if strings.ContainsAny(p, ",:\n\r") {
		return fmt.Errorf("%s %q: must not contain ',', ':' or a line break", f, truncate(p, 64))
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("%s %q: must not contain a \"..\" element", f, truncate(p, 64))
		}
	}
	return nil
}

// isAWSID reports whether s is prefix followed by 8 to 40 lower-case hex
// digits.
func isAWSID(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) < 8 || len(rest) > 40 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// CheckPlatform applies the seed's platform rules for a delegate on
// platform ("fargate", "ec2" or "" for a plain host) and names the field
// and the rule it breaks. Only Fargate restricts anything.
func (c *ContainerSpec) CheckPlatform(platform string) error {
	if platform != PlatformFargate || c == nil {
		return nil
	}
	if c.SecurityContext != nil && c.SecurityContext.Privileged {
		return fmt.Errorf("container.security_context.privileged: privileged containers are not supported on Fargate (use a delegate on ECS on EC2)")
	}
	for i, v := range c.Volumes {
		f := fmt.Sprintf("container.volumes[%d]", i)
		if v.HostPath != nil {
			return fmt.Errorf("%s.host_path: host_path volumes are not supported on Fargate (use empty_dir or efs, or a delegate on ECS on EC2)", f)
		}
		if e := v.EmptyDir; e != nil && e.SizeMiB != 0 && (e.SizeMiB < FargateMinEmptyDirMiB || e.SizeMiB > FargateMaxEmptyDirMiB) {
			return fmt.Errorf("%s.empty_dir.size_mib %d: on Fargate a size, when given, must be at least %d MiB (21 GiB) and at most %d MiB (200 GiB)",
				f, e.SizeMiB, FargateMinEmptyDirMiB, FargateMaxEmptyDirMiB)
		}
	}
	return nil
}
