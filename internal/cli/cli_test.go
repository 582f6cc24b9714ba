package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/protocol"
)

func exitCodeOf(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("error %v (%T) is not an *ExitError", err, err)
	}
	return ee.Code
}

func TestTokenCreateLastLineIsToken(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	r := runCLI(t.Context(), m.env(), "", "token", "create", "ci")
	if r.err != nil {
		t.Fatalf("err = %v, stderr = %q", r.err, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("stdout %q: want an explanation and the token", r.stdout)
	}
	if got := lines[len(lines)-1]; got != "tok_secret_ci" {
		t.Errorf("last line = %q, want the token alone", got)
	}
	if !strings.Contains(lines[0], "DELEGATE_TOKEN") {
		t.Errorf("first line %q does not explain the token", lines[0])
	}

	// A second token with the same name: the manager's error, exit 1.
	r = runCLI(t.Context(), m.env(), "", "token", "create", "ci")
	if code := exitCodeOf(t, r.err); code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if !strings.Contains(r.stderr, "already exists") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr = %q, want one line with the manager's message", r.stderr)
	}
}

func TestTokenListAndRevoke(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	for _, args := range [][]string{{"ci"}, {"prod", "--init-secret", "REGISTRY_PASSWORD", "--init-secret", "CA"}} {
		if r := runCLI(t.Context(), m.env(), "", append([]string{"token", "create"}, args...)...); r.err != nil {
			t.Fatal(r.err)
		}
	}
	r := runCLI(t.Context(), m.env(), "", "token", "revoke", "ci")
	if r.err != nil || !strings.Contains(r.stdout, `Revoked delegate token "ci"`) {
		t.Fatalf("revoke: err = %v, stdout = %q", r.err, r.stdout)
	}
	r = runCLI(t.Context(), m.env(), "", "token", "list")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := "NAME  SCOPE    STATUS   INIT-SECRETS          CREATED  REVOKED\n" +
		"ci    account  revoked  -                     1m ago   0s ago\n" +
		"prod  account  active   REGISTRY_PASSWORD,CA  1m ago   -\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	r = runCLI(t.Context(), m.env(), "", "token", "list", "--json")
	var list protocol.TokenList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Tokens) != 2 || list.Tokens[0].Status != protocol.TokenRevoked {
		t.Errorf("--json: %v, %+v", err, list)
	}
	r = runCLI(t.Context(), m.env(), "", "token", "revoke", "nope")
	if code := exitCodeOf(t, r.err); code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("revoke unknown: exit %d, stderr %q", code, r.stderr)
	}
}

func TestDelegatesList(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	hb := testNow.Add(-3 * time.Second)
	m.delegates = []protocol.Delegate{
		{Name: "east", Hostname: "host-a", IP: "10.0.0.1", Tags: []string{"linux", "prod"}, Version: "0.1.0",
			Status: protocol.DelegateConnected, Connection: protocol.ConnWebSocket, LastHeartbeat: &hb, RunningTasks: 2, Capacity: 4,
			Configuration: "tools", Description: "build box in rack 4", UpgradeState: protocol.UpgradeAvailable, WantedVersion: "0.2.0", Upgrade: protocol.UpgradeAuto},
		{Name: "west", Hostname: "host-b", IP: "10.0.0.2", Version: "0.1.0", Status: protocol.DelegateDisconnected,
			Connection: protocol.ConnPolling, Draining: true, Org: "eng", UpgradeState: protocol.UpgradeCurrent, Upgrade: protocol.UpgradeOff},
		{Name: "web", Hostname: "host-c", IP: "10.0.0.3", Version: "0.2.0", Status: protocol.DelegateConnected,
			Connection: protocol.ConnWebSocket, LastHeartbeat: &hb, Org: "eng", Project: "web", Configuring: "tools v2"},
	}
	r := runCLI(t.Context(), m.env(), "", "delegates", "list")
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The default is narrow: what a glance needs.
	want := "NAME  STATUS                 CONNECTION  VERSION  TAGS        TASKS\n" +
		"east  connected              websocket   0.1.0    linux,prod  2/4\n" +
		"west  disconnected,draining  polling     0.1.0    -           0\n" +
		"web   connected,configuring  websocket   0.2.0    -           0\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	r = runCLI(t.Context(), m.env(), "", "delegates", "list", "-o", "wide")
	want = "NAME  HOSTNAME  IP        SCOPE            TAGS        VERSION  UPGRADE            AUTO-UPGRADE  STATUS                 CONNECTION  LAST-HEARTBEAT  TASKS  CONFIGURATION  DESCRIPTION          INSTANCE-ID  TYPE  TOKEN  REGISTERED  OVER-THRESHOLD  WANTED-VERSION\n" +
		"east  host-a    10.0.0.1  account          linux,prod  0.1.0    upgrade available  on            connected              websocket   3s ago          2/4    tools          build box in rack 4  -            -     -      -           -               0.2.0\n" +
		"west  host-b    10.0.0.2  org/eng          -           0.1.0    current            off           disconnected,draining  polling     never           0      -              -                    -            -     -      -           -               held\n" +
		"web   host-c    10.0.0.3  project/eng/web  -           0.2.0    -                  manual        connected,configuring  websocket   3s ago          0      -              -                    -            -     -      -           -               -\n"
	if d := cmp.Diff(want, r.stdout); r.err != nil || d != "" {
		t.Errorf("-o wide: err %v (-want +got):\n%s", r.err, d)
	}
	r = runCLI(t.Context(), m.env(), "", "delegates", "list", "--json")
	var list protocol.DelegateList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(m.delegates, list.Delegates); d != "" {
		t.Errorf("--json (-want +got):\n%s", d)
	}
}

