package executor

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/legate-dev/legate/internal/protocol"
)

// HelmEnv names the helm binary a delegate runs helm tasks with; unset,
// it is the helm on the delegate's PATH.
const HelmEnv = "LEGATE_HELM"

// Bounds of what the delegate reads of helm's answers (its own output is
// streamed, not kept).
const (
	// maxHelmAnswer bounds the JSON of `helm history` and `helm get
	// metadata`.
	maxHelmAnswer = 1 << 20
	// maxHelmManifest bounds the manifest read for the deploy record;
	// a larger one is recorded without its workloads.
	maxHelmManifest = 8 << 20
	// helmWaitDelay bounds how long Wait waits for helm's output once
	// helm exited (a process it started holding the pipe).
	helmWaitDelay = 5 * time.Second
)

// helmType runs helm tasks with the delegate's helm 3 binary: every helm
// command is a process of its own (its memory is not the delegate's),
// with a process group that Interrupt and Terminate signal.
type helmType struct{}

// available reports whether this delegate can run helm tasks: it has a
// helm binary.
func (helmType) available(opts Options) error {
	_, err := helmBinary(opts)
	return err
}

// helmBinary is the helm a delegate runs: Options.Helm, else
// $LEGATE_HELM, else helm on PATH.
func helmBinary(opts Options) (string, error) {
	p, from := opts.Helm, "the delegate's helm"
	if p == "" {
		p, from = os.Getenv(HelmEnv), HelmEnv
	}
	if p == "" {
		found, err := exec.LookPath("helm")
		if err != nil {
			return "", fmt.Errorf("this delegate has no helm binary: install helm 3 on its PATH, or set %s to its path", HelmEnv)
		}
		return found, nil
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s %q is not an executable file: install helm 3 and set %s to its path", from, p, HelmEnv)
	}
	return p, nil
}

func (helmType) New(spec protocol.TaskSpec, opts Options) (Execution, error) {
	if spec.Helm == nil {
		return nil, errors.New(`helm task has no "helm" section`)
	}
	h := *spec.Helm
	if err := h.Validate(); err != nil {
		return nil, err
	}
	bin, err := helmBinary(opts)
	if err != nil {
		return nil, faultError{err}
	}
	env := opts.KubeEnv
	if env == nil {
		env = kubeChildEnv(os.Environ())
	}
	return &helmRun{spec: h, bin: bin, baseEnv: env, containers: opts.Containers}, nil
}

// helmRun is one run of a helm task: the helm commands it runs in turn
// (history, upgrade --install, and a rollback or uninstall, then what
// the record needs), from one goroutine.
type helmRun struct {
	spec    protocol.HelmSpec
	bin     string
	baseEnv []string
	// containers holds the stage workspace of spec.ChartPath; chart is
	// the copy of that chart in dir.
	containers ContainerRuntime
	chart      string

	dir     string // the task's temp dir: helm's homes, values, kubeconfig
	env     []string
	values  string
	timeout time.Duration
	out     io.Writer

	mu      sync.Mutex
	cur     *exec.Cmd // the helm process running now, if any
	stopped bool      // Interrupt was called: start no more commands

	exited chan struct{}
	res    helmResult
}

// helmResult is how a helm task ended.
type helmResult struct {
	deploy string // protocol.DeploySucceeded, DeployFailed or DeployRolledBack
	err    string
	record *protocol.DeployRecord
	// fault: helm could not reach the cluster before it changed anything;
	// another delegate may.
	fault bool
}

