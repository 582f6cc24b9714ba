package manifest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// generate is Generate of base(kind) changed by edit, failing the test on
// an error.
func generate(t *testing.T, kind string, edit func(*Params)) string {
	t.Helper()
	p := base(kind)
	if edit != nil {
		edit(&p)
	}
	out, err := Generate(p)
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	return out
}

// kindCase is one kind's artifact: the docker kind as docker run or a
// compose file, ECS and Fargate as task definitions.
type kindCase struct {
	name, kind string
	edit       func(*Params)
}

func everyKind() []kindCase {
	return []kindCase{
		{"kubernetes", KindKubernetes, nil},
		{"helm", KindHelm, nil},
		{"docker", KindDocker, nil},
		{"compose", KindDocker, func(p *Params) { p.Compose = true }},
		{"ecs", KindECS, nil},
		{"fargate", KindFargate, nil},
		{"systemd", KindSystemd, nil},
	}
}

// with runs edit after the case's own edit.
func (k kindCase) with(edit func(*Params)) func(*Params) {
	return func(p *Params) {
		if k.edit != nil {
			k.edit(p)
		}
		edit(p)
	}
}

// TestUpgradesAutomaticByDefault: every kind upgrades itself unless asked
// not to: Kubernetes with the upgrader CronJob and its Role, Helm with the
// chart's upgrade value, the container kinds and systemd with legate
// watcher in place of the delegate (with the image's writable directory);
// --upgrade self-managed gives the delegate alone.
func TestUpgradesAutomaticByDefault(t *testing.T) {
	auto := map[string][]string{
		"kubernetes": {`kind: "CronJob"`, `- "upgrader"`, `legate.dev/upgrade: "auto"`, `resourceNames:`},
		"helm":       {`upgrade: "auto"`},
		"docker":     {"  registry.example.com/legate:v1.2.3 watcher --dir /var/lib/legate\n"},
		"compose":    {"command:\n      - \"watcher\"\n      - \"--dir\"\n      - \"/var/lib/legate\"\n"},
		"ecs":        {`"command": [` + "\n" + `        "watcher",` + "\n" + `        "--dir",` + "\n" + `        "/var/lib/legate"`, `curl -fsS http://127.0.0.1:3461/healthz`},
		"fargate":    {`"command": [` + "\n" + `        "watcher",` + "\n" + `        "--dir",` + "\n" + `        "/var/lib/legate"`, `curl -fsS http://127.0.0.1:3461/healthz`},
		"systemd":    {"ExecStart=/usr/local/bin/legate watcher --dir /var/lib/legate-delegate/legate-delegate\n"},
	}
	self := map[string][]string{
		"kubernetes": {`legate.dev/upgrade: "self-managed"`, `- "delegate"`},
		"helm":       {`upgrade: "self-managed"`},
		"docker":     {"  registry.example.com/legate:v1.2.3 delegate\n"},
		"compose":    {"command:\n      - \"delegate\"\n"},
		"ecs":        {`"command": [` + "\n" + `        "delegate"` + "\n"},
		"fargate":    {`"command": [` + "\n" + `        "delegate"` + "\n"},
		"systemd":    {"ExecStart=/usr/local/bin/legate delegate\n"},
	}
	for _, k := range everyKind() {
		t.Run(k.name, func(t *testing.T) {
			def := generate(t, k.kind, k.edit)
			for _, want := range auto[k.name] {
				if !strings.Contains(def, want) {
					t.Errorf("the default spec lacks %q:\n%s", want, def)
				}
			}
			if strings.Contains(def, "self-managed") || strings.Contains(def, "3461") != (k.kind == KindECS || k.kind == KindFargate) {
				t.Errorf("the default spec is self-managed, or has the alternate health port where it has no health check:\n%s", def)
			}
			opt := generate(t, k.kind, k.with(func(p *Params) { p.Upgrade = protocol.UpgradeSelfManaged }))
			for _, want := range self[k.name] {
				if !strings.Contains(opt, want) {
					t.Errorf("the self-managed spec lacks %q:\n%s", want, opt)
				}
			}
			for _, not := range []string{"watcher", "CronJob", "upgrader", "3461"} {
				if strings.Contains(opt, not) {
					t.Errorf("the self-managed spec has %q:\n%s", not, opt)
				}
			}
		})
	}
}

