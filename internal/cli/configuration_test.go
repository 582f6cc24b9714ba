package cli

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// fakeConfigurations is the fake manager's configuration store.
type fakeConfigurations struct {
	mu      sync.Mutex
	list    []protocol.Configuration
	creates []protocol.CreateConfigurationRequest
	updates []protocol.UpdateConfigurationRequest
}

func (m *fakeManager) configurationRoutes(mux *http.ServeMux) {
	f := &m.confs
	find := func(name string) int {
		for i, c := range f.list {
			if c.Name == name {
				return i
			}
		}
		return -1
	}
	mux.HandleFunc("POST /api/v1/configurations", func(w http.ResponseWriter, r *http.Request) {
		var req protocol.CreateConfigurationRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeError(w, 400, protocol.CodeBadRequest, "bad JSON")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.creates = append(f.creates, req)
		if find(req.Name) >= 0 {
			writeError(w, 409, protocol.CodeConflict, "configuration \""+req.Name+"\" already exists")
			return
		}
		sel := req.Selectors
		if sel == nil {
			sel = []string{}
		}
		c := protocol.Configuration{Name: req.Name, Script: req.Script, Selectors: sel, Org: req.Org, Project: req.Project,
			Version: 1, CreatedAt: testNow, UpdatedAt: testNow}
		f.list = append(f.list, c)
		writeJSON(w, 201, c)
	})
	mux.HandleFunc("GET /api/v1/configurations", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		writeJSON(w, 200, protocol.ConfigurationList{Configurations: f.list})
	})
	mux.HandleFunc("GET /api/v1/configurations/{name}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if i := find(r.PathValue("name")); i >= 0 {
			writeJSON(w, 200, f.list[i])
			return
		}
		writeError(w, 404, protocol.CodeNotFound, "configuration \""+r.PathValue("name")+"\" not found")
	})
	mux.HandleFunc("PATCH /api/v1/configurations/{name}", func(w http.ResponseWriter, r *http.Request) {
		var req protocol.UpdateConfigurationRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeError(w, 400, protocol.CodeBadRequest, "bad JSON")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.updates = append(f.updates, req)
		i := find(r.PathValue("name"))
		if i < 0 {
			writeError(w, 404, protocol.CodeNotFound, "configuration \""+r.PathValue("name")+"\" not found")
			return
		}
		c := &f.list[i]
		if req.Script != nil {
			c.Script = *req.Script
		}
		if req.Selectors != nil {
			c.Selectors = *req.Selectors
		}
		c.Version++
		c.UpdatedAt = testNow.Add(time.Minute)
		writeJSON(w, 200, *c)
	})
	mux.HandleFunc("DELETE /api/v1/configurations/{name}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if i := find(r.PathValue("name")); i >= 0 {
			f.list = append(f.list[:i], f.list[i+1:]...)
			w.WriteHeader(204)
			return
		}
		writeError(w, 404, protocol.CodeNotFound, "configuration \""+r.PathValue("name")+"\" not found")
	})
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigurationCommands(t *testing.T) {
	m := newFakeManager(t, outcomeSpec{})
	ctx := t.Context()
	script := writeFile(t, "tools.sh", "#!/bin/bash\napt-get install -y jq\n")

	r := ok(t, runCLI(ctx, m.env(), "", "configuration", "create", "tools", "--script", script, "--selector", "Linux", "--selector", "docker,linux"))
	if want := "Created configuration \"tools\" (version 1) for delegates with docker, linux.\n"; r.stdout != want {
		t.Errorf("create stdout = %q, want %q", r.stdout, want)
	}
	want := []protocol.CreateConfigurationRequest{{Name: "tools", Script: "#!/bin/bash\napt-get install -y jq\n", Selectors: []string{"docker", "linux"}}}
	if diff := cmp.Diff(want, m.confs.creates); diff != "" {
		t.Errorf("create request (-want +got):\n%s", diff)
	}
	// From standard input, no selectors: every delegate.
	r = ok(t, runCLI(ctx, m.env(), "echo base\n", "configuration", "create", "base", "--script", "-", "--json"))
	base := decode[protocol.Configuration](t, r)
	if base.Name != "base" || base.Script != "echo base\n" || len(base.Selectors) != 0 || base.Version != 1 {
		t.Errorf("create --json = %+v", base)
	}
	failsWith(t, runCLI(ctx, m.env(), "", "configuration", "create", "tools", "--script", script), `configuration "tools" already exists`)
	// Scoped to a project.
	r = ok(t, runCLI(ctx, m.env(), "", "configuration", "create", "web", "--script", script, "--org", "eng", "--project", "web"))
	if want := "Created configuration \"web\" (version 1, scope project/eng/web) for every delegate.\n"; r.stdout != want {
		t.Errorf("create --org --project stdout = %q, want %q", r.stdout, want)
	}
	if got := m.confs.creates[len(m.confs.creates)-1]; got.Org != "eng" || got.Project != "web" {
		t.Errorf("create --org --project sent %+v", got)
	}

	r = ok(t, runCLI(ctx, m.env(), "", "configuration", "list"))
	wantTable := "NAME   VERSION  SCOPE            SELECTORS        SCRIPT                UPDATED\n" +
		"tools  1        account          docker,linux     2 lines: #!/bin/bash  2026-11-22 12:00:00 UTC (0s ago)\n" +
		"base   1        account          (all delegates)  1 line: echo base     2026-11-22 12:00:00 UTC (0s ago)\n" +
		"web    1        project/eng/web  (all delegates)  2 lines: #!/bin/bash  2026-11-22 12:00:00 UTC (0s ago)\n"
	if diff := cmp.Diff(wantTable, r.stdout); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	list := decode[protocol.ConfigurationList](t, ok(t, runCLI(ctx, m.env(), "", "configuration", "list", "--json")))
	if len(list.Configurations) != 3 || list.Configurations[2].Project != "web" {
		t.Errorf("list --json: %+v", list)
	}

	r = ok(t, runCLI(ctx, m.env(), "", "configuration", "get", "tools"))
	wantGet := `Name:        tools
Version:     1
Scope:       account
Applies to:  delegates with docker, linux
Created:     2026-11-22 12:00:00 UTC (0s ago)
Updated:     2026-11-22 12:00:00 UTC (0s ago)
Script:
  #!/bin/bash
  apt-get install -y jq
`
	if diff := cmp.Diff(wantGet, r.stdout); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}
	failsWith(t, runCLI(ctx, m.env(), "", "configuration", "get", "nope"), `configuration "nope" not found`)

	newScript := writeFile(t, "v2.sh", "apt-get install -y jq curl\n")
	r = ok(t, runCLI(ctx, m.env(), "", "configuration", "update", "tools", "--script", newScript))
	if want := "Updated configuration \"tools\" to version 2 (for delegates with docker, linux).\n"; r.stdout != want {
		t.Errorf("update stdout = %q, want %q", r.stdout, want)
	}
	r = ok(t, runCLI(ctx, m.env(), "", "configuration", "update", "tools", "--selector", "GPU", "--json"))
	if got := decode[protocol.Configuration](t, r); got.Version != 3 || !cmp.Equal(got.Selectors, []string{"gpu"}) || got.Script != "apt-get install -y jq curl\n" {
		t.Errorf("update --selector --json = %+v", got)
	}
	// --selector "" removes the selectors: an empty list, not "unchanged".
	ok(t, runCLI(ctx, m.env(), "", "configuration", "update", "tools", "--selector", ""))
	if u := m.confs.updates[len(m.confs.updates)-1]; u.Script != nil || u.Selectors == nil || len(*u.Selectors) != 0 {
		t.Errorf("update --selector \"\" sent %+v", u)
	}
	failsWith(t, runCLI(ctx, m.env(), "", "configuration", "update", "nope", "--script", newScript), `configuration "nope" not found`)

	r = ok(t, runCLI(ctx, m.env(), "", "configuration", "delete", "base"))
	if r.stdout != "Deleted configuration \"base\".\n" {
		t.Errorf("delete stdout = %q", r.stdout)
	}
	failsWith(t, runCLI(ctx, m.env(), "", "configuration", "delete", "base"), `configuration "base" not found`)
}

