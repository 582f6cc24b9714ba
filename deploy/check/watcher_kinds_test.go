package check

import (
	"encoding/json"
	"os"
	osexec "os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/manifest"
	"github.com/legate-dev/legate/internal/protocol"
)

// containerSpec is what a docker artifact asks of its container beyond
// the environment: the command, the user and the resource flags, read
// back from the artifact with the strict parsers.
type containerSpec struct {
	env   map[string]string
	args  []string
	flags []string // podman run flags: --user, --cpus, --memory
}

func dockerSpec(t *testing.T, artifact string) containerSpec {
	t.Helper()
	if strings.HasPrefix(artifact, "docker run") {
		runs, err := parseDockerRuns(artifact)
		if err != nil {
			t.Fatalf("parse docker run: %v\n%s", err, artifact)
		}
		r := runs[0]
		s := containerSpec{env: r.Env, args: r.Args}
		keys := make([]string, 0, len(r.Flags))
		for k := range r.Flags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s.flags = append(s.flags, k, r.Flags[k])
		}
		return s
	}
	c, err := decodeCompose(artifact)
	if err != nil {
		t.Fatalf("decode compose: %v\n%s", err, artifact)
	}
	for _, svc := range c.Services {
		s := containerSpec{env: map[string]string{}, args: svc.Command}
		for k, v := range svc.Environment {
			s.env[k] = composeValue(v)
		}
		if svc.User != "" {
			s.flags = append(s.flags, "--user", svc.User)
		}
		if svc.CPUs != "" {
			s.flags = append(s.flags, "--cpus", svc.CPUs)
		}
		if svc.MemLimit != "" {
			s.flags = append(s.flags, "--memory", svc.MemLimit)
		}
		return s
	}
	t.Fatalf("no service in:\n%s", artifact)
	return containerSpec{}
}

// TestContainerKindsRunUnderTheWatcher runs the default docker run
// command, compose file and ECS and Fargate task definitions (automatic
// upgrades) in legate's image with podman, as they are written: their command (legate watcher with the image's
// directory), their user and their size's limits. The delegate connects
// to a real manager under the watcher (the manager lists it with
// automatic upgrades on, from the watcher's slot) and runs a task as the
// artifact's user: uid 1000, or 0 with --run-as-root.
func TestContainerKindsRunUnderTheWatcher(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the image is not built and run")
	}
	image := needImage(t)
	m := startHostManager(t, image)
	token := strings.TrimSpace(m.cli(t, "token", "create", "watched", "--value-only"))
	for _, tc := range []struct {
		name, kind string
		flags      []string
		wantUID    string
	}{
		{"docker", manifest.KindDocker, []string{"--size", "laptop"}, "1000"},
		{"compose-root", manifest.KindDocker, []string{"--compose", "--run-as-root", "--size", "small"}, "0"},
		// ECS on EC2 runs as root (the instance's Docker socket; not
		// mounted here).
		{"ecs", manifest.KindECS, []string{"--region", "eu-west-1"}, "0"},
		{"fargate", manifest.KindFargate, []string{"--region", "eu-west-1", "--execution-role-arn", testRole, "--size", "laptop"}, "1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := "watched-" + tc.name
			artifact := m.cli(t, append([]string{"manifest", tc.kind, "--token", token, "--manager-url", m.url, "--allow-loopback",
				"--name", name, "--tags", name, "--image", image}, tc.flags...)...)
			var spec containerSpec
			if tc.kind == manifest.KindDocker {
				spec = dockerSpec(t, artifact)
			} else {
				spec = taskDefinitionSpec(t, artifact)
			}
			if want := []string{"watcher", "--dir", manifest.ImageWorkDir}; !slices.Equal(spec.args, want) {
				t.Fatalf("the container's command is %q, want %q:\n%s", spec.args, want, artifact)
			}

			hostname := uniqueName("specs-options-" + tc.name)
			container := runSpecContainer(t, image, hostname, spec)
			got := m.waitConnected(t, hostname, func() bool { return containerStopped(container) })
			if got.Upgrade != protocol.UpgradeAuto {
				t.Errorf("the delegate's upgrade is %q, want %q (a watcher runs it and upgrades it)", got.Upgrade, protocol.UpgradeAuto)
			}
			// The image's health check asks the watcher's delegate: healthy
			// on its port, unhealthy when neither of the two ports answers.
			if out, err := podman("exec", container, "/usr/local/bin/legate-healthcheck"); err != nil {
				t.Errorf("the image's health check under the watcher: %v\n%s", err, out)
			}
			if out, err := podman("exec", "--env", "DELEGATE_HTTP_PORT="+freePort(t), container, "/usr/local/bin/legate-healthcheck"); err == nil {
				t.Errorf("the image's health check passed with no delegate on the port it asks:\n%s", out)
			}
			out := m.cli(t, "task", "run", "-o", "json", "--selector", name, "--script", `echo "uid=$(id -u) parent=$(cat /proc/$PPID/comm)"; cat /proc/1/cmdline | tr '\0' ' '`)
			var task protocol.Task
			if err := json.Unmarshal([]byte(out), &task); err != nil {
				t.Fatalf("decode task run: %v\n%s", err, out)
			}
			if task.Status != protocol.StatusSucceeded || task.DelegateHostname != hostname {
				t.Fatalf("task %s on %q, want %s on %q", task.Status, task.DelegateHostname, protocol.StatusSucceeded, hostname)
			}
			logs := m.cli(t, "task", "logs", task.ID)
			for _, want := range []string{"uid=" + tc.wantUID + " ", "/usr/local/bin/legate watcher --dir " + manifest.ImageWorkDir} {
				if !strings.Contains(logs, want) {
					t.Errorf("task output lacks %q:\n%s", want, logs)
				}
			}
		})
	}
}