func TestEmptyListsSayNoneOnStderr(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	for _, args := range [][]string{{"token", "list"}, {"delegates", "list"}, {"task", "list"}, {"org", "list"},
		{"project", "list"}, {"connector", "list"}} {
		r := runCLI(t.Context(), m.env(), "", args...)
		if r.err != nil || r.stdout != "" || !strings.HasPrefix(r.stderr, "No ") {
			t.Errorf("%v: err %v, stdout %q, stderr %q", args, r.err, r.stdout, r.stderr)
		}
		r = runCLI(t.Context(), m.env(), "", append(args, "--json")...)
		if r.err != nil || !strings.Contains(r.stdout, "[]") {
			t.Errorf("%v --json: err %v, stdout %q", args, r.err, r.stdout)
		}
	}
}

func TestTaskRunOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		outcome    outcomeSpec
		wantCode   int
		wantReason string // "" = no stderr output
	}{
		{"succeeded", outcomeSpec{chunks: []string{"hello\n", "world"}, status: protocol.StatusSucceeded, exitCode: intp(0)}, 0, ""},
		{"failed with exit code", outcomeSpec{chunks: []string{"hello\n", "world"}, status: protocol.StatusFailed, exitCode: intp(3)}, 3,
			"legate: task t_1 failed (exit code 3)\n"},
		{"failed without exit code", outcomeSpec{chunks: []string{"hello\n", "world"}, status: protocol.StatusFailed, errText: "delegate d1 lost"}, 1,
			"legate: task t_1 failed: delegate d1 lost\n"},
		{"failed with exit code out of range", outcomeSpec{chunks: []string{"hello\n", "world"}, status: protocol.StatusFailed, exitCode: intp(256)}, 1,
			"legate: task t_1 failed (exit code 256)\n"},
		{"timed out", outcomeSpec{chunks: []string{"hello\n", "world"}, status: protocol.StatusTimedOut, errText: "timed out after 1s"}, 124,
			"legate: task t_1 timed_out: timed out after 1s\n"},
		{"cancelled", outcomeSpec{chunks: []string{"hello\n", "world"}, status: protocol.StatusCancelled, errText: "cancelled by user"}, 130,
			"legate: task t_1 cancelled: cancelled by user\n"},
		{"not assigned", outcomeSpec{status: protocol.StatusNotAssigned, errText: "no delegate has selector gpu"}, 3,
			"legate: task t_1 not_assigned: no delegate has selector gpu\n"},
		{"not assigned, one line per delegate", outcomeSpec{status: protocol.StatusNotAssigned,
			errText: "no delegate can run the task:\nbuild-1 (host-a): selectors: missing selectors: gpu\n  build-2 (host-b): capacity: at capacity (2/2 tasks)\n"}, 3,
			"legate: task t_1 not_assigned: no delegate can run the task:\n" +
				"  build-1 (host-a): selectors: missing selectors: gpu\n" +
				"  build-2 (host-b): capacity: at capacity (2/2 tasks)\n"},
		{"failed with a multi-line error stays on one line", outcomeSpec{status: protocol.StatusFailed, errText: "executor error:\nfork failed"}, 1,
			"legate: task t_1 failed: executor error: fork failed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newFakeManager(t, tt.outcome)
			r := runCLI(t.Context(), m.env(), "", "task", "run", "--script", "echo hello")
			if code := exitCodeOf(t, r.err); code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (err %v)", code, tt.wantCode, r.err)
			}
			if want := strings.Join(tt.outcome.chunks, ""); r.stdout != want {
				t.Errorf("stdout = %q, want the raw chunks %q", r.stdout, want)
			}
			if r.stderr != tt.wantReason {
				t.Errorf("stderr = %q, want %q", r.stderr, tt.wantReason)
			}
		})
	}
}