func TestConfigurationUsageErrors(t *testing.T) {
	m := newFakeManager(t, outcomeSpec{})
	empty := writeFile(t, "empty.sh", "  \n")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"create without script", []string{"configuration", "create", "x"}, "needs --script FILE"},
		{"create without name", []string{"configuration", "create", "--script", empty}, "accepts 1 arg"},
		{"missing file", []string{"configuration", "create", "x", "--script", "/nonexistent/tools.sh"}, "no such file"},
		{"empty script", []string{"configuration", "create", "x", "--script", empty}, "is empty"},
		{"update without change", []string{"configuration", "update", "x"}, "needs --script FILE or --selector S"},
		{"project without org", []string{"configuration", "create", "x", "--script", empty, "--project", "web"}, "needs --org"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t.Context(), m.env(), "", tt.args...)
			if r.err == nil {
				t.Fatal("no error")
			}
			var ee *ExitError
			if errors.As(r.err, &ee) {
				t.Fatalf("usage error returned as %#v; want an ordinary error (exit 2)", ee)
			}
			if !strings.Contains(r.err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", r.err, tt.want)
			}
		})
	}
	if len(m.confs.creates)+len(m.confs.updates) != 0 {
		t.Errorf("usage errors reached the manager: %+v %+v", m.confs.creates, m.confs.updates)
	}
}

