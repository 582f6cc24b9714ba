package config

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// env returns a lookup function over m.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// with returns a copy of base with kv ("K", "V", ...) set; a value of
// "\x00unset" removes the key.
func with(base map[string]string, kv ...string) map[string]string {
	m := make(map[string]string, len(base)+len(kv)/2)
	for k, v := range base {
		m[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "\x00unset" {
			delete(m, kv[i])
			continue
		}
		m[kv[i]] = kv[i+1]
	}
	return m
}

var gen1 = map[string]string{
	"ACCOUNT_ID":            "px7xd_BFRCi-pfWPYXVjvw",
	"DELEGATE_TOKEN":        "NTJhZGQ3ZmQ2MWU2NGYzNzc4MDU0ZTMyMmY2ZGVmYjU=",
	"MANAGER_HOST_AND_PORT": "https://app.harness.io",
}

var gen2 = map[string]string{
	"HARNESS_ACCOUNT_ID": "px7xd_BFRCi-pfWPYXVjvw",
	"HARNESS_TOKEN":      "NTJhZGQ3ZmQ2MWU2NGYzNzc4MDU0ZTMyMmY2ZGVmYjU=",
	"HARNESS_URL":        "https://app.harness.io",
}

// minimal is what gen1 and gen2 both yield.
var minimal = Delegate{
	AccountID:   "px7xd_BFRCi-pfWPYXVjvw",
	Token:       "NTJhZGQ3ZmQ2MWU2NGYzNzc4MDU0ZTMyMmY2ZGVmYjU=",
	ManagerURLs: []string{"https://app.harness.io"},
	Name:        "legate-delegate",
	Type:        "SHELL",
	HTTPPort:    DefaultHTTPPort, AutoUpgrade: true,
}

// modified returns a copy of minimal changed by f.
func modified(f func(d *Delegate)) Delegate {
	d := minimal
	d.ManagerURLs = slices.Clone(minimal.ManagerURLs)
	f(&d)
	return d
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want Delegate
	}{
		{"first generation", gen1, minimal},
		{"second generation", gen2, minimal},
		{"ACCOUNT_SECRET alias", with(gen1, "DELEGATE_TOKEN", "\x00unset", "ACCOUNT_SECRET", minimal.Token), minimal},
		{"mixed generations", with(gen1, "ACCOUNT_ID", "\x00unset", "HARNESS_ACCOUNT_ID", minimal.AccountID), minimal},
		{"both generations, same value", with(gen1, "HARNESS_ACCOUNT_ID", " "+minimal.AccountID, "HARNESS_TOKEN", minimal.Token, "HARNESS_URL", "https://app.harness.io"), minimal},
		{"empty first generation falls back", with(gen2, "ACCOUNT_ID", "", "DELEGATE_TOKEN", "  ", "MANAGER_HOST_AND_PORT", ""), minimal},
		{"values trimmed", with(gen1, "ACCOUNT_ID", "  px7xd_BFRCi-pfWPYXVjvw\n", "DELEGATE_NAME", "\tbuild-01 "), modified(func(d *Delegate) { d.Name = "build-01" })},
		{"trailing slash dropped", with(gen1, "MANAGER_HOST_AND_PORT", "https://app.harness.io/"), minimal},
		{"path kept", with(gen1, "MANAGER_HOST_AND_PORT", "https://app.harness.io/gratis/"), modified(func(d *Delegate) { d.ManagerURLs = []string{"https://app.harness.io/gratis"} })},
		{"several URLs", with(gen1, "MANAGER_HOST_AND_PORT", "https://m1.example.com:8443/, http://10.0.0.7:8080,,https://m1.example.com:8443"),
			modified(func(d *Delegate) { d.ManagerURLs = []string{"https://m1.example.com:8443", "http://10.0.0.7:8080"} })},
		{"upper-case scheme", with(gen1, "MANAGER_HOST_AND_PORT", "HTTPS://App.Harness.io"), modified(func(d *Delegate) { d.ManagerURLs = []string{"https://App.Harness.io"} })},
		{"IPv6 host", with(gen1, "MANAGER_HOST_AND_PORT", "http://[::1]:7000"), modified(func(d *Delegate) { d.ManagerURLs = []string{"http://[::1]:7000"} })},
		{"name", with(gen1, "DELEGATE_NAME", "my_delegate.v2-A"), modified(func(d *Delegate) { d.Name = "my_delegate.v2-A" })},
		{"name second generation", with(gen1, "HARNESS_NAME", "ecs-delegate"), modified(func(d *Delegate) { d.Name = "ecs-delegate" })},
		{"tags normalized", with(gen1, "DELEGATE_TAGS", " Prod, aws ,,AWS, eu-west-1"), modified(func(d *Delegate) { d.Tags = []string{"aws", "eu-west-1", "prod"} })},
		{"tags second generation", with(gen1, "HARNESS_TAGS", "aws,ecs,production"), modified(func(d *Delegate) { d.Tags = []string{"aws", "ecs", "production"} })},
		{"empty tags", with(gen1, "DELEGATE_TAGS", ""), minimal},
		{"type upper-cased", with(gen1, "DELEGATE_TYPE", "docker"), modified(func(d *Delegate) { d.Type = "DOCKER" })},
		{"kubernetes type", with(gen1, "DELEGATE_TYPE", "KUBERNETES"), modified(func(d *Delegate) { d.Type = "KUBERNETES"; d.IdentityByHostname = true })},
		{"helm type", with(gen1, "DELEGATE_TYPE", "helm_delegate"), modified(func(d *Delegate) { d.Type = "HELM_DELEGATE"; d.IdentityByHostname = true })},
		{"in a kubernetes pod", with(gen1, "KUBERNETES_SERVICE_HOST", "10.96.0.1"), modified(func(d *Delegate) { d.IdentityByHostname = true })},
		{"in an ECS task", with(gen1, "ECS_CONTAINER_METADATA_URI_V4", "http://169.254.170.2/v4/x"), modified(func(d *Delegate) { d.IdentityByHostname = true })},
		{"in an older ECS agent's task", with(gen1, "ECS_CONTAINER_METADATA_URI", "http://169.254.170.2/v3/x"), modified(func(d *Delegate) { d.IdentityByHostname = true })},
		{"hostname", with(gen1, "DELEGATE_HOSTNAME", "ip-10-0-1-23.ec2.internal"), modified(func(d *Delegate) { d.Hostname = "ip-10-0-1-23.ec2.internal" })},
		{"deploy mode", with(gen1, "DEPLOY_MODE", "KUBERNETES"), modified(func(d *Delegate) { d.DeployMode = "KUBERNETES" })},
		{"next gen TRUE", with(gen1, "NEXT_GEN", "TRUE"), modified(func(d *Delegate) { d.NextGen = true })},
		{"next gen false", with(gen1, "NEXT_GEN", "False"), minimal},
		{"next gen empty", with(gen1, "NEXT_GEN", ""), minimal},
		{"auto upgrade off", with(gen1, "AUTO_UPGRADE", "false"), modified(func(d *Delegate) { d.AutoUpgrade = false })},
		{"watcher slot", with(gen1, "LEGATE_WATCHER_SLOT", "v1.2.3"), modified(func(d *Delegate) { d.WatcherSlot = "v1.2.3" })},
		{"poll for tasks", with(gen1, "POLL_FOR_TASKS", "true"), modified(func(d *Delegate) { d.PollForTasks = true })},
		{"reports over HTTP", with(gen1, "DELEGATE_HTTP_REPORTS", "true"), modified(func(d *Delegate) { d.HTTPReports = true })},
		{"capacity", with(gen1, "DELEGATE_TASK_CAPACITY", " 8 "), modified(func(d *Delegate) { d.Capacity = 8 })},
		{"capacity zero", with(gen1, "DELEGATE_TASK_CAPACITY", "0"), minimal},
		{"description", with(gen1, "DELEGATE_DESCRIPTION", "builds for team <blue>"), modified(func(d *Delegate) { d.Description = "builds for team <blue>" })},
		{"init script", with(gen1, "INIT_SCRIPT", "apt-get update\napt-get install -y jq\n"), modified(func(d *Delegate) { d.InitScript = "apt-get update\napt-get install -y jq" })},
		{"init alias", with(gen1, "INIT", "apt-get install -y jq\n"), modified(func(d *Delegate) { d.InitScript = "apt-get install -y jq" })},
		{"init alias same as INIT_SCRIPT", with(gen1, "INIT", "echo hi", "INIT_SCRIPT", " echo hi "), modified(func(d *Delegate) { d.InitScript = "echo hi" })},
		{"log streaming accepted", with(gen1, "LOG_STREAMING_SERVICE_URL", "https://app.harness.io/log-service/"), modified(func(d *Delegate) { d.LogStreamingURL = "https://app.harness.io/log-service/" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := FromEnv(env(tt.env))
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestFromEnvErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"nothing set", nil, "missing ACCOUNT_ID (or HARNESS_ACCOUNT_ID): the account ID to register with"},
		{"no account", with(gen1, "ACCOUNT_ID", "\x00unset"), "missing ACCOUNT_ID (or HARNESS_ACCOUNT_ID): the account ID to register with"},
		{"blank account", with(gen1, "ACCOUNT_ID", "   "), "missing ACCOUNT_ID (or HARNESS_ACCOUNT_ID): the account ID to register with"},
		{"no token", with(gen1, "DELEGATE_TOKEN", "\x00unset"), "missing DELEGATE_TOKEN (or HARNESS_TOKEN): the delegate token to register with"},
		{"no URL", with(gen1, "MANAGER_HOST_AND_PORT", "\x00unset"), "missing MANAGER_HOST_AND_PORT (or HARNESS_URL): the manager URL to connect to, such as https://legate.example.com"},

		{"account conflict", with(gen1, "HARNESS_ACCOUNT_ID", "other"), `ACCOUNT_ID="px7xd_BFRCi-pfWPYXVjvw" and HARNESS_ACCOUNT_ID="other" are both set, to different values; set only one`},
		{"token conflict hides values", with(gen1, "HARNESS_TOKEN", "other-token"), "DELEGATE_TOKEN and HARNESS_TOKEN are both set, to different values; set only one"},
		{"token alias conflict", with(gen1, "ACCOUNT_SECRET", "old"), "DELEGATE_TOKEN and ACCOUNT_SECRET are both set, to different values; set only one"},
		{"URL conflict", with(gen1, "HARNESS_URL", "https://app3.harness.io"), `MANAGER_HOST_AND_PORT="https://app.harness.io" and HARNESS_URL="https://app3.harness.io" are both set, to different values; set only one`},
		{"name conflict", with(gen1, "DELEGATE_NAME", "a", "HARNESS_NAME", "b"), `DELEGATE_NAME="a" and HARNESS_NAME="b" are both set, to different values; set only one`},
		{"tags conflict", with(gen1, "DELEGATE_TAGS", "a", "HARNESS_TAGS", "b"), `DELEGATE_TAGS="a" and HARNESS_TAGS="b" are both set, to different values; set only one`},
		{"init conflict", with(gen1, "INIT_SCRIPT", "echo a", "INIT", "echo b"), "INIT_SCRIPT and INIT are both set, to different scripts; set only one (INIT is another name for INIT_SCRIPT)"},

		{"account placeholder", with(gen1, "ACCOUNT_ID", "<ACCOUNT_ID>"), `ACCOUNT_ID is still the placeholder "<ACCOUNT_ID>" from the example; set it to your account ID`},
		{"account placeholder gen2", with(gen2, "HARNESS_ACCOUNT_ID", "PUT_YOUR_ACCOUNT_ID"), `HARNESS_ACCOUNT_ID is still the placeholder "PUT_YOUR_ACCOUNT_ID" from the example; set it to your account ID`},
		{"token placeholder", with(gen1, "DELEGATE_TOKEN", "<DELEGATE_TOKEN>"), `DELEGATE_TOKEN is still the placeholder "<DELEGATE_TOKEN>" from the example; set it to your delegate token`},
		{"token placeholder gen2", with(gen2, "HARNESS_TOKEN", "PUT_YOUR_DELEGATE_TOKEN"), `HARNESS_TOKEN is still the placeholder "PUT_YOUR_DELEGATE_TOKEN" from the example; set it to your delegate token`},
		{"URL placeholder", with(gen1, "MANAGER_HOST_AND_PORT", "<MANAGER_HOST_AND_PORT>"), `MANAGER_HOST_AND_PORT is still the placeholder "<MANAGER_HOST_AND_PORT>" from the example; set it to your manager URL, such as https://legate.example.com`},
		{"URL placeholder host", with(gen1, "MANAGER_HOST_AND_PORT", "<HOST>"), `MANAGER_HOST_AND_PORT is still the placeholder "<HOST>" from the example; set it to your manager URL, such as https://legate.example.com`},
		{"URL placeholder gen2", with(gen2, "HARNESS_URL", "PUT_YOUR_HARNESS_URL"), `HARNESS_URL is still the placeholder "PUT_YOUR_HARNESS_URL" from the example; set it to your manager URL, such as https://legate.example.com`},
		{"URL placeholder inside", with(gen1, "MANAGER_HOST_AND_PORT", "https://<HOST>:443"), `MANAGER_HOST_AND_PORT is still the placeholder "https://<HOST>:443" from the example; set it to your manager URL, such as https://legate.example.com`},
		{"name placeholder", with(gen1, "DELEGATE_NAME", "<DELEGATE_NAME>"), `DELEGATE_NAME is still the placeholder "<DELEGATE_NAME>" from the example; set it to the name of your delegate`},
		{"tags placeholder", with(gen1, "DELEGATE_TAGS", "<DELEGATE_TAGS>"), `DELEGATE_TAGS is still the placeholder "<DELEGATE_TAGS>" from the example; set it to a comma-separated list of tags, or leave it empty`},
		{"hostname placeholder", with(gen1, "DELEGATE_HOSTNAME", "<DELEGATE_HOST>"), `DELEGATE_HOSTNAME is still the placeholder "<DELEGATE_HOST>" from the example; set it to the delegate's host name, or leave it unset to detect it`},
		{"type placeholder", with(gen1, "DELEGATE_TYPE", "<DELEGATE_TYPE>"), `DELEGATE_TYPE is still the placeholder "<DELEGATE_TYPE>" from the example; set it to the delegate type, such as SHELL or DOCKER`},
		{"deploy mode placeholder", with(gen1, "DEPLOY_MODE", "YOUR_DEPLOY_MODE"), `DEPLOY_MODE is still the placeholder "YOUR_DEPLOY_MODE" from the example; set it to the deploy mode, or leave it empty`},
		{"template placeholder", with(gen1, "ACCOUNT_ID", "${ACCOUNT_ID}"), `ACCOUNT_ID is still the placeholder "${ACCOUNT_ID}" from the example; set it to your account ID`},
		{"helm placeholder", with(gen1, "ACCOUNT_ID", "{{ .Values.accountId }}"), `ACCOUNT_ID is still the placeholder "{{ .Values.accountId }}" from the example; set it to your account ID`},

		{"account with space", with(gen1, "ACCOUNT_ID", "my account"), `ACCOUNT_ID="my account": not an account ID (no spaces or control characters, at most 256 bytes)`},
		{"token with newline hides value", with(gen1, "DELEGATE_TOKEN", "abc\ndef"), "DELEGATE_TOKEN is malformed: it contains spaces or control characters or is longer than 4096 bytes"},

		{"ftp URL", with(gen1, "MANAGER_HOST_AND_PORT", "ftp://x"), `MANAGER_HOST_AND_PORT="ftp://x": must start with http:// or https://`},
		{"host only", with(gen1, "MANAGER_HOST_AND_PORT", "app.harness.io"), `MANAGER_HOST_AND_PORT="app.harness.io": must start with http:// or https://`},
		{"host and port", with(gen1, "MANAGER_HOST_AND_PORT", "localhost:8080"), `MANAGER_HOST_AND_PORT="localhost:8080": must start with http:// or https://`},
		{"no host", with(gen1, "MANAGER_HOST_AND_PORT", "https://"), `MANAGER_HOST_AND_PORT="https://": has no host`},
		{"port only", with(gen1, "MANAGER_HOST_AND_PORT", "http://:8080"), `MANAGER_HOST_AND_PORT="http://:8080": has no host`},
		{"bad port", with(gen1, "MANAGER_HOST_AND_PORT", "http://host:99999"), `MANAGER_HOST_AND_PORT="http://host:99999": port "99999" out of range`},
		{"unparsable", with(gen1, "MANAGER_HOST_AND_PORT", "http://[::1"), `MANAGER_HOST_AND_PORT="http://[::1": not a valid URL: missing ']' in host`},
		{"query", with(gen1, "MANAGER_HOST_AND_PORT", "https://host/?a=b"), `MANAGER_HOST_AND_PORT="https://host/?a=b": must not have a query or fragment`},
		{"credentials", with(gen1, "MANAGER_HOST_AND_PORT", "https://u:p@host"), `MANAGER_HOST_AND_PORT="https://u:p@host": must not contain credentials`},
		{"space in URL", with(gen1, "MANAGER_HOST_AND_PORT", "https://a b"), `MANAGER_HOST_AND_PORT="https://a b": must not contain spaces or control characters`},
		{"second URL bad", with(gen1, "MANAGER_HOST_AND_PORT", "https://ok.example.com,ws://x"), `MANAGER_HOST_AND_PORT="ws://x": must start with http:// or https://`},
		{"only commas", with(gen1, "MANAGER_HOST_AND_PORT", ", ,"), `MANAGER_HOST_AND_PORT=", ,": no URL in the list`},
		{"gen2 URL named", with(gen2, "HARNESS_URL", "ftp://x"), `HARNESS_URL="ftp://x": must start with http:// or https://`},

		{"name with space", with(gen1, "DELEGATE_NAME", "my delegate"), `DELEGATE_NAME="my delegate": must be 1-63 letters, digits, '-', '_' or '.'`},
		{"name too long", with(gen1, "DELEGATE_NAME", strings.Repeat("a", 64)), `DELEGATE_NAME="` + strings.Repeat("a", 64) + `": must be 1-63 letters, digits, '-', '_' or '.'`},
		{"name non-ASCII", with(gen1, "HARNESS_NAME", "naïve"), `HARNESS_NAME="naïve": must be 1-63 letters, digits, '-', '_' or '.'`},
		{"hostname bad", with(gen1, "DELEGATE_HOSTNAME", "host/1"), `DELEGATE_HOSTNAME="host/1": must be at most 253 letters, digits, '-', '_' or '.'`},
		{"auto upgrade bad", with(gen1, "AUTO_UPGRADE", "no"), `AUTO_UPGRADE="no": must be true or false`},
		{"type bad", with(gen1, "DELEGATE_TYPE", "shell script"), `DELEGATE_TYPE="SHELL SCRIPT": must be 1-63 letters, digits, '-' or '_' (such as SHELL or DOCKER)`},
		{"tag with control", with(gen1, "DELEGATE_TAGS", "a,b\x01c"), `DELEGATE_TAGS: tag "b\x01c" must be 1-128 characters without commas or control characters`},
		{"next gen yes", with(gen1, "NEXT_GEN", "yes"), `NEXT_GEN="yes": must be true or false`},
		{"poll 1", with(gen1, "POLL_FOR_TASKS", "1"), `POLL_FOR_TASKS="1": must be true or false`},
		{"http reports yes", with(gen1, "DELEGATE_HTTP_REPORTS", "yes"), `DELEGATE_HTTP_REPORTS="yes": must be true or false`},
		{"capacity abc", with(gen1, "DELEGATE_TASK_CAPACITY", "abc"), `DELEGATE_TASK_CAPACITY="abc": not a non-negative integer`},
		{"capacity negative", with(gen1, "DELEGATE_TASK_CAPACITY", "-1"), `DELEGATE_TASK_CAPACITY="-1": not a non-negative integer`},
		{"capacity plus", with(gen1, "DELEGATE_TASK_CAPACITY", "+3"), `DELEGATE_TASK_CAPACITY="+3": not a non-negative integer`},
		{"capacity overflow", with(gen1, "DELEGATE_TASK_CAPACITY", "99999999999999999999"), `DELEGATE_TASK_CAPACITY="99999999999999999999": not a non-negative integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := FromEnv(env(tt.env))
			if err == nil {
				t.Fatalf("FromEnv succeeded: %+v", d)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", got, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if tok := tt.env["HARNESS_TOKEN"]; tok != "" && !placeholder(tok) && strings.Contains(err.Error(), tok) {
				t.Errorf("error leaks a token: %q", err)
			}
			if diff := cmp.Diff(Delegate{}, d); diff != "" {
				t.Errorf("FromEnv returned a partial Delegate with its error:\n%s", diff)
			}
		})
	}
}

// The task definitions of seeds 003 (ECS and Fargate, HARNESS_*) and 004
// (Docker delegate on ECS / Fargate, first-generation names), first as
// copied (they must fail on the first placeholder), then with real values.
func TestSeedTaskDefinitions(t *testing.T) {
	t.Parallel()
	seed003ECS := map[string]string{
		"HARNESS_ACCOUNT_ID": "PUT_YOUR_ACCOUNT_ID",
		"HARNESS_TOKEN":      "PUT_YOUR_DELEGATE_TOKEN",
		"HARNESS_URL":        "PUT_YOUR_HARNESS_URL",
		"HARNESS_NAME":       "ecs-delegate",
	}
	seed003Fargate := with(seed003ECS, "HARNESS_NAME", "fargate-delegate")
	seed004ECS := map[string]string{
		"ACCOUNT_ID":                "<ACCOUNT_ID>",
		"DELEGATE_TOKEN":            "<DELEGATE_TOKEN>",
		"DELEGATE_TYPE":             "DOCKER",
		"INIT_SCRIPT":               "",
		"DEPLOY_MODE":               "KUBERNETES",
		"MANAGER_HOST_AND_PORT":     "<MANAGER_HOST_AND_PORT>",
		"DELEGATE_NAME":             "<DELEGATE_NAME>",
		"LOG_STREAMING_SERVICE_URL": "<LOG_STREAMING_SERVICE_URL>",
		"DELEGATE_TAGS":             "",
		"NEXT_GEN":                  "true",
	}
	seed004Fargate := with(seed004ECS, "MANAGER_HOST_AND_PORT", "<HOST>")

	const (
		account = "px7xd_BFRCi-pfWPYXVjvw"
		token   = "NTJhZGQ3ZmQ2MWU2NGYzNzc4MDU0ZTMyMmY2ZGVmYjU="
	)
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		want    Delegate
	}{
		{name: "003 ECS as copied", env: seed003ECS,
			wantErr: `HARNESS_ACCOUNT_ID is still the placeholder "PUT_YOUR_ACCOUNT_ID" from the example; set it to your account ID`},
		{name: "003 Fargate as copied", env: seed003Fargate,
			wantErr: `HARNESS_ACCOUNT_ID is still the placeholder "PUT_YOUR_ACCOUNT_ID" from the example; set it to your account ID`},
		{name: "004 ECS as copied", env: seed004ECS,
			wantErr: `ACCOUNT_ID is still the placeholder "<ACCOUNT_ID>" from the example; set it to your account ID`},
		{name: "004 Fargate, only the account filled in", env: with(seed004Fargate, "ACCOUNT_ID", account),
			wantErr: `DELEGATE_TOKEN is still the placeholder "<DELEGATE_TOKEN>" from the example; set it to your delegate token`},
		{name: "004 Fargate, URL left", env: with(seed004Fargate, "ACCOUNT_ID", account, "DELEGATE_TOKEN", token),
			wantErr: `MANAGER_HOST_AND_PORT is still the placeholder "<HOST>" from the example; set it to your manager URL, such as https://legate.example.com`},
		{
			name: "003 ECS filled in",
			env:  with(seed003ECS, "HARNESS_ACCOUNT_ID", account, "HARNESS_TOKEN", token, "HARNESS_URL", "https://legate.example.com"),
			want: Delegate{AccountID: account, Token: token, ManagerURLs: []string{"https://legate.example.com"}, Name: "ecs-delegate", Type: "SHELL", HTTPPort: DefaultHTTPPort, AutoUpgrade: true},
		},
		{
			name: "003 Fargate filled in, with tags",
			env:  with(seed003Fargate, "HARNESS_ACCOUNT_ID", account, "HARNESS_TOKEN", token, "HARNESS_URL", "https://legate.example.com/", "HARNESS_TAGS", "aws,ecs,production"),
			want: Delegate{AccountID: account, Token: token, ManagerURLs: []string{"https://legate.example.com"}, Name: "fargate-delegate", Type: "SHELL", Tags: []string{"aws", "ecs", "production"}, HTTPPort: DefaultHTTPPort, AutoUpgrade: true},
		},
		{
			name: "004 ECS filled in (Prod2 URLs with /gratis)",
			env: with(seed004ECS, "ACCOUNT_ID", account, "DELEGATE_TOKEN", token,
				"MANAGER_HOST_AND_PORT", "https://legate.example.com/gratis",
				"DELEGATE_NAME", "ecs-delegate-im",
				"LOG_STREAMING_SERVICE_URL", "https://legate.example.com/gratis/log-service/"),
			want: Delegate{
				AccountID: account, Token: token, ManagerURLs: []string{"https://legate.example.com/gratis"},
				Name: "ecs-delegate-im", Type: "DOCKER", DeployMode: "KUBERNETES", NextGen: true,
				LogStreamingURL: "https://legate.example.com/gratis/log-service/", HTTPPort: DefaultHTTPPort, AutoUpgrade: true,
			},
		},
		{
			name: "004 Fargate filled in, log streaming placeholder left (unused)",
			env: with(seed004Fargate, "ACCOUNT_ID", account, "DELEGATE_TOKEN", token,
				"MANAGER_HOST_AND_PORT", "http://10.0.3.4:7000", "DELEGATE_NAME", "fargate-1"),
			want: Delegate{
				AccountID: account, Token: token, ManagerURLs: []string{"http://10.0.3.4:7000"},
				Name: "fargate-1", Type: "DOCKER", DeployMode: "KUBERNETES", NextGen: true,
				LogStreamingURL: "<LOG_STREAMING_SERVICE_URL>", HTTPPort: DefaultHTTPPort, AutoUpgrade: true,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := FromEnv(env(tt.env))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v\nwant %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadEnv: nothing is required, but what is set is checked, so flags
// can fill in the rest before Validate.
func TestReadEnv(t *testing.T) {
	t.Parallel()
	d, err := ReadEnv(env(map[string]string{"DELEGATE_TAGS": "b,A"}))
	if err != nil {
		t.Fatalf("ReadEnv: %v", err)
	}
	want := Delegate{Name: "legate-delegate", Type: "SHELL", Tags: []string{"a", "b"}, HTTPPort: DefaultHTTPPort, AutoUpgrade: true}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if err := d.Validate(); err == nil || !strings.HasPrefix(err.Error(), "missing ACCOUNT_ID") {
		t.Errorf("Validate() = %v; want missing ACCOUNT_ID", err)
	}
	d.AccountID, d.Token, d.ManagerURLs = "acc", "tok", []string{"http://127.0.0.1:7000"}
	if err := d.Validate(); err != nil {
		t.Errorf("Validate() after filling in: %v", err)
	}
	for _, bad := range []map[string]string{
		{"ACCOUNT_ID": "<ACCOUNT_ID>"},
		{"HARNESS_URL": "ftp://x"},
		{"DELEGATE_TASK_CAPACITY": "x"},
		{"DELEGATE_TOKEN": "a", "HARNESS_TOKEN": "b"},
	} {
		if _, err := ReadEnv(env(bad)); err == nil {
			t.Errorf("ReadEnv(%v) succeeded", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    Delegate
		want string
	}{
		{"ok", minimal, ""},
		{"zero", Delegate{}, "missing ACCOUNT_ID (or HARNESS_ACCOUNT_ID): the account ID to register with"},
		{"no token", modified(func(d *Delegate) { d.Token = "" }), "missing DELEGATE_TOKEN (or HARNESS_TOKEN): the delegate token to register with"},
		{"placeholder token", modified(func(d *Delegate) { d.Token = "<DELEGATE_TOKEN>" }), `DELEGATE_TOKEN is still the placeholder "<DELEGATE_TOKEN>" from the example; set it to your delegate token`},
		{"no URLs", modified(func(d *Delegate) { d.ManagerURLs = nil }), "missing MANAGER_HOST_AND_PORT (or HARNESS_URL): the manager URL to connect to, such as https://legate.example.com"},
		{"trailing slash", modified(func(d *Delegate) { d.ManagerURLs = []string{"https://x.example.com/"} }), `MANAGER_HOST_AND_PORT="https://x.example.com/": must be written as "https://x.example.com" (lower-case scheme, no trailing slash)`},
		{"bad URL", modified(func(d *Delegate) { d.ManagerURLs = []string{"https://ok", "x"} }), `MANAGER_HOST_AND_PORT="x": must start with http:// or https://`},
		{"no name", modified(func(d *Delegate) { d.Name = "" }), "missing DELEGATE_NAME (or HARNESS_NAME): the delegate name"},
		{"bad name", modified(func(d *Delegate) { d.Name = "a/b" }), `DELEGATE_NAME="a/b": must be 1-63 letters, digits, '-', '_' or '.'`},
		{"bad tag", modified(func(d *Delegate) { d.Tags = []string{"a,b"} }), `DELEGATE_TAGS: tag "a,b" must be 1-128 characters without commas or control characters`},
		{"empty tag", modified(func(d *Delegate) { d.Tags = []string{""} }), `DELEGATE_TAGS: tag "" must be 1-128 characters without commas or control characters`},
		{"no type", modified(func(d *Delegate) { d.Type = "" }), "missing DELEGATE_TYPE: the delegate type, such as SHELL or DOCKER"},
		{"negative capacity", modified(func(d *Delegate) { d.Capacity = -2 }), "DELEGATE_TASK_CAPACITY=-2: not a non-negative integer"},
	}
	for _, tt := range tests {
		err := tt.d.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s: Validate() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestPlaceholder(t *testing.T) {
	t.Parallel()
	yes := []string{"<ACCOUNT_ID>", "<DELEGATE_TOKEN>", "<HOST>", "<delegate-name>", "PUT_YOUR_HARNESS_URL",
		"put_your_account_id", "YOUR_AWS_REGION", "https://<HOST>/", "arn:aws:iam::<ACC_ID>:role/x", "${TOKEN}", "{{.Values.token}}"}
	no := []string{"", "px7xd_BFRCi-pfWPYXVjvw", "https://app.harness.io", "a<b", "a>b", "<>", "x <a@b> y", "1<2 and 3>4", "YOURS", "<1x>", "<a b>"}
	for _, v := range yes {
		if !placeholder(v) {
			t.Errorf("placeholder(%q) = false", v)
		}
	}
	for _, v := range no {
		if placeholder(v) {
			t.Errorf("placeholder(%q) = true", v)
		}
	}
}

func TestSecretEnvNames(t *testing.T) {
	t.Parallel()
	names := SecretEnvNames()
	for _, want := range []string{"DELEGATE_TOKEN", "HARNESS_TOKEN", "ACCOUNT_SECRET", "PROXY_PASSWORD", "PROXY_USER", "LEGATE_API_KEY", "LEGATE_MASTER_KEY"} {
		if !slices.Contains(names, want) {
			t.Errorf("SecretEnvNames() lacks %s", want)
		}
	}
	names[0] = "changed" // callers get their own copy
	if SecretEnvNames()[0] != "DELEGATE_TOKEN" {
		t.Error("SecretEnvNames shares its slice")
	}
}

// fuzzVars are the variables FuzzFromEnv sets, in argument order.
var fuzzVars = []string{
	"ACCOUNT_ID", "HARNESS_ACCOUNT_ID", "DELEGATE_TOKEN", "HARNESS_TOKEN",
	"MANAGER_HOST_AND_PORT", "HARNESS_URL", "DELEGATE_NAME", "HARNESS_NAME",
	"DELEGATE_TAGS", "DELEGATE_TYPE", "NEXT_GEN", "DELEGATE_TASK_CAPACITY",
	"DELEGATE_HOSTNAME", "POLL_FOR_TASKS",
}

func FuzzFromEnv(f *testing.F) {
	f.Add(uint16(0b0000_0000_0001_0101), "acc", "", "tok", "", "https://m.example.com/", "", "", "", "", "", "", "", "", "")
	f.Add(uint16(0xffff), "a", "a", "t", "t", "http://h:1,https://h2/p/", "http://h:1,https://h2/p/", "n", "n", "x, Y", "docker", "TRUE", "7", "host-1", "false")
	f.Add(uint16(0b0010_1010), "", "<ACCOUNT_ID>", "", "PUT_YOUR_TOKEN", "", "ftp://x", "", "", "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, present uint16, v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13 string) {
		vals := []string{v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13}
		m := map[string]string{}
		for i, name := range fuzzVars {
			if present&(1<<i) != 0 {
				m[name] = vals[i]
			}
		}
		d, err := FromEnv(env(m))
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n") && !strings.ContainsAny(strings.Join(vals, ""), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("FromEnv result fails Validate: %v (%+v)", err, d)
		}
		if len(d.ManagerURLs) == 0 {
			t.Fatal("no manager URL")
		}
		for _, s := range d.ManagerURLs {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatalf("manager URL %q does not parse: %v", s, err)
			}
			if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.HasSuffix(s, "/") {
				t.Fatalf("manager URL %q: bad scheme, host or trailing slash", s)
			}
		}
		if d.Name == "" || d.Type == "" || d.Capacity < 0 {
			t.Fatalf("defaults not applied: %+v", d)
		}
	})
}

func TestThresholds(t *testing.T) {
	base := map[string]string{"ACCOUNT_ID": "acct", "DELEGATE_TOKEN": "tok", "MANAGER_HOST_AND_PORT": "http://m:1"}
	for _, tt := range []struct {
		cpu, mem     string
		wantCPU      int
		wantMem      int
		wantErrNames string
	}{
		{"", "", 0, 0, ""},
		{"80", "90", 80, 90, ""},
		{"0", "100", 0, 100, ""},
		{"101", "", 0, 0, "DELEGATE_CPU_THRESHOLD"},
		{"", "-5", 0, 0, "DELEGATE_MEMORY_THRESHOLD"},
		{"abc", "", 0, 0, "DELEGATE_CPU_THRESHOLD"},
	} {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		env["DELEGATE_CPU_THRESHOLD"], env["DELEGATE_MEMORY_THRESHOLD"] = tt.cpu, tt.mem
		d, err := FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if tt.wantErrNames != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErrNames) {
				t.Errorf("cpu=%q mem=%q: err %v, want one naming %s", tt.cpu, tt.mem, err, tt.wantErrNames)
			}
			continue
		}
		if err != nil || d.CPUThreshold != tt.wantCPU || d.MemoryThreshold != tt.wantMem {
			t.Errorf("cpu=%q mem=%q: got %d/%d, %v", tt.cpu, tt.mem, d.CPUThreshold, d.MemoryThreshold, err)
		}
	}
}

func TestDelegateIP(t *testing.T) {
	base := map[string]string{"ACCOUNT_ID": "acc1", "DELEGATE_TOKEN": "tok", "MANAGER_HOST_AND_PORT": "http://127.0.0.1:7460"}
	lookup := func(extra map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if v, ok := extra[k]; ok {
				return v, true
			}
			v, ok := base[k]
			return v, ok
		}
	}
	d, err := FromEnv(lookup(map[string]string{"DELEGATE_IP": " 10.1.2.3 "}))
	if err != nil || d.IP != "10.1.2.3" {
		t.Errorf("DELEGATE_IP: got %q, %v", d.IP, err)
	}
	if _, err := FromEnv(lookup(map[string]string{"DELEGATE_IP": "10.1.2"})); err == nil || !strings.Contains(err.Error(), "DELEGATE_IP") {
		t.Errorf("bad DELEGATE_IP: err %v, want one naming DELEGATE_IP", err)
	}
}

func TestUpgradeMode(t *testing.T) {
	for _, c := range []struct {
		slot string
		auto bool
		want string
	}{
		{"", true, protocol.UpgradeManual},
		{"", false, protocol.UpgradeManual},
		{"v1.2.3", true, protocol.UpgradeAuto},
		{"v1.2.3", false, protocol.UpgradeOff},
	} {
		if got := (Delegate{WatcherSlot: c.slot, AutoUpgrade: c.auto}).UpgradeMode(); got != c.want {
			t.Errorf("slot %q auto %v: %q, want %q", c.slot, c.auto, got, c.want)
		}
	}
}
