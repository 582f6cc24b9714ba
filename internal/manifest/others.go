package manifest

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
)

// helmValues prints a values file for deploy/helm/legate-delegate, with
// the helm install command in its leading comments.
func helmValues(p Params) string {
	comment := fmt.Sprintf("# Helm values of the legate delegate %q for the chart deploy/helm/legate-delegate.\n", p.Name) +
		"# Save this as values.yaml and install with:\n" +
		fmt.Sprintf("#   helm install %s deploy/helm/legate-delegate --namespace %s --create-namespace --values values.yaml\n", p.Name, p.Namespace)
	if p.Token != "" {
		comment += "# It holds the delegate token: keep it readable by you only.\n"
	}
	v := mapping{
		{"accountId", p.AccountID},
		{"managerUrl", p.ManagerURL},
	}
	if p.Token != "" {
		v = append(v, field{"token", p.Token})
	} else {
		v = append(v, field{"existingSecret", p.TokenSecret})
	}
	tags := seq{}
	for _, t := range p.Tags {
		tags = append(tags, t)
	}
	env := seq{}
	for _, e := range append(sizeEnv(p), p.Env...) {
		env = append(env, mapping{{"name", e.Name}, {"value", e.Value}})
	}
	v = append(v,
		field{"name", p.Name},
		field{"tags", tags},
		field{"description", p.Description},
		field{"replicas", p.Replicas},
		field{"rbac", p.RBAC},
		field{"image", p.Image},
		field{"extraEnv", env},
		field{"resources", helmResources(p)},
	)
	v = append(v, helmOptions(p)...)
	return yamlDocs(comment, v)
}

// dockerRun prints one docker run command per replica.
func dockerRun(p Params) string {
	var b strings.Builder
	env := delegateEnv(p, "DOCKER")
	env = append(env[:1:1], append([]protocol.EnvVar{{Name: TokenKey, Value: p.Token}}, env[1:]...)...)
	for i := 1; i <= p.Replicas; i++ {
		name := p.Name
		if p.Replicas > 1 {
			name += "-" + strconv.Itoa(i)
		}
		fmt.Fprintf(&b, "docker run --detach --name %s --restart unless-stopped --stop-timeout %d \\\n", shellQuote(name), DrainSeconds)
		if hostNetwork(p) {
			b.WriteString("  --network host \\\n")
		}
		for _, f := range dockerOptions(p) {
			fmt.Fprintf(&b, "  %s \\\n", f)
		}
		for _, e := range env {
			fmt.Fprintf(&b, "  --env %s \\\n", shellQuote(e.Name+"="+e.Value))
		}
		fmt.Fprintf(&b, "  %s %s\n", shellQuote(p.Image), strings.Join(containerCommand(p), " "))
	}
	return b.String()
}

// compose prints a compose file with one service for the delegate.
// Compose interpolates "$" in values: it is written "$$".
func compose(p Params) string {
	env := mapping{}
	for i, e := range delegateEnv(p, "DOCKER") {
		env = append(env, field{e.Name, composeEscape(e.Value)})
		if i == 0 {
			env = append(env, field{TokenKey, composeEscape(p.Token)})
		}
	}
	svc := mapping{
		{"image", p.Image},
		{"command", commandSeq(p)},
		{"restart", "unless-stopped"},
		{"stop_grace_period", strconv.Itoa(DrainSeconds) + "s"},
		{"environment", env},
	}
	svc = composeOptions(p, svc)
	if p.Replicas > 1 {
		svc = append(svc, field{"deploy", mapping{{"replicas", p.Replicas}}})
	}
	if hostNetwork(p) {
		svc = append(svc, field{"network_mode", "host"})
	}
	comment := fmt.Sprintf("# legate delegate %q: docker compose up -d (this file holds the delegate token)", p.Name)
	return yamlDocs(comment, mapping{{"services", mapping{{p.Name, svc}}}})
}

// hostNetwork: a same-host trial (a loopback manager URL, allowed) runs
// the container on the host's network, where that address is the
// manager's.
func hostNetwork(p Params) bool {
	u, err := url.Parse(p.ManagerURL)
	return err == nil && p.AllowLoopback && LoopbackHost(u.Hostname())
}

func composeEscape(s string) string { return strings.ReplaceAll(s, "$", "$$") }