func TestTaskRunJSONAndDetach(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{chunks: []string{"noise\n"}, status: protocol.StatusFailed, exitCode: intp(3)})
	r := runCLI(t.Context(), m.env(), "", "task", "run", "--script", "exit 3", "--json")
	if code := exitCodeOf(t, r.err); code != 3 {
		t.Errorf("--json exit code = %d, want 3", code)
	}
	var task protocol.Task
	if err := json.Unmarshal([]byte(r.stdout), &task); err != nil {
		t.Fatalf("--json output %q: %v", r.stdout, err)
	}
	if task.Status != protocol.StatusFailed || task.ExitCode == nil || *task.ExitCode != 3 || r.stderr != "" {
		t.Errorf("--json: task %+v, stderr %q", task, r.stderr)
	}

	r = runCLI(t.Context(), m.env(), "", "task", "run", "--script", "sleep 60", "--detach")
	if r.err != nil || r.stdout != "t_2\n" {
		t.Errorf("--detach: err %v, stdout %q, want the ID alone", r.err, r.stdout)
	}
}

// TestTaskRunInterrupted cancels the context (Ctrl-C) while output streams:
// the CLI stops following, exits 130 and leaves the task alone.
func TestTaskRunInterrupted(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{chunks: []string{"working\n"}, block: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := newNotifyBuffer()
	go func() {
		select {
		case <-out.wrote: // the first chunk arrived
			cancel()
		case <-ctx.Done():
		}
	}()
	r := runCLIOut(ctx, m.env(), "", out, "task", "run", "--script", "sleep 600")
	if code := exitCodeOf(t, r.err); code != 130 {
		t.Errorf("exit code = %d, want 130", code)
	}
	if r.stdout != "working\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	want := "legate: stopped following task t_1; it keeps running (legate task cancel t_1 to stop it)\n"
	if r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.cancels) != 0 {
		t.Errorf("the task was cancelled: %v", m.cancels)
	}
}