// waitConnected waits until the manager lists the delegate of hostname
// connected, and fails the test when stopped says its process stopped.
func (m hostManager) waitConnected(t *testing.T, hostname string, stopped func() bool) protocol.Delegate {
	t.Helper()
	var got protocol.Delegate
	eventually(t, 2*time.Minute, "the delegate on "+hostname+" connected", func() bool {
		d, ok := m.delegate(t, hostname)
		if ok && d.Status == protocol.DelegateConnected {
			got = d
			return true
		}
		if stopped() {
			t.Fatalf("the delegate's process stopped")
		}
		return false
	})
	return got
}

// taskDefinitionSpec reads an ECS or Fargate task definition's
// container: its command, user, environment.
func taskDefinitionSpec(t *testing.T, artifact string) containerSpec {
	t.Helper()
	td, err := decodeTaskDefinition(artifact)
	if err != nil {
		t.Fatalf("decode the task definition: %v\n%s", err, artifact)
	}
	c := td.ContainerDefinitions[0]
	s := containerSpec{env: map[string]string{}, args: c.Command}
	for _, kv := range c.Environment {
		s.env[deref(kv.Name)] = deref(kv.Value)
	}
	if c.User != nil {
		s.flags = append(s.flags, "--user", *c.User)
	}
	return s
}

