package config

import (
	"fmt"
	"path"
	"strings"
)

// MaxContainerHostPaths bounds the entries of LEGATE_CONTAINER_HOST_PATHS.
const MaxContainerHostPaths = 64

// containerPolicy reads who may run what without a sandbox and what
// container tasks may ask of the host: LEGATE_ALLOW_MIXED_SCOPES,
// LEGATE_CONTAINER_ALLOW_PRIVILEGED and LEGATE_CONTAINER_HOST_PATHS.
func (d *Delegate) containerPolicy(get func(string) string) error {
	var err error
	if d.AllowMixedScopes, err = parseBool("LEGATE_ALLOW_MIXED_SCOPES", get("LEGATE_ALLOW_MIXED_SCOPES")); err != nil {
		return err
	}
	if d.ContainerPrivileged, err = parseBool("LEGATE_CONTAINER_ALLOW_PRIVILEGED", get("LEGATE_CONTAINER_ALLOW_PRIVILEGED")); err != nil {
		return err
	}
	d.ContainerHostPaths, err = ParseHostPaths(get("LEGATE_CONTAINER_HOST_PATHS"))
	return err
}

// ParseHostPaths reads LEGATE_CONTAINER_HOST_PATHS: comma-separated
// absolute directories, cleaned; "" means none.
func ParseHostPaths(v string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !path.IsAbs(p) || strings.ContainsAny(p, "\x00:") {
			return nil, fmt.Errorf("LEGATE_CONTAINER_HOST_PATHS: %q is not an absolute path without ':' (list directories such as /data,/cache)", p)
		}
		out = append(out, path.Clean(p))
	}
	if len(out) > MaxContainerHostPaths {
		return nil, fmt.Errorf("LEGATE_CONTAINER_HOST_PATHS: %d paths, at most %d", len(out), MaxContainerHostPaths)
	}
	return out, nil
}
