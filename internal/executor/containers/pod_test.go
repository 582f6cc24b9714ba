package containers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// kubeEnv is an environment whose KUBECONFIG names a token kubeconfig
// with namespace ns.
func kubeEnv(t *testing.T, ns string, extra ...string) func(string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	kc := `{"apiVersion":"v1","kind":"Config","current-context":"c","contexts":[{"name":"c","context":{"cluster":"k","user":"u","namespace":"` + ns + `"}}],` +
		`"clusters":[{"name":"k","cluster":{"server":"https://127.0.0.1:1"}}],"users":[{"name":"u","user":{"token":"t"}}]}`
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KUBECONFIG": p}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return func(k string) string { return env[k] }
}

// TestPodRuntimeChoice: DELEGATE_CONTAINER_RUNTIME=kubernetes runs
// container tasks as pods in the credentials' namespace; in a pod
// (KUBERNETES_SERVICE_HOST) without podman or docker, that is the default;
// a bad start deadline is refused saying what to write.
func TestPodRuntimeChoice(t *testing.T) {
	c, err := Find(kubeEnv(t, "team-a", EnvContainerRuntime, "kubernetes", EnvPodStartDeadline, "90s"), "o", "")
	if err != nil || c.Name != RuntimeKubernetes || c.Pods == nil || c.Pods.Namespace != "team-a" || c.Pods.StartDeadline != 90*time.Second {
		t.Fatalf("explicit: %+v %v", c, err)
	}
	if c, err := Find(kubeEnv(t, ""), "o", ""); err == nil && c.Pods != nil {
		t.Fatal("outside a pod, without asking, a delegate with a kubeconfig runs pods")
	}
	if _, err := Find(kubeEnv(t, "x", EnvContainerRuntime, "kubernetes", EnvPodStartDeadline, "soon"), "o", ""); err == nil ||
		!strings.Contains(err.Error(), "LEGATE_POD_START_DEADLINE=\"soon\": give a positive duration") {
		t.Fatalf("bad deadline: %v", err)
	}
	t.Setenv("PATH", t.TempDir()) // no podman, no docker
	c, err = Find(kubeEnv(t, "", "KUBERNETES_SERVICE_HOST", "10.0.0.1"), "o", "")
	if err != nil || c.Name != RuntimeKubernetes || c.Pods.Namespace != "default" || c.Pods.StartDeadline != DefaultPodStartDeadline {
		t.Fatalf("default in a pod: %+v %v", c, err)
	}
}

// TestPodRefusals: what a pod cannot be given is refused before anything
// is created, saying what to do: an EFS volume, a stage's shared
// workspace, and (the delegate's host policy, as for podman) a host path
// not allowed or a privileged container.
func TestPodRefusals(t *testing.T) {
	c := &Runtime{Name: RuntimeKubernetes, Pods: &Pods{Namespace: "x"}}
	vol := func(v protocol.Volume) protocol.TaskSpec {
		v.Name, v.MountPath = "v", "/v"
		return protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "a", Volumes: []protocol.Volume{v}}}
	}
	for _, tc := range []struct {
		spec protocol.TaskSpec
		want string
	}{
		{vol(protocol.Volume{EFS: &protocol.EFSVolume{FilesystemID: "fs-12345678"}}), "container.volumes[0].efs: a delegate that runs container tasks as Kubernetes pods does not mount EFS"},
		{vol(protocol.Volume{EmptyDir: &protocol.EmptyDirVolume{Workspace: &protocol.Workspace{Key: "k1", Create: true}}}), "a pipeline stage's shared workspace is not kept between pods"},
		{vol(protocol.Volume{HostPath: &protocol.HostPathVolume{Path: "/etc"}}), "container.volumes[0].host_path /etc: this delegate mounts no host path"},
		{protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "a", SecurityContext: &protocol.SecurityContext{Privileged: true}}},
			"this delegate does not run privileged containers"},
	} {
		_, err := c.NewRun(taskOf("t", tc.spec))
		if err == nil || isFault(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
}

// TestPodLabelValue: a task ID that is not a label value is hashed into
// one.
func TestPodLabelValue(t *testing.T) {
	for in, ok := range map[string]bool{"t_0123abc": true, "a.b-c": true, "-x": false, "x y": false, strings.Repeat("a", 64): false} {
		got := labelValue(in)
		if (got == in) != ok || len(got) > 63 {
			t.Errorf("labelValue(%q) = %q", in, got)
		}
	}
}
