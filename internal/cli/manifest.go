package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/manifest"
	"github.com/legate-dev/legate/internal/protocol"
)

// Environment variables of the AWS CLI that give the default --region.
const (
	envAWSRegion        = "AWS_REGION"
	envAWSDefaultRegion = "AWS_DEFAULT_REGION"
)

// manifestFlags are the flags of `legate manifest KIND`.
type manifestFlags struct {
	token, newToken, org, project string
	tokenSecret, tokenSecretARN   string
	name, tags, image, desc       string
	replicas                      int
	env                           []string
	managerURL                    string
	allowLoopback                 bool
	namespace, rbac, upgrade      string
	compose, service              bool
	region, executionRole         string
	cluster                       string
	subnets, securityGroups       []string
	assignPublicIP                bool
	cpu, memory                   string
	size, hostname                string
	runAsRoot                     bool
	autoscale, autoscaleWith      string
}

// manifestKind describes one subcommand of legate manifest.
type manifestKind struct {
	kind, short, long, example string
}

func manifestKinds() []manifestKind {
	return []manifestKind{
		{manifest.KindKubernetes, "Kubernetes YAML: Namespace, Secret, ServiceAccount, RBAC, StatefulSet",
			`Print the Kubernetes objects of a delegate: its Namespace (--namespace,
default legate-delegate), a Secret with the token (or --token-secret NAME of an
existing Secret with the key DELEGATE_TOKEN), a ServiceAccount, its RBAC
(--rbac cluster: a ClusterRole over every namespace, the default; namespace:
a Role in its own namespace only; none) and a StatefulSet named NAME-CODE,
CODE being the first six letters of the account ID, so that two clusters'
delegates never collide. For high availability raise --replicas: the
replicas of one delegate share its name; do not install a second delegate.

--upgrade auto (the default) adds an hourly upgrader CronJob (never two
at once) that asks the manager which version the delegate should run and
patches the StatefulSet's image, with a ServiceAccount that may only get
and patch that StatefulSet (docs/upgrades.md). --upgrade self-managed
leaves upgrades to you: change the image tag, and the StatefulSet's
rolling update with the delegates' drain fails no task.

--size laptop|small|medium|large sets requests, limits and the task
capacity; --run-as-root runs the delegate as uid 0 (docs/install.md).

Apply it with kubectl apply -f FILE.`,
			`  legate manifest kubernetes --new-token k8s-prod --name prod --tags k8s,prod > delegate.yaml
  kubectl apply -f delegate.yaml
  legate manifest kubernetes --token-secret legate-token --rbac namespace --namespace team-a --replicas 2
  legate manifest kubernetes --new-token k8s-manual --name prod --upgrade self-managed --size small > delegate.yaml`},
		{manifest.KindHelm, "Helm values for deploy/helm/legate-delegate, and the helm install command",
			`Print a values file for the chart deploy/helm/legate-delegate; its first
lines say the helm install command. --token-secret NAME uses an existing
Secret (key DELEGATE_TOKEN) instead of the token's value. upgrade: auto
(the default) installs the upgrader CronJob, as for legate manifest
kubernetes; --size and --run-as-root set resources and runAsRoot.`,
			`  legate manifest helm --new-token k8s --name prod > values.yaml
  helm install prod deploy/helm/legate-delegate --namespace legate-delegate --create-namespace --values values.yaml`},
		{manifest.KindDocker, "A docker run command (--compose: a compose file)",
			`Print a docker run command that starts the delegate (one per --replicas,
named NAME-1, NAME-2, ...), or with --compose a compose file. The container
runs legate watcher, which runs the delegate and upgrades it with no
downtime from the manager's signed releases (--upgrade self-managed: the
delegate alone, you change the image). --size sets --cpus, --memory and the
task capacity; --run-as-root runs it as uid 0 (docs/install.md).`,
			`  legate manifest docker --new-token laptop --name laptop | sh
  legate manifest docker --token "$TOKEN" --compose --replicas 2 > compose.yaml && docker compose up -d`},
		{manifest.KindECS, "An ECS (EC2) task definition (--service: its service JSON)",
			`Print a task definition for ECS on EC2 (the seeds' task-spec.json shape,
for aws ecs register-task-definition --cli-input-json), or with --service the
service that runs it (for aws ecs create-service --cli-input-json). Logs go to
awslogs in --region (default: AWS_REGION). --token-secret-arn reads the token
from Secrets Manager (with --execution-role-arn) instead of embedding it.
The container runs legate watcher, which upgrades the delegate with no
downtime (--upgrade self-managed: the delegate alone). --hostname gives the
container its host name, the delegate's identity: a replaced task stays one
instance (one task per hostname). --size sets the task's CPU and memory and
the task capacity (docs/install.md).`,
			`  legate manifest ecs --new-token ecs --name ecs-delegate --region us-east-1 > task-spec.json
  aws ecs register-task-definition --cli-input-json file://task-spec.json
  legate manifest ecs --service --name ecs-delegate --cluster my-cluster --replicas 2 > service.json
  aws ecs create-service --cli-input-json file://service.json`},
		{manifest.KindFargate, "A Fargate task definition (--service: its service JSON)",
			`Print a Fargate task definition (awsvpc network, task --cpu and --memory,
--execution-role-arn), or with --service its service, which needs --subnet
(and usually --security-group). The container runs legate watcher, which
upgrades the delegate with no downtime (--upgrade self-managed: the delegate
alone). Fargate takes no container hostname: --hostname sets the delegate's
DELEGATE_HOSTNAME, its identity. --size picks a Fargate task size
(docs/install.md).`,
			`  legate manifest fargate --new-token fargate --name fargate-delegate \
    --execution-role-arn arn:aws:iam::123456789012:role/ecsTaskExecutionRole > task-spec.json
  legate manifest fargate --service --name fargate-delegate --cluster my-cluster \
    --subnet subnet-0abc --security-group sg-0abc > service.json`},
		{manifest.KindSystemd, "A systemd unit and its environment file for a Linux host",
			`Print a shell script that writes the delegate's environment file (mode
0600: it holds the token) and its systemd unit, then starts it. Run it as
root on a host with the legate binary at /usr/local/bin/legate. The unit
runs legate watcher, which upgrades the delegate with no downtime
(--upgrade self-managed: legate delegate). --size sets CPUQuota, MemoryMax
and the task capacity; --run-as-root sets User=root (docs/install.md).`,
			`  legate manifest systemd --new-token host1 --name build-hosts --tags linux > install.sh
  sudo sh install.sh`},
	}
}

