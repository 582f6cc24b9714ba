package cli

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/legate-dev/legate/internal/protocol"
)

// containerFlags are the flags of `legate task run` for a container task.
type containerFlags struct {
	image        string
	workdir      string
	cpu          float64
	memory       string
	privileged   bool
	readOnlyRoot bool
	runAsUser    int64
	runAsGroup   int64
	addCaps      []string
	dropCaps     []string
	volumes      []string
}

// containerFlagNames are the flags only a container task takes.
var containerFlagNames = []string{"image", "workdir", "cpu", "memory", "privileged", "read-only-root",
	"run-as-user", "run-as-group", "add-cap", "drop-cap", "volume"}

func (c *containerFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&c.image, "image", "", "run the task in a container of this image (makes it a container task)")
	fl.StringVar(&c.workdir, "workdir", "", "working directory in the container (absolute; default: the image's)")
	fl.Float64Var(&c.cpu, "cpu", 0, "CPU limit of the container in cores, e.g. 0.5 (0 = no limit)")
	fl.StringVar(&c.memory, "memory", "", "memory limit of the container: MiB, or with a unit: 512Mi, 2Gi (default: no limit)")
	fl.BoolVar(&c.privileged, "privileged", false, "run the container privileged (refused on Fargate)")
	fl.BoolVar(&c.readOnlyRoot, "read-only-root", false, "mount the container's root file system read-only")
	fl.Int64Var(&c.runAsUser, "run-as-user", 0, "UID the container's process runs as (default: the image's user)")
	fl.Int64Var(&c.runAsGroup, "run-as-group", 0, "GID the container's process runs as (default: the image's)")
	fl.StringSliceVar(&c.addCaps, "add-cap", nil, "Linux capability to add, e.g. NET_ADMIN, or ALL (repeatable or comma-separated)")
	fl.StringSliceVar(&c.dropCaps, "drop-cap", nil, "Linux capability to drop, e.g. CHOWN, or ALL; drops apply before adds (repeatable or comma-separated)")
	fl.StringArrayVar(&c.volumes, "volume", nil, "mount a volume: [NAME=]empty_dir:/PATH[:SIZE_MIB], [NAME=]host_path:/HOST:/PATH[:ro] or [NAME=]efs:FS_ID:/PATH[:root=/DIR,tls,iam,ap=FSAP_ID] (repeatable)")
}

// containerSpec builds a container task's section from the flags, the
// script (if any) and the command (the arguments after --).
func (c *containerFlags) containerSpec(fl *pflag.FlagSet, script string, command []string) (*protocol.ContainerSpec, error) {
	if c.image == "" {
		return nil, usagef("a container task needs --image")
	}
	cs := &protocol.ContainerSpec{Image: c.image, Script: script, Command: command, WorkingDir: c.workdir}
	if c.cpu != 0 || c.memory != "" {
		mib, err := parseMiB(c.memory)
		if err != nil {
			return nil, err
		}
		cs.Resources = &protocol.ContainerResources{CPU: c.cpu, MemoryMiB: mib}
	}
	sc := protocol.SecurityContext{Privileged: c.privileged, ReadOnlyRootFilesystem: c.readOnlyRoot, AddCapability: c.addCaps, DropCapability: c.dropCaps}
	if fl.Changed("run-as-user") {
		u := c.runAsUser
		sc.RunAsUser = &u
	}
	if fl.Changed("run-as-group") {
		g := c.runAsGroup
		sc.RunAsGroup = &g
	}
	if sc.Privileged || sc.ReadOnlyRootFilesystem || sc.RunAsUser != nil || sc.RunAsGroup != nil || len(sc.AddCapability) > 0 || len(sc.DropCapability) > 0 {
		cs.SecurityContext = &sc
	}
	for _, v := range c.volumes {
		vol, err := parseVolume(v)
		if err != nil {
			return nil, usagef("--volume %q: %v", v, err)
		}
		cs.Volumes = append(cs.Volumes, vol)
	}
	nameVolumes(cs.Volumes)
	if err := cs.Validate(); err != nil {
		return nil, usageError{err.Error()}
	}
	return cs, nil
}