// ecsTaskDefinition prints a RegisterTaskDefinitionInput in the shape of
// the seeds' task-spec.json: ECS on EC2 (bridge network) or Fargate
// (awsvpc, task CPU and memory, execution role).
func ecsTaskDefinition(p Params) string {
	envs := seq{}
	for i, e := range delegateEnv(p, "DOCKER") {
		envs = append(envs, mapping{{"name", e.Name}, {"value", e.Value}})
		if i == 0 && p.Token != "" {
			envs = append(envs, mapping{{"name", TokenKey}, {"value", p.Token}})
		}
	}
	c := mapping{
		{"name", p.Name},
		{"image", p.Image},
		{"essential", true},
		{"command", commandSeq(p)},
		{"environment", envs},
	}
	if p.Kind == KindECS && p.Hostname != "" {
		// Bridge mode: the container's host name, the delegate's identity.
		c = append(c, field{"hostname", p.Hostname})
	}
	if p.Kind == KindFargate && p.RunAsRoot {
		c = append(c, field{"user", "0"})
	}
	if p.TokenSecretARN != "" {
		c = append(c, field{"secrets", seq{mapping{{"name", TokenKey}, {"valueFrom", p.TokenSecretARN}}}})
	}
	if p.Kind == KindECS {
		// Task containers on EC2: the instance's Docker, through its
		// socket (see TaskContainerNotes). Opening it takes root (or the
		// docker group).
		c = append(c,
			field{"user", "0"},
			field{"mountPoints", seq{mapping{{"sourceVolume", dockerSocketVolume}, {"containerPath", DockerSocket}, {"readOnly", false}}}})
	}
	c = append(c,
		field{"healthCheck", mapping{
			{"command", ecsHealthCommand(p)},
			{"interval", 30}, {"timeout", 5}, {"retries", 3}, {"startPeriod", 10},
		}},
		field{"stopTimeout", ecsStopTimeout},
		field{"logConfiguration", mapping{
			{"logDriver", "awslogs"},
			{"options", mapping{
				{"awslogs-group", "/ecs/" + p.Name},
				{"awslogs-region", p.Region},
				{"awslogs-stream-prefix", "delegate"},
			}},
		}},
	)
	td := mapping{{"family", p.Name}, {"containerDefinitions", seq{c}}}
	if p.Kind == KindECS {
		td = append(td, field{"volumes", seq{mapping{{"name", dockerSocketVolume}, {"host", mapping{{"sourcePath", DockerSocket}}}}}})
	}
	if p.Kind == KindFargate {
		td = append(td, field{"requiresCompatibilities", seq{"FARGATE"}}, field{"networkMode", "awsvpc"})
	} else {
		td = append(td, field{"requiresCompatibilities", seq{"EC2"}}, field{"networkMode", "bridge"})
	}
	td = append(td, field{"cpu", p.CPU}, field{"memory", p.Memory})
	if p.ExecutionRoleARN != "" {
		td = append(td, field{"executionRoleArn", p.ExecutionRoleARN})
	}
	return toJSON(td)
}

// DockerSocket is the Docker daemon's socket on an ECS container instance,
// which the EC2 task definition mounts for task containers.
const DockerSocket = "/var/run/docker.sock"

const dockerSocketVolume = "docker-socket"

// TaskContainerNotes is what a user should know about task containers
// (container tasks and pipeline steps) with the artifact of p: "" when
// nothing. The CLI prints it on stderr: JSON has no comments.
func TaskContainerNotes(p Params) string {
	if p.Service {
		return ""
	}
	switch p.Kind {
	case KindECS:
		return "task containers: the task definition mounts the instance's Docker socket (" + DockerSocket +
			") and runs the delegate as root to open it, so container tasks and pipeline steps run with the instance's Docker: " +
			"the delegate speaks the Docker Engine API over the socket itself (no docker CLI in the image; it registers the docker-api runtime). " +
			"To run it as the image's user (uid 1000) instead, set \"user\" to \"1000:GID\" with GID the socket's group on the instance. " +
			"Whoever can run a task there controls the instance's Docker, and so the instance: keep such delegates on " +
			"instances of their own, and scope who may run tasks on them. On EC2 privileged containers and host_path volumes " +
			"(such as the socket itself, for Docker-in-Docker builds) run only where the delegate allows them " +
			"(LEGATE_CONTAINER_ALLOW_PRIVILEGED=true, LEGATE_CONTAINER_HOST_PATHS) and for users with task:privileged; " +
			"empty_dir size is the instance's disk."
	case KindFargate:
		return "task containers: Fargate has no Docker socket and no privileged containers, so this delegate has no " +
			"container runtime and is offered no container tasks or steps (legate task explain says no container runtime); " +
			"run those from an ECS-on-EC2 (legate manifest ecs) or Kubernetes delegate and select it with a tag. A delegate on Fargate that has a runtime refuses privileged " +
			"containers and host_path volumes, and empty_dir size_mib outside 21504-204800 (the task's ephemeral storage, 21 to 200 GiB)."
	}
	return ""
}

