package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/legate-dev/legate/internal/executor/pipe"
	"github.com/legate-dev/legate/internal/kube"
	"github.com/legate-dev/legate/internal/protocol"
)

// kubernetesArg is the hidden first argument with which the delegate's
// own binary runs a kubernetes task (see runKubernetes): the deploy runs
// in that child process, so that neither the API client nor what it reads
// stays in the memory of the delegate, which only copies its output.
const kubernetesArg = "__legate-kubernetes"

// kubernetesType applies manifests and waits for their rollout, in a child
// process (see kubernetesArg).
type kubernetesType struct{}

func (kubernetesType) New(spec protocol.TaskSpec, opts Options) (Execution, error) {
	if spec.Kubernetes == nil {
		return nil, errors.New(`kubernetes task has no "kubernetes" section`)
	}
	k := *spec.Kubernetes
	if err := k.Validate(); err != nil {
		return nil, err
	}
	env := opts.KubeEnv
	if env == nil {
		env = kubeChildEnv(os.Environ())
	}
	if k.Cluster != nil {
		// The task's cluster and its credentials replace the delegate's:
		// the child is not even told where those are.
		env = withoutKubeCredentials(env)
	}
	return &kubeRun{spec: k, env: env, containers: opts.Containers}, nil
}

// kubeChildEnv are the variables of the delegate's environment that the
// child gets: where its credentials are (a pod's service, a kubeconfig),
// and how to reach the API (proxies, extra CAs). The task's own env is
// not passed: a task does not choose the delegate's credentials.
func kubeChildEnv(environ []string) []string {
	keep := []string{"KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "HOME",
		"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "TMPDIR", "PATH"}
	out := []string{}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		for _, name := range keep {
			if k == name {
				out = append(out, kv)
			}
		}
	}
	return out
}

// withoutKubeCredentials drops from env what leads to the delegate's own
// Kubernetes credentials.
func withoutKubeCredentials(env []string) []string {
	out := []string{}
	for _, kv := range env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT":
		default:
			out = append(out, kv)
		}
	}
	return out
}

// kubeResult is what the child reports on its fd 3 before it exits.
type kubeResult struct {
	// Deploy is protocol.DeploySucceeded, DeployFailed or DeployRolledBack.
	Deploy string `json:"deploy"`
	Error  string `json:"error,omitempty"`
	// Fault: the delegate has no credentials or cannot reach the API;
	// another delegate may.
	Fault bool `json:"fault,omitempty"`
	// Record is what the deploy left (output deploy_record).
	Record *protocol.DeployRecord `json:"record,omitempty"`
}

// deployStrategy is DeployRecord.Strategy of spec: the strategy, and the
// action within it when it has one ("canary: promote").
func deployStrategy(spec protocol.KubernetesSpec) string {
	s := spec.Strategy
	if s == "" {
		s = protocol.StrategyRolling
	}
	if spec.Action != "" {
		s += ": " + spec.Action
	}
	return s
}

// kubeOutputs are a kubernetes task's outputs: deploy_status, and
// deploy_record (rec, or one of the spec alone when the child reported
// none).
func kubeOutputs(spec protocol.KubernetesSpec, status string, rec *protocol.DeployRecord) map[string]string {
	if rec == nil {
		rec = &protocol.DeployRecord{Type: protocol.TaskKubernetes, Strategy: deployStrategy(spec), Namespace: spec.Namespace}
	}
	out := map[string]string{protocol.OutputDeployStatus: status}
	if b, ok := fitRecord(rec); ok {
		out[protocol.OutputDeployRecord] = string(b)
	}
	return out
}

// fitRecord is rec as JSON within protocol.MaxDeployRecordBytes: when it
// has too many workloads for that, the last ones are left out (the task's
// output names them all). ok is false when even that does not fit.
func fitRecord(rec *protocol.DeployRecord) (b []byte, ok bool) {
	r := *rec
	for {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, false
		}
		if len(b) <= protocol.MaxDeployRecordBytes {
			return b, true
		}
		if len(r.Workloads) == 0 {
			return nil, false
		}
		r.Workloads = r.Workloads[:len(r.Workloads)-1]
	}
}

// kubeRun is one run of a kubernetes task: its child process.
type kubeRun struct {
	spec protocol.KubernetesSpec
	env  []string
	// containers holds the stage workspace of spec.Files.
	containers ContainerRuntime

	out     io.Writer
	pr      *os.File // the output pipe's read end
	result  *os.File // the result pipe's read end
	cmd     *exec.Cmd
	reader  *pipe.Reader
	exited  chan struct{}
	waitErr error
}

