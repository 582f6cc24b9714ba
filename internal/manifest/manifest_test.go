package manifest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// base is a valid request of kind; the cases change one thing.
func base(kind string) Params {
	p := Params{Kind: kind, AccountID: "ABCDEFGH2345", ManagerURL: "https://legate.example.com", Token: "tok_abc"}
	if kind != KindSystemd {
		p.Image = "registry.example.com/legate:v1.2.3"
	}
	switch kind {
	case KindECS:
		p.Region = "us-east-1"
	case KindFargate:
		p.Region = "us-east-1"
		p.ExecutionRoleARN = "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"
	}
	return p
}

func TestGenerateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Params)
		want string // a part of the error
	}{
		{"unknown kind", func(p *Params) { p.Kind = "nomad" }, `unknown manifest kind "nomad": use one of kubernetes, helm, docker, ecs, fargate, systemd`},
		{"no token", func(p *Params) { p.Token = "" }, "no delegate token"},
		{"two tokens", func(p *Params) { p.TokenSecret = "s" }, "give the token once"},
		{"token with a space", func(p *Params) { p.Token = "a b" }, "not a delegate token"},
		{"k8s name with capitals", func(p *Params) { p.Name = "My_Delegate" }, `name "My_Delegate" cannot name Kubernetes objects`},
		{"k8s name too long", func(p *Params) { p.Name = strings.Repeat("a", 57) }, "at most 56 characters"},
		{"namespace", func(p *Params) { p.Namespace = "Prod" }, `namespace "Prod" is not a Kubernetes namespace name`},
		{"rbac", func(p *Params) { p.RBAC = "admin" }, `rbac "admin": use cluster`},
		{"replicas", func(p *Params) { p.Replicas = -1 }, "replicas -1: use 1 to 1000"},
		{"bad env name", func(p *Params) { p.Env = []protocol.EnvVar{{Name: "1X", Value: "v"}} }, `env name "1X"`},
		{"reserved env", func(p *Params) { p.Env = []protocol.EnvVar{{Name: "HARNESS_NAME", Value: "v"}} }, "env HARNESS_NAME is set by the manifest: use name instead"},
		{"env twice", func(p *Params) { p.Env = []protocol.EnvVar{{Name: "X", Value: "1"}, {Name: "X", Value: "2"}} }, "env X is given twice"},
		{"tag with comma", func(p *Params) { p.Tags = []string{"a,b"} }, `tag "a,b"`},
		{"manager URL scheme", func(p *Params) { p.ManagerURL = "legate.example.com" }, "must start with http:// or https://"},
		{"no manager URL", func(p *Params) { p.ManagerURL = "" }, "no manager URL"},
		{"manager URL not UTF-8", func(p *Params) { p.ManagerURL = "https://h\xff.example.com" }, "is not a URL"},
		{"account too short for the code", func(p *Params) { p.AccountID = "ab-c" }, "six letters or digits"},
		{"cpu", func(p *Params) { p.CPU = "lots" }, `cpu "lots" is not a Kubernetes quantity`},
		{"not for kubernetes", func(p *Params) { p.Compose = true }, "compose does not apply to a kubernetes manifest"},
		{"image", func(p *Params) { p.Image = "not an image" }, `image "not an image"`},
		{"upgrade", func(p *Params) { p.Upgrade = "nightly" }, `upgrade "nightly": use auto (the default: upgrades with no downtime) or self-managed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base(KindKubernetes)
			tc.edit(&p)
			_, err := Generate(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestGenerateRefusesPerKind(t *testing.T) {
	for _, tc := range []struct {
		kind string
		edit func(*Params)
		want string
	}{
		{KindECS, func(p *Params) { p.Name = "a.b" }, "cannot name an ECS task family"},
		{KindECS, func(p *Params) { p.Region = "" }, "no AWS region"},
		{KindECS, func(p *Params) { p.Token = ""; p.TokenSecretARN = "arn:aws:secretsmanager:us-east-1:1:secret:x" }, "ECS needs it to read the token's secret"},
		{KindECS, func(p *Params) { p.Namespace = "x" }, "namespace does not apply to a ecs manifest"},
		{KindFargate, func(p *Params) { p.ExecutionRoleARN = "" }, "Fargate needs it"},
		{KindFargate, func(p *Params) { p.CPU, p.Memory = "256", "4096" }, "not a Fargate task size"},
		{KindFargate, func(p *Params) { p.Service = true }, "a Fargate service needs its network"},
		{KindFargate, func(p *Params) { p.TokenSecretARN = "arn:aws:s3:::bucket"; p.Token = "" }, "is not an ARN of secretsmanager"},
		{KindSystemd, func(p *Params) { p.Image = "x" }, "image does not apply to a systemd manifest"},
		{KindSystemd, func(p *Params) { p.Env = []protocol.EnvVar{{Name: "INIT_SCRIPT", Value: "a\nb"}} }, "cannot hold line breaks"},
		{KindDocker, func(p *Params) { p.Name = "-x" }, `name "-x"`},
		{KindHelm, func(p *Params) { p.Token = ""; p.TokenSecret = "Bad_Name" }, "is not a Kubernetes Secret name"},
	} {
		t.Run(tc.kind+" "+tc.want, func(t *testing.T) {
			p := base(tc.kind)
			tc.edit(&p)
			_, err := Generate(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestGenerateEveryKind(t *testing.T) {
	for _, k := range Kinds() {
		out, err := Generate(base(k))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if !strings.Contains(out, "ABCDEFGH2345") || !strings.Contains(out, "https://legate.example.com") || !strings.Contains(out, "tok_abc") {
			t.Errorf("%s: the output lacks the account, URL or token:\n%s", k, out)
		}
		if !TokenEmbedded(base(k)) || Notice(base(k)) == "" {
			t.Errorf("%s: a token by value is embedded and needs a notice", k)
		}
	}
}

func TestAccountCode(t *testing.T) {
	for in, want := range map[string]string{"ABCDEFGH2345": "abcdef", "a-b_c.D2345x": "abcd23", "ab": "ab"} {
		if got := AccountCode(in); got != want {
			t.Errorf("AccountCode(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLoopbackManagerURL: a manager URL that names the delegate's own
// host (loopback, unspecified, link-local) is refused in every kind, with
// the flags that fix it, unless AllowLoopback asks for a same-host trial.
func TestLoopbackManagerURL(t *testing.T) {
	for _, tc := range []struct {
		url      string
		loopback bool
	}{
		{"http://127.0.0.1:7460", true},
		{"http://127.8.9.10", true},
		{"http://localhost:7460", true},
		{"http://LOCALHOST.:7460", true},
		{"https://api.localhost", true},
		{"http://[::1]:7460", true},
		{"http://[::ffff:127.0.0.1]:7460", true},
		{"http://0.0.0.0:7460", true},
		{"http://[::]:7460", true},
		{"http://169.254.169.254", true},
		{"http://[fe80::1]:7460", true},
		{"https://legate.example.com", false},
		{"http://10.0.0.5:7460", false},
		{"http://192.168.1.20:7460", false},
		{"http://[2001:db8::1]:7460", false},
		{"http://localhost.example.com", false},
		{"http://legate-manager.legate.svc:7460", false},
	} {
		for _, k := range Kinds() {
			p := base(k)
			p.ManagerURL = tc.url
			_, err := Generate(p)
			switch {
			case !tc.loopback && err != nil:
				t.Errorf("%s %s: %v, want it accepted", k, tc.url, err)
			case tc.loopback && err == nil:
				t.Errorf("%s %s: accepted, want it refused", k, tc.url)
			case tc.loopback:
				for _, want := range []string{tc.url, "--public-url", "--manager-url", "--allow-loopback"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s %s: error %q does not say %q", k, tc.url, err, want)
					}
				}
			}
			if !tc.loopback {
				continue
			}
			p.AllowLoopback = true
			if out, err := Generate(p); err != nil || !strings.Contains(out, strings.TrimRight(tc.url, "/")) {
				t.Errorf("%s %s with AllowLoopback: err %v, output:\n%s", k, tc.url, err, out)
			}
		}
	}
}

// TestNoImage: a container kind without an image is refused with the
// fix (publish the image, set the manager's --delegate-image, or --image),
// rather than given an image no registry serves; systemd needs none.
func TestNoImage(t *testing.T) {
	for _, k := range Kinds() {
		p := base(k)
		p.Image = ""
		_, err := Generate(p)
		if k == KindSystemd {
			if err != nil {
				t.Errorf("systemd without an image: %v", err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s without an image: accepted", k)
			continue
		}
		for _, want := range []string{"scripts/image --push", "--delegate-image", "--image", "docs/install.md"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s without an image: error %q does not say %q", k, err, want)
			}
		}
	}
}

// TestDefaultsFill: what the manager knows fills what a request leaves
// out, and never what it sets.
func TestDefaultsFill(t *testing.T) {
	d := Defaults{ManagerURL: "https://legate.example.com", Image: "registry.example.com/legate:v1"}
	for _, tc := range []struct {
		in, want Params
	}{
		{Params{Kind: KindDocker}, Params{Kind: KindDocker, ManagerURL: d.ManagerURL, Image: d.Image}},
		{Params{Kind: KindSystemd}, Params{Kind: KindSystemd, ManagerURL: d.ManagerURL}},
		{Params{Kind: KindHelm, ManagerURL: "https://other.example.com", Image: "x/y:z"}, Params{Kind: KindHelm, ManagerURL: "https://other.example.com", Image: "x/y:z"}},
	} {
		if diff := cmp.Diff(tc.want, d.Fill(tc.in)); diff != "" {
			t.Errorf("Fill(%+v) (-want +got):\n%s", tc.in, diff)
		}
	}
}

// TestLoopbackDockerOnHostNetwork: a same-host trial of the docker kinds
// runs on the host's network, where the manager's loopback address is
// the manager's; without a loopback URL the spec keeps its own network.
func TestLoopbackDockerOnHostNetwork(t *testing.T) {
	for _, compose := range []bool{false, true} {
		p := base(KindDocker)
		p.Compose = compose
		p.ManagerURL, p.AllowLoopback = "http://127.0.0.1:7460", true
		out, err := Generate(p)
		want := "--network host"
		if compose {
			want = `network_mode: "host"`
		}
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("compose %v, loopback: err %v, want %q in:\n%s", compose, err, want, out)
		}
		p.ManagerURL = "https://legate.example.com"
		if out, err := Generate(p); err != nil || strings.Contains(out, "host") {
			t.Errorf("compose %v, public URL: err %v, want no host network in:\n%s", compose, err, out)
		}
	}
}

func TestParseEnv(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    protocol.EnvVar
		wantErr bool
	}{
		{in: "A=b", want: protocol.EnvVar{Name: "A", Value: "b"}},
		{in: "A=", want: protocol.EnvVar{Name: "A"}},
		{in: "INIT_SCRIPT=a=b c", want: protocol.EnvVar{Name: "INIT_SCRIPT", Value: "a=b c"}},
		{in: "A", wantErr: true},
		{in: "=b", wantErr: true},
		{in: "A B=c", wantErr: true},
		{in: "9A=c", wantErr: true},
	} {
		got, err := ParseEnv(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseEnv(%q): error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" && !tc.wantErr {
			t.Errorf("ParseEnv(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func FuzzParseEnv(f *testing.F) {
	for _, s := range []string{"A=b", "A=", "=", "A", "INIT_SCRIPT=echo a=b", "é=x", "A=\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEnv(s)
		if err != nil {
			return
		}
		if e.Name+"="+e.Value != s {
			t.Fatalf("ParseEnv(%q) = %+v: not the input back", s, e)
		}
		if checkEnvName(e.Name) != nil {
			t.Fatalf("ParseEnv(%q) accepted the name %q", s, e.Name)
		}
	})
}

// FuzzGenerate: any name, tags, description and env value either gives a
// one-line error or an output that is the same on a second run.
func FuzzGenerate(f *testing.F) {
	f.Add(0, "legate-delegate", "a,b", "desc", "INIT_SCRIPT", "echo hi\nexit 0")
	f.Add(2, "x", "yes,no,null", "", "X", "'\"$`\\")
	f.Add(5, "d.1", "", "\u2028", "Y", "\x00")
	f.Fuzz(func(t *testing.T, kind int, name, tags, desc, envName, envValue string) {
		kinds := Kinds()
		p := base(kinds[(kind%len(kinds)+len(kinds))%len(kinds)])
		p.Name, p.Tags, p.Description = name, strings.Split(tags, ","), desc
		p.Env = []protocol.EnvVar{{Name: envName, Value: envValue}}
		out, err := Generate(p)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			return
		}
		again, _ := Generate(p)
		if out != again {
			t.Fatal("two runs gave different output")
		}
	})
}

