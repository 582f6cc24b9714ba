package containers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/k8stest"
	"github.com/legate-dev/legate/internal/protocol"
)

// The tests of this file run container tasks as pods on the real control
// plane of scripts/k8s-ensure, as a ServiceAccount that has only the Role
// of docs/task-containers.md in its namespace. The limit: kwok stands in
// for the kubelet, so no container runs (no log, no exit of its own).
// Where a container would end, the test patches the pod's status as a
// kubelet would (the admin's credentials, the status subresource); the
// rest (the pod and Secret created, read back from the API, followed,
// deleted) is the cluster's own behaviour.

// podCluster is a namespace of the cluster and a Runtime that runs
// pods there as a ServiceAccount with the Role docs/task-containers.md
// documents (pod-tasks-role) and nothing else.
func podCluster(t *testing.T, owner string) (*k8stest.Cluster, string, *Runtime) {
	t.Helper()
	k := k8stest.Require(t)
	ns := k.Namespace(t)
	cr := k.ServiceAccountWithRole(t, ns, "delegate", k8stest.DocumentedRole(t, "../../../docs/task-containers.md", "pod-tasks-role"))
	env := map[string]string{EnvContainerRuntime: "kubernetes", "KUBECONFIG": cr.Kubeconfig}
	c, err := Find(func(k string) string { return env[k] }, owner, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != RuntimeKubernetes || c.Pods.Namespace != ns {
		t.Fatalf("Find: %+v", c)
	}
	return k, ns, c
}

// apiPod is what the tests read of a pod.
type apiPod struct {
	Metadata struct {
		Name   string            `json:"name"`
		UID    string            `json:"uid"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec   json.RawMessage `json:"spec"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

// taskPods lists the pods of a task.
func taskPods(t *testing.T, k *k8stest.Cluster, ns, taskID string) []apiPod {
	t.Helper()
	var list struct {
		Items []apiPod `json:"items"`
	}
	k.Do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods?labelSelector="+LabelTask+"%3D"+taskID, nil, &list)
	return list.Items
}

// waitPod waits until the task's pod exists and kwok made it Running.
func waitPod(t *testing.T, k *k8stest.Cluster, ns, taskID string) apiPod {
	t.Helper()
	var p apiPod
	k8stest.Eventually(t, time.Minute, "the task's pod running", func() (bool, string) {
		pods := taskPods(t, k, ns, taskID)
		if len(pods) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods))
		}
		p = pods[0]
		return p.Status.Phase == "Running", p.Status.Phase
	})
	return p
}

// waitNoPod waits until the task has no pod left (reaped).
func waitNoPod(t *testing.T, k *k8stest.Cluster, ns, taskID string) {
	t.Helper()
	k8stest.Eventually(t, time.Minute, "the task's pod deleted", func() (bool, string) {
		n := len(taskPods(t, k, ns, taskID))
		return n == 0, fmt.Sprintf("%d pods", n)
	})
}

// patchStatus patches a pod's status as a kubelet would (strategic merge
// of the container statuses by name).
func patchStatus(t *testing.T, k *k8stest.Cluster, ns, pod string, status map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"status": status})
	code, body, err := k.Request(context.Background(), "", http.MethodPatch, "/api/v1/namespaces/"+ns+"/pods/"+pod+"/status", "application/strategic-merge-patch+json", b)
	if err != nil || code != http.StatusOK {
		t.Fatalf("patch the pod's status: %d %v %s", code, err, body)
	}
}

// exitStatus is the status of a container that exited with code.
func exitStatus(code int) map[string]any {
	return map[string]any{"containerStatuses": []map[string]any{{"name": "task",
		"state": map[string]any{"running": nil, "terminated": map[string]any{"exitCode": code, "reason": "Error"}}}}}
}

type runResult struct {
	x   Exit
	err error
	out *notifyWriter
}

// runAsync runs task on c and returns where its exit comes.
func runAsync(ctx context.Context, c *Runtime, task Task) (<-chan runResult, *notifyWriter) {
	out := &notifyWriter{}
	ch := make(chan runResult, 1)
	go func() {
		x, err := runTask(ctx, c, task, out)
		ch <- runResult{x, err, out}
	}()
	return ch, out
}

