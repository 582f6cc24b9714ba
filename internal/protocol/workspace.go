package protocol

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// DeployWorkspace is the stage workspace a kubernetes or helm task of a
// pipeline step reads its manifests or chart from: the empty_dir an
// earlier container step of the same stage wrote, a volume of the
// container runtime of the delegate that ran that step. The manager alone
// sets it (a submitted task that sets it is refused), and sends the task
// to that delegate. Since v4.
type DeployWorkspace struct {
	// Name is the empty_dir's name in the stage's steps.
	Name string `json:"name"`
	// Key names the volume on the delegate (legate-ws-KEY), as
	// Workspace.Key.
	Key string `json:"key"`
	// Remove: this step is the last of the stage to use the workspace and
	// removes it when it ends.
	Remove bool `json:"remove,omitempty"`
	// WrittenBy are the earlier steps of the stage that mount it (what a
	// missing file's error names).
	WrittenBy []string `json:"written_by,omitempty"`
}

// Limits of what a deploy task reads from a workspace. A kubernetes task's
// files count against MaxKubernetesManifests and
// MaxKubernetesManifestBytes with its inline manifests.
const (
	// MaxWorkspacePathBytes bounds a path in a workspace.
	MaxWorkspacePathBytes = 1024
	// MaxHelmChartFiles bounds the files of a chart directory copied from
	// a workspace.
	MaxHelmChartFiles = 1000
	// MaxHelmChartBytes bounds the bytes of a chart copied from a
	// workspace (a directory's files in all, or an archive): 16 MiB.
	MaxHelmChartBytes = 16 << 20
	// MaxHelmChartDepth bounds the depth of a chart directory's tree.
	MaxHelmChartDepth = 32
	// maxWrittenBy bounds DeployWorkspace.WrittenBy.
	maxWrittenBy = 256
)

// validate checks a deploy task's workspace (what names it in errors)
// and normalizes WrittenBy (empty → nil).
func (w *DeployWorkspace) validate(what string) error {
	v := Volume{Name: w.Name, MountPath: "/w", EmptyDir: &EmptyDirVolume{}}
	if err := v.validate(what); err != nil {
		return err
	}
	if !validWorkspaceKey(w.Key) {
		return fmt.Errorf("%s.key %q: use 1 to 64 lower-case letters and digits", what, truncate(w.Key, 64))
	}
	if len(w.WrittenBy) == 0 {
		w.WrittenBy = nil
	}
	if len(w.WrittenBy) > maxWrittenBy {
		return fmt.Errorf("%s.written_by: at most %d steps", what, maxWrittenBy)
	}
	for _, s := range w.WrittenBy {
		if err := checkText(what+".written_by", s, 256); err != nil {
			return err
		}
	}
	return nil
}

// CheckWorkspacePath checks a path in a workspace: relative, written
// clean (no "..", ".", empty or trailing elements but "." alone, the
// workspace itself), printable, at most MaxWorkspacePathBytes.
func CheckWorkspacePath(what, p string) error {
	if p == "" {
		return fmt.Errorf("%s: give a path in the workspace, such as k8s/deployment.yaml", what)
	}
	if err := checkText(what, p, MaxWorkspacePathBytes); err != nil {
		return err
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("%s %q: give a path relative to the workspace (k8s/deployment.yaml, not /ws/k8s/deployment.yaml)", what, truncate(p, 64))
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("%s %q: must not contain a \"..\" element (the files are read inside the workspace only)", what, truncate(p, 64))
		}
	}
	if c := path.Clean(p); c != p {
		return fmt.Errorf("%s %q: write it as %q", what, truncate(p, 64), truncate(c, 64))
	}
	return nil
}

// CheckManifestText refuses a manifest's text that is not valid UTF-8 or
// holds control characters other than tab, newline and carriage return.
func CheckManifestText(s string) error { return checkManifestText(s) }

// validateFiles checks a kubernetes task's Files and Workspace together.
func (k *KubernetesSpec) validateFiles() error {
	switch {
	case k.Workspace == nil && len(k.Files) == 0:
		return nil
	case k.Workspace == nil:
		return errors.New("kubernetes files are paths in a pipeline stage's workspace: only a pipeline step that names its workspace has them (give the documents in manifests)")
	case len(k.Files) == 0:
		return errors.New("a kubernetes workspace needs files: the paths in it of the manifests to apply")
	case len(k.Files) > MaxKubernetesManifests:
		return fmt.Errorf("a kubernetes task has %d files: at most %d", len(k.Files), MaxKubernetesManifests)
	}
	for i, f := range k.Files {
		if err := CheckWorkspacePath(fmt.Sprintf("kubernetes files[%d]", i), f); err != nil {
			return err
		}
	}
	return k.Workspace.validate("kubernetes workspace")
}

// SetsWorkspace names the first part of s that only the manager may set
// (a container's workspace empty_dir, a deploy task's workspace), or "".
func (s *TaskSpec) SetsWorkspace() string {
	if f := s.Container.SetsWorkspace(); f != "" {
		return f
	}
	if s.Kubernetes != nil && s.Kubernetes.Workspace != nil {
		return "kubernetes.workspace"
	}
	if s.Helm != nil && s.Helm.Workspace != nil {
		return "helm.workspace"
	}
	return ""
}