func (h *helmRun) Start(ctx context.Context, out io.Writer) error {
	dir, err := os.MkdirTemp("", "legate-helm-")
	if err != nil {
		return faultf("create the helm task's directory: %v", err)
	}
	h.dir, h.out = dir, out
	for _, d := range []string{"cache", "config", "data", "home"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return faultf("create the helm task's directory: %v", err)
		}
	}
	if err := h.copyWorkspaceChart(ctx); err != nil {
		return err
	}
	values := []byte(h.spec.Values)
	if len(values) == 0 {
		values = []byte("{}")
	}
	// JSON is YAML: the values go to helm as they came, in a file only
	// the delegate's user reads.
	h.values = filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(h.values, values, 0o600); err != nil {
		return faultf("write the helm values file: %v", err)
	}
	kubeconfig := ""
	if h.spec.Cluster != nil {
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, clusterKubeconfig(h.spec.Cluster, h.spec.Namespace), 0o600); err != nil {
			return faultf("write the kubeconfig of the task's cluster: %v", err)
		}
	}
	h.env = helmChildEnv(h.baseEnv, dir, kubeconfig)
	h.timeout = time.Duration(h.spec.TimeoutMS) * time.Millisecond
	if h.timeout <= 0 {
		h.timeout = protocol.DefaultHelmTimeoutMS * time.Millisecond
	}
	h.exited = make(chan struct{})
	go func() {
		defer close(h.exited)
		h.res = h.deploy()
	}()
	return nil
}

// helmChildEnv is helm's environment: the kubernetes child's (where the
// credentials are, proxies, CAs), with helm's homes and HOME in the
// task's dir, so that no repository, registry login or plugin of the
// delegate's user is used and nothing stays. kubeconfig, when set,
// replaces the delegate's credentials. A kubeconfig the delegate found
// in its own HOME is named, as HOME moves.
func helmChildEnv(base []string, dir, kubeconfig string) []string {
	var env []string
	home, hasKubeconfig, inPod := "", false, false
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME":
			home = v
			continue
		case strings.HasPrefix(k, "HELM_"):
			continue
		case k == "KUBECONFIG" || k == "KUBERNETES_SERVICE_HOST" || k == "KUBERNETES_SERVICE_PORT":
			if kubeconfig != "" {
				continue
			}
			hasKubeconfig = hasKubeconfig || k == "KUBECONFIG"
			inPod = inPod || k == "KUBERNETES_SERVICE_HOST"
		}
		env = append(env, kv)
	}
	if kubeconfig != "" {
		env = append(env, "KUBECONFIG="+kubeconfig)
	} else if !hasKubeconfig && !inPod && home != "" {
		if p := filepath.Join(home, ".kube", "config"); fileExists(p) {
			env = append(env, "KUBECONFIG="+p)
		}
	}
	return append(env, "HOME="+filepath.Join(dir, "home"), "HELM_CACHE_HOME="+filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, "config"), "HELM_DATA_HOME="+filepath.Join(dir, "data"))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// clusterKubeconfig is a kubeconfig (as JSON, which is YAML) for c, its
// context's namespace ns.
func clusterKubeconfig(c *protocol.KubeCluster, ns string) []byte {
	cluster := map[string]any{"server": c.Server}
	if c.CAPEM != "" {
		cluster["certificate-authority-data"] = base64.StdEncoding.EncodeToString([]byte(c.CAPEM))
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config",
		"clusters":        []any{map[string]any{"name": "legate", "cluster": cluster}},
		"users":           []any{map[string]any{"name": "legate", "user": map[string]any{"token": c.Token}}},
		"contexts":        []any{map[string]any{"name": "legate", "context": map[string]any{"cluster": "legate", "user": "legate", "namespace": ns}}},
		"current-context": "legate",
	})
	return b
}

func (h *helmRun) Done() <-chan struct{} { return h.exited }

// Interrupt stops the helm command running now (SIGTERM to its process
// group: helm marks an upgrade it cancels as failed) and starts no more.
func (h *helmRun) Interrupt() { h.signal(syscall.SIGTERM) }

// Terminate kills the helm command running now.
func (h *helmRun) Terminate() { h.signal(syscall.SIGKILL) }

func (h *helmRun) signal(sig syscall.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	if h.cur != nil && h.cur.Process != nil {
		_ = syscall.Kill(-h.cur.Process.Pid, sig)
	}
}

