package manifest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
)

// This file holds the settings every kind shares beyond the delegate's
// environment: automatic upgrades (the default), the root variant, the
// size presets and the ECS hostname.

// Sizes, in the order help texts show them (seed 001's delegate sizes).
const (
	SizeLaptop = "laptop"
	SizeSmall  = "small"
	SizeMedium = "medium"
	SizeLarge  = "large"
)

// Sizes lists the size presets.
func Sizes() []string { return []string{SizeLaptop, SizeSmall, SizeMedium, SizeLarge} }

// What a size is made of. The delegate process itself is small (idle
// about 12 MB, at most about 31 MiB while a task streams its output as
// fast as it can; BENCHMARKS.md): its requests are its own need doubled
// plus a share per task slot, and its limits are room for the tasks it
// runs (which run in its container, pod, task or unit). The CPU limits
// are the CPUs of seed 001's sizes; the task capacity is tasksPerCPU
// tasks per CPU of the limit.
const (
	sizeDelegateMemMiB = 64  // the delegate's ~31 MiB streaming peak, doubled
	sizeDelegateMilli  = 50  // the delegate's own CPU request (the default request)
	sizeSlotMemMiB     = 32  // requested per task slot
	sizeSlotMilli      = 25  // requested per task slot
	sizeSlotLimitMiB   = 256 // the memory limit per task slot
	tasksPerCPU        = 4
)

// Size is one preset: the delegate's task capacity, its requests and
// limits (Kubernetes quantities), the ECS/Fargate task size (CPU units and
// MiB, a pair Fargate accepts), docker's --cpus and --memory, and
// systemd's CPUQuota and MemoryMax.
type Size struct {
	Name                    string
	Capacity                int
	CPURequest, MemRequest  string
	CPULimit, MemLimit      string
	ECSCPU, ECSMemory       string
	DockerCPUs, DockerMem   string
	SystemdCPU, SystemdMem  string
	limitMilli, limitMemMiB int
}

// SizeOf returns the preset of name.
func SizeOf(name string) (Size, bool) {
	var milli int
	switch name {
	case SizeLaptop:
		milli = 500
	case SizeSmall:
		milli = 1000
	case SizeMedium:
		milli = 2000
	case SizeLarge:
		milli = 4000
	default:
		return Size{}, false
	}
	capacity := milli * tasksPerCPU / 1000
	limitMiB := capacity * sizeSlotLimitMiB
	// Fargate's smallest memory for the CPU: 2 GiB per vCPU (at least
	// 1 GiB), above the limit, so the limit fits in the task.
	ecsMem := max(2*milli*1024/1000, 1024)
	return Size{
		Name:        name,
		Capacity:    capacity,
		CPURequest:  strconv.Itoa(sizeDelegateMilli+sizeSlotMilli*capacity) + "m",
		MemRequest:  strconv.Itoa(sizeDelegateMemMiB+sizeSlotMemMiB*capacity) + "Mi",
		CPULimit:    cpuQuantity(milli),
		MemLimit:    memQuantity(limitMiB),
		ECSCPU:      strconv.Itoa(milli * 1024 / 1000),
		ECSMemory:   strconv.Itoa(ecsMem),
		DockerCPUs:  strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64),
		DockerMem:   strconv.Itoa(limitMiB) + "m",
		SystemdCPU:  strconv.Itoa(milli/10) + "%",
		SystemdMem:  strconv.Itoa(limitMiB) + "M",
		limitMilli:  milli,
		limitMemMiB: limitMiB,
	}, true
}

func cpuQuantity(milli int) string {
	if milli%1000 == 0 {
		return strconv.Itoa(milli / 1000)
	}
	return strconv.Itoa(milli) + "m"
}

func memQuantity(mib int) string {
	if mib%1024 == 0 {
		return strconv.Itoa(mib/1024) + "Gi"
	}
	return strconv.Itoa(mib) + "Mi"
}

// capacityEnv is the variable a size sets: the delegate's task capacity.
const capacityEnv = "DELEGATE_TASK_CAPACITY"

// normalizeOptions checks and defaults upgrade, size, run-as-root and
// hostname; the kinds read them with the helpers below.
func normalizeOptions(p *Params) error {
	switch p.Upgrade {
	case "":
		if !p.Service {
			p.Upgrade = protocol.UpgradeAutomatic
		}
	case protocol.UpgradeSelfManaged, protocol.UpgradeAutomatic:
	default:
		return fmt.Errorf("upgrade %q: use %s (the default: upgrades with no downtime) or %s (you upgrade)", p.Upgrade, protocol.UpgradeAutomatic, protocol.UpgradeSelfManaged)
	}
	if p.Size != "" {
		if _, ok := SizeOf(p.Size); !ok {
			return fmt.Errorf("size %q: use one of %s (docs/install.md has what each gives)", p.Size, strings.Join(Sizes(), ", "))
		}
		if p.CPU != "" || p.Memory != "" {
			return fmt.Errorf("size %s sets cpu and memory: give size or cpu and memory, not both", p.Size)
		}
		for _, e := range p.Env {
			if e.Name == capacityEnv {
				return fmt.Errorf("env %s is set by size %s: give one of them", capacityEnv, p.Size)
			}
		}
		sz, _ := SizeOf(p.Size)
		switch p.Kind {
		case KindKubernetes, KindHelm:
			p.CPU, p.Memory = sz.CPURequest, sz.MemRequest
		case KindECS, KindFargate:
			p.CPU, p.Memory = sz.ECSCPU, sz.ECSMemory
		}
	}
	if p.Hostname != "" {
		if !dnsSubdomain(strings.ToLower(p.Hostname)) || len(p.Hostname) > 63 {
			return fmt.Errorf("hostname %q: use letters, digits, '-' and '.', starting and ending with a letter or digit, at most 63 characters", p.Hostname)
		}
		if p.Replicas > 1 {
			return fmt.Errorf("hostname %q names one instance, and replicas %d would all have it (and be one instance): leave out hostname, or write one task definition per hostname", p.Hostname, p.Replicas)
		}
		for _, e := range p.Env {
			if e.Name == "DELEGATE_HOSTNAME" {
				return fmt.Errorf("env DELEGATE_HOSTNAME: use hostname")
			}
		}
	}
	return nil
}

