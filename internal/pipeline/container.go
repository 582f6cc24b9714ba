package pipeline

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/legate-dev/legate/internal/protocol"
)

// container reads a step's container section: the task spec's container
// fields (protocol.ContainerSpec), under the same names. Expressions may
// appear in its script and command; the rest is checked here as the
// manager checks a container task at submit.
func (ps *parser) container(n *yaml.Node, path string) *protocol.ContainerSpec {
	c := &protocol.ContainerSpec{}
	volLines := map[int]int{}
	ps.fields(n, path, map[string]func(*yaml.Node){
		"image":       func(v *yaml.Node) { c.Image = ps.str(v, path+".image") },
		"command":     func(v *yaml.Node) { c.Command = ps.strList(v, path+".command") },
		"script":      func(v *yaml.Node) { c.Script = ps.str(v, path+".script") },
		"working_dir": func(v *yaml.Node) { c.WorkingDir = ps.str(v, path+".working_dir") },
		"resources": func(v *yaml.Node) {
			r := &protocol.ContainerResources{}
			rp := path + ".resources"
			ps.fields(v, rp, map[string]func(*yaml.Node){
				"cpu":        func(x *yaml.Node) { r.CPU = ps.number(x, rp+".cpu") },
				"memory_mib": func(x *yaml.Node) { r.MemoryMiB = int64(ps.integer(x, rp+".memory_mib", 0, 1<<24)) },
			})
			c.Resources = r
		},
		"security_context": func(v *yaml.Node) {
			sc := &protocol.SecurityContext{}
			sp := path + ".security_context"
			id := func(x *yaml.Node, f string) *int64 {
				i := int64(ps.integer(x, f, 0, 1<<31-1))
				return &i
			}
			ps.fields(v, sp, map[string]func(*yaml.Node){
				"privileged":                func(x *yaml.Node) { sc.Privileged = ps.boolean(x, sp+".privileged") },
				"read_only_root_filesystem": func(x *yaml.Node) { sc.ReadOnlyRootFilesystem = ps.boolean(x, sp+".read_only_root_filesystem") },
				"run_as_user":               func(x *yaml.Node) { sc.RunAsUser = id(x, sp+".run_as_user") },
				"run_as_group":              func(x *yaml.Node) { sc.RunAsGroup = id(x, sp+".run_as_group") },
				"add_capability":            func(x *yaml.Node) { sc.AddCapability = ps.strList(x, sp+".add_capability") },
				"drop_capability":           func(x *yaml.Node) { sc.DropCapability = ps.strList(x, sp+".drop_capability") },
			})
			c.SecurityContext = sc
		},
		"volumes": func(v *yaml.Node) {
			if v.Kind != yaml.SequenceNode {
				ps.add(v, path+".volumes", "expected a list of volumes, found %s", kindName(v))
				return
			}
			for i, vn := range v.Content {
				volLines[i] = vn.Line
				c.Volumes = append(c.Volumes, ps.volume(vn, fmt.Sprintf("%s.volumes[%d]", path, i)))
			}
		},
	})
	if n.Kind != yaml.MappingNode {
		return c
	}
	// The checks of a submitted container task, with placeholders for
	// expressions (their values are checked when the step's task is made).
	chk := *c
	chk.Command = append([]string(nil), c.Command...)
	if c.SecurityContext != nil {
		sc := *c.SecurityContext
		chk.SecurityContext = &sc
	}
	if err := chk.Validate(); err != nil {
		line := n.Line
		if m := volIndex.FindStringSubmatch(err.Error()); m != nil {
			if i, _ := strconv.Atoi(m[1]); volLines[i] > 0 {
				line = volLines[i]
			}
		}
		ps.addLine(line, path, "%v", err)
	} else if chk.SecurityContext != nil {
		c.SecurityContext = chk.SecurityContext // capabilities normalized
	}
	return c
}

var volIndex = regexp.MustCompile(`^container\.volumes\[(\d+)\]`)