// TestPodTaskOnACluster: a container task becomes a pod with the task's
// image, command, working dir, environment, resources, the seed's
// security context and its volumes (read back from the API); its secret
// values are in a Secret owned by the pod, never in the pod's spec; the
// pod runs without a ServiceAccount token; the pod's events are in the
// task's output; the container's exit code (patched in as a kubelet would)
// decides the result; the pod and its Secret are deleted at the end.
func TestPodTaskOnACluster(t *testing.T) {
	t.Parallel()
	k, ns, c := podCluster(t, "owner1")
	c.AllowPrivileged, c.HostPaths = true, []string{"/data"}
	uid, gid := int64(1000), int64(2000)
	spec := protocol.TaskSpec{Type: protocol.TaskContainer,
		Env:       map[string]string{"MODE": "fast"},
		SecretEnv: map[string]string{"API_TOKEN": "s3cr3t-value"},
		Container: &protocol.ContainerSpec{
			Image: "registry.example/tool:1.2", Command: []string{"tool", "--check", "all"}, WorkingDir: "/work",
			Resources: &protocol.ContainerResources{CPU: 0.5, MemoryMiB: 256},
			SecurityContext: &protocol.SecurityContext{Privileged: true, ReadOnlyRootFilesystem: true, RunAsUser: &uid, RunAsGroup: &gid,
				AddCapability: []string{"NET_ADMIN"}, DropCapability: []string{"ALL"}},
			Volumes: []protocol.Volume{
				{Name: "scratch_1", MountPath: "/scratch", EmptyDir: &protocol.EmptyDirVolume{SizeMiB: 64}},
				{Name: "data", MountPath: "/data", HostPath: &protocol.HostPathVolume{Path: "/data/in", ReadOnly: true}},
			},
		}}
	task := taskOf("task-1", spec)
	task.KillGrace = 3 * time.Second
	ch, out := runAsync(t.Context(), c, task)
	p := waitPod(t, k, ns, "task-1")
	if p.Metadata.Labels[LabelOwner] != "owner1" || p.Metadata.Labels[LabelRun] == "" {
		t.Fatalf("labels: %v", p.Metadata.Labels)
	}
	var got struct {
		RestartPolicy                 string           `json:"restartPolicy"`
		AutomountServiceAccountToken  *bool            `json:"automountServiceAccountToken"`
		TerminationGracePeriodSeconds int64            `json:"terminationGracePeriodSeconds"`
		Volumes                       []map[string]any `json:"volumes"`
		Containers                    []map[string]any `json:"containers"`
	}
	if err := json.Unmarshal(p.Spec, &got); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p.Spec), "s3cr3t-value") {
		t.Fatal("the secret value is in the pod's spec")
	}
	if got.RestartPolicy != "Never" || got.AutomountServiceAccountToken == nil || *got.AutomountServiceAccountToken || got.TerminationGracePeriodSeconds != 3 {
		t.Fatalf("pod spec: %+v", got)
	}
	wantVolumes := []map[string]any{
		{"name": "v0", "emptyDir": map[string]any{"sizeLimit": "64Mi"}},
		{"name": "v1", "hostPath": map[string]any{"path": "/data/in", "type": ""}},
	}
	if diff := cmp.Diff(wantVolumes, got.Volumes); diff != "" {
		t.Fatalf("volumes (-want +got):\n%s", diff)
	}
	ct := got.Containers[0]
	for _, f := range []string{"terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy"} {
		delete(ct, f) // the API's defaults
	}
	wantContainer := map[string]any{
		"name": "task", "image": "registry.example/tool:1.2", "command": []any{"tool", "--check", "all"}, "workingDir": "/work",
		"env": []any{
			map[string]any{"name": "LEGATE_TASK_ID", "value": "task-1"},
			map[string]any{"name": "MODE", "value": "fast"},
			map[string]any{"name": "API_TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": p.Metadata.Name, "key": "env0"}}},
		},
		"resources": map[string]any{"limits": map[string]any{"cpu": "500m", "memory": "256Mi"}, "requests": map[string]any{"cpu": "500m", "memory": "256Mi"}},
		"securityContext": map[string]any{"privileged": true, "readOnlyRootFilesystem": true, "runAsUser": float64(1000), "runAsGroup": float64(2000),
			"capabilities": map[string]any{"add": []any{"NET_ADMIN"}, "drop": []any{"ALL"}}},
		"volumeMounts": []any{
			map[string]any{"name": "v0", "mountPath": "/scratch"},
			map[string]any{"name": "v1", "mountPath": "/data", "readOnly": true},
		},
	}
	if diff := cmp.Diff(wantContainer, ct); diff != "" {
		t.Fatalf("container (-want +got):\n%s", diff)
	}
	var secret struct {
		Metadata struct {
			OwnerReferences []struct {
				Kind, Name, UID string
			} `json:"ownerReferences"`
		} `json:"metadata"`
		Data map[string][]byte `json:"data"`
	}
	k.Do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/secrets/"+p.Metadata.Name, nil, &secret)
	if string(secret.Data["env0"]) != "s3cr3t-value" || len(secret.Metadata.OwnerReferences) != 1 || secret.Metadata.OwnerReferences[0].UID != p.Metadata.UID {
		t.Fatalf("the pod's Secret: %+v", secret)
	}

	// The scheduler records its event asynchronously: wait until it is
	// in the API, so that the output surely has it.
	k8stest.Eventually(t, time.Minute, "the Scheduled event", func() (bool, string) {
		var evs struct{ Items []struct{ Reason string } }
		k.Do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/events?fieldSelector=involvedObject.name%3D"+p.Metadata.Name, nil, &evs)
		return len(evs.Items) > 0, fmt.Sprint(evs.Items)
	})
	patchStatus(t, k, ns, p.Metadata.Name, exitStatus(3))
	r := <-ch
	if r.err != nil || exitCode(r.x) != 3 || r.x.Err == nil || r.x.Err.Error() != "exit status 3" || isFault(r.x.Err) {
		t.Fatalf("exit: %+v %v\n%s", r.x, r.err, out.String())
	}
	if !strings.Contains(out.String(), "[pod] Normal Scheduled: Successfully assigned "+ns+"/"+p.Metadata.Name) {
		t.Fatalf("no scheduling event in the output:\n%s", out.String())
	}
	waitNoPod(t, k, ns, "task-1")
	if code := k.Do(t, http.MethodGet, "/api/v1/namespaces/"+ns+"/secrets/"+p.Metadata.Name, nil, nil, http.StatusNotFound); code != http.StatusNotFound {
		t.Fatalf("the Secret is still there: %d", code)
	}

	// Exit 0 with a script: succeeded; the script is in the Secret too.
	ch, out = runAsync(t.Context(), c, taskOf("task-2", protocol.TaskSpec{Type: protocol.TaskContainer,
		Container: &protocol.ContainerSpec{Image: "alpine:3", Script: "echo $TOKEN"}}))
	p = waitPod(t, k, ns, "task-2")
	if !strings.Contains(string(p.Spec), `"command":["/bin/sh","-c","eval \"$LEGATE_SCRIPT\""]`) || strings.Contains(string(p.Spec), "echo $TOKEN") {
		t.Fatalf("script pod spec: %s", p.Spec)
	}
	patchStatus(t, k, ns, p.Metadata.Name, exitStatus(0))
	if r := <-ch; r.err != nil || r.x.Err != nil || exitCode(r.x) != 0 {
		t.Fatalf("exit: %+v %v\n%s", r.x, r.err, out.String())
	}
	waitNoPod(t, k, ns, "task-2")
}

