package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/protocol"
)

// podTaskCredentials makes a ServiceAccount in ns with only the Role that
// docs/task-containers.md documents for container tasks as pods, and
// returns a kubeconfig of its token (the credentials a delegate finds
// outside a cluster as it finds its ServiceAccount's in one).
func podTaskCredentials(t *testing.T, k *k8stest.Cluster, ns string) string {
	t.Helper()
	return k.ServiceAccountWithRole(t, ns, "delegate", k8stest.DocumentedRole(t, "../docs/task-containers.md", "pod-tasks-role")).Kubeconfig
}

// taskPod is the name and phase of a task's pod ("" when it has none).
func taskPod(t *testing.T, k *k8stest.Cluster, ns, taskID string) (name, phase string) {
	t.Helper()
	pods := k.Pods(t, ns, "dev.legate.task="+taskID)
	if len(pods) == 0 {
		return "", ""
	}
	return pods[0].Metadata.Name, pods[0].Status.Phase
}

// TestContainerTaskAsPodOnACluster: a real delegate process with
// DELEGATE_CONTAINER_RUNTIME=kubernetes and a ServiceAccount that has the
// documented Role only is offered container tasks (it registered a
// runtime) and runs them as pods in its namespace on the real API server
// of scripts/k8s-ensure. Killed with kill -9 while its pod runs, it
// leaves the pod; started again (same host name and working directory)
// it deletes it. A task's exit code (patched into the pod's status as a
// kubelet would: kwok runs no container) is the task's, its pod's events
// are in the task's output, and its pod is deleted at the end.
func TestContainerTaskAsPodOnACluster(t *testing.T) {
	t.Parallel()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	kubeconfig := podTaskCredentials(t, k, ns)
	c := startCluster(t)
	env := append(c.seed004Env(c.token("pods"), "pods", ""), "DELEGATE_CONTAINER_RUNTIME=kubernetes", "KUBECONFIG="+kubeconfig,
		"DELEGATE_HOSTNAME=pods-0")
	work := t.TempDir()
	d := start(t, "delegate pods-0", env, "delegate", "--workdir", work)
	c.waitConnected("pods-0", "")
	if !strings.Contains(d.out.String(), "container tasks run as Kubernetes pods") || !strings.Contains(d.out.String(), ns) {
		t.Fatalf("the delegate does not say it runs pods in %s:\n%s", ns, d.out.String())
	}

	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--image", "alpine:3", "--script", "sleep 600"))
	eventually(t, 60*time.Second, "the task's pod to run", func() bool {
		_, phase := taskPod(t, k, ns, id)
		return phase == "Running"
	})
	d.signal(syscall.SIGKILL)
	d.wait(30 * time.Second)
	if name, _ := taskPod(t, k, ns, id); name == "" {
		t.Fatal("the pod is gone before the restart: the test proves nothing")
	}
	d2 := start(t, "delegate pods-0 again", env, "delegate", "--workdir", work)
	eventually(t, 60*time.Second, "the restarted delegate to say it removed what the killed one left", func() bool {
		return strings.Contains(d2.out.String(), "removed the containers and volumes an earlier run of this delegate left")
	})
	eventually(t, 60*time.Second, "the killed run's pod to be gone", func() bool {
		name, _ := taskPod(t, k, ns, id)
		return name == ""
	})
	c.waitConnected("pods-0", "")

	for _, code := range []int{7, 0} {
		id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--image", "alpine:3", "--", "run-checks"))
		var name string
		eventually(t, 60*time.Second, "the task's pod to run", func() bool {
			var phase string
			name, phase = taskPod(t, k, ns, id)
			return phase == "Running"
		})
		// The scheduler records its event asynchronously: wait until it
		// is in the API, so that the task's output surely has it.
		eventually(t, 60*time.Second, "the pod's Scheduled event", func() bool {
			var evs struct{ Items []json.RawMessage }
			k.Do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/events?fieldSelector=involvedObject.name%3D"+name, nil, &evs)
			return len(evs.Items) > 0
		})
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"containerStatuses": []map[string]any{{"name": "task",
			"state": map[string]any{"running": nil, "terminated": map[string]any{"exitCode": code, "reason": "Completed"}}}}}})
		st, body, err := k.Request(context.Background(), "", http.MethodPatch, "/api/v1/namespaces/"+ns+"/pods/"+name+"/status", "application/strategic-merge-patch+json", patch)
		if err != nil || st != http.StatusOK {
			t.Fatalf("patch the pod's status: %d %v %s", st, err, body)
		}
		var task protocol.Task
		eventually(t, 60*time.Second, "the task to end", func() bool {
			task = c.task(id)
			return task.Status == protocol.StatusSucceeded || task.Status == protocol.StatusFailed
		})
		want := protocol.StatusSucceeded
		if code != 0 {
			want = protocol.StatusFailed
		}
		if task.Status != want || task.ExitCode == nil || *task.ExitCode != code {
			t.Fatalf("exit %d: %+v", code, task)
		}
		logs := c.mustCLI("task", "logs", id)
		if !strings.Contains(logs, "[pod] Normal Scheduled: Successfully assigned "+ns+"/"+name) {
			t.Errorf("the pod's events are not in the task's output:\n%s", logs)
		}
		eventually(t, 60*time.Second, "the ended task's pod to be gone", func() bool {
			n, _ := taskPod(t, k, ns, id)
			return n == ""
		})
	}
}
