package dispatch

import (
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

func TestApplicableConfiguration(t *testing.T) {
	cs := []store.Configuration{ // ordered by name, as the store lists them
		{Name: "a-linux", Selectors: []string{"linux"}},
		{Name: "all"},
		{Name: "b-linux", Selectors: []string{"linux"}},
		{Name: "by-host", Selectors: []string{"host-7"}},
		{Name: "gpu-linux", Selectors: []string{"gpu", "linux"}},
	}
	scoped := []store.Configuration{
		{Name: "a-acct", Selectors: []string{"linux"}},
		{Name: "b-web", Selectors: []string{"linux"}, Org: "eng", Project: "web"},
		{Name: "c-eng", Selectors: []string{"linux"}, Org: "eng"},
		{Name: "d-ops", Selectors: []string{"linux"}, Org: "ops"},
		{Name: "e-web-any", Org: "eng", Project: "web"},
		{Name: "f-api-gpu", Selectors: []string{"gpu", "linux"}, Org: "eng", Project: "api"},
	}
	tests := []struct {
		name       string
		tags       []string
		dname      string
		host       string
		org, proj  string
		want       string
		configured []store.Configuration
	}{
		{"most selectors wins", []string{"linux", "gpu"}, "d", "h", "", "", "gpu-linux", cs},
		{"tie: first by name", []string{"LINUX "}, "d", "h", "", "", "a-linux", cs},
		{"no selectors: every delegate", nil, "d", "h", "", "", "all", cs},
		{"implicit hostname", nil, "d", "HOST-7", "", "", "by-host", cs},
		{"implicit name", nil, "gpu", "h", "", "", "all", cs}, // "gpu" alone does not satisfy gpu-linux
		{"none match", []string{"linux"}, "d", "h", "", "", "", []store.Configuration{{Name: "x", Selectors: []string{"windows"}}}},
		{"none at all", nil, "d", "h", "", "", "", nil},
		// Scope: a configuration applies only to delegates its scope
		// covers (a project's never reaches an account or org delegate);
		// on a tie, the one of the scope closest to the delegate's own
		// (the narrowest).
		{"account delegate: only the account's", []string{"linux", "gpu"}, "d", "h", "", "", "a-acct", scoped},
		{"org delegate: its org's over the account's", []string{"linux"}, "d", "h", "eng", "", "c-eng", scoped},
		{"org delegate: never a project's", []string{"linux", "gpu"}, "d", "h", "eng", "", "c-eng", scoped},
		{"other org delegate", []string{"linux"}, "d", "h", "ops", "", "d-ops", scoped},
		{"project delegate: the project's own", []string{"linux"}, "d", "h", "eng", "web", "b-web", scoped},
		{"project delegate: not a sibling project's", []string{"linux", "gpu"}, "d", "h", "eng", "web", "b-web", scoped},
		{"project delegate: its org's when the project has none", []string{"linux"}, "d", "h", "eng", "api", "c-eng", scoped},
		{"project delegate: its project's with most selectors", []string{"linux", "gpu"}, "d", "h", "eng", "api", "f-api-gpu", scoped},
		{"project delegate without tags", nil, "d", "h", "eng", "web", "e-web-any", scoped},
		{"project delegate of another org: the account's", []string{"linux"}, "d", "h", "ops", "x", "d-ops", scoped},
		{"project delegate of an org without one: the account's", []string{"linux"}, "d", "h", "dev", "x", "a-acct", scoped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			target := configTarget{tags: protocol.NormalizeSelectors(tt.tags), name: tt.dname, hostname: tt.host, org: tt.org, project: tt.proj}
			if c := applicableConfiguration(tt.configured, target); c != nil {
				got = c.Name
			}
			if got != tt.want {
				t.Errorf("applies %q, want %q", got, tt.want)
			}
		})
	}
}