func TestDescribeShowsConfiguration(t *testing.T) {
	m := newFakeManager(t, outcomeSpec{})
	reg := testNow.Add(-2 * time.Hour)
	fin := testNow.Add(-time.Minute)
	zero, two := 0, 2
	m.details["build"] = protocol.DelegateDetails{Name: "build", Instances: []protocol.DelegateDetail{
		{
			Delegate: protocol.Delegate{InstanceID: "i_1", Name: "build", Hostname: "host-a", IP: "10.0.0.1", Version: "0.3.0",
				Status: protocol.DelegateConnected, RegisteredAt: reg, Description: "rack 4, GPU box", Configuration: "tools"},
			ConfigurationApplies: &protocol.ConfigurationRef{Name: "tools", Version: 2},
			ConfigurationResult: &protocol.ConfigurationResult{Name: "tools", Version: 2, ExitCode: &zero, Output: "installed jq\n",
				OutputBytes: 13, StartedAt: fin.Add(-time.Second), FinishedAt: fin},
		},
		{
			Delegate: protocol.Delegate{InstanceID: "i_2", Name: "build", Hostname: "host-b", Version: "0.3.0",
				Status: protocol.DelegateConnected, RegisteredAt: reg, Configuration: "tools", Configuring: "tools v3"},
			ConfigurationApplies: &protocol.ConfigurationRef{Name: "tools", Version: 3},
			ConfigurationResult: &protocol.ConfigurationResult{Name: "tools", Version: 2, ExitCode: &two, Error: "exit status 2",
				Output: "head\n[… 4990 bytes left out …]\ntail\n", OutputBytes: 5000, StartedAt: fin, FinishedAt: fin},
		},
	}}
	r := ok(t, runCLI(t.Context(), m.env(), "", "delegates", "describe", "build"))
	want := `Delegate build: 2 instances

Instance i_1
  Hostname:       host-a
  Description:    rack 4, GPU box
  IP:             10.0.0.1
  Status:         connected
  Connection:     last heartbeat never
  Scope:          account
  Tags:           -
  Running:        0 tasks
  Isolation:      not reported (older delegate)
  Version:        0.3.0
  Type:           -
  Token:          -
  Registered:     2026-11-22 10:00:00 UTC (2h ago)
  Configuration:  tools v2 applies
  Last applied:   tools v2, exit 0, 2026-11-22 11:59:00 UTC (1m ago)
  Configuration output:
    installed jq
  Allowlist: none
  Deny list: none

Instance i_2
  Hostname:       host-b
  IP:             -
  Status:         connected,configuring
  Connection:     last heartbeat never
  Scope:          account
  Tags:           -
  Running:        0 tasks
  Isolation:      not reported (older delegate)
  Version:        0.3.0
  Type:           -
  Token:          -
  Registered:     2026-11-22 10:00:00 UTC (2h ago)
  Configuring:    tools v3 is running (takes no new tasks)
  Configuration:  tools v3 applies
  Last applied:   tools v2, exit 2, 2026-11-22 11:59:00 UTC (1m ago): exit status 2
  Configuration output (excerpt of 5000 bytes):
    head
    [… 4990 bytes left out …]
    tail
  Allowlist: none
  Deny list: none
`
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("describe (-want +got):\n%s", diff)
	}
	got := decode[protocol.DelegateDetails](t, ok(t, runCLI(t.Context(), m.env(), "", "delegates", "describe", "build", "--json")))
	if got.Instances[0].ConfigurationResult == nil || *got.Instances[0].ConfigurationResult.ExitCode != 0 ||
		got.Instances[0].Description != "rack 4, GPU box" || got.Instances[1].Configuring != "tools v3" {
		t.Errorf("describe --json lost configuration fields: %+v", got)
	}
}
