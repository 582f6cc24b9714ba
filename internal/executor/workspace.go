package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/legate-dev/legate/internal/executor/containers"
	"github.com/legate-dev/legate/internal/protocol"
)

// A deploy task's workspace is the runtime volume an earlier container
// step of its stage wrote (legate-ws-KEY, see package containers). The
// delegate reads what the task names of it through an os.Root at the
// volume's mount point: no
// path, symlink or ".." leads outside it, only regular files are read
// (opened without blocking, checked once open), and what is read is
// bounded. The deploy's child process or helm gets the content read,
// nothing else of the volume.

// writers names the steps that should have written ws, for errors.
func writers(ws *protocol.DeployWorkspace) string {
	switch len(ws.WrittenBy) {
	case 0:
		return "an earlier step of the stage"
	case 1:
		return "step " + ws.WrittenBy[0]
	}
	return "steps " + strings.Join(ws.WrittenBy, ", ")
}

// openWorkspace opens the root of the volume of ws in c's runtime.
func openWorkspace(ctx context.Context, c ContainerRuntime, ws *protocol.DeployWorkspace) (*os.Root, error) {
	vol := containers.WorkspaceVolume(ws.Key)
	if c == nil {
		return nil, fmt.Errorf("the stage workspace %q (volume %s) is not on this delegate: it has no container runtime, and %s of the stage wrote it on a delegate that has one", ws.Name, vol, writers(ws))
	}
	dir, err := c.WorkspaceDir(ctx, ws)
	if errors.Is(err, containers.ErrNoWorkspace) {
		return nil, fmt.Errorf("the stage workspace %q (volume %s) is not on this delegate: %s of the stage, which made it, ran on another delegate, or this delegate restarted since and removed it", ws.Name, vol, writers(ws))
	}
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		// The runtime keeps its volumes where this delegate's user cannot
		// read (docker's, as another user than root): another delegate
		// may.
		return nil, faultf("read the stage workspace %q at %s: %v (the delegate's user must be able to read its container runtime's volumes: rootless podman, or root)", ws.Name, dir, err)
	}
	return root, nil
}

// workspaceError says why what of a workspace cannot be read: missing
// (naming the steps that should have written it), leading outside it, or
// else.
func workspaceError(what, p string, ws *protocol.DeployWorkspace, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s is not in the workspace %q: %s of the stage should have written it there", what, p, ws.Name, writers(ws))
	case strings.Contains(err.Error(), "path escapes from parent"):
		return fmt.Errorf("%s %s leads outside the workspace %q (a symlink out of it): refused, only what is in the workspace is read", what, p, ws.Name)
	}
	return fmt.Errorf("%s %s in the workspace %q: %v", what, p, ws.Name, err)
}

// openRegular opens name in root for reading: a regular file only (a
// FIFO or device is refused, not waited on).
func openRegular(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		f.Close()
		return nil, nil, fmt.Errorf("not a regular file or directory (%s)", fi.Mode().Type())
	}
	return f, fi, nil
}