func (k *kubeRun) Start(ctx context.Context, out io.Writer) error {
	k.out = out
	child, err := k.childSpec(ctx)
	if err != nil {
		return err
	}
	input, err := json.Marshal(child)
	if err != nil {
		return fmt.Errorf("kubernetes task: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return faultf("create output pipe: %v", err)
	}
	k.pr = pr
	rr, rw, err := os.Pipe()
	if err != nil {
		pw.Close()
		return faultf("create result pipe: %v", err)
	}
	k.result = rr
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"legate-kubernetes", kubernetesArg},
		Env:        k.env,
		Stdin:      bytes.NewReader(input),
		Stdout:     pw,
		Stderr:     pw,
		ExtraFiles: []*os.File{rw}, // fd 3
		// The child dies with the delegate. SIGKILL, not SIGTERM: once the
		// delegate is gone nobody reads the child's output or result, and
		// the manager runs the task again on another delegate (or fails
		// it) when this one's lease lapses; a child that went on — even
		// only to finish an API call, or stuck where SIGTERM does not
		// reach its deploy — would race that run in the cluster. It keeps
		// nothing that needs cleaning up (its state is the cluster's), so
		// nothing is lost by not letting it react. Pdeathsig follows the
		// thread that started the child; the delegate locks no goroutine
		// to a thread that ends, so that is the delegate's lifetime.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	err = cmd.Start()
	pw.Close()
	rw.Close()
	if err != nil {
		return faultf("start the kubernetes deploy process: %v", err)
	}
	k.cmd, k.out = cmd, out
	k.reader = pipe.Start(pr, out)
	k.exited = make(chan struct{})
	go func() {
		k.waitErr = cmd.Wait()
		close(k.exited)
	}()
	return nil
}

func (k *kubeRun) Done() <-chan struct{} { return k.exited }

// Interrupt asks the child to stop (SIGTERM): it stops waiting, reports
// and exits; it does not roll back what it applied.
func (k *kubeRun) Interrupt() { _ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGTERM) }

// Terminate kills the child.
func (k *kubeRun) Terminate() { _ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL) }

func (k *kubeRun) Finish(stop *Stop) Outcome {
	held := k.reader.Finish()
	if held {
		fmt.Fprintf(k.out, "\n[legate: stopped reading output after the deploy process ended]\n")
	}
	var res kubeResult
	b, _ := io.ReadAll(io.LimitReader(k.result, maxKubeResult))
	resErr := json.Unmarshal(b, &res)
	if stop != nil {
		io.WriteString(k.out, stop.Notice("stopped the deploy process; what it applied stays"))
		o := stop.Outcome()
		o.Outputs = kubeOutputs(k.spec, protocol.DeployFailed, res.Record)
		return o
	}
	if resErr != nil || res.Deploy == "" {
		o := failed(fmt.Sprintf("the kubernetes deploy process ended without a result (%v)", k.waitErr))
		o.DelegateFault = true
		o.Outputs = kubeOutputs(k.spec, protocol.DeployFailed, nil)
		return o
	}
	o := succeeded()
	switch {
	case res.Fault:
		o = faulted(res.Error)
	case res.Error != "":
		// A rolled-back deploy failed; an abort or a swap-back that
		// did what it was asked succeeded, its status rolled_back.
		o = failed(res.Error)
	}
	o.Outputs = kubeOutputs(k.spec, res.Deploy, res.Record)
	return o
}

func (k *kubeRun) Cleanup() {
	removeWorkspace(k.containers, k.spec.Workspace, k.out)
	if k.pr != nil {
		k.pr.Close()
	}
	if k.result != nil {
		k.result.Close()
	}
}

// maxKubeResult bounds the result the child reports: a deploy record and
// an error of at most maxKubeError bytes.
const (
	maxKubeError  = 32 << 10
	maxKubeResult = protocol.MaxDeployRecordBytes + maxKubeError + 4<<10
)

// maxKubeInput bounds the spec the child reads: the manifests' limit and
// room for the rest.
const maxKubeInput = protocol.MaxKubernetesManifestBytes*2 + 64<<10

// runKubernetes is the child process of a kubernetes task: it reads the
// task's KubernetesSpec on stdin, deploys it with the delegate's
// credentials, writes its progress to stdout (the task's output) and its
// kubeResult to fd 3, and exits 0 when the deploy succeeded, 1 otherwise.
// SIGTERM stops it (cancels the deploy).
func runKubernetes() int {
	result := os.NewFile(3, "result")
	syscall.CloseOnExec(3)
	report := func(r kubeResult) int {
		// Within the bound of what the delegate reads of the result.
		if len(r.Error) > maxKubeError {
			r.Error = strings.ToValidUTF8(r.Error[:maxKubeError], "") + " …"
		}
		if rec := r.Record; rec != nil {
			r.Record = nil
			if b, ok := fitRecord(rec); ok {
				r.Record = new(protocol.DeployRecord)
				_ = json.Unmarshal(b, r.Record)
			}
		}
		b, _ := json.Marshal(r)
		_, _ = result.Write(b)
		result.Close()
		if r.Error == "" {
			return 0
		}
		if r.Error != "" {
			fmt.Fprintf(os.Stdout, "error: %s\n", r.Error)
		}
		return 1
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, maxKubeInput))
	var spec protocol.KubernetesSpec
	if err == nil {
		err = json.Unmarshal(b, &spec)
	}
	if err == nil {
		err = spec.Validate()
	}
	if err != nil {
		rec := &protocol.DeployRecord{Type: protocol.TaskKubernetes, Strategy: deployStrategy(spec), Namespace: spec.Namespace}
		return report(kubeResult{Deploy: protocol.DeployFailed, Error: fmt.Sprintf("kubernetes task: %v", err), Record: rec})
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return report(deployKubernetes(ctx, spec, os.Getenv, os.Stdout))
}