// ecsService prints a CreateServiceInput for the task definition, in the
// shape of the seeds' service.json.
func ecsService(p Params) string {
	launch := "EC2"
	if p.Kind == KindFargate {
		launch = "FARGATE"
	}
	s := mapping{
		{"cluster", p.Cluster},
		{"serviceName", p.Name},
		{"taskDefinition", p.Name},
		{"desiredCount", p.Replicas},
		{"launchType", launch},
		{"schedulingStrategy", "REPLICA"},
		// Rolling: the new tasks connect before the old ones drain.
		{"deploymentConfiguration", mapping{{"minimumHealthyPercent", 100}, {"maximumPercent", 200}}},
		{"enableECSManagedTags", true},
		{"propagateTags", "SERVICE"},
	}
	if p.Kind == KindFargate {
		subnets, groups := seq{}, seq{}
		for _, x := range p.Subnets {
			subnets = append(subnets, x)
		}
		for _, x := range p.SecurityGroups {
			groups = append(groups, x)
		}
		public := "DISABLED"
		if p.AssignPublicIP {
			public = "ENABLED"
		}
		vpc := mapping{{"subnets", subnets}}
		if len(groups) > 0 {
			vpc = append(vpc, field{"securityGroups", groups})
		}
		vpc = append(vpc, field{"assignPublicIp", public})
		s = append(s, field{"platformVersion", "LATEST"}, field{"networkConfiguration", mapping{{"awsvpcConfiguration", vpc}}})
	}
	return toJSON(s)
}

// Paths of the systemd install.
const (
	systemdBinary = "/usr/local/bin/legate"
	systemdUser   = "legate-delegate"
)

// SystemdPaths are the environment file and unit file of a systemd
// delegate named name.
func SystemdPaths(name string) (envFile, unitFile string) {
	return "/etc/legate/delegate-" + name + ".env", "/etc/systemd/system/legate-delegate-" + name + ".service"
}

// systemd prints a shell script that writes the environment file (mode
// 0600: it holds the token) and the unit, then starts the service.
func systemd(p Params) string {
	envFile, unitFile := SystemdPaths(p.Name)
	unit := "legate-delegate-" + p.Name
	var env strings.Builder
	env.WriteString("# legate delegate " + p.Name + ": read by systemd (" + unitFile + ")\n")
	vars := delegateEnv(p, "SHELL")
	vars = append(vars[:1:1], append([]protocol.EnvVar{{Name: TokenKey, Value: p.Token}}, vars[1:]...)...)
	for _, e := range vars {
		env.WriteString(e.Name + "=" + systemdQuote(e.Value) + "\n")
	}
	workdir := "/var/lib/legate-delegate/" + p.Name
	user, execStart, limits := systemdOptions(p, workdir)
	unitText := `[Unit]
Description=legate delegate ` + p.Name + `
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
User=` + user + `
EnvironmentFile=` + envFile + `
StateDirectory=legate-delegate/` + p.Name + `
WorkingDirectory=` + workdir + `
ExecStart=` + execStart + `
` + limits + `Restart=always
RestartSec=5
KillMode=mixed
KillSignal=SIGTERM
TimeoutStopSec=` + strconv.Itoa(DrainSeconds) + `
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
`
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# legate delegate %q on this host (systemd). Run as root: sh this-file\n", p.Name)
	fmt.Fprintf(&b, "# Needs the legate binary at %s. %s holds the delegate token (mode 0600).\n", systemdBinary, envFile)
	fmt.Fprintf(&b, "# With legate-delegate of the same build beside it (%s-delegate), the delegate runs as that, in 40%% less memory.\n", systemdBinary)
	if p.Replicas > 1 {
		fmt.Fprintf(&b, "# %d replicas: one host runs one instance; run this on %d hosts (same name: one delegate).\n", p.Replicas, p.Replicas)
	}
	b.WriteString("set -eu\n")
	fmt.Fprintf(&b, "id -u %s >/dev/null 2>&1 || useradd --system --home-dir /var/lib/legate-delegate --shell /usr/sbin/nologin %s\n", systemdUser, systemdUser)
	b.WriteString("install -d -m 0700 /etc/legate\n")
	b.WriteString("umask 077\n")
	fmt.Fprintf(&b, "cat > %s <<'LEGATE_ENV_EOF'\n%sLEGATE_ENV_EOF\n", envFile, env.String())
	fmt.Fprintf(&b, "chmod 0600 %s\n", envFile)
	b.WriteString("umask 022\n")
	fmt.Fprintf(&b, "cat > %s <<'LEGATE_UNIT_EOF'\n%sLEGATE_UNIT_EOF\n", unitFile, unitText)
	fmt.Fprintf(&b, "systemctl daemon-reload\nsystemctl enable --now %s.service\n", unit)
	return b.String()
}

// systemdQuote quotes an environment file value: double quotes, with
// '\', '"', '$' and '`' escaped by '\' (systemd's environment file
// rules). Values hold no line breaks or control characters (checked).
func systemdQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '\\' || r == '"' || r == '$' || r == '`' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}