// TestSystemdUnitRunsTheWatcher runs the systemd spec's ExecStart as it is
// written (legate watcher in the unit's state directory, here a
// temporary one, with the unit's environment file) on this host: the
// delegate connects to a real manager under the watcher and runs a task
// whose parent is the watcher's delegate.
func TestSystemdUnitRunsTheWatcher(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no processes")
	}
	if err := buildLegate(); err != nil {
		t.Fatal(err)
	}
	m := startHostManager(t, "")
	token := strings.TrimSpace(m.cli(t, "token", "create", "watched-host", "--value-only"))
	artifact := m.cli(t, "manifest", "systemd", "--token", token, "--manager-url", m.url, "--allow-loopback", "--name", "watched-host", "--tags", "watched-host", "--size", "laptop")
	inst, err := parseSystemd(artifact)
	if err != nil {
		t.Fatalf("parse the systemd script: %v\n%s", err, artifact)
	}
	svc := inst.Unit["Service"]
	execStart := strings.Fields(svc["ExecStart"])
	want := []string{"/usr/local/bin/legate", "watcher", "--dir", svc["WorkingDirectory"]}
	if !slices.Equal(execStart, want) || svc["MemoryMax"] != "512M" || svc["CPUQuota"] != "50%" {
		t.Fatalf("ExecStart=%q MemoryMax=%q CPUQuota=%q, want %q with the laptop size's limits", svc["ExecStart"], svc["MemoryMax"], svc["CPUQuota"], want)
	}
	dir := t.TempDir()
	hostname := uniqueName("specs-options-host")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "DELEGATE_HOSTNAME=" + hostname, "DELEGATE_HTTP_PORT=" + freePort(t)}
	for k, v := range inst.EnvFile {
		env = append(env, k+"="+v)
	}
	cmd := osexec.Command(legateBinary, "watcher", "--dir", dir)
	cmd.Env, cmd.Dir = env, dir
	_, done := startProcess(t, cmd, "the watcher", 60*time.Second)
	got := m.waitConnected(t, hostname, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if got.Upgrade != protocol.UpgradeAuto {
		t.Errorf("the delegate's upgrade is %q, want %q (a watcher runs it)", got.Upgrade, protocol.UpgradeAuto)
	}
	res := m.cli(t, "task", "run", "-o", "json", "--selector", "watched-host", "--script", `echo "capacity=$DELEGATE_TASK_CAPACITY slot=$LEGATE_WATCHER_SLOT"`)
	var task protocol.Task
	if err := json.Unmarshal([]byte(res), &task); err != nil || task.Status != protocol.StatusSucceeded {
		t.Fatalf("task run: %v\n%s", err, res)
	}
	if logs := m.cli(t, "task", "logs", task.ID); !strings.Contains(logs, "capacity=2 slot=") || strings.Contains(logs, "slot=\n") {
		t.Errorf("the task's environment: want the laptop size's capacity and the watcher's slot:\n%s", logs)
	}
}

// runSpecContainer runs the image with the artifact's command, user,
// limits and environment, on the host's network (to reach the manager on
// 127.0.0.1) under a hostname of its own, with a free health port (see
// runDelegateContainer), and removes it when the test ends.
func runSpecContainer(t *testing.T, image, hostname string, spec containerSpec) string {
	t.Helper()
	name := uniqueName("legate-specs-options")
	args := append(append([]string{}, podmanRun...), "--detach", "--name", name, "--network", "host", "--hostname", hostname)
	args = append(args, spec.flags...)
	keys := make([]string, 0, len(spec.env))
	for k := range spec.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != "DELEGATE_HTTP_PORT" {
			args = append(args, "--env", k+"="+spec.env[k])
		}
	}
	args = append(args, "--env", "DELEGATE_HTTP_PORT="+freePort(t), image)
	args = append(args, spec.args...)
	if out, err := podman(args...); err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := podman("logs", name)
			t.Logf("--- output of container %s ---\n%s", name, out)
		}
		if out, err := podman("rm", "--force", "--volumes", "--time", "10", name); err != nil {
			t.Errorf("remove container %s: %v\n%s", name, err, out)
		}
	})
	return name
}

// ecsMetadataURI is what ECS (the agent on EC2, and Fargate) sets in every
// container of a task: its task metadata endpoint.
const ecsMetadataURI = "http://169.254.170.2/v4/0123456789abcdef-0123456789"

// instances lists the manager's delegate instances of name.
func (m hostManager) instances(t testing.TB, name string) []protocol.Delegate {
	t.Helper()
	var list protocol.DelegateList
	out := m.cli(t, "delegates", "list", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("decode delegates list: %v\n%s", err, out)
	}
	var got []protocol.Delegate
	for _, d := range list.Delegates {
		if d.Name == name {
			got = append(got, d)
		}
	}
	return got
}