// TestRunAsRootEveryKind: --run-as-root makes the delegate uid 0 in every
// kind, and without it no kind runs it as root but ECS on EC2 (which
// opens the instance's Docker socket).
func TestRunAsRootEveryKind(t *testing.T) {
	root := map[string]string{
		"kubernetes": "securityContext:\n            runAsUser: 0\n            runAsGroup: 0\n            runAsNonRoot: false\n",
		"helm":       "runAsRoot: true\n",
		"docker":     "  --user 0 \\\n",
		"compose":    "    user: \"0\"\n",
		"ecs":        `"user": "0"`,
		"fargate":    `"user": "0"`,
		"systemd":    "User=root\n",
	}
	for _, k := range everyKind() {
		t.Run(k.name, func(t *testing.T) {
			out := generate(t, k.kind, k.with(func(p *Params) { p.RunAsRoot = true }))
			if !strings.Contains(out, root[k.name]) {
				t.Errorf("--run-as-root: lacks %q:\n%s", root[k.name], out)
			}
			def := generate(t, k.kind, k.edit)
			if k.kind != KindECS && strings.Contains(def, root[k.name]) {
				t.Errorf("without --run-as-root the spec has %q:\n%s", root[k.name], def)
			}
		})
	}
}

// TestSizeEveryKind: each size sets what each kind allows, and the task
// capacity.
func TestSizeEveryKind(t *testing.T) {
	want := map[string]map[string][]string{
		SizeLaptop: {
			"kubernetes": {"requests:\n                          cpu: \"100m\"\n                          memory: \"128Mi\"\n                        limits:\n                          cpu: \"500m\"\n                          memory: \"512Mi\"\n", "name: \"DELEGATE_TASK_CAPACITY\"\n                  value: \"2\""},
			"helm":       {"limits:\n    cpu: \"500m\"\n    memory: \"512Mi\"\n", "name: \"DELEGATE_TASK_CAPACITY\"\n    value: \"2\""},
			"docker":     {"  --cpus 0.5 \\\n  --memory 512m \\\n", "--env DELEGATE_TASK_CAPACITY=2 "},
			"compose":    {"cpus: \"0.5\"\n", "mem_limit: \"512m\"\n", "DELEGATE_TASK_CAPACITY: \"2\""},
			"ecs":        {`"cpu": "512"`, `"memory": "1024"`, `"value": "2"`},
			"fargate":    {`"cpu": "512"`, `"memory": "1024"`, `"value": "2"`},
			"systemd":    {"CPUQuota=50%\nMemoryMax=512M\n", "DELEGATE_TASK_CAPACITY=\"2\""},
		},
		SizeLarge: {
			"kubernetes": {"requests:\n                          cpu: \"450m\"\n                          memory: \"576Mi\"\n                        limits:\n                          cpu: \"4\"\n                          memory: \"4Gi\"\n"},
			"helm":       {"limits:\n    cpu: \"4\"\n    memory: \"4Gi\"\n"},
			"docker":     {"  --cpus 4 \\\n  --memory 4096m \\\n", "DELEGATE_TASK_CAPACITY=16 "},
			"compose":    {"cpus: \"4\"\n", "mem_limit: \"4096m\"\n"},
			"ecs":        {`"cpu": "4096"`, `"memory": "8192"`},
			"fargate":    {`"cpu": "4096"`, `"memory": "8192"`},
			"systemd":    {"CPUQuota=400%\nMemoryMax=4096M\n"},
		},
	}
	for size, kinds := range want {
		for _, k := range everyKind() {
			t.Run(size+"/"+k.name, func(t *testing.T) {
				out := generate(t, k.kind, k.with(func(p *Params) { p.Size = size }))
				for _, w := range kinds[k.name] {
					if !strings.Contains(squash(out), squash(w)) {
						t.Errorf("lacks %q:\n%s", w, out)
					}
				}
			})
		}
	}
	// Every size is a Fargate task size, and its memory holds the limit.
	for _, name := range Sizes() {
		sz, _ := SizeOf(name)
		if !fargateSize(atoi(t, sz.ECSCPU), atoi(t, sz.ECSMemory)) || atoi(t, sz.ECSMemory) < sz.limitMemMiB {
			t.Errorf("size %s: ECS %s/%s is not a Fargate size holding %d MiB", name, sz.ECSCPU, sz.ECSMemory, sz.limitMemMiB)
		}
	}
}

