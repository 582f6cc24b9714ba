package containers

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
)

// Settings of the delegate's policy for what container tasks may ask of
// its host (read by package config).
const (
	EnvContainerAllowPrivileged = "LEGATE_CONTAINER_ALLOW_PRIVILEGED"
	EnvContainerHostPaths       = "LEGATE_CONTAINER_HOST_PATHS"
)

// checkHost applies the delegate's policy before anything starts: a
// privileged container, or one adding capabilities beyond the runtime's
// defaults, runs only with AllowPrivileged, and a host_path volume only
// under one of HostPaths (its symbolic links resolved, so that a link
// cannot lead out). A refusal names the field and the setting.
func (c *Runtime) checkHost(cs *protocol.ContainerSpec) error {
	if sc := cs.SecurityContext; sc != nil && !c.AllowPrivileged {
		for _, what := range cs.HostAccess() {
			if strings.HasPrefix(what, "container.security_context.") {
				return fmt.Errorf("%s: this delegate does not run privileged containers or add capabilities beyond the runtime's defaults (its operator may allow them with %s=true)",
					what, EnvContainerAllowPrivileged)
			}
		}
	}
	for i, v := range cs.Volumes {
		if v.HostPath == nil {
			continue
		}
		p := path.Clean(v.HostPath.Path)
		resolved := p
		if r, err := filepath.EvalSymlinks(p); err == nil {
			resolved = r
		}
		if !protocol.HostPathAllowed(p, c.HostPaths) || !protocol.HostPathAllowed(resolved, c.HostPaths) {
			allowed := strings.Join(c.HostPaths, ",")
			if allowed == "" {
				return fmt.Errorf("container.volumes[%d].host_path %s: this delegate mounts no host path (its operator may list the directories allowed in %s, such as /data,/cache)",
					i, p, EnvContainerHostPaths)
			}
			return fmt.Errorf("container.volumes[%d].host_path %s: not under a directory this delegate allows (%s=%s)", i, resolved, EnvContainerHostPaths, allowed)
		}
	}
	return nil
}
