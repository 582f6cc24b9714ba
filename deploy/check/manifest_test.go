package check

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/legate-dev/legate/internal/manifest"
	"github.com/legate-dev/legate/internal/protocol"
)

const (
	testAccount = "GCWWXTQ2ABCDEFGHIJKLMN"
	testURL     = "https://legate.example.com:7460"
	testImage   = "registry.example.com/legate:v1.2.3"
	testToken   = "0123456789abcdef0123456789abcdef"
	testARN     = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:legate/token-AbCdEf"
	testRole    = "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"
)

// params is a valid request of kind with the asked values of the tests.
func params(kind string) manifest.Params {
	p := manifest.Params{Kind: kind, AccountID: testAccount, ManagerURL: testURL, Token: testToken,
		Name: "prod-east", Tags: []string{"k8s", "Prod East", "yes"}, Description: "the east cluster's delegate",
		Image: "registry.example.com/legate:v1.2.3",
		Env: []protocol.EnvVar{
			{Name: "PROXY_HOST", Value: "proxy.internal"}, {Name: "PROXY_PORT", Value: "3128"},
			{Name: "INIT_SCRIPT", Value: "apt-get update && apt-get install -y jq\necho \"ready: $HOME\" 'done' `x` \\"},
			{Name: "NULL", Value: "null"}, {Name: "N", Value: "1.0"},
		}}
	switch kind {
	case manifest.KindECS, manifest.KindFargate:
		p.Region, p.ExecutionRoleARN = "eu-west-1", testRole
	case manifest.KindSystemd:
		p.Image = ""
		p.Env[2].Value = "apt-get update && echo \"ready: $HOME\" 'done' `x` \\"
	}
	return p
}

// matrix is the variants checked per kind: name -> change of params.
func matrix(kind string) map[string]func(*manifest.Params) {
	m := map[string]func(*manifest.Params){
		"defaults":         func(p *manifest.Params) { p.Name, p.Tags, p.Env, p.Description = "", nil, nil, "" },
		"asked values":     func(*manifest.Params) {},
		"replicas 3":       func(p *manifest.Params) { p.Replicas = 3 },
		"unicode and YAML": func(p *manifest.Params) { p.Tags = []string{"ünï", "on", "- x", "a: b", "#c"} },
	}
	if kind != manifest.KindSystemd { // refuses control characters
		// DEL, NEL and another C1 control, which YAML may not hold as they
		// are (the fuzz target found DEL).
		m["controls in a value"] = func(p *manifest.Params) {
			p.Env = []protocol.EnvVar{{Name: "X", Value: "a\x7fb\u0085c\u0090d\u2028e"}}
		}
		// A name over 128 bytes is an explicit key ("? NAME") in a
		// compose file; a leading BOM has every character escaped.
		m["long name, BOM"] = func(p *manifest.Params) {
			p.Env = []protocol.EnvVar{{Name: "X_" + strings.Repeat("A", 200), Value: "\ufeffbom"}, {Name: "ON", Value: "on"}}
			p.Compose = p.Kind == manifest.KindDocker
		}
	}
	if kind != manifest.KindKubernetes && kind != manifest.KindHelm {
		m["upgrade self-managed"] = func(p *manifest.Params) { p.Upgrade = "self-managed" }
	}
	// Every size, and the root variant (with the smallest size).
	for _, size := range manifest.Sizes() {
		m["size "+size] = func(p *manifest.Params) { p.Size = size }
	}
	m["run as root"] = func(p *manifest.Params) { p.RunAsRoot, p.Size = true, manifest.SizeLaptop }
	switch kind {
	case manifest.KindKubernetes, manifest.KindHelm:
		m["rbac namespace"] = func(p *manifest.Params) { p.RBAC, p.Namespace = "namespace", "team-a" }
		m["rbac none"] = func(p *manifest.Params) { p.RBAC = "none" }
		m["existing secret"] = func(p *manifest.Params) { p.Token, p.TokenSecret = "", "legate-token" }
		m["sizes"] = func(p *manifest.Params) { p.CPU, p.Memory = "0.25", "128Mi" }
		m["upgrade self-managed"] = func(p *manifest.Params) { p.Upgrade = "self-managed" }
		m["upgrade auto, existing secret"] = func(p *manifest.Params) { p.Upgrade, p.Token, p.TokenSecret = "auto", "", "legate-token" }
		if kind == manifest.KindKubernetes {
			m["autoscale"] = func(p *manifest.Params) { p.Autoscale, p.Size = "1:10", manifest.SizeSmall }
			m["autoscale keda"] = func(p *manifest.Params) { p.Autoscale, p.AutoscaleWith = "0:5", protocol.AutoscaleKEDA }
			m["autoscale hpa"] = func(p *manifest.Params) { p.Autoscale, p.AutoscaleWith = "2:5", protocol.AutoscaleHPA }
		}
	case manifest.KindDocker:
		m["compose"] = func(p *manifest.Params) { p.Compose = true }
		m["compose replicas"] = func(p *manifest.Params) { p.Compose, p.Replicas = true, 2 }
		m["compose root, size"] = func(p *manifest.Params) { p.Compose, p.RunAsRoot, p.Size = true, true, manifest.SizeMedium }
	case manifest.KindECS, manifest.KindFargate:
		m["secret ARN"] = func(p *manifest.Params) { p.Token, p.TokenSecretARN = "", testARN }
		m["service"] = func(p *manifest.Params) { p.Service, p.Cluster = true, "delegates" }
		if kind == manifest.KindFargate {
			m["service"] = func(p *manifest.Params) {
				p.Service, p.Subnets, p.SecurityGroups, p.Cluster = true, []string{"subnet-0abc", "subnet-0def"}, []string{"sg-0abc"}, "delegates"
			}
			m["service public"] = func(p *manifest.Params) { p.Service, p.Subnets, p.AssignPublicIP = true, []string{"subnet-0abc"}, true }
		}
		m["sizes"] = func(p *manifest.Params) { p.CPU, p.Memory = "1024", "3072" }
		m["hostname"] = func(p *manifest.Params) { p.Hostname = "ecs-delegate-1" }
	}
	return m
}