func (h *helmRun) Finish(stop *Stop) Outcome {
	if stop != nil {
		io.WriteString(h.out, stop.Notice("stopped helm; what it applied stays, and no rollback ran"))
		o := stop.Outcome()
		o.Outputs = map[string]string{protocol.OutputDeployStatus: protocol.DeployFailed}
		return o
	}
	r := h.res
	o := succeeded()
	switch {
	case r.fault:
		o = faulted(r.err)
	case r.deploy != protocol.DeploySucceeded:
		o = failed(r.err)
	}
	o.Outputs = map[string]string{protocol.OutputDeployStatus: r.deploy}
	if r.record != nil {
		o.Outputs[protocol.OutputDeployRecord] = recordJSON(r.record)
	}
	return o
}

func (h *helmRun) Cleanup() {
	removeWorkspace(h.containers, h.spec.Workspace, h.out)
	if h.dir == "" {
		return
	}
	if err := os.RemoveAll(h.dir); err != nil {
		fmt.Fprintf(h.out, "\n[legate: could not remove the helm task's directory: %v]\n", err)
	}
}

// errStopped: Interrupt came before a command started.
var errStopped = errors.New("stopped")

// helm runs one helm command in its own process group: its output goes
// to the task's output, unless stdout is given (then only its stderr
// does). It returns helm's error line ("Error: …") when it failed.
func (h *helmRun) helm(stdout io.Writer, args ...string) error {
	return h.helmTo(stdout, h.out, args...)
}

// helmTo is helm with its stderr going to stderr.
func (h *helmRun) helmTo(stdout, stderr io.Writer, args ...string) error {
	tail := &tailWriter{w: stderr}
	cmd := &exec.Cmd{
		Path:        h.bin,
		Args:        append([]string{"helm"}, args...),
		Env:         h.env,
		Dir:         h.dir,
		Stdout:      tail,
		Stderr:      tail,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		WaitDelay:   helmWaitDelay,
	}
	if stdout != nil {
		cmd.Stdout = stdout
	}
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return errStopped
	}
	err := cmd.Start()
	if err == nil {
		h.cur = cmd
	}
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("start helm: %w", err)
	}
	err = cmd.Wait()
	h.mu.Lock()
	h.cur = nil
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("helm %s: %s", args[0], tail.errorLine(err))
	}
	return nil
}

// tailWriter passes output on and keeps its last line that starts with
// "Error: ", which is how helm says why it failed.
type tailWriter struct {
	w       io.Writer
	mu      sync.Mutex
	partial []byte
	last    string
}

func (t *tailWriter) Write(p []byte) (int, error) {
	_, _ = t.w.Write(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.line(string(t.partial[:i]))
		t.partial = t.partial[i+1:]
	}
	if len(t.partial) > 4096 {
		t.partial = t.partial[len(t.partial)-4096:]
	}
	return len(p), nil
}

func (t *tailWriter) line(l string) {
	if strings.HasPrefix(l, "Error: ") {
		t.last = strings.TrimPrefix(l, "Error: ")
		if len(t.last) > 1024 {
			t.last = t.last[:1024]
		}
	}
}

func (t *tailWriter) errorLine(err error) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.line(string(t.partial))
	if t.last != "" {
		return t.last
	}
	return err.Error()
}

// limitBuffer keeps at most max bytes and says when there were more.
type limitBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (l *limitBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); len(p) > room {
		l.over = true
		p = p[:max(room, 0)]
	}
	l.Buffer.Write(p)
	return len(p), nil
}

// recordJSON is r as the deploy_record output: its workloads are dropped
// from the last while it is over MaxDeployRecordBytes.
func recordJSON(r *protocol.DeployRecord) string {
	for {
		b, _ := json.Marshal(r)
		if len(b) <= protocol.MaxDeployRecordBytes || len(r.Workloads) == 0 {
			return string(b)
		}
		r.Workloads = r.Workloads[:len(r.Workloads)-1]
	}
}