func (ps *parser) volume(n *yaml.Node, path string) protocol.Volume {
	var v protocol.Volume
	ps.fields(n, path, map[string]func(*yaml.Node){
		"name":       func(x *yaml.Node) { v.Name = ps.str(x, path+".name") },
		"mount_path": func(x *yaml.Node) { v.MountPath = ps.str(x, path+".mount_path") },
		"empty_dir": func(x *yaml.Node) {
			e := &protocol.EmptyDirVolume{}
			if !(x.Kind == yaml.ScalarNode && x.Tag == "!!null") {
				ps.fields(x, path+".empty_dir", map[string]func(*yaml.Node){
					"size_mib": func(y *yaml.Node) {
						e.SizeMiB = int64(ps.integer(y, path+".empty_dir.size_mib", 1, protocol.FargateMaxEmptyDirMiB*1024))
					},
				})
			}
			v.EmptyDir = e
		},
		"host_path": func(x *yaml.Node) {
			h := &protocol.HostPathVolume{}
			ps.fields(x, path+".host_path", map[string]func(*yaml.Node){
				"path":      func(y *yaml.Node) { h.Path = ps.str(y, path+".host_path.path") },
				"read_only": func(y *yaml.Node) { h.ReadOnly = ps.boolean(y, path+".host_path.read_only") },
			})
			v.HostPath = h
		},
		"efs": func(x *yaml.Node) {
			e := &protocol.EFSVolume{}
			ep := path + ".efs"
			ps.fields(x, ep, map[string]func(*yaml.Node){
				"filesystem_id":      func(y *yaml.Node) { e.FilesystemID = ps.str(y, ep+".filesystem_id") },
				"root_directory":     func(y *yaml.Node) { e.RootDirectory = ps.str(y, ep+".root_directory") },
				"transit_encryption": func(y *yaml.Node) { e.TransitEncryption = ps.boolean(y, ep+".transit_encryption") },
				"access_point_id":    func(y *yaml.Node) { e.AccessPointID = ps.str(y, ep+".access_point_id") },
				"iam":                func(y *yaml.Node) { e.IAM = ps.boolean(y, ep+".iam") },
			})
			v.EFS = e
		},
	})
	return v
}

func (ps *parser) boolean(n *yaml.Node, path string) bool {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		ps.add(n, path, "expected true or false, found %s", kindName(n))
		return false
	}
	b, _ := strconv.ParseBool(n.Value)
	return b
}

func (ps *parser) number(n *yaml.Node, path string) float64 {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		ps.add(n, path, "expected a number, found %s", kindName(n))
		return 0
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || f < 0 || f > 1024 {
		ps.add(n, path, "%s is out of range: 0 to 1024", n.Value)
		return 0
	}
	return f
}

// workspaces checks the empty_dir volumes the steps of each stage share
// (one name used by more than one step of a stage): the same size in each
// step, and none in a parallel group (its steps start together, maybe on
// different delegates, before any of them could have made the workspace).
func (ps *parser) workspaces(p *Pipeline) {
	for si, st := range p.Stages {
		uses := map[string]int{}
		size := map[string]int64{}
		for _, it := range st.Items {
			for _, s := range it.Steps {
				for _, name := range workspaceNames(&s) {
					uses[name]++
				}
			}
		}
		ps.deployWorkspaces(si, &p.Stages[si])
		for ii, it := range st.Items {
			for ji, s := range it.Steps {
				path := fmt.Sprintf("stages[%d].steps[%d]", si, ii)
				if it.Parallel {
					path += fmt.Sprintf(".parallel[%d]", ji)
				}
				for _, v := range emptyDirs(&s) {
					if uses[v.Name] < 2 {
						continue
					}
					if it.Parallel {
						ps.addLine(ps.lines[path], path+".container.volumes", "the empty_dir %q is the stage's shared workspace (other steps of stage %s name it too), and a step of a parallel group cannot use it: give the volume another name in this step, or take the step out of the group", v.Name, st.Name)
						continue
					}
					if sz, ok := size[v.Name]; ok && sz != v.EmptyDir.SizeMiB {
						ps.addLine(ps.lines[path], path+".container.volumes", "the empty_dir %q is the stage's shared workspace, with size_mib %d in an earlier step: give it the same size_mib in every step", v.Name, sz)
					}
					size[v.Name] = v.EmptyDir.SizeMiB
				}
			}
		}
	}
}

// workspaceName reads the workspace a deploy step reads from: the name of
// an empty_dir (checked against the stage by workspaces).
func (ps *parser) workspaceName(n *yaml.Node, path string) string {
	name := ps.str(n, path)
	probe := protocol.ContainerSpec{Image: "probe", Volumes: []protocol.Volume{{Name: name, MountPath: "/w", EmptyDir: &protocol.EmptyDirVolume{}}}}
	if err := probe.Validate(); err != nil && name != "" {
		ps.add(n, path, "%q: the name of an empty_dir volume: letters, digits, '-', '_' or '.', at most 63", name)
	}
	return name
}