// checkArtifact decodes an artifact strictly with the check of its kind.
func checkArtifact(t *testing.T, p manifest.Params, out string) {
	t.Helper()
	var err error
	switch {
	case p.Kind == manifest.KindKubernetes:
		_, err = decodeK8s(out)
	case p.Kind == manifest.KindHelm:
		var r string
		if r, err = renderDelegateValues(out); err == nil {
			_, err = decodeK8s(r)
		}
	case p.Kind == manifest.KindDocker && p.Compose:
		_, err = decodeCompose(out)
	case p.Kind == manifest.KindDocker:
		var runs []dockerRun
		if runs, err = parseDockerRuns(out); err == nil && len(runs) != max(p.Replicas, 1) {
			t.Errorf("%d docker run commands, want %d", len(runs), max(p.Replicas, 1))
		}
	case p.Service:
		_, err = decodeService(out)
	case p.Kind == manifest.KindECS || p.Kind == manifest.KindFargate:
		_, err = decodeTaskDefinition(out)
	case p.Kind == manifest.KindSystemd:
		_, err = parseSystemd(out)
	}
	if err != nil {
		t.Fatalf("strict check: %v\n%s", err, out)
	}
}

// TestManifestsDecodeStrictly runs the generator for a matrix of params
// for every kind and decodes each output with the real schema.
func TestManifestsDecodeStrictly(t *testing.T) {
	t.Parallel()
	for _, kind := range manifest.Kinds() {
		for name, edit := range matrix(kind) {
			t.Run(kind+"/"+name, func(t *testing.T) {
				t.Parallel()
				p := params(kind)
				edit(&p)
				out, err := manifest.Generate(p)
				if err != nil {
					t.Fatal(err)
				}
				checkArtifact(t, p, out)
			})
		}
	}
}

