package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestListInstancePage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		in := func(name, host, org, project string, tags ...string) Instance {
			return Instance{ID: "d_" + name + "_" + host, AccountID: "acc1", IdentityKey: name + "|" + host, Name: name, Hostname: host,
				Tags: tags, Org: org, Project: project, RegisteredAt: t0}
		}
		gone := in("gone", "h1", "", "")
		mustUpsert(t, s, in("alpha", "h2", "", "", "linux"), in("alpha", "h1", "", "", "gpu", "linux"),
			in("beta", "h1", "o1", "", "linux_x"), in("gamma", "h1", "o1", "p1", "100%"),
			in("delta", "h1", "o2", "", "linux"), gone,
			Instance{ID: "d_other", AccountID: "acc2", IdentityKey: "alpha|h9", Name: "alpha", Hostname: "h9", RegisteredAt: t0})
		if err := s.DeregisterInstance(ctx, gone.ID, t0); err != nil {
			t.Fatal(err)
		}
		hosts := func(q InstanceQuery) []string {
			t.Helper()
			q.AccountID = "acc1"
			list, err := s.ListInstancePage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, in := range list {
				out = append(out, in.Name+"/"+in.Hostname)
			}
			return out
		}
		for _, tt := range []struct {
			name string
			q    InstanceQuery
			want []string
		}{
			{"all", InstanceQuery{}, []string{"alpha/h1", "alpha/h2", "beta/h1", "delta/h1", "gamma/h1"}},
			{"deregistered too", InstanceQuery{Deregistered: true}, []string{"alpha/h1", "alpha/h2", "beta/h1", "delta/h1", "gamma/h1", "gone/h1"}},
			{"two names", InstanceQuery{Names: 2}, []string{"alpha/h1", "alpha/h2", "beta/h1"}},
			{"after", InstanceQuery{Names: 2, After: "beta"}, []string{"delta/h1", "gamma/h1"}},
			{"after the last", InstanceQuery{Names: 2, After: "gamma"}, nil},
			{"name contains, case ignored", InstanceQuery{NameContains: "LT"}, []string{"delta/h1"}},
			{"name with a wildcard", InstanceQuery{NameContains: "a_p"}, nil},
			{"one name, case ignored", InstanceQuery{Name: "ALPHA"}, []string{"alpha/h1", "alpha/h2"}},
			{"one name is whole", InstanceQuery{Name: "alph"}, nil},
			{"one name that stopped", InstanceQuery{Name: "gone", Deregistered: true}, []string{"gone/h1"}},
			{"tag", InstanceQuery{Tag: "linux"}, []string{"alpha/h1", "alpha/h2", "delta/h1"}},
			{"tag is whole", InstanceQuery{Tag: "linux_"}, nil},
			{"tag with a wildcard", InstanceQuery{Tag: "100%"}, []string{"gamma/h1"}},
			{"org and beneath", InstanceQuery{Scopes: []ScopeFilter{{Org: "o1"}}}, []string{"beta/h1", "gamma/h1"}},
			{"project", InstanceQuery{Scopes: []ScopeFilter{{Org: "o1", Project: "p1"}}}, []string{"gamma/h1"}},
			{"filters and paging", InstanceQuery{Tag: "linux", Names: 1, After: "alpha"}, []string{"delta/h1"}},
		} {
			if diff := cmp.Diff(tt.want, hosts(tt.q)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.name, diff)
			}
		}
		var ids []string
		for i := range 600 { // more than one IN list
			ids = append(ids, fmt.Sprintf("x%d", i))
		}
		ids = append(ids, "d_alpha_h1")
		if err := s.RecordConfigurationResult(ctx, ConfigurationResult{InstanceID: "d_alpha_h1", Configuration: "tools", Version: 1, StartedAt: t0}); err != nil {
			t.Fatal(err)
		}
		rs, err := s.ConfigurationResultsOf(ctx, ids)
		if err != nil || len(rs) != 1 || rs["d_alpha_h1"].Configuration != "tools" {
			t.Fatalf("ConfigurationResultsOf: %+v, %v", rs, err)
		}
	})
}