// TestTaskContainersOnECS: the EC2 task definition mounts the instance's
// Docker socket (volume and mount point) and runs as root to open it; the
// Fargate one has neither; the notes say what each means for task
// containers, the services have none.
func TestTaskContainersOnECS(t *testing.T) {
	type mount struct {
		SourceVolume  string `json:"sourceVolume"`
		ContainerPath string `json:"containerPath"`
		ReadOnly      bool   `json:"readOnly"`
	}
	type td struct {
		Volumes []struct {
			Name string `json:"name"`
			Host struct {
				SourcePath string `json:"sourcePath"`
			} `json:"host"`
		} `json:"volumes"`
		ContainerDefinitions []struct {
			User        string  `json:"user"`
			MountPoints []mount `json:"mountPoints"`
		} `json:"containerDefinitions"`
	}
	for _, kind := range []string{KindECS, KindFargate} {
		p := base(kind)
		p.Region, p.ExecutionRoleARN = "eu-west-1", "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"
		out, err := Generate(p)
		if err != nil {
			t.Fatal(err)
		}
		var got td
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %v\n%s", kind, err, out)
		}
		c := got.ContainerDefinitions[0]
		notes := TaskContainerNotes(p)
		switch kind {
		case KindECS:
			if len(got.Volumes) != 1 || got.Volumes[0].Host.SourcePath != DockerSocket || c.User != "0" ||
				len(c.MountPoints) != 1 || c.MountPoints[0] != (mount{got.Volumes[0].Name, DockerSocket, false}) {
				t.Errorf("ecs: no Docker socket mount:\n%s", out)
			}
			for _, want := range []string{DockerSocket, "Docker Engine API", `"1000:GID"`, "controls the instance's Docker", "privileged"} {
				if !strings.Contains(notes, want) {
					t.Errorf("ecs notes lack %q: %s", want, notes)
				}
			}
		case KindFargate:
			if len(got.Volumes) != 0 || c.User != "" || len(c.MountPoints) != 0 {
				t.Errorf("fargate: a host mount or user:\n%s", out)
			}
			for _, want := range []string{"no container runtime", "legate manifest ecs", "21504-204800"} {
				if !strings.Contains(notes, want) {
					t.Errorf("fargate notes lack %q: %s", want, notes)
				}
			}
		}
		p.Service, p.Subnets = true, []string{"subnet-0123abcd"}
		if n := TaskContainerNotes(p); n != "" {
			t.Errorf("%s service: notes %q", kind, n)
		}
	}
}