// wantEnv is the environment an artifact of p must give the delegate.
func wantEnv(p manifest.Params, typ string) map[string]string {
	name := p.Name
	if name == "" {
		name = manifest.DefaultName
	}
	env := map[string]string{"ACCOUNT_ID": p.AccountID, "MANAGER_HOST_AND_PORT": strings.TrimRight(p.ManagerURL, "/"),
		"DELEGATE_NAME": name, "DELEGATE_TYPE": typ}
	switch {
	case p.Token != "":
		env["DELEGATE_TOKEN"] = p.Token
	case p.TokenSecret != "":
		env["DELEGATE_TOKEN"] = "valueFrom:secret/" + p.TokenSecret + "/DELEGATE_TOKEN"
	case p.TokenSecretARN != "":
		env["DELEGATE_TOKEN"] = "valueFrom:" + p.TokenSecretARN
	}
	if len(p.Tags) > 0 {
		env["DELEGATE_TAGS"] = strings.Join(p.Tags, ",")
	}
	if p.Description != "" {
		env["DELEGATE_DESCRIPTION"] = p.Description
	}
	if sz, ok := manifest.SizeOf(p.Size); ok {
		env["DELEGATE_TASK_CAPACITY"] = strconv.Itoa(sz.Capacity)
	}
	if p.Kind == manifest.KindFargate && p.Hostname != "" {
		env["DELEGATE_HOSTNAME"] = p.Hostname
	}
	for _, e := range p.Env {
		env[e.Name] = e.Value
	}
	return env
}

// TestArtifactsSetTheAskedValues: the environment each artifact gives the
// delegate, read back with envOf, is exactly the one asked for (name,
// tags, token or its reference, manager URL, extra variables).
func TestArtifactsSetTheAskedValues(t *testing.T) {
	t.Parallel()
	typ := map[string]string{manifest.KindKubernetes: "KUBERNETES", manifest.KindHelm: "KUBERNETES", manifest.KindDocker: "DOCKER",
		manifest.KindECS: "DOCKER", manifest.KindFargate: "DOCKER", manifest.KindSystemd: "SHELL"}
	for _, kind := range manifest.Kinds() {
		for name, edit := range matrix(kind) {
			p := params(kind)
			edit(&p)
			if p.Service {
				continue // a service carries no environment
			}
			t.Run(kind+"/"+name, func(t *testing.T) {
				t.Parallel()
				out, err := manifest.Generate(p)
				if err != nil {
					t.Fatal(err)
				}
				got, err := envOf(kind, out)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(wantEnv(p, typ[kind]), got); d != "" {
					t.Errorf("environment (-want +got):\n%s\n%s", d, out)
				}
			})
		}
	}
}