func TestTaskRunBuildsSpec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "deploy.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho deploy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  protocol.TaskSpec
	}{
		{
			name: "shell script with everything",
			args: []string{"--script", "echo hi", "--selector", "Linux", "--selector", "prod,east", "--timeout", "90s",
				"--queue-timeout", "1m", "--retries", "2", "--env", "A=1", "--env", "B=x=y", "--secret-env", "TOKEN=s3",
				"--secret-env", "FROM_ENV"},
			want: protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "echo hi"},
				Selectors: []string{"east", "linux", "prod"}, Env: map[string]string{"A": "1", "B": "x=y"},
				SecretEnv: map[string]string{"TOKEN": "s3", "FROM_ENV": "from-the-env"},
				TimeoutMS: 90000, QueueTimeoutMS: 60000, Retries: 2},
		},
		{
			name: "script from a file",
			args: []string{"--file", script},
			want: protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "#!/bin/sh\necho deploy\n"}},
		},
		{
			name:  "script from stdin",
			args:  []string{"--file", "-"},
			stdin: "echo piped\n",
			want:  protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "echo piped\n"}},
		},
		{
			name: "http inferred from --http-url",
			args: []string{"--http-url", "https://api.internal/health", "--method", "post", "--header", "Content-Type: application/json",
				"--header", "X-Trace:abc:def", "--body", `{"a":1}`, "--expect-status", "201"},
			want: protocol.TaskSpec{Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "POST", URL: "https://api.internal/health",
				Headers: map[string]string{"Content-Type": "application/json", "X-Trace": "abc:def"}, Body: `{"a":1}`, ExpectStatus: 201}},
		},
		{
			name: "scope, capabilities and connector",
			args: []string{"--script", "deploy", "--org", "eng", "--project", "web", "--capability", " https://git.internal/health ",
				"--capability", "tcp://db.internal:5432", "--capability", "binary:kubectl", "--capability", "tcp://[::1]:22",
				"--capability", "http://a.internal/x?y=1,2", "--capability", "binary:kubectl", "--connector", "k8s-east"},
			want: protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "deploy"}, Org: "eng", Project: "web",
				Capabilities: []string{"https://git.internal/health", "tcp://db.internal:5432", "binary:kubectl", "tcp://[::1]:22",
					"http://a.internal/x?y=1,2"},
				Connector: "k8s-east"},
		},
		{
			name: "org only, connector with its own selectors",
			args: []string{"--http-url", "https://api.internal/", "--org", "eng", "--connector", "vault", "--selector", "east"},
			want: protocol.TaskSpec{Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "GET", URL: "https://api.internal/"},
				Org: "eng", Connector: "vault", Selectors: []string{"east"}},
		},
		{
			name: "container with a command and everything",
			args: []string{"--image", "localhost/debian-min:bookworm", "--workdir", "/ws", "--cpu", "0.5", "--memory", "2Gi",
				"--privileged", "--read-only-root", "--run-as-user", "1000", "--run-as-group", "0", "--add-cap", "net_admin,CAP_CHOWN",
				"--drop-cap", "ALL", "--volume", "empty_dir:/ws:21504", "--volume", "src=host_path:/srv/app:/src:ro",
				"--volume", "host_path:/var/run/docker.sock:/var/run/docker.sock", "--volume", "efs:fs-12345678:/cache:root=/c,tls,iam",
				"--volume", "empty_dir:/x/ws", "--env", "A=1", "--secret-env", "T=s", "--", "id", "-u"},
			want: protocol.TaskSpec{Type: protocol.TaskContainer, Env: map[string]string{"A": "1"}, SecretEnv: map[string]string{"T": "s"},
				Container: &protocol.ContainerSpec{Image: "localhost/debian-min:bookworm", Command: []string{"id", "-u"}, WorkingDir: "/ws",
					Resources: &protocol.ContainerResources{CPU: 0.5, MemoryMiB: 2048},
					SecurityContext: &protocol.SecurityContext{Privileged: true, ReadOnlyRootFilesystem: true, RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(0)),
						AddCapability: []string{"NET_ADMIN", "CHOWN"}, DropCapability: []string{"ALL"}},
					Volumes: []protocol.Volume{
						{Name: "ws", MountPath: "/ws", EmptyDir: &protocol.EmptyDirVolume{SizeMiB: 21504}},
						{Name: "src", MountPath: "/src", HostPath: &protocol.HostPathVolume{Path: "/srv/app", ReadOnly: true}},
						{Name: "docker.sock", MountPath: "/var/run/docker.sock", HostPath: &protocol.HostPathVolume{Path: "/var/run/docker.sock"}},
						{Name: "cache", MountPath: "/cache", EFS: &protocol.EFSVolume{FilesystemID: "fs-12345678", RootDirectory: "/c", TransitEncryption: true, IAM: true}},
						{Name: "vol-5", MountPath: "/x/ws", EmptyDir: &protocol.EmptyDirVolume{}},
					}}},
		},
		{
			name: "container script, image's defaults",
			args: []string{"--image", "alpine", "--script", "echo ${secrets.T}", "--memory", "512"},
			want: protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "alpine", Script: "echo ${secrets.T}",
				Resources: &protocol.ContainerResources{MemoryMiB: 512}}},
		},
		{
			name: "container's own entrypoint",
			args: []string{"--type", "container", "--image", "alpine"},
			want: protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "alpine"}},
		},
		{
			name: "explicit http type",
			args: []string{"--type", "http", "--http-url", "http://10.0.0.5:8080/"},
			want: protocol.TaskSpec{Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "GET", URL: "http://10.0.0.5:8080/"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newFakeManager(t, outcomeSpec{status: protocol.StatusSucceeded})
			env := m.env()
			env["FROM_ENV"] = "from-the-env"
			r := runCLI(t.Context(), env, tt.stdin, append([]string{"task", "run"}, tt.args...)...)
			if r.err != nil {
				t.Fatalf("err = %v, stderr = %q", r.err, r.stderr)
			}
			specs := m.submitted()
			if len(specs) != 1 {
				t.Fatalf("%d tasks submitted, want 1", len(specs))
			}
			if d := cmp.Diff(tt.want, specs[0]); d != "" {
				t.Errorf("spec (-want +got):\n%s", d)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{status: protocol.StatusSucceeded})
	tests := []struct {
		name    string
		args    []string
		wantMsg string
	}{
		{"no script", []string{"task", "run"}, "exactly one of --script or --file"},
		{"script and file", []string{"task", "run", "--script", "x", "--file", "y"}, "exactly one of --script or --file"},
		{"manager --url mistaken for the target", []string{"--url", "http://127.0.0.1:1", "task", "run"}, "--http-url"},
		{"empty script", []string{"task", "run", "--script", "  "}, "empty"},
		{"missing file", []string{"task", "run", "--file", "/nonexistent/x.sh"}, "--file /nonexistent/x.sh"},
		{"bad env", []string{"task", "run", "--script", "x", "--env", "NOEQUALS"}, `--env "NOEQUALS"`},
		{"env without key", []string{"task", "run", "--script", "x", "--env", "=v"}, `--env "=v"`},
		{"secret env not in environment", []string{"task", "run", "--script", "x", "--secret-env", "UNSET_VAR"}, "--secret-env UNSET_VAR"},
		{"negative timeout", []string{"task", "run", "--script", "x", "--timeout", "-1s"}, "--timeout"},
		{"negative retries", []string{"task", "run", "--script", "x", "--retries", "-1"}, "--retries"},
		{"timeout over 7 days", []string{"task", "run", "--script", "x", "--timeout", "169h"}, "--timeout 169h0m0s is out of range: use a positive duration up to 168h (7 days)"},
		{"queue timeout over 7 days", []string{"task", "run", "--script", "x", "--queue-timeout", "2562047h"}, "--queue-timeout 2562047h0m0s is out of range"},
		{"too many retries", []string{"task", "run", "--script", "x", "--retries", "101"}, "--retries 101 is out of range: use 0 to 100"},
		{"bad type", []string{"task", "run", "--type", "docker", "--script", "x"}, `--type "docker"`},
		{"http flag on shell task", []string{"task", "run", "--script", "x", "--method", "POST"}, "--method is for http tasks"},
		{"shell flag on http task", []string{"task", "run", "--http-url", "http://x/", "--script", "x"}, "--script is for shell tasks"},
		{"http without URL", []string{"task", "run", "--type", "http"}, "needs --http-url"},
		{"bad http URL", []string{"task", "run", "--http-url", "ftp://x/"}, "--http-url"},
		{"bad header", []string{"task", "run", "--http-url", "http://x/", "--header", "NoColon"}, `--header "NoColon"`},
		{"bad expect status", []string{"task", "run", "--http-url", "http://x/", "--expect-status", "42"}, "--expect-status"},
		{"bad status filter", []string{"task", "list", "--status", "done"}, `--status "done"`},
		{"negative limit", []string{"task", "list", "--limit", "-1"}, "--limit"},
		{"bad scope", []string{"task", "list", "--scope", "eng/"}, `--scope "eng/": use ORG or ORG/PROJECT`},
		{"missing argument", []string{"task", "get"}, "accepts 1 arg"},
		{"task project without org", []string{"task", "run", "--script", "x", "--project", "web"}, "--project web needs --org"},
		{"capability without scheme", []string{"task", "run", "--script", "x", "--capability", "db.internal:5432"}, `--capability "db.internal:5432": want http://URL, https://URL, tcp://HOST:PORT or binary:NAME`},
		{"capability ftp", []string{"task", "run", "--script", "x", "--capability", "ftp://x/"}, `--capability "ftp://x/"`},
		{"capability http without host", []string{"task", "run", "--script", "x", "--capability", "https:///path"}, "needs a URL with a host"},
		{"capability tcp without port", []string{"task", "run", "--script", "x", "--capability", "tcp://db.internal"}, "tcp://HOST:PORT"},
		{"capability tcp without host", []string{"task", "run", "--script", "x", "--capability", "tcp://:5432"}, "tcp://HOST:PORT"},
		{"capability tcp port 0", []string{"task", "run", "--script", "x", "--capability", "tcp://db:0"}, `port "0": want 1-65535`},
		{"capability tcp port too big", []string{"task", "run", "--script", "x", "--capability", "tcp://db:65536"}, `port "65536": want 1-65535`},
		{"capability tcp port not a number", []string{"task", "run", "--script", "x", "--capability", "tcp://db:pg"}, `port "pg"`},
		{"capability tcp with a path", []string{"task", "run", "--script", "x", "--capability", "tcp://db:5432/x"}, "port"},
		{"capability binary empty", []string{"task", "run", "--script", "x", "--capability", "binary:"}, "binary:NAME"},
		{"capability binary path", []string{"task", "run", "--script", "x", "--capability", "binary:/usr/bin/kubectl"}, "without '/'"},
		{"capability uppercase scheme", []string{"task", "run", "--script", "x", "--capability", "HTTPS://x"}, "want http://URL"},
		{"empty connector", []string{"task", "run", "--script", "x", "--connector", " "}, "--connector"},
		{"token project without org", []string{"token", "create", "ci", "--project", "web"}, "--project web needs --org"},
		{"project create without org", []string{"project", "create", "web"}, "project create needs --org ORG"},
		{"project delete without org", []string{"project", "delete", "web"}, "project delete needs --org ORG"},
		{"org create without name", []string{"org", "create"}, "accepts 1 arg"},
		{"connector create without --url", []string{"connector", "create", "k8s"}, "connector create needs --url URL"},
		{"connector create with a bad --url", []string{"connector", "create", "k8s", "--url", "k8s.internal:6443"}, `--url "k8s.internal:6443"`},
		{"connector create with a tcp --url", []string{"connector", "create", "db", "--url", "tcp://db:5432"}, `--url "tcp://db:5432": want an http:// or https:// URL`},
		{"connector create with a hostless --url", []string{"connector", "create", "db", "--url", "https://:443/"}, `--url "https://:443/"`},
		{"connector create with two --url", []string{"--url", "http://manager:8080", "connector", "create", "k8s", "--url", "https://k8s:6443"},
			"--url given 2 times (on connector create, --url is the connector's endpoint: set the manager URL with LEGATE_URL)"},
		{"explain without ID", []string{"task", "explain"}, "accepts 1 arg"},
		{"describe without name", []string{"delegates", "describe"}, "accepts 1 arg"},
		{"unknown flag", []string{"task", "run", "--nope"}, "unknown flag"},
		{"container flag on a shell task", []string{"task", "run", "--script", "x", "--run-as-user", "1"}, "--run-as-user is for container tasks (--image IMAGE), not shell tasks"},
		{"container without image", []string{"task", "run", "--type", "container", "--script", "x"}, "a container task needs --image"},
		{"command without image", []string{"task", "run", "--script", "x", "--", "id"}, `unexpected argument "id"`},
		{"command before --", []string{"task", "run", "--image", "i", "id"}, `unexpected argument "id"`},
		{"container script and command", []string{"task", "run", "--image", "i", "--script", "x", "--", "id"}, "not both"},
		{"bad volume type", []string{"task", "run", "--image", "i", "--volume", "tmpfs:/x"}, `--volume "tmpfs:/x": unknown volume type "tmpfs"`},
		{"bad empty_dir size", []string{"task", "run", "--image", "i", "--volume", "empty_dir:/x:big"}, `size "big"`},
		{"bad host_path option", []string{"task", "run", "--image", "i", "--volume", "host_path:/a:/b:rw"}, "host_path:/HOST:/PATH:ro"},
		{"bad efs option", []string{"task", "run", "--image", "i", "--volume", "efs:fs-12345678:/e:nfs4"}, `efs option "nfs4"`},
		{"relative mount path", []string{"task", "run", "--image", "i", "--volume", "empty_dir:ws"}, "container.volumes[0].mount_path"},
		{"bad memory", []string{"task", "run", "--image", "i", "--memory", "lots"}, `--memory "lots"`},
		{"bad capability", []string{"task", "run", "--image", "i", "--add-cap", "NET ADMIN"}, "container.security_context.add_capability[0]"},
		{"efs iam without tls", []string{"task", "run", "--image", "i", "--volume", "efs:fs-12345678:/e:iam"}, "transit_encryption"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := m.env()
			if tt.name == "manager --url mistaken for the target" {
				delete(env, EnvURL)
			}
			r := runCLI(t.Context(), env, "", tt.args...)
			if r.err == nil {
				t.Fatal("no error")
			}
			var ee *ExitError
			if errors.As(r.err, &ee) {
				t.Fatalf("usage error returned as %#v; want an ordinary error (exit 2)", ee)
			}
			if !strings.Contains(r.err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", r.err, tt.wantMsg)
			}
		})
	}
	if n := len(m.submitted()); n != 0 {
		t.Errorf("%d tasks submitted by invalid commands", n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.tokenReqs) != 0 || len(m.projects) != 0 || len(m.connReqs) != 0 {
		t.Errorf("invalid commands reached the manager: tokens %v, projects %v, connectors %v", m.tokenReqs, m.projects, m.connReqs)
	}
}

func TestMissingConfiguration(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no URL", map[string]string{EnvAPIKey: testKey}, []string{"task", "list"}, EnvURL},
		{"no key", map[string]string{EnvURL: m.srv.URL}, []string{"token", "list"}, EnvAPIKey},
		{"bad URL", map[string]string{EnvURL: "localhost", EnvAPIKey: testKey}, []string{"delegates", "list"}, "http://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t.Context(), tt.env, "", tt.args...)
			if code := exitCodeOf(t, r.err); code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			if !strings.Contains(r.stderr, tt.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr = %q, want one line naming %s", r.stderr, tt.want)
			}
			if tt.name != "bad URL" && !strings.Contains(r.stderr, "set -a; . DATA/admin.env") {
				t.Errorf("stderr = %q does not mention admin.env", r.stderr)
			}
		})
	}
	// Flags win over the environment.
	r := runCLI(t.Context(), map[string]string{}, "", "--url", m.srv.URL, "--api-key", testKey, "token", "list")
	if r.err != nil {
		t.Errorf("flags: %v, stderr %q", r.err, r.stderr)
	}
	r = runCLI(t.Context(), m.env(), "", "--api-key", "wrong", "token", "list")
	if code := exitCodeOf(t, r.err); code != 1 || !strings.Contains(r.stderr, "check "+EnvAPIKey) {
		t.Errorf("wrong key: exit %d, stderr %q", code, r.stderr)
	}
}