// TestKubernetesUpgradeModes: self-managed adds nothing but its
// annotation; auto (the default) adds the hourly upgrader CronJob (never two at once)
// with a ServiceAccount that may only get and patch the StatefulSet.
func TestKubernetesUpgradeModes(t *testing.T) {
	p := base(KindKubernetes)
	p.Upgrade = protocol.UpgradeSelfManaged
	self, err := Generate(p)
	if err != nil {
		t.Fatal(err)
	}
	auto, err := Generate(base(KindKubernetes))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(self, `legate.dev/upgrade: "self-managed"`) || strings.Contains(self, "CronJob") {
		t.Errorf("self-managed:\n%s", self)
	}
	for _, want := range []string{
		`legate.dev/upgrade: "auto"`,
		`kind: "CronJob"`,
		`schedule: "0 * * * *"`,
		`concurrencyPolicy: "Forbid"`,
		`serviceAccountName: "legate-delegate-abcdef-upgrader"`,
		`- "upgrader"`,
		`value: "legate-delegate-abcdef"`,
	} {
		if !strings.Contains(auto, want) {
			t.Errorf("auto lacks %q:\n%s", want, auto)
		}
	}
	// The upgrader's Role: get and patch of its StatefulSet, nothing else.
	var role string
	for _, doc := range strings.Split(auto, "\n---\n") {
		if strings.Contains(doc, "\nkind: \"Role\"\n") && strings.Contains(doc, `name: "legate-delegate-abcdef-upgrader"`) {
			role = doc
		}
	}
	_, rules, _ := strings.Cut(role, "rules:")
	for _, want := range []string{`"apps"`, `"statefulsets"`, `"legate-delegate-abcdef"`, `"get"`, `"patch"`} {
		if !strings.Contains(rules, want) {
			t.Errorf("the upgrader's role lacks %s:\n%s", want, role)
		}
	}
	if strings.Contains(rules, `"*"`) || strings.Count(rules, "- ") != 6 {
		t.Errorf("the upgrader's role grants more than get and patch of its StatefulSet:\n%s", rules)
	}
}