// squash makes every run of white space one space: the sizes' checks do
// not depend on indentation.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a number", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// TestOptionsRefused: an unknown size (with the list), a size with
// cpu/memory, a hostname where it does not apply or for several replicas.
func TestOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		kind string
		edit func(*Params)
		want string
	}{
		{KindKubernetes, func(p *Params) { p.Size = "huge" }, `size "huge": use one of laptop, small, medium, large`},
		{KindDocker, func(p *Params) { p.Size = "Small" }, `size "Small": use one of laptop, small, medium, large`},
		{KindKubernetes, func(p *Params) { p.Size = "small"; p.CPU = "1" }, "give size or cpu and memory, not both"},
		{KindDocker, func(p *Params) {
			p.Size = "small"
			p.Env = []protocol.EnvVar{{Name: "DELEGATE_TASK_CAPACITY", Value: "3"}}
		}, "env DELEGATE_TASK_CAPACITY is set by size small"},
		{KindKubernetes, func(p *Params) { p.Hostname = "h1" }, "hostname does not apply to a kubernetes manifest"},
		{KindDocker, func(p *Params) { p.Hostname = "h1" }, "hostname does not apply to a docker manifest"},
		{KindECS, func(p *Params) { p.Hostname = "h1"; p.Replicas = 2 }, `hostname "h1" names one instance`},
		{KindECS, func(p *Params) { p.Hostname = "-h" }, `hostname "-h": use letters`},
		{KindFargate, func(p *Params) {
			p.Hostname = "h1"
			p.Env = []protocol.EnvVar{{Name: "DELEGATE_HOSTNAME", Value: "x"}}
		}, "env DELEGATE_HOSTNAME: use hostname"},
		{KindECS, func(p *Params) { p.Service = true; p.Size = "small" }, "size does not apply"},
		{KindECS, func(p *Params) { p.Service = true; p.Upgrade = "auto" }, "upgrade does not apply"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			p := base(tc.kind)
			tc.edit(&p)
			if _, err := Generate(p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestECSHostname: ECS (bridge) gives the container the hostname; Fargate
// (awsvpc, which takes none) gives the delegate DELEGATE_HOSTNAME.
func TestECSHostname(t *testing.T) {
	ecs := generate(t, KindECS, func(p *Params) { p.Hostname = "ecs-delegate-1" })
	if !strings.Contains(ecs, `"hostname": "ecs-delegate-1"`) || strings.Contains(ecs, "DELEGATE_HOSTNAME") {
		t.Errorf("ecs:\n%s", ecs)
	}
	fg := generate(t, KindFargate, func(p *Params) { p.Hostname = "fargate-1" })
	if strings.Contains(fg, `"hostname"`) || !strings.Contains(fg, `"name": "DELEGATE_HOSTNAME",`+"\n"+`          "value": "fargate-1"`) {
		t.Errorf("fargate:\n%s", fg)
	}
}

// TestSizesDocumented: docs/install.md's table of sizes says what the
// code gives, row by row.
func TestSizesDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Sizes() {
		sz, _ := SizeOf(name)
		row := fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s / %s | %s / %s | %s / %s |", name, sz.Capacity, sz.CPURequest, sz.MemRequest,
			sz.CPULimit, sz.MemLimit, sz.ECSCPU, sz.ECSMemory, sz.DockerCPUs, sz.DockerMem, sz.SystemdCPU, sz.SystemdMem)
		if !strings.Contains(string(b), row+"\n") {
			t.Errorf("docs/install.md lacks the row of size %s:\n%s", name, row)
		}
	}
}
