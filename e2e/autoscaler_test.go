package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestAutoscalerScalesAStatefulSetOnItsQueue is the proof of the
// autoscaler on the real API server: `legate autoscaler` (a real process,
// with a ServiceAccount that may only get and patch the StatefulSet's
// scale) scales a StatefulSet from 1 to its maximum when 50 tasks wait for
// its selector, the queue drains, and it scales back to its minimum
// without interrupting a long task on the highest-ordinal replica: the
// replicas are lowered only once that task has finished, and it succeeds.
//
// kwok's pods run nothing, so the test stands in for them: it follows the
// StatefulSet's spec.replicas as read from the cluster, starting a real
// delegate process (hostname POD, as in a pod) for each ordinal below it
// and stopping (SIGTERM: the delegate's own drain) those above.
func TestAutoscalerScalesAStatefulSetOnItsQueue(t *testing.T) {
	k := k8stest.Require(t)
	c := startSpecCluster(t)
	ns := k.Namespace(t)
	token := c.token("pool")
	out := c.mustCLI("manifest", "kubernetes", "--token", token, "--name", "pool", "--namespace", ns, "--rbac", "namespace",
		"--tags", "linux", "--upgrade", "self-managed", "--env", "DELEGATE_TASK_CAPACITY=1", "--autoscale", "1:4")
	k.Kubectl(t, out, "apply", "--server-side", "--field-manager", "legate-e2e", "--validate=strict", "-f", "-")
	sts := strings.TrimPrefix(strings.TrimSpace(k.Kubectl(t, "", "get", "statefulset", "-n", ns, "-o", "name")), "statefulset.apps/")
	// The autoscaler runs as its Deployment says, with its ServiceAccount
	// (the manifest's Role: get and patch of the StatefulSet's scale), on
	// the host: kwok runs no container. Faster ticks for the test.
	var args []string
	if err := json.Unmarshal([]byte(k.Kubectl(t, "", "get", "deployment", sts+"-autoscaler", "-n", ns, "-o",
		"jsonpath={.spec.template.spec.containers[0].args}")), &args); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "autoscaler.kubeconfig")
	if err := os.WriteFile(kubeconfig, k.TokenKubeconfig(k.Token(t, ns, sts+"-autoscaler"), ns), 0o600); err != nil {
		t.Fatal(err)
	}
	// Its API key, as docs/elastic.md says to make it: a service
	// account's, with the viewer role.
	c.mustCLI("user", "create", "autoscaler", "--service-account")
	c.mustCLI("role", "bind", "viewer", "--service-account", "autoscaler")
	lines := strings.Split(strings.TrimSpace(c.mustCLI("apikey", "create", "autoscaler", "--owner", "autoscaler")), "\n")
	key := strings.TrimSpace(lines[len(lines)-1])
	as := start(t, "autoscaler", []string{"KUBECONFIG=" + kubeconfig, "LEGATE_URL=" + c.url, "LEGATE_API_KEY=" + key},
		append(args, "--interval", "200ms", "--cool-down", "1s")...)

	dir := t.TempDir()
	gate, longGate := filepath.Join(dir, "gate"), filepath.Join(dir, "long-gate")
	running := map[int]*proc{}
	var long string
	longDone := func() bool { return long != "" && c.task(long).Status == protocol.StatusSucceeded }
	maxSeen := 0
	// follow makes the delegates what spec.replicas says, and checks
	// that no replica went while the long task ran.
	follow := func() int {
		n := k.GetStatefulSet(t, ns, sts).Spec.Replicas
		maxSeen = max(maxSeen, n)
		if long != "" && n < 4 && !longDone() {
			t.Fatalf("replicas lowered to %d while the long task %s runs on %s-3 (%s)", n, long, sts, c.task(long).Status)
		}
		for i := range n {
			if running[i] == nil {
				env := append(c.seed004Env(token, "pool", "linux"), "DELEGATE_TYPE=SHELL", "DELEGATE_TASK_CAPACITY=1")
				running[i] = c.delegate("pool", sts+"-"+strconv.Itoa(i), env...)
			}
		}
		for i, p := range running {
			if i >= n {
				p.signal(syscall.SIGTERM)
				if code := p.wait(time.Minute); code != 0 {
					t.Fatalf("%s-%d exited %d after SIGTERM", sts, i, code)
				}
				delete(running, i)
			}
		}
		return n
	}
	if n := follow(); n != 1 {
		t.Fatalf("replicas at the start: %d, want 1", n)
	}

	// 50 tasks for the selector, held until the test opens their gate.
	var ids []string
	for range 50 {
		ids = append(ids, c.submit("--selector", "linux", "--script", fmt.Sprintf("while [ ! -f %s ]; do sleep 0.05; done", gate)))
	}
	eventually(t, 2*time.Minute, "the StatefulSet scaled to its maximum, 4", func() bool { return follow() == 4 })
	// A long task pinned to the highest-ordinal replica (its hostname).
	long = c.submit("--selector", sts+"-3", "--script", fmt.Sprintf("while [ ! -f %s ]; do sleep 0.05; done; echo long-done", longGate))
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the queue drained", func() bool {
		follow()
		var sig protocol.QueueSignal
		out := c.mustCLI("task", "queue", "--selectors", "linux", "-o", "json")
		return json.Unmarshal([]byte(out), &sig) == nil && sig.Queued == 0
	})
	eventually(t, time.Minute, "the long task running on "+sts+"-3", func() bool {
		follow()
		tk := c.task(long)
		return tk.Status == protocol.StatusRunning && tk.DelegateHostname == sts+"-3"
	})
	// The autoscaler holds back: the highest ordinal runs the long task.
	eventually(t, time.Minute, "the autoscaler waiting for "+sts+"-3", func() bool {
		follow()
		return strings.Contains(as.out.String(), "the highest-ordinal replica runs tasks")
	})
	if n := follow(); n != 4 {
		t.Fatalf("replicas %d while the long task runs, want 4", n)
	}
	if err := os.WriteFile(longGate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the StatefulSet scaled back to its minimum, 1", func() bool { return follow() == 1 })
	tk := c.task(long)
	if tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != sts+"-3" {
		t.Fatalf("the long task: %s on %s (%s), want succeeded on %s-3", tk.Status, tk.DelegateHostname, tk.Error, sts)
	}
	// The first scale-in came after the long task ended (one host, one
	// clock: the order of two events, not a duration).
	if in := scaledAt(t, as.out.String(), 4, 3); tk.FinishedAt == nil || in.Before(*tk.FinishedAt) {
		t.Errorf("scaled in from 4 at %s, before the long task on %s-3 finished (%v)", in, sts, tk.FinishedAt)
	}
	for _, id := range ids {
		if tk := c.task(id); tk.Status != protocol.StatusSucceeded {
			t.Errorf("task %s: %s (%s), want succeeded", id, tk.Status, tk.Error)
		}
	}
	if maxSeen != 4 {
		t.Errorf("largest replicas seen: %d, want 4", maxSeen)
	}
	t.Logf("autoscaler decisions:\n%s", grepLines(as.out.String(), "scaled"))
}

// scaledAt is when the autoscaler's log says it scaled from to.
func scaledAt(t *testing.T, log string, from, to int) time.Time {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "msg=scaled") && strings.Contains(l, fmt.Sprintf(" from=%d to=%d ", from, to)) {
			ts, _, _ := strings.Cut(strings.TrimPrefix(l, "time="), " ")
			at, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				t.Fatalf("autoscaler log line %q: %v", l, err)
			}
			return at
		}
	}
	t.Fatalf("the autoscaler never scaled from %d to %d:\n%s", from, to, log)
	return time.Time{}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