func TestManagerDown(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	env := m.env()
	m.srv.Close()
	r := runCLI(t.Context(), env, "", "task", "run", "--script", "true")
	if code := exitCodeOf(t, r.err); code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if !strings.Contains(r.stderr, "is the manager running") {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestTaskGetListLogsCancel(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{chunks: []string{"line 1\n", "line 2\n"}, status: protocol.StatusFailed, exitCode: intp(3),
		errText: "exit status 3"})
	if r := runCLI(t.Context(), m.env(), "", "task", "run", "--script", "exit 3", "--selector", "linux"); exitCodeOf(t, r.err) != 3 {
		t.Fatalf("run: %v", r.err)
	}
	if r := runCLI(t.Context(), m.env(), "", "task", "run", "--detach", "--script", "sleep 1"); r.err != nil {
		t.Fatal(r.err)
	}

	r := runCLI(t.Context(), m.env(), "", "task", "get", "t_1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{"ID:", "t_1", "failed", "Exit code:", "exit status 3", "d1 (host1)", "linux", "1.5s",
		"2026-11-22 12:00:00 UTC (0s ago)", "Script:", "exit 3"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("task get output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t.Context(), m.env(), "", "task", "get", "t_1", "--json")
	var task protocol.Task
	if err := json.Unmarshal([]byte(r.stdout), &task); err != nil || task.ID != "t_1" {
		t.Errorf("get --json: %v, %+v", err, task)
	}
	r = runCLI(t.Context(), m.env(), "", "task", "get", "t_404")
	if code := exitCodeOf(t, r.err); code != 1 || !strings.Contains(r.stderr, "t_404 not found") {
		t.Errorf("get unknown: exit %d, stderr %q", code, r.stderr)
	}

	r = runCLI(t.Context(), m.env(), "", "task", "list")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := "ID   STATUS  PRIORITY  TYPE   EXIT  DELEGATE  CREATED  DURATION\n" +
		"t_2  queued  normal    shell  -     -         0s ago   -\n" +
		"t_1  failed  normal    shell  3     d1        0s ago   1.5s\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("task list (-want +got):\n%s", d)
	}
	r = runCLI(t.Context(), m.env(), "", "task", "list", "--status", "failed", "--limit", "5", "--json")
	var list protocol.TaskList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != "t_1" {
		t.Errorf("list --json: %v, %+v", err, list)
	}
	m.mu.Lock()
	q := m.listQuery
	m.mu.Unlock()
	if q != "limit=5&status=failed" {
		t.Errorf("list query = %q", q)
	}
	if r = runCLI(t.Context(), m.env(), "", "task", "list", "--scope", "eng/web", "--delegate", "builder", "-o", "name"); r.err != nil {
		t.Fatal(r.err)
	}
	m.mu.Lock()
	q = m.listQuery
	m.mu.Unlock()
	if q != "delegate=builder&limit=50&scope=eng%2Fweb" {
		t.Errorf("list query with scope and delegate = %q", q)
	}

	r = runCLI(t.Context(), m.env(), "", "task", "logs", "t_1")
	if r.err != nil || r.stdout != "line 1\nline 2\n" {
		t.Errorf("logs: err %v, stdout %q", r.err, r.stdout)
	}

	r = runCLI(t.Context(), m.env(), "", "task", "cancel", "t_2")
	if r.err != nil || r.stdout != "Task t_2 is cancelled.\n" {
		t.Errorf("cancel: err %v, stdout %q", r.err, r.stdout)
	}
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		task     protocol.Task
		wantCode int
	}{
		{protocol.Task{Status: protocol.StatusSucceeded, ExitCode: intp(0)}, 0},
		{protocol.Task{Status: protocol.StatusFailed, ExitCode: intp(42)}, 42},
		{protocol.Task{Status: protocol.StatusFailed, ExitCode: intp(0)}, 1},
		{protocol.Task{Status: protocol.StatusFailed, ExitCode: intp(-1)}, 1},
		{protocol.Task{Status: protocol.StatusFailed}, 1},
		{protocol.Task{Status: protocol.StatusTimedOut, ExitCode: intp(137)}, 124},
		{protocol.Task{Status: protocol.StatusCancelled}, 130},
		{protocol.Task{Status: protocol.StatusNotAssigned}, 3},
		{protocol.Task{Status: protocol.StatusRunning}, 1},
	}
	for _, tt := range tests {
		code, reason := outcome(tt.task)
		if code != tt.wantCode {
			t.Errorf("outcome(%s, %v) = %d, want %d", tt.task.Status, tt.task.ExitCode, code, tt.wantCode)
		}
		// (TestTaskRunOutcomes covers the multi-line error of not_assigned.)
		if (reason == "") != (tt.task.Status == protocol.StatusSucceeded) || strings.Contains(reason, "\n") {
			t.Errorf("outcome(%s) reason = %q", tt.task.Status, reason)
		}
	}
}

func TestAge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ago  time.Duration
		want string
	}{
		{-time.Second, "0s ago"}, {3 * time.Second, "3s ago"}, {59 * time.Second, "59s ago"},
		{90 * time.Second, "1m ago"}, {3 * time.Hour, "3h ago"}, {72 * time.Hour, "3d ago"},
	}
	for _, tt := range tests {
		if got := age(testNow, testNow.Add(-tt.ago)); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", tt.ago, got, tt.want)
		}
	}
}