// TestPodTaskTimeoutAndCancel: a pod that runs on (kwok never ends it) is
// deleted when the task times out, and when it is cancelled; both say
// that the pod was deleted (the executor's notice), and the pod is gone
// from the cluster.
func TestPodTaskTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	k, ns, c := podCluster(t, "owner2")
	spec := protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "alpine:3", Command: []string{"sleep", "infinity"}}}

	task := taskOf("slow", spec)
	task.Timeout, task.KillGrace = 3*time.Second, time.Second
	ch, _ := runAsync(t.Context(), c, task)
	r := <-ch
	if r.err != nil || !strings.HasPrefix(r.x.Stopped, "deleted the pod legate-") {
		t.Fatalf("timeout: %+v %v\n%s", r.x, r.err, r.out.String())
	}
	if n := len(taskPods(t, k, ns, "slow")); n != 0 {
		t.Fatalf("%d pods left after the timeout", n)
	}

	ctx, cancel := context.WithCancel(t.Context())
	task = taskOf("cancelled", spec)
	task.KillGrace = time.Second
	ch, _ = runAsync(ctx, c, task)
	waitPod(t, k, ns, "cancelled")
	cancel()
	r = <-ch
	if r.err != nil || !strings.HasPrefix(r.x.Stopped, "deleted the pod legate-") {
		t.Fatalf("cancel: %+v %v\n%s", r.x, r.err, r.out.String())
	}
	if n := len(taskPods(t, k, ns, "cancelled")); n != 0 {
		t.Fatalf("%d pods left after the cancel", n)
	}
}

// TestPodTaskStartDeadline: a pod no node can take (more memory than the
// kwok node has) stays Pending; its FailedScheduling event is in the
// task's output, and the task fails at the start deadline with that
// reason, its pod deleted. A pod whose image cannot be pulled (the
// kubelet's waiting status, patched in as a kubelet would) fails with the
// pull's message. The test passes the deadline itself once the cluster
// said what it says (no race with a timer); the timer's own passing is
// TestPodTaskStartDeadlineTimer's.
func TestPodTaskStartDeadline(t *testing.T) {
	t.Parallel()
	k, ns, c := podCluster(t, "owner3")
	spec := protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "alpine:3",
		Resources: &protocol.ContainerResources{MemoryMiB: 1 << 24}}}
	for _, tc := range []struct {
		task, want string
		status     map[string]any // patched in once the pod is pending
	}{
		{task: "unschedulable", want: "Unschedulable: 0/1 nodes are available: 1 Insufficient memory"},
		{task: "pull", want: "ErrImagePull: pull access denied for alpine", status: map[string]any{"containerStatuses": []map[string]any{{
			"name": "task", "image": "alpine:3", "imageID": "", "ready": false, "restartCount": 0,
			"state": map[string]any{"waiting": map[string]any{"reason": "ErrImagePull", "message": "pull access denied for alpine"}}}}}},
	} {
		pass := make(chan time.Time)
		c.Pods.startDeadline = func() <-chan time.Time { return pass }
		ch, out := runAsync(t.Context(), c, taskOf(tc.task, spec))
		k8stest.Eventually(t, time.Minute, tc.task+": the FailedScheduling event in the output", func() (bool, string) {
			return strings.Contains(out.String(), "[pod] Warning FailedScheduling: 0/1 nodes are available: 1 Insufficient memory"), out.String()
		})
		if tc.status != nil {
			pods := taskPods(t, k, ns, tc.task)
			patchStatus(t, k, ns, pods[0].Metadata.Name, tc.status)
			k8stest.Eventually(t, time.Minute, "the waiting status in the output", func() (bool, string) {
				return strings.Contains(out.String(), "[pod] container waiting: "+tc.want), out.String()
			})
		}
		close(pass)
		r := <-ch
		if r.err != nil || r.x.Err == nil || isFault(r.x.Err) || !strings.Contains(r.x.Err.Error(), "did not start within 5m0s (LEGATE_POD_START_DEADLINE): "+tc.want) {
			t.Fatalf("%s: %+v %v\n%s", tc.task, r.x, r.err, out.String())
		}
		if n := len(taskPods(t, k, ns, tc.task)); n != 0 {
			t.Fatalf("%s: %d pods left", tc.task, n)
		}
	}
}

// TestPodTaskStartDeadlineTimer: the start deadline's own timer fails a
// pod that stays Pending.
func TestPodTaskStartDeadlineTimer(t *testing.T) {
	t.Parallel()
	k, ns, c := podCluster(t, "owner4")
	c.Pods.StartDeadline = 2 * time.Second
	spec := protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "alpine:3",
		Resources: &protocol.ContainerResources{MemoryMiB: 1 << 24}}}
	x, err := runTask(t.Context(), c, taskOf("pending", spec), nil)
	if err != nil || x.Err == nil || !strings.Contains(x.Err.Error(), "did not start within 2s (LEGATE_POD_START_DEADLINE)") {
		t.Fatalf("%+v %v", x, err)
	}
	if n := len(taskPods(t, k, ns, "pending")); n != 0 {
		t.Fatalf("%d pods left", n)
	}
}

// TestPodSweep: Runtime.Sweep, as a delegate runs it at start, deletes
// the pods and Secrets an earlier run of the same delegate (its owner
// label) left, and nothing of another delegate's.
func TestPodSweep(t *testing.T) {
	t.Parallel()
	k, ns, mine := podCluster(t, "sweeper")
	other := *mine
	other.Owner = "someone-else"
	spec := protocol.TaskSpec{Type: protocol.TaskContainer, SecretEnv: map[string]string{"K": "v"},
		Container: &protocol.ContainerSpec{Image: "alpine:3", Command: []string{"sleep", "infinity"}}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chOther, _ := runAsync(ctx, &other, taskOf("theirs", spec))
	// A run of this delegate that "crashed": its pod and Secret are made
	// as a run makes them, and nothing ends it.
	ex, err := mine.NewRun(taskOf("left", spec))
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Start(t.Context(), &notifyWriter{}); err != nil {
		t.Fatal(err)
	}
	ex.(*podExec).stopFollow()
	waitPod(t, k, ns, "left")
	waitPod(t, k, ns, "theirs")
	pods, secrets, err := mine.Sweep(t.Context())
	if err != nil || pods != 1 || secrets != 1 {
		t.Fatalf("sweep: %d pods, %d secrets, %v", pods, secrets, err)
	}
	waitNoPod(t, k, ns, "left")
	if n := len(taskPods(t, k, ns, "theirs")); n != 1 {
		t.Fatalf("the other delegate's pod: %d", n)
	}
	cancel()
	<-chOther
}
