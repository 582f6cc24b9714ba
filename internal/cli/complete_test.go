package cli

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/legate-dev/legate/internal/protocol"
)

// completions runs cobra's hidden completion command as a shell does and
// returns the candidates (without the directive line).
func completions(t *testing.T, env map[string]string, args ...string) []string {
	t.Helper()
	r := runCLI(t.Context(), env, "", append([]string{"__complete"}, args...)...)
	if r.err != nil {
		t.Fatalf("__complete %v: %v", args, r.err)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("__complete %v: no directive line in %q", args, r.stdout)
	}
	if got := lines[len(lines)-1]; got != ":4" { // ShellCompDirectiveNoFileComp
		t.Errorf("__complete %v: directive %s, want :4 (no file names)", args, got)
	}
	return lines[:len(lines)-1]
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	m := outputManager(t)
	if r := runCLI(t.Context(), m.env(), "", "task", "run", "--detach", "--script", "sleep 1"); r.err != nil {
		t.Fatal(r.err)
	}
	if r := runCLI(t.Context(), m.env(), "", "connector", "create", "k8s", "--url", "https://k8s.internal:6443"); r.err != nil {
		t.Fatal(r.err)
	}
	m.confs.mu.Lock()
	m.confs.list = append(m.confs.list, protocol.Configuration{Name: "tools", Version: 2})
	m.confs.mu.Unlock()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"task", "get", ""}, []string{"t_2\tqueued, shell, 0s ago", "t_1\tfailed, shell, 0s ago"}},
		{[]string{"task", "logs", "t_1"}, []string{"t_1\tfailed, shell, 0s ago"}},
		{[]string{"task", "cancel", ""}, []string{"t_2\tqueued, shell, 0s ago"}},
		{[]string{"task", "get", "t_1", ""}, nil}, // one argument only
		{[]string{"delegates", "describe", ""}, []string{"east\t2 instances", "west\t1 instance"}},
		{[]string{"delegates", "describe", "w"}, []string{"west\t1 instance"}},
		{[]string{"token", "revoke", ""}, []string{"ci\taccount"}},
		{[]string{"apikey", "revoke", ""}, []string{"admin\tthe key in use"}},
		{[]string{"org", "delete", ""}, []string{"eng"}},
		{[]string{"project", "delete", "--org", "eng", ""}, []string{"web\torg eng"}},
		{[]string{"connector", "get", ""}, []string{"k8s\thttps://k8s.internal:6443"}},
		{[]string{"configuration", "update", ""}, []string{"tools\tv2, account"}},
		{[]string{"task", "run", "--org", ""}, []string{"eng"}},
		{[]string{"token", "create", "x", "--org", "eng", "--project", ""}, []string{"web\torg eng"}},
		{[]string{"task", "run", "--connector", ""}, []string{"k8s\thttps://k8s.internal:6443"}},
		{[]string{"task", "run", "--selector", ""}, []string{"east", "host-a", "host-b", "host-c", "linux", "west"}},
		{[]string{"task", "list", "--status", "f"}, []string{"failed"}},
		{[]string{"task", "list", "-o", ""}, []string{"json", "yaml", "wide", "name"}},
		{[]string{"token", "create", ""}, nil}, // a new name
		{[]string{"apikey", "create", "deploy", "--owner", ""}, []string{"admin\tuser", "alice\tuser", "ci-bot\tservice account"}},
		{[]string{"role", "bind", "viewer", "--user", "a"}, []string{"admin\tuser", "alice\tuser"}},
		{[]string{"role", "bind", "viewer", "--service-account", ""}, []string{"ci-bot\tservice account"}},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, completions(t, m.env(), tt.args...), cmpopts.EquateEmpty()); d != "" {
			t.Errorf("__complete %v (-want +got):\n%s", tt.args, d)
		}
	}
}

// TestCompletionQuietOnErrors: without configuration, with a refused key,
// or with a manager that does not answer, completion offers nothing,
// prints no error and gives up after completionTimeout (a test that hangs
// here has lost the timeout).
func TestCompletionQuietOnErrors(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	// A listener that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	for name, env := range map[string]map[string]string{
		"no configuration": {},
		"refused key":      {EnvURL: m.srv.URL, EnvAPIKey: "wrong"},
		"bad URL":          {EnvURL: "myhost", EnvAPIKey: testKey},
		"silent manager":   {EnvURL: "http://" + ln.Addr().String(), EnvAPIKey: testKey},
	} {
		r := runCLI(t.Context(), env, "", "__complete", "task", "get", "")
		if r.err != nil || r.stdout != ":4\n" || strings.Contains(r.stderr, "legate:") {
			t.Errorf("%s: err %v, stdout %q, stderr %q", name, r.err, r.stdout, r.stderr)
		}
	}
}