// TestHelp checks that every command explains itself with an example.
func TestHelp(t *testing.T) {
	t.Parallel()
	root := &cobra.Command{Use: "legate"}
	addCommands(root, &app{getenv: func(string) string { return "" }, now: time.Now, loc: time.UTC})
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && (c.Short == "" || c.Long == "" || c.Example == "") {
			t.Errorf("%q lacks a short or long description or an example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	r := runCLI(t.Context(), nil, "", "task", "run", "--help")
	if r.err != nil || !strings.Contains(r.stdout, "legate task run --script") || !strings.Contains(r.stdout, "--http-url") {
		t.Errorf("task run --help: err %v, output:\n%s", r.err, r.stdout)
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"task", "run", "--help"}, []string{"--capability tcp://db.internal:5432", "--connector", "binary:NAME"}},
		{[]string{"task", "explain", "--help"}, []string{"legate task explain t_123", "allowlisted", "capability_denied"}},
		{[]string{"org", "create", "--help"}, []string{"legate org create eng"}},
		{[]string{"project", "create", "--help"}, []string{"legate project create --org eng web"}},
		{[]string{"project", "list", "--help"}, []string{"legate project list --org eng"}},
		{[]string{"token", "create", "--help"}, []string{"--org eng --project web", "scope"}},
		{[]string{"connector", "create", "--help"}, []string{"legate connector create k8s-east --url https://", "LEGATE_URL"}},
		{[]string{"connector", "--help"}, []string{"LAST-SUCCESS"}},
		{[]string{"delegates", "describe", "--help"}, []string{"legate delegates describe build", "deny list"}},
		{[]string{"configuration", "create", "--help"}, []string{"legate configuration create build-tools --script tools.sh", "the most selectors wins"}},
		{[]string{"configuration", "--help"}, []string{"10 minute timeout", "takes no task"}},
	} {
		r := runCLI(t.Context(), nil, "", tt.args...)
		for _, w := range tt.want {
			if r.err != nil || !strings.Contains(r.stdout, w) {
				t.Errorf("%v: err %v, output lacks %q:\n%s", tt.args, r.err, w, r.stdout)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }
