package containers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/kube"
	"github.com/legate-dev/legate/internal/protocol"
)

// A delegate installed in Kubernetes has no container runtime of its own:
// it runs container tasks as pods, one per task, in its own namespace,
// through the API with its ServiceAccount's credentials (see Pods).

// RuntimeKubernetes is the container runtime of a delegate that runs
// container tasks as pods (EnvContainerRuntime=kubernetes; the default
// in a pod without podman or docker): what it registers.
const RuntimeKubernetes = "kubernetes"

// EnvPodStartDeadline bounds how long a task's pod may take to start
// (scheduled, image pulled, container started): a Go duration.
const EnvPodStartDeadline = "LEGATE_POD_START_DEADLINE"

// DefaultPodStartDeadline is the start deadline of a task's pod when
// EnvPodStartDeadline is unset: a slow image pull fits, a pod that cannot
// be scheduled or pulled fails with the reason instead of holding the
// task until its timeout.
const DefaultPodStartDeadline = 5 * time.Minute

// podLogDrain is how long the delegate still reads a pod's log once its
// container ended (the kubelet closes the stream at the end; a stream that
// stays open is not waited for longer).
const podLogDrain = 10 * time.Second

// podContainer is the name of the one container of a task's pod.
const podContainer = "task"

// Pods is where and how a delegate runs container tasks as pods.
type Pods struct {
	// Config is the API and the credentials (the ServiceAccount's in a
	// pod, a kubeconfig's elsewhere).
	Config kube.Config
	// Namespace holds the task pods and their Secrets: the
	// credentials' own namespace.
	Namespace string
	// StartDeadline bounds a pod's start (EnvPodStartDeadline).
	StartDeadline time.Duration
	// startDeadline, when set, replaces the timer of StartDeadline (tests
	// decide when it passes).
	startDeadline func() <-chan time.Time
}

// findPods is the Runtime of a delegate that runs container tasks as
// pods: the API found as kubectl would (kube.Load), nothing connected
// yet (the delegate's idle footprint does not grow: a client exists
// only while a container task runs).
func findPods(getenv func(string) string, owner, platform string) (*Runtime, error) {
	cfg, err := kube.Load(getenv, kube.ServiceAccountDir)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", EnvContainerRuntime, RuntimeKubernetes, err)
	}
	p := &Pods{Config: cfg, Namespace: cfg.Namespace, StartDeadline: DefaultPodStartDeadline}
	if p.Namespace == "" {
		p.Namespace = "default" // what kubectl uses too
	}
	if s := strings.TrimSpace(getenv(EnvPodStartDeadline)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s=%q: give a positive duration, such as 5m or 90s", EnvPodStartDeadline, s)
		}
		p.StartDeadline = d
	}
	return &Runtime{Name: RuntimeKubernetes, Owner: owner, Platform: platform, Pods: p}, nil
}

// checkPod refuses what a pod cannot be given: an EFS volume (the
// cluster mounts EFS through its CSI driver and a PersistentVolume an
// operator made, not what a task names), and a pipeline stage's shared
// workspace. The latter could be a PersistentVolumeClaim, but a claim
// needs a storage class able to move a ReadWriteOnce volume between the
// stage's pods (a wait for attach and detach on each step), it would
// outlive a crashed delegate without an owner to go with, and the
// stage's kubernetes and helm steps read the workspace from the
// delegate's own filesystem, which a claim is not on: so it is refused,
// and the stage runs on a delegate with podman or docker, or as one step.
func checkPod(cs *protocol.ContainerSpec) error {
	for i, v := range cs.Volumes {
		switch {
		case v.EFS != nil:
			return fmt.Errorf("container.volumes[%d].efs: a delegate that runs container tasks as Kubernetes pods does not mount EFS file systems (mount the file system in the cluster as a PersistentVolume, or run the task on an ECS delegate)", i)
		case v.EmptyDir != nil && v.EmptyDir.Workspace != nil:
			return fmt.Errorf("container.volumes[%d] %q: a pipeline stage's shared workspace is not kept between pods on a delegate that runs container tasks as Kubernetes pods (run the stage on a delegate with podman or docker, or do its work in one step)", i, v.Name)
		}
	}
	return nil
}

// podRun names one run of a container task as a pod.
type podRun struct {
	Name   string            // the pod's and its Secret's name
	Labels map[string]string // on both
	// Env are the task's plain variables (name, value); Secret its
	// secret ones and the script, by key in the Secret.
	Env    [][2]string
	Secret map[string]string
	// SecretEnv maps a variable name to its key in the Secret.
	SecretEnv [][2]string
	// Grace is the pod's terminationGracePeriodSeconds; Deadline its
	// activeDeadlineSeconds (0: none).
	Grace, Deadline int64
}