func (a *app) manifestCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "manifest KIND",
		Aliases: []string{"manifests"},
		Short:   "Print a ready-to-apply install spec of a delegate (Kubernetes, Helm, Docker, ECS, Fargate, systemd)",
		Long: `Print the spec that installs a delegate, ready to apply: KIND is one of
` + strings.Join(manifest.Kinds(), ", ") + `. It never applies anything.

The spec is generated by the manager (the same generator serves its API), for
the account of the API key, with the URL delegates reach the manager at (the
manager's --public-url, or --manager-url) and the image operators published
(the manager's --delegate-image, or --image; docs/install.md). A manager URL
on loopback (localhost, 127.0.0.1, ::1, 0.0.0.0, link-local) is refused: in a
container or on another host it is the delegate itself. --allow-loopback
accepts it for a trial on the manager's own host (the docker kinds then use
the host's network).
The token is given by value (--token), created on the spot (--new-token
NAME, scoped with --org/--project), or referenced where it lives
(--token-secret for Kubernetes and Helm, --token-secret-arn for ECS and
Fargate). A spec that holds the token's value is a secret: a note on
stderr says so; the spec itself goes to stdout alone.`,
		Example: `  legate manifest kubernetes --new-token k8s --name prod --replicas 2 > delegate.yaml
  legate manifest docker --token "$TOKEN" --env PROXY_HOST=proxy.internal --env PROXY_PORT=3128`,
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return usagef("unknown manifest kind %q: use one of %s", args[0], strings.Join(manifest.Kinds(), ", "))
	}
	for _, k := range manifestKinds() {
		cmd.AddCommand(a.manifestKindCmd(k))
	}
	return cmd
}