// parseMiB reads a memory size: a number of MiB, or a number with a unit
// (Mi/M/m, Gi/G/g); "" is 0.
func parseMiB(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"Gi", 1024}, {"Mi", 1}, {"G", 1024}, {"M", 1}, {"g", 1024}, {"m", 1}} {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > 1<<40/mult {
		return 0, usagef("--memory %q: want a positive size in MiB, or with a unit such as 512Mi or 2Gi", s)
	}
	return n * mult, nil
}

// parseVolume reads one --volume value:
//
//	[NAME=]empty_dir:/PATH[:SIZE_MIB]
//	[NAME=]host_path:/HOST:/PATH[:ro]
//	[NAME=]efs:FS_ID:/PATH[:root=/DIR,tls,iam,ap=FSAP_ID]
//
// A volume without a NAME is named by nameVolumes.
func parseVolume(s string) (protocol.Volume, error) {
	var v protocol.Volume
	rest := s
	if name, r, ok := strings.Cut(s, "="); ok && !strings.Contains(name, ":") {
		v.Name, rest = name, r
		if name == "" {
			return v, fmt.Errorf("the name before = is empty")
		}
	}
	parts := strings.Split(rest, ":")
	switch parts[0] {
	case "empty_dir":
		if len(parts) < 2 || len(parts) > 3 {
			return v, fmt.Errorf("want empty_dir:/PATH or empty_dir:/PATH:SIZE_MIB")
		}
		v.MountPath, v.EmptyDir = parts[1], &protocol.EmptyDirVolume{}
		if len(parts) == 3 {
			n, err := strconv.ParseInt(parts[2], 10, 64)
			if err != nil || n <= 0 {
				return v, fmt.Errorf("size %q: want a positive number of MiB", parts[2])
			}
			v.EmptyDir.SizeMiB = n
		}
	case "host_path":
		if len(parts) < 3 || len(parts) > 4 || (len(parts) == 4 && parts[3] != "ro") {
			return v, fmt.Errorf("want host_path:/HOST:/PATH or host_path:/HOST:/PATH:ro")
		}
		v.MountPath, v.HostPath = parts[2], &protocol.HostPathVolume{Path: parts[1], ReadOnly: len(parts) == 4}
	case "efs":
		if len(parts) < 3 || len(parts) > 4 {
			return v, fmt.Errorf("want efs:FS_ID:/PATH or efs:FS_ID:/PATH:OPTIONS (root=/DIR,tls,iam,ap=FSAP_ID)")
		}
		v.MountPath, v.EFS = parts[2], &protocol.EFSVolume{FilesystemID: parts[1]}
		if len(parts) == 4 {
			for _, o := range strings.Split(parts[3], ",") {
				k, val, _ := strings.Cut(o, "=")
				switch k {
				case "root":
					v.EFS.RootDirectory = val
				case "tls":
					v.EFS.TransitEncryption = true
				case "iam":
					v.EFS.IAM = true
				case "ap":
					v.EFS.AccessPointID = val
				default:
					return v, fmt.Errorf("efs option %q: want root=/DIR, tls, iam or ap=FSAP_ID", o)
				}
			}
		}
	default:
		return v, fmt.Errorf("unknown volume type %q: want empty_dir, host_path or efs", parts[0])
	}
	return v, nil
}

// nameVolumes names each unnamed volume after its mount path's last
// element ("/ws" is ws), or vol-N when that is empty, taken or not a
// valid name.
func nameVolumes(vols []protocol.Volume) {
	taken := map[string]bool{}
	for _, v := range vols {
		taken[v.Name] = true
	}
	for i := range vols {
		if vols[i].Name != "" {
			continue
		}
		name := path.Base(path.Clean("/" + vols[i].MountPath))
		if !validVolumeName(name) || taken[name] {
			for n := i + 1; ; n++ {
				if name = "vol-" + strconv.Itoa(n); !taken[name] {
					break
				}
			}
		}
		taken[name] = true
		vols[i].Name = name
	}
}

func validVolumeName(s string) bool {
	if s == "" || len(s) > 63 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')) {
			return false
		}
	}
	return true
}

// checkNoContainerFlags refuses container flags on another task type.
func checkNoContainerFlags(cmd *cobra.Command, typ string) error {
	for _, name := range containerFlagNames {
		if cmd.Flags().Changed(name) {
			return usagef("--%s is for container tasks (--image IMAGE), not %s tasks", name, typ)
		}
	}
	return nil
}
