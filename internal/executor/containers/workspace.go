package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
)

// A pipeline stage's workspace is a runtime volume (legate-ws-KEY) its
// container steps mount and its deploy steps read on the delegate's own
// filesystem, at the volume's mount point; the runtime keeps it until the
// stage's last step that uses it (or the next start's sweep).

// WorkspaceVolume is the runtime volume of the stage workspace key.
func WorkspaceVolume(key string) string { return "legate-ws-" + key }

// ErrNoWorkspace is WorkspaceDir's error when the workspace's volume is
// not in the runtime: the step of the stage that made it ran on another
// delegate, or this delegate restarted since and removed it.
var ErrNoWorkspace = errors.New("the stage workspace's volume is not on this delegate")

// WorkspaceDir is the host directory of the volume of ws (its mount
// point), where a deploy step reads what a container step of its stage
// wrote.
func (c *Runtime) WorkspaceDir(ctx context.Context, ws *protocol.DeployWorkspace) (string, error) {
	if c.Pods != nil {
		return "", fmt.Errorf("the stage workspace %q is not on this delegate: it runs container tasks as Kubernetes pods, which keep no stage workspace (run the stage on a delegate with podman or docker)", ws.Name)
	}
	vol := WorkspaceVolume(ws.Key)
	if c.api != nil {
		return c.apiWorkspaceDir(ctx, ws, vol)
	}
	out, err := c.runtimeCmd(ctx, "volume", "inspect", "--format", "{{.Mountpoint}}", vol)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoWorkspace, err)
	}
	dir := strings.TrimSpace(out)
	if !filepath.IsAbs(dir) || strings.ContainsAny(dir, "\n") {
		return "", faultf("%s volume inspect %s: no mount point in its answer %q", c.Name, vol, truncateText(dir, 200))
	}
	return dir, nil
}

// apiWorkspaceDir is WorkspaceDir through the Docker Engine API. The
// mount point is a path on the daemon's host: a delegate in a container
// (the reason to speak the API over a mounted socket) reads it only when
// that directory is mounted into it at the same path, so it is checked
// here and refused with what to do, rather than read as an empty stage.
func (c *Runtime) apiWorkspaceDir(ctx context.Context, ws *protocol.DeployWorkspace, vol string) (string, error) {
	dir, found, err := c.api.volumeMountpoint(ctx, vol)
	if err != nil {
		return "", faultf("inspect the volume %s through the Docker API socket %s: %v", vol, c.Path, err)
	}
	if !found {
		return "", fmt.Errorf("%w: no volume %s on the Docker daemon of %s", ErrNoWorkspace, vol, c.Path)
	}
	if !filepath.IsAbs(dir) || strings.ContainsAny(dir, "\n") {
		return "", faultf("the Docker API's volume %s: no mount point in its answer %q", vol, truncateText(dir, 200))
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", faultf("the stage workspace %q is the volume %s at %s on the Docker daemon's host, which this delegate cannot read (it reaches the daemon through its socket): mount the host's volumes directory into the delegate's container at the same path, or run the stage's deploy steps on a delegate with the podman or docker CLI on that host",
			ws.Name, vol, dir)
	}
	return dir, nil
}

func truncateText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// RemoveWorkspace removes the volume of ws when its step is the stage's
// last to use it (a fresh context: after a cancellation too), writing to
// out what it could not remove.
func (c *Runtime) RemoveWorkspace(ws *protocol.DeployWorkspace, out io.Writer) {
	if ws == nil || !ws.Remove || c.Pods != nil || ws.Key == "" {
		return
	}
	if out == nil {
		out = io.Discard
	}
	if c.api != nil {
		if err := c.api.removeVolume(context.Background(), WorkspaceVolume(ws.Key)); err != nil {
			fmt.Fprintf(out, "\n[legate: remove the stage workspace %q: %v]\n", ws.Name, err)
		}
		return
	}
	if o, err := c.runtimeCmd(context.Background(), "volume", "rm", "--force", WorkspaceVolume(ws.Key)); err != nil && !noSuch(o) {
		fmt.Fprintf(out, "\n[legate: remove the stage workspace %q: %v]\n", ws.Name, err)
	}
}
