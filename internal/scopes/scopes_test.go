package scopes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/leaktest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

func TestMain(m *testing.M) { os.Exit(leaktest.Main(m.Run)) }

var t0 = time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)

// newService is the service over a real SQLite store in t's directory,
// with org o1, its project p1 and a connector "github" (selector gh).
func newService(t *testing.T) *Service {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "legate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, err := range []error{
		st.CreateOrg(ctx, store.Org{AccountID: "a1", Name: "o1", CreatedAt: t0}),
		st.CreateProject(ctx, store.Project{AccountID: "a1", Org: "o1", Name: "p1", CreatedAt: t0}),
		st.CreateConnector(ctx, store.Connector{AccountID: "a1", Name: "github", URL: "https://api.github.example", Selectors: []string{"gh"}, CreatedAt: t0}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return New(Config{Store: st, Now: func() time.Time { return t0 }})
}

func TestCheckScope(t *testing.T) {
	svc := newService(t)
	for _, tc := range []struct {
		org, project string
		err          string // a part of the error; "" for none
	}{
		{"", "", ""},
		{"o1", "", ""},
		{"o1", "p1", ""},
		{"", "p1", "a project needs its org"},
		{"o2", "", `unknown org "o2"`},
		{"o1", "p2", `unknown project "p2" in org "o1"`},
	} {
		err := svc.CheckScope(context.Background(), "a1", tc.org, tc.project)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckScope(%q, %q) = %v, want %q", tc.org, tc.project, err, tc.err)
		}
	}
	// Another account's org is unknown to this one.
	if err := svc.CheckScope(context.Background(), "a2", "o1", ""); err == nil {
		t.Error("account a2 sees account a1's org o1")
	}
}

// TestResolveTask: a task gets its connector's selectors unless it has
// its own, the connector's URL as a capability, and its capabilities
// normalized once each; bad ones are refused with what to write.
func TestResolveTask(t *testing.T) {
	svc := newService(t)
	ctx := context.Background()
	spec := protocol.TaskSpec{Org: " o1 ", Project: "p1", Connector: "github",
		Capabilities: []string{"tcp://DB.example:5432", "tcp://db.example:5432", "binary:kubectl"}}
	if err := svc.ResolveTask(ctx, "a1", &spec); err != nil {
		t.Fatal(err)
	}
	want := protocol.TaskSpec{Org: "o1", Project: "p1", Connector: "github", Selectors: []string{"gh"},
		Capabilities: []string{"tcp://db.example:5432", "binary:kubectl", "https://api.github.example"}}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("resolved task (-want +got):\n%s", diff)
	}
	own := protocol.TaskSpec{Connector: "github", Selectors: []string{"mine"}}
	if err := svc.ResolveTask(ctx, "a1", &own); err != nil || !cmp.Equal(own.Selectors, []string{"mine"}) {
		t.Errorf("a task's own selectors: %v, %v; want [mine] kept", own.Selectors, err)
	}
	for _, tc := range []struct {
		spec protocol.TaskSpec
		err  string
	}{
		{protocol.TaskSpec{Connector: "gitlab"}, `unknown connector "gitlab"`},
		{protocol.TaskSpec{Org: "nope"}, `unknown org "nope"`},
		{protocol.TaskSpec{Capabilities: []string{"ftp://x"}}, "use http://…, https://…, tcp://host:port or binary:NAME"},
		{protocol.TaskSpec{Capabilities: []string{"tcp://x"}}, "want tcp://host:port"},
		{protocol.TaskSpec{Capabilities: []string{"binary:a/b"}}, "want binary:NAME"},
		{protocol.TaskSpec{Capabilities: make([]string, 21)}, "too many capabilities"},
	} {
		err := svc.ResolveTask(ctx, "a1", &tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ResolveTask(%+v) = %v, want %q", tc.spec, err, tc.err)
		}
	}
}

// TestRoutesNeedNoService: the manager lists the routes of a service it
// has not built (its tests list routes of a bare manager).
func TestRoutesNeedNoService(t *testing.T) {
	var svc *Service
	if n := len(svc.Routes()); n != 10 {
		t.Errorf("%d routes, want the 10 of orgs, projects and connectors", n)
	}
}