// workspacePaths reads a kubernetes step's files: paths in its workspace,
// without expressions (the files are read as they are).
func (ps *parser) workspacePaths(n *yaml.Node, path string) []string {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		ps.add(n, path, "expected a list of paths in the workspace (files: [k8s/deployment.yaml]), found %s", kindName(n))
		return []string{}
	}
	if len(n.Content) > protocol.MaxKubernetesManifests {
		ps.add(n, path, "%d files: at most %d", len(n.Content), protocol.MaxKubernetesManifests)
	}
	out := ps.strList(n, path)
	for i, f := range out {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if strings.Contains(f, exprOpen) {
			ps.add(n.Content[i], ip, "paths in a workspace take no expressions: write the path the earlier step writes the file to")
			continue
		}
		if err := protocol.CheckWorkspacePath("file", f); err != nil {
			ps.add(n.Content[i], ip, "%v", err)
		}
	}
	return out
}

// deployWorkspace is the workspace a kubernetes or helm step reads its
// files or chart from, "" when none.
func deployWorkspace(s *Step) string {
	switch {
	case s.Kubernetes != nil:
		return s.Kubernetes.Workspace
	case s.Helm != nil:
		return s.Helm.Workspace
	}
	return ""
}

// workspaceNames are the empty_dirs a step uses: its container's, or
// the workspace of a deploy step.
func workspaceNames(s *Step) []string {
	if w := deployWorkspace(s); w != "" {
		return []string{w}
	}
	var out []string
	for _, v := range emptyDirs(s) {
		out = append(out, v.Name)
	}
	return out
}

// deployWorkspaces checks the workspace of each deploy step of a stage: an
// empty_dir an earlier container step of the stage names, and the step
// not in a parallel group.
func (ps *parser) deployWorkspaces(si int, st *Stage) {
	earlier := map[string]bool{}
	for ii, it := range st.Items {
		for ji, s := range it.Steps {
			path := fmt.Sprintf("stages[%d].steps[%d]", si, ii)
			if it.Parallel {
				path += fmt.Sprintf(".parallel[%d]", ji)
			}
			w := deployWorkspace(&s)
			if w == "" {
				continue
			}
			section := path + "." + s.Type + ".workspace"
			switch {
			case it.Parallel:
				ps.addLine(ps.lines[path], section, "a step of a parallel group cannot read a workspace (its steps start together, before the step that writes it ended): take the step out of the group")
			case !earlier[w]:
				ps.addLine(ps.lines[path], section, "%q is not an empty_dir of an earlier container step of stage %s: name the empty_dir volume that a container step before this one writes the files to (volumes: [{name: %s, mount_path: /ws, empty_dir: {}}])", w, st.Name, w)
			}
		}
		for _, s := range it.Steps {
			for _, v := range emptyDirs(&s) {
				earlier[v.Name] = true
			}
		}
	}
}

func emptyDirs(s *Step) []protocol.Volume {
	if s.Container == nil {
		return nil
	}
	var out []protocol.Volume
	for _, v := range s.Container.Volumes {
		if v.EmptyDir != nil {
			out = append(out, v)
		}
	}
	return out
}

// Workspace reports whether the empty_dir name is shared by the steps of
// stage (used by more than one of them), and the steps that use it, in
// order.
func (p *Pipeline) Workspace(stage, name string) (shared bool, steps []string) {
	for _, st := range p.Stages {
		if st.Name != stage {
			continue
		}
		for _, it := range st.Items {
			for _, s := range it.Steps {
				if slices.Contains(workspaceNames(&s), name) {
					steps = append(steps, s.Name)
				}
			}
		}
	}
	return len(steps) > 1, steps
}

// deployWorkspace is the workspace of the deploy step ref that reads from
// the empty_dir name (nil for ""): the manager sets its key and sends the
// step where the volume is; the last step of the stage that uses it
// removes it.
func (p *Pipeline) deployWorkspace(ref StepRef, name string) *protocol.DeployWorkspace {
	if name == "" {
		return nil
	}
	_, steps := p.Workspace(ref.Stage, name)
	ws := &protocol.DeployWorkspace{Name: name, Remove: len(steps) > 0 && steps[len(steps)-1] == ref.Step}
	for _, s := range steps {
		if s == ref.Step {
			break
		}
		ws.WrittenBy = append(ws.WrittenBy, s)
	}
	return ws
}