func (a *app) manifestKindCmd(k manifestKind) *cobra.Command {
	var f manifestFlags
	cmd := &cobra.Command{
		Use:     k.kind + " [flags]",
		Short:   k.short,
		Long:    k.long,
		Example: k.example,
		Args:    cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			return a.runManifest(cmd, k.kind, &f)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.token, "token", "", "the delegate token's value (it ends up in the output)")
	fl.StringVar(&f.newToken, "new-token", "", "create a delegate token named NAME and use it")
	fl.StringVar(&f.org, "org", "", "the organization the delegate serves: your delegate:edit permission is checked there, and --new-token creates the token at its level")
	fl.StringVar(&f.project, "project", "", "the project of --org the delegate serves (as --org)")
	fl.StringVar(&f.name, "name", "", "the delegate's name (DELEGATE_NAME; default "+manifest.DefaultName+")")
	fl.StringVar(&f.tags, "tags", "", "the delegate's tags, comma-separated (DELEGATE_TAGS)")
	fl.IntVar(&f.replicas, "replicas", 1, "delegate processes; the replicas of one delegate share its name (HA)")
	fl.StringArrayVar(&f.env, "env", nil, "extra environment NAME=VALUE, repeatable (proxy settings, INIT_SCRIPT, thresholds...)")
	fl.StringVar(&f.desc, "description", "", "the delegate's description (DELEGATE_DESCRIPTION)")
	fl.StringVar(&f.managerURL, "manager-url", "", "the URL delegates reach the manager at (default: the manager's --public-url)")
	fl.BoolVar(&f.allowLoopback, "allow-loopback", false, "accept a manager URL on loopback (localhost, 127.0.0.1, ::1, 0.0.0.0) for a trial on the manager's own host")
	if k.kind != manifest.KindSystemd {
		fl.StringVar(&f.image, "image", "", "the container image (default: the manager's --delegate-image)")
	}
	manifestOptionFlags(cmd, k.kind, &f)
	switch k.kind {
	case manifest.KindKubernetes, manifest.KindHelm:
		fl.StringVar(&f.tokenSecret, "token-secret", "", "an existing Secret holding the token under the key "+manifest.TokenKey+", instead of --token")
		fl.StringVar(&f.namespace, "namespace", "", "the Kubernetes namespace (default "+manifest.DefaultNamespace+")")
		fl.StringVar(&f.rbac, "rbac", "", "cluster (a ClusterRole over every namespace; default), namespace (a Role in --namespace only) or none")
		fl.StringVar(&f.cpu, "cpu", "", "CPU request (default 50m)")
		fl.StringVar(&f.memory, "memory", "", "memory request (default 64Mi)")
	case manifest.KindDocker:
		fl.BoolVar(&f.compose, "compose", false, "print a compose file instead of docker run")
	case manifest.KindECS, manifest.KindFargate:
		fl.BoolVar(&f.service, "service", false, "print the service JSON (create-service) instead of the task definition")
		fl.StringVar(&f.tokenSecretARN, "token-secret-arn", "", "a Secrets Manager ARN holding the token, instead of --token")
		fl.StringVar(&f.region, "region", "", "the AWS region of the awslogs log driver (default: "+envAWSRegion+" or "+envAWSDefaultRegion+")")
		fl.StringVar(&f.executionRole, "execution-role-arn", "", "the task execution role (required for Fargate and with --token-secret-arn)")
		fl.StringVar(&f.cluster, "cluster", "", "with --service: the ECS cluster (default "+manifest.DefaultCluster+")")
		fl.StringVar(&f.cpu, "cpu", "", "task CPU units (default 256)")
		fl.StringVar(&f.memory, "memory", "", "task memory in MiB (default 512)")
		if k.kind == manifest.KindFargate {
			fl.StringArrayVar(&f.subnets, "subnet", nil, "with --service: a subnet of the tasks, repeatable")
			fl.StringArrayVar(&f.securityGroups, "security-group", nil, "with --service: a security group of the tasks, repeatable")
			fl.BoolVar(&f.assignPublicIP, "assign-public-ip", false, "with --service: give the tasks a public IP (default: none; use a private subnet with NAT)")
		}
	}
	return cmd
}