// automatic reports whether legate watcher (containers, systemd) or the
// upgrader CronJob (Kubernetes, Helm) upgrades the delegate.
func automatic(p Params) bool { return p.Upgrade == protocol.UpgradeAutomatic }

// ImageWorkDir is the image's working directory, a volume its user owns:
// the watcher keeps its versions there.
const ImageWorkDir = "/var/lib/legate"

// containerCommand is the command of the delegate's container: the
// delegate itself, or legate watcher, which runs it, keeps it running and
// upgrades it from the manager's signed releases.
func containerCommand(p Params) []string {
	if automatic(p) {
		return []string{"watcher", "--dir", ImageWorkDir}
	}
	return []string{"delegate"}
}

// commandSeq is containerCommand as a YAML or JSON sequence.
func commandSeq(p Params) seq {
	s := seq{}
	for _, a := range containerCommand(p) {
		s = append(s, a)
	}
	return s
}

// sizeEnv is the environment a size adds: the task capacity.
func sizeEnv(p Params) []protocol.EnvVar {
	sz, ok := SizeOf(p.Size)
	if !ok {
		return nil
	}
	return []protocol.EnvVar{{Name: capacityEnv, Value: strconv.Itoa(sz.Capacity)}}
}

// k8sOptions adds to a delegate container what the options ask of it:
// limits (size) and the root security context.
func k8sOptions(p Params, c mapping) mapping {
	if sz, ok := SizeOf(p.Size); ok {
		for i := range c {
			if c[i].key == "resources" {
				c[i].val = mapping{
					{"requests", mapping{{"cpu", p.CPU}, {"memory", p.Memory}}},
					{"limits", mapping{{"cpu", sz.CPULimit}, {"memory", sz.MemLimit}}},
				}
			}
		}
	}
	if p.RunAsRoot {
		c = append(c, field{"securityContext", rootSecurityContext()})
	}
	return c
}

// rootSecurityContext runs the container as root in the image's group.
func rootSecurityContext() mapping {
	return mapping{{"runAsUser", 0}, {"runAsGroup", 0}, {"runAsNonRoot", false}}
}

// dockerOptions are the docker run flags of the options.
func dockerOptions(p Params) []string {
	var flags []string
	if p.RunAsRoot {
		flags = append(flags, "--user 0")
	}
	if sz, ok := SizeOf(p.Size); ok {
		flags = append(flags, "--cpus "+sz.DockerCPUs, "--memory "+sz.DockerMem)
	}
	return flags
}

// composeOptions adds the options to a compose service.
func composeOptions(p Params, svc mapping) mapping {
	if p.RunAsRoot {
		svc = append(svc, field{"user", "0"})
	}
	if sz, ok := SizeOf(p.Size); ok {
		svc = append(svc, field{"cpus", sz.DockerCPUs}, field{"mem_limit", sz.DockerMem})
	}
	return svc
}

// systemdOptions are the unit lines of the options: the user, the command,
// and the size's limits.
func systemdOptions(p Params, workdir string) (user, exec, limits string) {
	user = systemdUser
	if p.RunAsRoot {
		user = "root"
	}
	exec = systemdBinary + " delegate"
	if automatic(p) {
		exec = systemdBinary + " watcher --dir " + workdir
	}
	if sz, ok := SizeOf(p.Size); ok {
		limits = "CPUQuota=" + sz.SystemdCPU + "\nMemoryMax=" + sz.SystemdMem + "\n"
	}
	return user, exec, limits
}

// ecsHealthCommand is the container health check of ECS and Fargate: the
// delegate's /healthz; under the watcher the delegate has the next port
// while a new version runs beside it and keeps it after the switch (they
// alternate), so either port answering is healthy.
func ecsHealthCommand(p Params) seq {
	check := "curl -fsS http://127.0.0.1:" + strconv.Itoa(HTTPPort) + "/healthz"
	if automatic(p) {
		check += " || curl -fsS http://127.0.0.1:" + strconv.Itoa(HTTPPort+1) + "/healthz"
	}
	return seq{"CMD-SHELL", check + " || exit 1"}
}

// helmResources are the chart's resources: the requests, and with a size
// its limits.
func helmResources(p Params) mapping {
	r := mapping{{"requests", mapping{{"cpu", p.CPU}, {"memory", p.Memory}}}}
	if sz, ok := SizeOf(p.Size); ok {
		r = append(r, field{"limits", mapping{{"cpu", sz.CPULimit}, {"memory", sz.MemLimit}}})
	}
	return r
}

// helmOptions are the chart values of the options: upgrade (the chart's
// default is auto too) and runAsRoot.
func helmOptions(p Params) []field {
	f := []field{{"upgrade", p.Upgrade}}
	if p.RunAsRoot {
		f = append(f, field{"runAsRoot", true})
	}
	return f
}
