package protocol

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// PermTaskPrivileged is the permission a task needs, besides task:run,
// when its container asks for access to the delegate's host (see
// ContainerSpec.HostAccess). The delegate's own policy must allow it too.
const PermTaskPrivileged = "task:privileged"

// defaultCapabilities are the capabilities podman and docker give a
// container by default: adding one of them asks for nothing more.
func defaultCapabilities() []string {
	return []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
		"NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
}

// HostAccess lists what the container asks of the delegate's host beyond
// an ordinary container, one entry per field ("container.security_context.privileged",
// "container.volumes[0].host_path /", "container.security_context.add_capability SYS_ADMIN"):
// privileged mode, host paths and capabilities that runtimes do not give
// by default. Nil for none.
func (c *ContainerSpec) HostAccess() []string {
	if c == nil {
		return nil
	}
	var out []string
	if sc := c.SecurityContext; sc != nil {
		if sc.Privileged {
			out = append(out, "container.security_context.privileged")
		}
		for _, cp := range sc.AddCapability {
			name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(cp)), "CAP_")
			if !slices.Contains(defaultCapabilities(), name) {
				out = append(out, "container.security_context.add_capability "+name)
			}
		}
	}
	for i, v := range c.Volumes {
		if v.HostPath != nil {
			out = append(out, fmt.Sprintf("container.volumes[%d].host_path %s", i, path.Clean(v.HostPath.Path)))
		}
	}
	return out
}

// HostPathAllowed reports whether p (an absolute host path) is one of
// allowed or lies under one; ".." cannot climb out (the path is cleaned).
func HostPathAllowed(p string, allowed []string) bool {
	p = path.Clean(p)
	for _, a := range allowed {
		a = path.Clean(a)
		if p == a || a == "/" || strings.HasPrefix(p, a+"/") {
			return true
		}
	}
	return false
}