// TestECSHostnameKeepsOneInstance: an ECS or Fargate delegate is
// identified by the hostname chosen for its task definition (seed 000).
// Two tasks of one task definition, started one after the other as ECS
// replaces a task, with other IPs (and, on Fargate, other container host
// names, as awsvpc gives them), are one instance of the manager: the
// second takes the first one's instance ID and the manager lists one.
// ECS (bridge) gives the container the task definition's hostname;
// Fargate's delegates take it from DELEGATE_HOSTNAME.
func TestECSHostnameKeepsOneInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the image is not built and run")
	}
	image := needImage(t)
	m := startHostManager(t, image)
	token := strings.TrimSpace(m.cli(t, "token", "create", "ecs-identity", "--value-only"))
	for _, tc := range []struct{ kind string }{{manifest.KindECS}, {manifest.KindFargate}} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			name := "identity-" + tc.kind
			chosen := uniqueName("specs-options-" + tc.kind)
			args := []string{"manifest", tc.kind, "--token", token, "--manager-url", m.url, "--allow-loopback", "--name", name,
				"--image", image, "--region", "eu-west-1", "--hostname", chosen}
			if tc.kind == manifest.KindFargate {
				args = append(args, "--execution-role-arn", testRole)
			}
			artifact := m.cli(t, args...)
			td, err := decodeTaskDefinition(artifact)
			if err != nil {
				t.Fatalf("decode the task definition: %v\n%s", err, artifact)
			}
			c := td.ContainerDefinitions[0]
			env := map[string]string{}
			for _, kv := range c.Environment {
				env[deref(kv.Name)] = deref(kv.Value)
			}
			env["ECS_CONTAINER_METADATA_URI_V4"] = ecsMetadataURI
			var ids []string
			for i, ip := range []string{"10.0.3.17", "10.0.9.201"} {
				// The container's host name: the task definition's
				// (bridge), or awsvpc's own, one per task (Fargate).
				hostname := deref(c.Hostname)
				if tc.kind == manifest.KindFargate {
					if hostname != "" {
						t.Fatalf("a Fargate task definition with a hostname (ECS refuses it): %s", hostname)
					}
					hostname = "ip-" + strings.ReplaceAll(ip, ".", "-")
				}
				if hostname == "" {
					t.Fatalf("the ECS task definition gives the container no hostname:\n%s", artifact)
				}
				env["DELEGATE_IP"] = ip
				spec := containerSpec{env: env, args: c.Command}
				if c.User != nil {
					spec.flags = []string{"--user", *c.User}
				}
				container := runSpecContainer(t, image, hostname, spec)
				var got protocol.Delegate
				eventually(t, 2*time.Minute, "task "+ip+" connected", func() bool {
					for _, d := range m.instances(t, name) {
						if d.IP == ip && d.Status == protocol.DelegateConnected {
							got = d
							return true
						}
					}
					if containerStopped(container) {
						t.Fatalf("the container stopped")
					}
					return false
				})
				if got.Hostname != chosen {
					t.Errorf("task %d registered with hostname %q, want the chosen %q", i+1, got.Hostname, chosen)
				}
				ids = append(ids, got.InstanceID)
				if i == 0 {
					// ECS stops the task it replaces: SIGTERM, the
					// delegate drains and exits.
					if out, err := podman("stop", "--time", "30", container); err != nil {
						t.Fatalf("podman stop: %v\n%s", err, out)
					}
				}
			}
			if ids[0] != ids[1] {
				t.Errorf("the two tasks are instances %s and %s, want one", ids[0], ids[1])
			}
			if got := m.instances(t, name); len(got) != 1 {
				t.Errorf("the manager lists %d instances of %s while the second task runs, want 1: %+v", len(got), name, got)
			}
		})
	}
}