// helmRevision is one revision of `helm history -o json`.
type helmRevision struct {
	Revision int    `json:"revision"`
	Status   string `json:"status"`
}

// helmMetadata is `helm get metadata -o json`.
type helmMetadata struct {
	Chart      string `json:"chart"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
	Revision   int    `json:"revision"`
	Status     string `json:"status"`
}

// ns is the namespace flag of every helm command.
func (h *helmRun) ns() string { return "--namespace=" + h.spec.Namespace }

// previous is the release's revision deployed now, 0 when the release
// does not exist or has none deployed; installed is false when the
// release does not exist.
func (h *helmRun) previous() (rev int, installed bool, err error) {
	buf := &limitBuffer{max: maxHelmAnswer}
	// Its "release: not found" is no news: not in the task's output.
	if err := h.helmTo(buf, io.Discard, "history", h.ns(), "--max=256", "--output=json", "--", h.spec.Release); err != nil {
		if strings.Contains(err.Error(), "release: not found") {
			return 0, false, nil
		}
		return 0, false, err
	}
	var revs []helmRevision
	if buf.over || json.Unmarshal(buf.Bytes(), &revs) != nil {
		return 0, true, errors.New("helm history: unreadable answer")
	}
	for _, r := range revs {
		if r.Status == "deployed" && r.Revision > rev {
			rev = r.Revision
		}
	}
	return rev, true, nil
}

// deploy runs the task's helm commands and says how it ended.
func (h *helmRun) deploy() helmResult {
	s := h.spec
	chart := s.Chart
	if s.ChartPath != "" {
		chart = s.ChartPath + " from the workspace " + s.Workspace.Name
	}
	if s.Version != "" {
		chart += " " + s.Version
	}
	if s.Repo != "" {
		chart += " from " + s.Repo
	}
	fmt.Fprintf(h.out, "helm: release %s in namespace %s, chart %s; wait %s, rollback %s\n",
		s.Release, s.Namespace, chart, h.timeout, s.Rollback)
	prev, installed, err := h.previous()
	if err != nil {
		// Nothing was changed yet: when the cluster did not answer (or
		// was not trusted), running the task elsewhere is safe.
		unreachable := strings.Contains(err.Error(), "Kubernetes cluster unreachable") || strings.Contains(err.Error(), "x509: ")
		fmt.Fprintf(h.out, "helm: %v\n", err)
		return helmResult{deploy: protocol.DeployFailed, err: err.Error(), fault: unreachable}
	}
	args := []string{"upgrade", "--install", h.ns(), "--values=" + h.values, "--wait", "--timeout=" + h.timeout.String()}
	if s.Repo != "" {
		args = append(args, "--repo="+s.Repo)
	}
	if s.Version != "" {
		args = append(args, "--version="+s.Version)
	}
	chartArg := s.Chart
	if h.chart != "" {
		chartArg = h.chart
	}
	upgradeErr := h.helm(nil, append(args, "--", s.Release, chartArg)...)
	if errors.Is(upgradeErr, errStopped) {
		return helmResult{deploy: protocol.DeployFailed, err: "stopped"}
	}
	if upgradeErr == nil {
		fmt.Fprintf(h.out, "helm: release %s deployed\n", s.Release)
		return helmResult{deploy: protocol.DeploySucceeded, record: h.record()}
	}
	if s.Rollback != protocol.RollbackAuto {
		return helmResult{deploy: protocol.DeployFailed, err: upgradeErr.Error(), record: h.record()}
	}
	return h.rollback(prev, installed, upgradeErr)
}

// rollback undoes a failed upgrade: back to the revision deployed before
// it, or, when the release did not exist, its uninstall.
func (h *helmRun) rollback(prev int, installed bool, cause error) helmResult {
	s := h.spec
	wait := []string{h.ns(), "--wait", "--timeout=" + h.timeout.String()}
	switch {
	case !installed:
		fmt.Fprintf(h.out, "helm: the first install of release %s failed: uninstalling it\n", s.Release)
		if err := h.helm(nil, append(append([]string{"uninstall"}, wait...), "--", s.Release)...); err != nil {
			return helmResult{deploy: protocol.DeployFailed, err: fmt.Sprintf("%v; uninstalling the release failed too: %v", cause, err)}
		}
		rec := &protocol.DeployRecord{Type: protocol.TaskHelm, Cluster: h.server(), Namespace: s.Namespace, Release: s.Release}
		return helmResult{deploy: protocol.DeployRolledBack, err: fmt.Sprintf("rolled back: uninstalled release %s, whose first install failed: %v", s.Release, cause), record: rec}
	case prev == 0:
		fmt.Fprintf(h.out, "helm: release %s had no deployed revision to roll back to: it stays as the upgrade left it\n", s.Release)
		return helmResult{deploy: protocol.DeployFailed, err: cause.Error(), record: h.record()}
	}
	fmt.Fprintf(h.out, "helm: rolling release %s back to revision %d\n", s.Release, prev)
	rb := append(append([]string{"rollback"}, wait...), "--", s.Release, strconv.Itoa(prev))
	if err := h.helm(nil, rb...); err != nil {
		return helmResult{deploy: protocol.DeployFailed, err: fmt.Sprintf("%v; the rollback to revision %d failed too: %v", cause, prev, err), record: h.record()}
	}
	fmt.Fprintf(h.out, "helm: rolled release %s back to revision %d\n", s.Release, prev)
	rec := h.record()
	rec.RolledBackTo = strconv.Itoa(prev)
	return helmResult{deploy: protocol.DeployRolledBack, err: fmt.Sprintf("rolled back: release %s to revision %d: %v", s.Release, prev, cause), record: rec}
}

// server is the API server the task deploys to, when the task names it.
func (h *helmRun) server() string {
	if h.spec.Cluster != nil {
		return h.spec.Cluster.Server
	}
	return ""
}

// record is the deploy record of the release as it is now; what helm
// does not answer stays empty.
func (h *helmRun) record() *protocol.DeployRecord {
	s := h.spec
	rec := &protocol.DeployRecord{Type: protocol.TaskHelm, Cluster: h.server(), Namespace: s.Namespace, Release: s.Release}
	buf := &limitBuffer{max: maxHelmAnswer}
	var md helmMetadata
	if h.helm(buf, "get", "metadata", h.ns(), "--output=json", "--", s.Release) != nil || buf.over || json.Unmarshal(buf.Bytes(), &md) != nil {
		return rec
	}
	rec.Chart, rec.ChartVersion, rec.AppVersion, rec.ReleaseRevision = md.Chart, md.Version, md.AppVersion, md.Revision
	man := &limitBuffer{max: maxHelmManifest}
	if h.helm(man, "get", "manifest", h.ns(), "--revision="+strconv.Itoa(md.Revision), "--", s.Release) == nil && !man.over {
		rec.Workloads = manifestWorkloads(man.Bytes())
	}
	return rec
}

// manifestWorkloads are the Deployments, StatefulSets and DaemonSets of
// a release's manifest, with their containers' images.
func manifestWorkloads(manifest []byte) []protocol.DeployedWorkload {
	type container struct {
		Image string `yaml:"image"`
	}
	var out []protocol.DeployedWorkload
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var doc struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []container `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			// A document helm applied but this reader cannot: the record
			// keeps what came before it.
			return out
		}
		switch doc.Kind {
		case "Deployment", "StatefulSet", "DaemonSet":
			w := protocol.DeployedWorkload{Kind: doc.Kind, Name: doc.Metadata.Name}
			for _, c := range doc.Spec.Template.Spec.Containers {
				w.Images = append(w.Images, c.Image)
			}
			out = append(out, w)
		}
	}
}