// labelValue is s when it is a valid label value, else a hash of it.
func labelValue(s string) string {
	ok := len(s) <= 63
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		ok = alnum || (i > 0 && i < len(s)-1 && strings.IndexByte("-_.", c) >= 0)
	}
	if ok {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// newPodRun names the run of task t and splits its environment into
// what the pod's spec may show and what goes into its Secret.
func newPodRun(owner, run string, t Task, startDeadline time.Duration) podRun {
	r := podRun{
		Name:   "legate-" + run,
		Labels: map[string]string{LabelOwner: labelValue(owner), LabelTask: labelValue(t.ID), LabelRun: run},
		Secret: map[string]string{},
		Grace:  int64((t.KillGrace + time.Second - 1) / time.Second),
	}
	r.Env = append(r.Env, [2]string{"LEGATE_TASK_ID", t.ID})
	for _, kv := range t.Env {
		k, v, _ := strings.Cut(kv, "=")
		if _, secret := t.SecretEnv[k]; !secret {
			r.Env = append(r.Env, [2]string{k, v})
		}
	}
	// Secret keys are [-._a-zA-Z0-9]+, variable names need not be.
	for i, k := range sortedKeys(t.SecretEnv) {
		key := "env" + strconv.Itoa(i)
		r.Secret[key] = t.SecretEnv[k]
		r.SecretEnv = append(r.SecretEnv, [2]string{k, key})
	}
	if t.Spec.Script != "" {
		// The script may hold resolved stored secrets: not in the spec.
		r.Secret["script"] = t.Spec.Script
		r.SecretEnv = append(r.SecretEnv, [2]string{ScriptEnv, "script"})
	}
	if t.Timeout > 0 {
		// The pod ends itself if the delegate that should end it is gone
		// for good (no restart of it sweeps it): after the task's timeout
		// and its start deadline.
		r.Deadline = int64((t.Timeout+startDeadline)/time.Second) + r.Grace + 1
	}
	return r
}

// obj is a JSON object in the making.
type obj = map[string]any

// podManifest is the pod of run for spec: a pure function of its inputs.
// The pod runs without a ServiceAccount token: the delegate's may create
// pods and read Secrets in its namespace, which a task's image must not
// inherit (a task that deploys is a kubernetes or helm task, run by the
// delegate with its own credentials).
func podManifest(ns string, cs *protocol.ContainerSpec, run podRun) obj {
	env := []obj{}
	for _, kv := range run.Env {
		env = append(env, obj{"name": kv[0], "value": kv[1]})
	}
	for _, kv := range run.SecretEnv {
		env = append(env, obj{"name": kv[0], "valueFrom": obj{"secretKeyRef": obj{"name": run.Name, "key": kv[1]}}})
	}
	c := obj{"name": podContainer, "image": cs.Image, "env": env}
	switch {
	case len(cs.Command) > 0:
		c["command"] = cs.Command
	case cs.Script != "":
		c["command"] = []string{"/bin/sh", "-c", `eval "$` + ScriptEnv + `"`}
	}
	if cs.WorkingDir != "" {
		c["workingDir"] = cs.WorkingDir
	}
	if r := cs.Resources; r != nil && (r.CPU > 0 || r.MemoryMiB > 0) {
		lim := obj{}
		if r.CPU > 0 {
			lim["cpu"] = strconv.FormatInt(max(1, int64(r.CPU*1000)), 10) + "m"
		}
		if r.MemoryMiB > 0 {
			lim["memory"] = strconv.FormatInt(r.MemoryMiB, 10) + "Mi"
		}
		c["resources"] = obj{"limits": lim} // requests default to the limits
	}
	if sc := cs.SecurityContext; sc != nil {
		c["securityContext"] = podSecurityContext(sc)
	}
	var vols, mounts []obj
	for i, v := range cs.Volumes {
		name := "v" + strconv.Itoa(i) // spec names allow what pod volume names do not
		m := obj{"name": name, "mountPath": path.Clean(v.MountPath)}
		switch {
		case v.EmptyDir != nil:
			ed := obj{}
			if v.EmptyDir.SizeMiB > 0 {
				ed["sizeLimit"] = strconv.FormatInt(v.EmptyDir.SizeMiB, 10) + "Mi"
			}
			vols = append(vols, obj{"name": name, "emptyDir": ed})
		case v.HostPath != nil:
			vols = append(vols, obj{"name": name, "hostPath": obj{"path": path.Clean(v.HostPath.Path)}})
			if v.HostPath.ReadOnly {
				m["readOnly"] = true
			}
		}
		mounts = append(mounts, m)
	}
	if len(mounts) > 0 {
		c["volumeMounts"] = mounts
	}
	spec := obj{
		"restartPolicy":                 "Never",
		"automountServiceAccountToken":  false,
		"enableServiceLinks":            false,
		"terminationGracePeriodSeconds": run.Grace,
		"containers":                    []obj{c},
	}
	if len(vols) > 0 {
		spec["volumes"] = vols
	}
	if run.Deadline > 0 {
		spec["activeDeadlineSeconds"] = run.Deadline
	}
	return obj{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": obj{"name": run.Name, "namespace": ns, "labels": run.Labels},
		"spec":     spec,
	}
}

// podSecurityContext is the container's securityContext for the seed's
// fields.
func podSecurityContext(sc *protocol.SecurityContext) obj {
	out := obj{}
	if sc.Privileged {
		out["privileged"] = true
	}
	if sc.ReadOnlyRootFilesystem {
		out["readOnlyRootFilesystem"] = true
	}
	if sc.RunAsUser != nil {
		out["runAsUser"] = *sc.RunAsUser
	}
	if sc.RunAsGroup != nil {
		out["runAsGroup"] = *sc.RunAsGroup
	}
	caps := obj{}
	if len(sc.AddCapability) > 0 {
		caps["add"] = sc.AddCapability
	}
	if len(sc.DropCapability) > 0 {
		caps["drop"] = sc.DropCapability
	}
	if len(caps) > 0 {
		out["capabilities"] = caps
	}
	return out
}

// secretManifest is the Secret of run, owned by the pod (uid) so that the
// garbage collector deletes it with the pod, whoever deletes that.
func secretManifest(ns, podUID string, run podRun) obj {
	return obj{
		"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
		"metadata": obj{"name": run.Name, "namespace": ns, "labels": run.Labels,
			"ownerReferences": []obj{{"apiVersion": "v1", "kind": "Pod", "name": run.Name, "uid": podUID}}},
		"stringData": run.Secret,
	}
}

// podsPath and secretsPath are the collections of ns.
func podsPath(ns string) string    { return "/api/v1/namespaces/" + ns + "/pods" }
func secretsPath(ns string) string { return "/api/v1/namespaces/" + ns + "/secrets" }

// podAPIError says what an answer of the API means for a task: refused by
// RBAC or unreachable is the delegate's fault (another delegate may run
// the task), invalid is the task's.
func podAPIError(what string, err error) error {
	var se *kube.StatusError
	if errors.As(err, &se) && (se.Code == 400 || se.Code == 422) {
		return fmt.Errorf("%s: the cluster refused it: %w", what, err)
	}
	if errors.As(err, &se) && se.Code == 403 {
		return faultf("%s: %v (the delegate's ServiceAccount needs the Role of docs/task-containers.md: pods, pods/log, events and secrets in its namespace)", what, err)
	}
	return faultf("%s: %v", what, err)
}

// sweep deletes every pod and Secret labelled with owner: what an earlier
// run of the delegate left (Runtime.Sweep). It returns how many.
func (p *Pods) sweep(ctx context.Context, owner string) (pods, secrets int, err error) {
	kc, err := kube.NewClient(p.Config)
	if err != nil {
		return 0, 0, err
	}
	defer kc.Close()
	sel := LabelOwner + "=" + labelValue(owner)
	var errs []error
	for _, coll := range []struct {
		path string
		n    *int
	}{{secretsPath(p.Namespace), &secrets}, {podsPath(p.Namespace), &pods}} { // Secrets first: a pod's deletion takes its own with it
		var list struct {
			Items []struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if err := kc.List(ctx, coll.path, sel, "", &list); err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", coll.path, err))
			continue
		}
		for _, it := range list.Items {
			if err := kc.DeleteNow(ctx, coll.path+"/"+it.Metadata.Name, 0); err != nil && !kube.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %s/%s: %w", coll.path, it.Metadata.Name, err))
				continue
			}
			*coll.n++
		}
	}
	return pods, secrets, errors.Join(errs...)
}

// mustJSON marshals what podManifest and secretManifest build (maps of
// strings, numbers and slices: it cannot fail).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
