package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/protocol"
)

// kubeDeployment is a Deployment's manifest; with neverReady its pods
// never become Ready (kwok).
func kubeDeployment(name, image string, neverReady bool) string {
	return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: %s}}\n"+
		"  template:\n    metadata: {labels: {app: %s, kwok.local/never-ready: %q}}\n    spec: {containers: [{name: %s, image: %q}]}\n",
		name, name, name, strconv.FormatBool(neverReady), name, image)
}

// writeManifest writes text to a file in the test's temp dir.
func writeManifest(t *testing.T, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitFinished waits for a task to end, bounded by d (a rollout through
// the real control plane takes seconds).
func (c *cluster) waitFinished(id string, d time.Duration) protocol.Task {
	c.t.Helper()
	var tk protocol.Task
	eventually(c.t, d, "task "+id+" finished", func() bool {
		tk = c.task(id)
		return protocol.Terminal(tk.Status)
	})
	return tk
}

// TestKubernetesConnectorOnARealCluster: a delegate process with no
// Kubernetes credentials at all (no KUBECONFIG, not in a pod, a HOME
// without a kubeconfig) deploys, through the manager, to the real control
// plane with a kubernetes connector: the API server's URL and CA, and the
// token of a ServiceAccount limited to one namespace as a stored secret.
// The Deployment runs in the cluster; the token is in neither the task's
// output nor the answers of the API. With a wrong token in the secret the
// task fails saying the cluster refused it, naming the cluster.
func TestKubernetesConnectorOnARealCluster(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "legate")
	c := startCluster(t)
	if r := c.cliStdin(cr.Token, nil, "secret", "create", "K8S_TOKEN", "--from-stdin"); r.code != 0 {
		t.Fatalf("secret create: %+v", r)
	}
	c.mustCLI("connector", "create", "prod", "--type", "kubernetes", "--url", k.API, "--ca-file", k.CAFile,
		"--token-secret", "K8S_TOKEN", "--selector", "k8s")
	c.delegate("k8s", "k8s-no-creds", append(c.seed004Env(c.token("k8s"), "k8s", "k8s"), "HOME="+t.TempDir())...)
	if out := c.mustCLI("delegates", "describe", "k8s"); !strings.Contains(out, "Task types:") || !strings.Contains(out, "kubernetes") {
		t.Errorf("delegates describe does not show the task types the delegate registered:\n%s", out)
	}

	file := writeManifest(t, kubeDeployment("web", "web:1", false))
	id := c.submit("--type", "kubernetes", "--connector", "prod", "--namespace", ns, "-f", file, "--timeout", "60s")
	tk := c.waitFinished(id, 3*time.Minute)
	logs := c.mustCLI("task", "logs", id)
	if tk.Status != protocol.StatusSucceeded || !strings.Contains(logs, "at "+k.API+" (the task's cluster)") ||
		!strings.Contains(logs, "deployment/web: rolled out") {
		t.Fatalf("the deploy through the connector: %+v\n%s", tk, logs)
	}
	if images, _ := k.Images(t, ns, "deployments/web"); len(images) != 1 || images[0] != "web:1" {
		t.Fatalf("the cluster's Deployment's images: %v", images)
	}
	for what, text := range map[string]string{
		"output": logs, "task get": c.mustCLI("task", "get", id, "-o", "json"), "task list": c.mustCLI("task", "list", "-o", "json"),
		"connector get": c.mustCLI("connector", "get", "prod", "-o", "json"), "connector list": c.mustCLI("connector", "list", "-o", "wide"),
	} {
		if strings.Contains(text, cr.Token) {
			t.Errorf("the %s holds the ServiceAccount's token", what)
		}
	}

	if r := c.cliStdin("not-a-valid-token", nil, "secret", "update", "K8S_TOKEN", "--from-stdin"); r.code != 0 {
		t.Fatalf("secret update: %+v", r)
	}
	r := c.cli("task", "run", "--type", "kubernetes", "--connector", "prod", "--namespace", ns, "-f", file)
	want := "the cluster " + k.API + " refused the task's token (401 Unauthorized)"
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("a deploy with a wrong token: exit %d, want 1 saying %q\nstdout: %s\nstderr: %s", r.code, want, r.stdout, r.stderr)
	}
}

// childrenOf returns the PIDs of the child processes of pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	dirs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range dirs {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// TestKubernetesChildDiesWithItsDelegate: the child process in which a
// delegate runs a kubernetes task (here a rollout that never completes)
// does not outlive the delegate: kill -9 the delegate, and the child is
// gone too (it is in a process group of its own, which no signal to the
// delegate's group reaches). The kill comes once the rollout is stuck
// where it stays, so the child writes nothing more: a write to its output
// pipe, whose reader died, would end it anyway (SIGPIPE), but a stuck
// deploy is silent until its timeout.
func TestKubernetesChildDiesWithItsDelegate(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.NamespaceServiceAccount(t, ns, "legate")
	c := startCluster(t)
	del := c.delegate("k8s", "k8s-dies", append(c.seed004Env(c.token("k8s"), "k8s", "k8s"), "KUBECONFIG="+cr.Kubeconfig)...)

	id := c.submit("--type", "kubernetes", "--namespace", ns, "-f", writeManifest(t, kubeDeployment("stuck", "stuck:1", true)), "--timeout", "10m")
	c.waitRunning(id)
	eventually(t, 2*time.Minute, "the rollout stuck at 0 of 2 available", func() bool {
		return strings.Contains(c.mustCLI("task", "logs", id), "deployment/stuck: 0 of 2 updated replicas available")
	})
	var child int
	eventually(t, time.Minute, "the delegate's kubernetes child", func() bool {
		for _, pid := range childrenOf(t, del.cmd.Process.Pid) {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "__legate-kubernetes") {
				child = pid
				return true
			}
		}
		return false
	})
	pidfd, err := unix.PidfdOpen(child, 0)
	if err != nil {
		t.Fatalf("pidfd_open of the child %d: %v", child, err)
	}
	defer unix.Close(pidfd)
	// Should it outlive the delegate, it must not outlive the test.
	t.Cleanup(func() { _ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0) })

	del.signal(syscall.SIGKILL)
	del.wait(time.Minute)
	// The pidfd becomes readable when the child exits: a bounded wait for
	// that event, not a guess at how long it takes.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int((time.Minute).Milliseconds()))
	for err == unix.EINTR {
		n, err = unix.Poll(fds, int((time.Minute).Milliseconds()))
	}
	if err != nil || n != 1 {
		t.Fatalf("the kubernetes child %d is still running a minute after its delegate was killed (poll: %d, %v)", child, n, err)
	}
}