// manifestExt reports whether a directory's file is a manifest to read.
func manifestExt(name string) bool {
	switch path.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readManifestFiles reads files of root: each a file, or a directory whose
// *.yaml, *.yml and *.json files (not its subdirectories') are read in
// name order; at most room documents' files and maxBytes bytes in all.
// names are the paths read, in order.
func readManifestFiles(root *os.Root, files []string, ws *protocol.DeployWorkspace, room, maxBytes int) (texts, names []string, err error) {
	total := 0
	read := func(name string, f *os.File) error {
		if len(texts) == room {
			return fmt.Errorf("kubernetes files: more than %d manifests with the inline ones (at most %d)", room, protocol.MaxKubernetesManifests)
		}
		b, err := io.ReadAll(io.LimitReader(f, int64(maxBytes-total)+1))
		if err != nil {
			return workspaceError("kubernetes file", name, ws, err)
		}
		total += len(b)
		if total > maxBytes {
			return fmt.Errorf("kubernetes files: the manifests are larger than %d bytes in all (with the inline ones): at most %d", maxBytes, protocol.MaxKubernetesManifestBytes)
		}
		if strings.TrimSpace(string(b)) == "" {
			return fmt.Errorf("kubernetes file %s in the workspace %q is empty: %s of the stage should have written a manifest there", name, ws.Name, writers(ws))
		}
		if err := protocol.CheckManifestText(string(b)); err != nil {
			return fmt.Errorf("kubernetes file %s in the workspace %q: %v", name, ws.Name, err)
		}
		texts, names = append(texts, string(b)), append(names, name)
		return nil
	}
	for _, p := range files {
		f, fi, err := openRegular(root, p)
		if err != nil {
			return nil, nil, workspaceError("kubernetes file", p, ws, err)
		}
		if !fi.IsDir() {
			err = read(p, f)
			f.Close()
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		entries, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return nil, nil, workspaceError("kubernetes directory", p, ws, err)
		}
		var inDir []string
		for _, e := range entries {
			if manifestExt(e.Name()) && !e.IsDir() {
				inDir = append(inDir, path.Join(p, e.Name()))
			}
		}
		slices.Sort(inDir)
		if len(inDir) == 0 {
			return nil, nil, fmt.Errorf("kubernetes directory %s in the workspace %q holds no .yaml, .yml or .json file: %s of the stage should have written the manifests there", p, ws.Name, writers(ws))
		}
		for _, name := range inDir {
			f, fi, err := openRegular(root, name)
			if err == nil && fi.IsDir() {
				f.Close()
				err = errors.New("a directory")
			}
			if err != nil {
				return nil, nil, workspaceError("kubernetes file", name, ws, err)
			}
			err = read(name, f)
			f.Close()
			if err != nil {
				return nil, nil, err
			}
		}
	}
	return texts, names, nil
}

// copyChart copies the chart at p in root (a directory, or a .tgz
// archive) into dst, a directory of the task's own; it returns the path
// helm is given. At most MaxHelmChartFiles files, MaxHelmChartBytes bytes
// and MaxHelmChartDepth levels; symlinks are followed inside the
// workspace only, and what they point to is copied.
func copyChart(root *os.Root, p string, ws *protocol.DeployWorkspace, dst string) (string, error) {
	f, fi, err := openRegular(root, p)
	if err != nil {
		return "", workspaceError("helm chart_path", p, ws, err)
	}
	defer f.Close()
	if !fi.IsDir() {
		if !strings.HasSuffix(p, ".tgz") && !strings.HasSuffix(p, ".tar.gz") {
			return "", fmt.Errorf("helm chart_path %s in the workspace %q is a file: give a chart's directory or a .tgz archive", p, ws.Name)
		}
		out := filepath.Join(dst, "chart.tgz")
		c := chartCopy{}
		return out, c.file(f, p, out)
	}
	out := filepath.Join(dst, "chart")
	c := chartCopy{root: root, ws: ws}
	return out, c.dir(f, p, out, 0)
}

// chartCopy is one copy of a chart directory and its bounds.
type chartCopy struct {
	root         *os.Root
	ws           *protocol.DeployWorkspace
	files, bytes int
}

func (c *chartCopy) dir(d *os.File, p, out string, depth int) error {
	if depth > protocol.MaxHelmChartDepth {
		return fmt.Errorf("helm chart_path: %s is more than %d directories deep (a symlink loop?)", p, protocol.MaxHelmChartDepth)
	}
	if err := os.Mkdir(out, 0o700); err != nil {
		return faultf("copy the chart: %v", err)
	}
	entries, err := d.ReadDir(-1)
	if err != nil {
		return workspaceError("helm chart directory", p, c.ws, err)
	}
	for _, e := range entries {
		name := path.Join(p, e.Name())
		f, fi, err := openRegular(c.root, name)
		if err != nil {
			return workspaceError("helm chart file", name, c.ws, err)
		}
		if fi.IsDir() {
			err = c.dir(f, name, filepath.Join(out, e.Name()), depth+1)
		} else {
			err = c.file(f, name, filepath.Join(out, e.Name()))
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *chartCopy) file(f *os.File, name, out string) error {
	c.files++
	if c.files > protocol.MaxHelmChartFiles {
		return fmt.Errorf("helm chart_path: the chart has more than %d files", protocol.MaxHelmChartFiles)
	}
	w, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return faultf("copy the chart: %v", err)
	}
	n, err := io.Copy(w, io.LimitReader(f, int64(protocol.MaxHelmChartBytes-c.bytes)+1))
	c.bytes += int(n)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if c.bytes > protocol.MaxHelmChartBytes {
		return fmt.Errorf("helm chart_path: the chart is larger than %d bytes", protocol.MaxHelmChartBytes)
	}
	if err != nil {
		return fmt.Errorf("helm chart file %s: %v", name, err)
	}
	return nil
}

// removeWorkspace removes the volume of ws when its step is the stage's
// last to use it (see containers.Runtime.RemoveWorkspace).
func removeWorkspace(c ContainerRuntime, ws *protocol.DeployWorkspace, out io.Writer) {
	if c != nil && ws != nil {
		c.RemoveWorkspace(ws, out)
	}
}

// childSpec is the spec the kubernetes child gets: with the files of its
// workspace read and appended to its manifests, and no workspace.
func (k *kubeRun) childSpec(ctx context.Context) (protocol.KubernetesSpec, error) {
	spec := k.spec
	ws := spec.Workspace
	if ws == nil {
		return spec, nil
	}
	root, err := openWorkspace(ctx, k.containers, ws)
	if err != nil {
		return spec, err
	}
	defer root.Close()
	inline := 0
	for _, m := range spec.Manifests {
		inline += len(m)
	}
	texts, names, err := readManifestFiles(root, spec.Files, ws, protocol.MaxKubernetesManifests-len(spec.Manifests), protocol.MaxKubernetesManifestBytes-inline)
	if err != nil {
		return spec, err
	}
	fmt.Fprintf(k.out, "read %d manifest file(s) from the workspace %s: %s\n", len(names), ws.Name, strings.Join(names, ", "))
	spec.Manifests = append(slices.Clone(spec.Manifests), texts...)
	spec.Files, spec.Workspace = nil, nil
	return spec, nil
}

// copyWorkspaceChart copies the chart of a helm task's workspace into
// its directory.
func (h *helmRun) copyWorkspaceChart(ctx context.Context) error {
	ws := h.spec.Workspace
	if ws == nil {
		return nil
	}
	root, err := openWorkspace(ctx, h.containers, ws)
	if err != nil {
		return err
	}
	defer root.Close()
	chart, err := copyChart(root, h.spec.ChartPath, ws, h.dir)
	if err != nil {
		return err
	}
	h.chart = chart
	fmt.Fprintf(h.out, "helm: copied the chart %s from the workspace %s\n", h.spec.ChartPath, ws.Name)
	return nil
}