// clusterSource is Config.Source for the cluster a task names.
const clusterSource = "the task's cluster"

// kubeConfig is where spec deploys and with which credentials: the
// cluster the task names (a Kubernetes connector's), else the delegate's
// own that getenv leads to.
func kubeConfig(spec protocol.KubernetesSpec, getenv func(string) string) (kube.Config, error) {
	if c := spec.Cluster; c != nil {
		cfg := kube.Config{Server: strings.TrimRight(c.Server, "/"), Source: clusterSource, Token: c.Token}
		if c.CAPEM != "" {
			cfg.CA = []byte(c.CAPEM)
		}
		return cfg, nil
	}
	return kube.Load(getenv, kube.ServiceAccountDir)
}

// refusedCredentials words the API's 401 for the cluster a task named:
// its token (the connector's stored secret) is wrong or expired.
func refusedCredentials(cfg kube.Config, err error) error {
	var se *kube.StatusError
	if cfg.Source != clusterSource || !errors.As(err, &se) || se.Code != 401 {
		return err
	}
	return fmt.Errorf("the cluster %s refused the task's token (401 Unauthorized): the stored secret its Kubernetes connector names holds a token that is wrong or expired; put a valid one there (legate secret update)", cfg.Server)
}

// deployKubernetes runs spec with the credentials kubeConfig finds.
func deployKubernetes(ctx context.Context, spec protocol.KubernetesSpec, getenv func(string) string, out io.Writer) kubeResult {
	cfg, err := kubeConfig(spec, getenv)
	if err != nil {
		return kubeResult{Deploy: protocol.DeployFailed, Error: err.Error(), Fault: true}
	}
	c, err := kube.NewClient(cfg)
	if err != nil {
		return kubeResult{Deploy: protocol.DeployFailed, Error: err.Error(), Fault: true}
	}
	defer c.Close()
	timeout := time.Duration(spec.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = protocol.DefaultKubernetesTimeoutMS * time.Millisecond
	}
	fmt.Fprintf(out, "deploying %d manifest(s) to namespace %s at %s (%s); strategy %s; rollout timeout %s, rollback %s\n",
		len(spec.Manifests), spec.Namespace, cfg.Server, cfg.Source, deployStrategy(spec), timeout, spec.Rollback)
	result, err := kube.Run(ctx, c, kubeDeploy(spec, timeout), out)
	rec := deployRecord(spec, cfg.Server, result)
	switch result.Outcome {
	case kube.Succeeded:
		fmt.Fprintf(out, "deployed to namespace %s\n", spec.Namespace)
		return kubeResult{Deploy: protocol.DeploySucceeded, Record: rec}
	case kube.RolledBack:
		r := kubeResult{Deploy: protocol.DeployRolledBack, Record: rec}
		if err != nil {
			r.Error = err.Error()
		}
		return r
	}
	err = refusedCredentials(cfg, err)
	// No answer from the API (a refused connection, an untrusted
	// certificate): this delegate cannot reach the cluster, another may.
	// An apply is idempotent, so running the task again elsewhere is safe.
	var ue *url.Error
	return kubeResult{Deploy: protocol.DeployFailed, Error: err.Error(), Fault: errors.As(err, &ue) && ctx.Err() == nil, Record: rec}
}

// kubeDeploy is the deploy spec asks for.
func kubeDeploy(spec protocol.KubernetesSpec, timeout time.Duration) kube.Deploy {
	d := kube.Deploy{Namespace: spec.Namespace, Manifests: spec.Manifests, Timeout: timeout, Rollback: spec.Rollback == protocol.RollbackAuto,
		Strategy: spec.Strategy, Action: spec.Action}
	if spec.Canary != nil {
		d.CanaryPercent, d.CanaryReplicas = spec.Canary.Percent, spec.Canary.Replicas
	}
	if spec.BlueGreen != nil {
		d.Service = spec.BlueGreen.Service
	}
	return d
}

// deployRecord is the deploy record of a deploy to server that ended in r.
func deployRecord(spec protocol.KubernetesSpec, server string, r kube.Result) *protocol.DeployRecord {
	rec := &protocol.DeployRecord{Type: protocol.TaskKubernetes, Strategy: deployStrategy(spec), Cluster: server, Namespace: spec.Namespace,
		RolledBackTo: r.RolledBackTo}
	for _, w := range r.Workloads {
		rec.Workloads = append(rec.Workloads, protocol.DeployedWorkload{Kind: w.Kind, Name: w.Name, Images: w.Images, Revision: w.Revision})
	}
	return rec
}