// TestKubernetesShape checks what the seeds ask of the Kubernetes
// delegate beyond the schema: the StatefulSet's name carries the
// account's code, replicas, probes, small requests, a long grace period,
// and the RBAC model asked for.
func TestKubernetesShape(t *testing.T) {
	t.Parallel()
	for _, rbac := range []string{"cluster", "namespace", "none"} {
		for _, kind := range []string{manifest.KindKubernetes, manifest.KindHelm} {
			t.Run(kind+"/"+rbac, func(t *testing.T) {
				p := params(kind)
				p.RBAC, p.Replicas = rbac, 2
				out, err := manifest.Generate(p)
				if err != nil {
					t.Fatal(err)
				}
				if kind == manifest.KindHelm {
					if out, err = renderDelegateValues(out); err != nil {
						t.Fatal(err)
					}
				}
				objs, err := decodeK8s(out)
				if err != nil {
					t.Fatal(err)
				}
				// The upgrader's objects (automatic upgrades, the default)
				// are counted apart: a CronJob, its ServiceAccount, Role
				// and RoleBinding.
				kinds, upgrader := map[string]int{}, map[string]int{}
				var sts *appsv1.StatefulSet
				for _, o := range objs {
					if name := objectName(o.Obj); strings.HasSuffix(name, "-upgrader") {
						upgrader[o.Kind]++
						continue
					}
					kinds[o.Kind]++
					if s, ok := o.Obj.(*appsv1.StatefulSet); ok {
						sts = s
					}
				}
				if d := cmp.Diff(map[string]int{"CronJob": 1, "ServiceAccount": 1, "Role": 1, "RoleBinding": 1}, upgrader); d != "" {
					t.Errorf("the upgrader's objects (-want +got):\n%s", d)
				}
				// Beside the deployer's rights, a Role of its own namespace
				// for container tasks as pods (podTaskRole), but with rbac none.
				want := map[string]map[string]int{
					"cluster":   {"ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1},
					"namespace": {"Role": 2, "RoleBinding": 2},
					"none":      {},
				}[rbac]
				for _, k := range []string{"Secret", "ServiceAccount", "StatefulSet"} {
					want[k] = 1
				}
				for _, k := range []string{"Secret", "ServiceAccount", "StatefulSet", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
					if kinds[k] != want[k] {
						t.Errorf("%d %s objects, want %d (%v)", kinds[k], k, want[k], kinds)
					}
				}
				checkPodTaskRole(t, objs, rbac)
				if sts.Name != "prod-east-gcwwxt" || *sts.Spec.Replicas != 2 {
					t.Errorf("StatefulSet %s with %d replicas, want prod-east-gcwwxt with 2", sts.Name, *sts.Spec.Replicas)
				}
				ps := sts.Spec.Template.Spec
				if ps.TerminationGracePeriodSeconds == nil || *ps.TerminationGracePeriodSeconds < 300 {
					t.Errorf("terminationGracePeriodSeconds %v: want at least 300 to drain", ps.TerminationGracePeriodSeconds)
				}
				c := ps.Containers[0]
				if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.Ports[0].ContainerPort != manifest.HTTPPort {
					t.Errorf("probes %s %s on port %d", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path, c.Ports[0].ContainerPort)
				}
				if mem := c.Resources.Requests[corev1.ResourceMemory]; mem.Value() > 256<<20 {
					t.Errorf("memory request %s: legate needs tens of MB", mem.String())
				}
				if got := sts.Spec.Template.Labels["legate.dev/account"]; got != "gcwwxt" {
					t.Errorf("account label %q", got)
				}
			})
		}
	}
}

// TestHelmOutputMatchesKubernetes: the chart rendered with `legate
// manifest helm` values gives the delegate the same environment as
// `legate manifest kubernetes` with the same params.
func TestHelmOutputMatchesKubernetes(t *testing.T) {
	t.Parallel()
	get := func(kind string) map[string]string {
		out, err := manifest.Generate(params(kind))
		if err != nil {
			t.Fatal(err)
		}
		env, err := envOf(kind, out)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	if d := cmp.Diff(get(manifest.KindKubernetes), get(manifest.KindHelm)); d != "" {
		t.Errorf("kubernetes vs helm (-kubernetes +helm):\n%s", d)
	}
}

// TestSeedExamplesPassTheECSCheck: the seeds' own task-spec.json and
// service.json pass the strict ECS check, the reference legate's output
// is held to.
func TestSeedExamplesPassTheECSCheck(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/seeds/*.json")
	if len(files) != 6 {
		t.Fatalf("%d seed examples, want 6", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(f, "service") {
			_, err = decodeService(string(b))
		} else {
			_, err = decodeTaskDefinition(string(b))
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestChecksCatchMisplacedFields: each check refuses a document with a
// field out of place, so a pass means something.
func TestChecksCatchMisplacedFields(t *testing.T) {
	t.Parallel()
	gen := func(p manifest.Params) string {
		out, err := manifest.Generate(p)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	k8s := gen(params(manifest.KindKubernetes))
	td := gen(params(manifest.KindECS))
	svcP := params(manifest.KindFargate)
	svcP.Service, svcP.Subnets = true, []string{"subnet-1"}
	svc := gen(svcP)
	composeP := params(manifest.KindDocker)
	composeP.Compose = true
	compose := gen(composeP)
	docker := gen(params(manifest.KindDocker))
	unit := gen(params(manifest.KindSystemd))
	seedTD, err := os.ReadFile("testdata/seeds/004-ecs-task-spec.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		check func(string) error
		doc   string
	}{
		// replicas belongs to the StatefulSet's spec, not the pod's.
		{"k8s replicas in the pod spec", func(s string) error { _, err := decodeK8s(s); return err },
			strings.Replace(k8s, "      serviceAccountName:", "      replicas: 2\n      serviceAccountName:", 1)},
		{"k8s unknown field", func(s string) error { _, err := decodeK8s(s); return err },
			strings.Replace(k8s, "  podManagementPolicy:", "  podManagmentPolicy:", 1)},
		{"k8s probe path as a list", func(s string) error { _, err := decodeK8s(s); return err },
			strings.Replace(k8s, `path: "/readyz"`, `path: ["/readyz"]`, 1)},
		{"k8s duplicate key", func(s string) error { _, err := decodeK8s(s); return err },
			strings.Replace(k8s, "  podManagementPolicy: \"Parallel\"", "  podManagementPolicy: \"Parallel\"\n  podManagementPolicy: \"OrderedReady\"", 1)},
		// environment belongs to a container definition.
		{"ecs environment at task level", func(s string) error { _, err := decodeTaskDefinition(s); return err },
			strings.Replace(td, `"family":`, `"environment": [], "family":`, 1)},
		{"seed task-spec with a misplaced field", func(s string) error { _, err := decodeTaskDefinition(s); return err },
			strings.Replace(string(seedTD), `"family"`, `"desiredCount": 1, "family"`, 1)},
		{"service with a task definition field", func(s string) error { _, err := decodeService(s); return err },
			strings.Replace(svc, `"cluster":`, `"containerDefinitions": [], "cluster":`, 1)},
		{"compose unknown key", func(s string) error { _, err := decodeCompose(s); return err },
			strings.Replace(compose, "    restart:", "    restrat:", 1)},
		{"docker run unknown flag", func(s string) error { _, err := parseDockerRuns(s); return err },
			strings.Replace(docker, "--detach", "--detach --privileged", 1)},
		{"docker run unquoted $", func(s string) error { _, err := parseDockerRuns(s); return err },
			strings.Replace(docker, "--env ACCOUNT_ID=", "--env ACCOUNT_ID=$", 1)},
		{"unit key in the wrong section", func(s string) error { _, err := parseSystemd(s); return err },
			strings.Replace(unit, "[Install]\n", "[Install]\nRestart=always\n", 1)},
		{"env file unescaped quote", func(s string) error { _, err := parseSystemd(s); return err },
			strings.Replace(unit, `DELEGATE_TYPE="SHELL"`, `DELEGATE_TYPE="SH"ELL"`, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.check(tc.doc); err == nil {
				t.Errorf("the check passed a wrong document")
			}
		})
	}
}

// TestECSShape: the seeds' shape: awslogs, no portMappings, the secret by
// ARN, Fargate's awsvpc and execution role.
func TestECSShape(t *testing.T) {
	t.Parallel()
	p := params(manifest.KindFargate)
	p.Token, p.TokenSecretARN = "", testARN
	out, err := manifest.Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	td, err := decodeTaskDefinition(out)
	if err != nil {
		t.Fatal(err)
	}
	c := td.ContainerDefinitions[0]
	b, _ := json.Marshal(td.NetworkMode)
	if string(b) != `"awsvpc"` || *td.ExecutionRoleArn != testRole || len(c.PortMappings) != 0 ||
		string(c.LogConfiguration.LogDriver) != "awslogs" || len(c.Secrets) != 1 {
		t.Errorf("task definition: %s", out)
	}
	if strings.Contains(out, testToken) {
		t.Error("the token's value is in a definition that reads it from Secrets Manager")
	}
	if len(td.Volumes) != 0 || len(c.MountPoints) != 0 {
		t.Errorf("a Fargate task definition with a host volume: %s", out)
	}

	// ECS on EC2: the instance's Docker socket for task containers, a host
	// volume and its mount point as the ECS API reads them.
	out, err = manifest.Generate(params(manifest.KindECS))
	if err != nil {
		t.Fatal(err)
	}
	if td, err = decodeTaskDefinition(out); err != nil {
		t.Fatal(err)
	}
	c = td.ContainerDefinitions[0]
	if len(td.Volumes) != 1 || td.Volumes[0].Host == nil || deref(td.Volumes[0].Host.SourcePath) != manifest.DockerSocket ||
		len(c.MountPoints) != 1 || deref(c.MountPoints[0].SourceVolume) != deref(td.Volumes[0].Name) ||
		deref(c.MountPoints[0].ContainerPath) != manifest.DockerSocket || deref(c.User) != "0" {
		t.Errorf("ECS on EC2 without the Docker socket for task containers: %s", out)
	}
}

// objectName is the metadata.name of a decoded object.
func objectName(obj any) string {
	if o, ok := obj.(interface{ GetName() string }); ok {
		return o.GetName()
	}
	return ""
}