func (a *app) runManifest(cmd *cobra.Command, kind string, f *manifestFlags) error {
	if err := checkScopeFlags(f.org, f.project); err != nil {
		return err
	}
	if f.newToken != "" && (f.token != "" || f.tokenSecret != "" || f.tokenSecretARN != "") {
		return usagef("--new-token creates the token: leave out --token, --token-secret and --token-secret-arn")
	}
	if f.replicas < 1 {
		return usagef("--replicas %d: want 1 or more", f.replicas)
	}
	req := protocol.ManifestRequest{
		Kind: kind, Token: f.token, TokenSecret: f.tokenSecret, TokenSecretARN: f.tokenSecretARN,
		Name: f.name, Replicas: f.replicas, Image: f.image, Description: f.desc,
		Namespace: f.namespace, RBAC: f.rbac, Upgrade: f.upgrade, Compose: f.compose, Service: f.service,
		Autoscale: f.autoscale, AutoscaleWith: f.autoscaleWith,
		Region: f.region, ExecutionRoleARN: f.executionRole, Cluster: f.cluster,
		Subnets: f.subnets, SecurityGroups: f.securityGroups, AssignPublicIP: f.assignPublicIP,
		CPU: f.cpu, Memory: f.memory, Org: f.org, Project: f.project,
		ManagerURL: f.managerURL, AllowLoopback: f.allowLoopback,
	}
	req.Size, req.RunAsRoot, req.Hostname = f.size, f.runAsRoot, f.hostname
	if f.tags != "" {
		req.Tags = strings.Split(f.tags, ",")
	}
	for _, s := range f.env {
		e, err := manifest.ParseEnv(s)
		if err != nil {
			return usagef("--env: %v", err)
		}
		req.Env = append(req.Env, e)
	}
	if (kind == manifest.KindECS || kind == manifest.KindFargate) && req.Region == "" {
		if req.Region = a.getenv(envAWSRegion); req.Region == "" {
			req.Region = a.getenv(envAWSDefaultRegion)
		}
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	if f.newToken != "" {
		// Check everything else first, so that a refused request does
		// not leave a token behind.
		who, err := c.WhoAmI(ctx)
		if err != nil {
			return err
		}
		// The manager's defaults, as the route fills them in (a manager
		// that does not say its public URL uses the URL it was reached at).
		d := manifest.Defaults{ManagerURL: who.PublicURL, Image: who.DelegateImage}
		if d.ManagerURL == "" {
			d.ManagerURL = c.BaseURL()
		}
		check := d.Fill(req)
		check.AccountID, check.Token = who.AccountID, "check"
		if _, err := manifest.Generate(check); err != nil {
			return &ExitError{Code: ExitUsage, Msg: "legate: " + err.Error()}
		}
		tok, err := c.CreateScopedToken(ctx, protocol.CreateTokenRequest{Name: f.newToken, Org: f.org, Project: f.project})
		if err != nil {
			return err
		}
		if tok.Value == "" {
			return fmt.Errorf("create token: the manager returned no token value")
		}
		req.Token = tok.Value
		where := ""
		if tok.Org != "" {
			where = " (scope " + escape(scope(tok.Org, tok.Project)) + ")"
		}
		fmt.Fprintf(stderr, "legate: created delegate token %q%s; its value is in the manifest only (legate token revoke %s undoes it)\n", tok.Name, where, tok.Name)
	}
	out, err := c.Manifest(ctx, req)
	if err != nil {
		return err
	}
	if n := manifest.Notice(req); n != "" {
		fmt.Fprintln(stderr, "legate: note: "+n)
	}
	if n := manifest.TaskContainerNotes(req); n != "" {
		fmt.Fprintln(stderr, "legate: note: "+n)
	}
	_, err = fmt.Fprint(cmd.OutOrStdout(), out)
	return err
}

// manifestOptionFlags are the flags of upgrades, the root variant, sizes
// and the ECS hostname (docs/install.md).
func manifestOptionFlags(cmd *cobra.Command, kind string, f *manifestFlags) {
	fl := cmd.Flags()
	how := "legate watcher runs the delegate and upgrades it with no downtime from the manager's signed releases"
	if kind == manifest.KindKubernetes || kind == manifest.KindHelm {
		how = "an hourly upgrader CronJob patches the StatefulSet's image to the version the manager wants, with a ServiceAccount that may only get and patch it"
	}
	fl.StringVar(&f.upgrade, "upgrade", "", "auto (default: "+how+"; docs/upgrades.md) or self-managed (the delegate alone: you upgrade it by changing its image or binary)")
	fl.StringVar(&f.size, "size", "", "a size preset: "+strings.Join(manifest.Sizes(), ", ")+
		" (requests, limits and task capacity measured for legate; docs/install.md has the table; not with --cpu/--memory)")
	fl.BoolVar(&f.runAsRoot, "run-as-root", false, "run the delegate as root (uid 0), for INIT_SCRIPTs that install packages: its tasks run as root too (docs/install.md says the risk)")
	if kind == manifest.KindKubernetes {
		fl.StringVar(&f.autoscale, "autoscale", "", "MIN:MAX: size the StatefulSet on its queue signal within these replicas (legate autoscaler in a Deployment whose Role may only get and patch that StatefulSet's scale; docs/elastic.md)")
		fl.StringVar(&f.autoscaleWith, "autoscale-with", "", "legate (the default), keda (print a KEDA ScaledObject with a metrics-api trigger instead) or hpa (a HorizontalPodAutoscaler on an external metric)")
	}
	if kind == manifest.KindECS || kind == manifest.KindFargate {
		fl.StringVar(&f.hostname, "hostname", "", "the delegate's host name, its identity: replacements of the task stay one instance (ECS: the container's hostname; Fargate: DELEGATE_HOSTNAME); one task per hostname")
	}
}
