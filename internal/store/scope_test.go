package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestOrgsAndProjects(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()

		orgs := []struct {
			o       Org
			wantErr error
		}{
			{Org{AccountID: "acc1", Name: "eng", CreatedAt: t0}, nil},
			{Org{AccountID: "acc1", Name: "sales", CreatedAt: at(time.Minute)}, nil},
			{Org{AccountID: "acc1", Name: "empty", CreatedAt: at(2 * time.Minute)}, nil},
			{Org{AccountID: "acc2", Name: "eng", CreatedAt: t0}, nil},
			{Org{AccountID: "acc1", Name: "eng", CreatedAt: at(time.Hour)}, ErrConflict},
		}
		for _, tt := range orgs {
			if err := s.CreateOrg(ctx, tt.o); !errors.Is(err, tt.wantErr) {
				t.Errorf("CreateOrg(%+v) error %v, want %v", tt.o, err, tt.wantErr)
			}
		}
		list, err := s.ListOrgs(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		wantOrgs := []Org{orgs[2].o, orgs[0].o, orgs[1].o}
		if diff := cmp.Diff(wantOrgs, list); diff != "" {
			t.Errorf("ListOrgs (-want +got):\n%s", diff)
		}
		if list, err := s.ListOrgs(ctx, "acc3"); err != nil || list != nil {
			t.Errorf("ListOrgs(acc3) = %v, %v; want nothing", list, err)
		}
		got, err := s.GetOrg(ctx, "acc1", "eng")
		if diff := cmp.Diff(orgs[0].o, got); err != nil || diff != "" {
			t.Errorf("GetOrg error %v (-want +got):\n%s", err, diff)
		}
		_, err = s.GetOrg(ctx, "acc3", "eng")
		wantErr(t, "GetOrg of another account", err, ErrNotFound)

		projects := []struct {
			p       Project
			wantErr error
		}{
			{Project{AccountID: "acc1", Org: "eng", Name: "web", CreatedAt: t0}, nil},
			{Project{AccountID: "acc1", Org: "eng", Name: "api", CreatedAt: t0}, nil},
			{Project{AccountID: "acc1", Org: "sales", Name: "crm", CreatedAt: t0}, nil},
			{Project{AccountID: "acc1", Org: "sales", Name: "web", CreatedAt: t0}, nil}, // same name, other org
			{Project{AccountID: "acc2", Org: "eng", Name: "web", CreatedAt: t0}, nil},   // same names, other account
			{Project{AccountID: "acc1", Org: "eng", Name: "web", CreatedAt: at(time.Hour)}, ErrConflict},
			{Project{AccountID: "acc1", Org: "nope", Name: "web", CreatedAt: t0}, ErrNotFound},
			{Project{AccountID: "acc3", Org: "eng", Name: "web", CreatedAt: t0}, ErrNotFound},
		}
		for _, tt := range projects {
			if err := s.CreateProject(ctx, tt.p); !errors.Is(err, tt.wantErr) {
				t.Errorf("CreateProject(%+v) error %v, want %v", tt.p, err, tt.wantErr)
			}
		}
		name := func(ps []Project) []string {
			var out []string
			for _, p := range ps {
				out = append(out, p.AccountID+"/"+p.Org+"/"+p.Name)
			}
			return out
		}
		lists := []struct {
			account, org string
			want         []string
		}{
			{"acc1", "", []string{"acc1/eng/api", "acc1/eng/web", "acc1/sales/crm", "acc1/sales/web"}},
			{"acc1", "sales", []string{"acc1/sales/crm", "acc1/sales/web"}},
			{"acc1", "empty", nil},
			{"acc1", "nope", nil},
			{"acc2", "", []string{"acc2/eng/web"}},
		}
		for _, tt := range lists {
			got, err := s.ListProjects(ctx, tt.account, tt.org)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, name(got)); diff != "" {
				t.Errorf("ListProjects(%s, %q) (-want +got):\n%s", tt.account, tt.org, diff)
			}
		}
		gotP, err := s.GetProject(ctx, "acc1", "eng", "web")
		if diff := cmp.Diff(projects[0].p, gotP); err != nil || diff != "" {
			t.Errorf("GetProject error %v (-want +got):\n%s", err, diff)
		}
		for _, k := range [][3]string{{"acc1", "eng", "crm"}, {"acc1", "nope", "web"}, {"acc3", "eng", "web"}} {
			_, err := s.GetProject(ctx, k[0], k[1], k[2])
			wantErr(t, fmt.Sprintf("GetProject%v", k), err, ErrNotFound)
		}
	})
}

func TestDeleteOrgsAndProjects(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, o := range []string{"eng", "sales", "empty"} {
			if err := s.CreateOrg(ctx, Org{AccountID: "acc1", Name: o, CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateOrg(ctx, Org{AccountID: "acc2", Name: "sales", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		for _, p := range [][2]string{{"eng", "web"}, {"eng", "api"}} {
			if err := s.CreateProject(ctx, Project{AccountID: "acc1", Org: p[0], Name: p[1], CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		tokens := []Token{
			{ID: "t1", AccountID: "acc1", Name: "web", Hash: "h1", CreatedAt: t0, Org: "eng", Project: "web"},
			{ID: "t2", AccountID: "acc1", Name: "sales", Hash: "h2", CreatedAt: t0, Org: "sales"},
			// Tokens that name other scopes do not hold these.
			{ID: "t3", AccountID: "acc1", Name: "account", Hash: "h3", CreatedAt: t0},
			{ID: "t4", AccountID: "acc2", Name: "api", Hash: "h4", CreatedAt: t0, Org: "eng", Project: "api"},
			{ID: "t5", AccountID: "acc1", Name: "old", Hash: "h5", CreatedAt: t0, Org: "eng", Project: "api",
				RevokedAt: ptr(t0)},
		}
		for _, tok := range tokens {
			if err := s.CreateToken(ctx, tok); err != nil {
				t.Fatal(err)
			}
		}

		steps := []struct {
			name    string
			del     func() error
			wantErr error
		}{
			{"org with projects", func() error { return s.DeleteOrg(ctx, "acc1", "eng") }, ErrInUse},
			{"org with a token", func() error { return s.DeleteOrg(ctx, "acc1", "sales") }, ErrInUse},
			{"unknown org", func() error { return s.DeleteOrg(ctx, "acc1", "nope") }, ErrNotFound},
			{"unused org", func() error { return s.DeleteOrg(ctx, "acc1", "empty") }, nil},
			{"deleted org", func() error { return s.DeleteOrg(ctx, "acc1", "empty") }, ErrNotFound},
			{"project with a token", func() error { return s.DeleteProject(ctx, "acc1", "eng", "web") }, ErrInUse},
			{"project with only a revoked token", func() error { return s.DeleteProject(ctx, "acc1", "eng", "api") }, nil},
			{"unknown project", func() error { return s.DeleteProject(ctx, "acc1", "eng", "api") }, ErrNotFound},
			{"project of another account", func() error { return s.DeleteProject(ctx, "acc2", "eng", "web") }, ErrNotFound},
			{"org with one project left", func() error { return s.DeleteOrg(ctx, "acc1", "eng") }, ErrInUse},
			{"revoke the project token", func() error { _, err := s.RevokeToken(ctx, "acc1", "web", at(time.Hour)); return err }, nil},
			{"project after revoke", func() error { return s.DeleteProject(ctx, "acc1", "eng", "web") }, nil},
			{"org after its projects", func() error { return s.DeleteOrg(ctx, "acc1", "eng") }, nil},
			{"revoke the org token", func() error { _, err := s.RevokeToken(ctx, "acc1", "sales", at(time.Hour)); return err }, nil},
			{"org after revoke", func() error { return s.DeleteOrg(ctx, "acc1", "sales") }, nil},
		}
		for _, st := range steps {
			if err := st.del(); !errors.Is(err, st.wantErr) {
				t.Fatalf("%s: error %v, want %v", st.name, err, st.wantErr)
			}
		}
		if list, err := s.ListOrgs(ctx, "acc1"); err != nil || list != nil {
			t.Errorf("ListOrgs(acc1) after deletes = %v, %v", list, err)
		}
		if _, err := s.GetOrg(ctx, "acc2", "sales"); err != nil {
			t.Errorf("acc2's org went with acc1's: %v", err)
		}
		if err := s.CreateOrg(ctx, Org{AccountID: "acc1", Name: "eng", CreatedAt: at(time.Hour)}); err != nil {
			t.Errorf("re-create deleted org: %v", err)
		}
		if err := s.DeleteOrg(ctx, "acc1", "eng"); err != nil {
			t.Errorf("delete org re-created without projects: %v", err)
		}
	})
}

func TestTokenAndInstanceScope(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()

		tok := Token{ID: "t1", AccountID: "acc1", Name: "web", Hash: "h1", CreatedAt: t0, Org: "eng", Project: "web"}
		orgTok := Token{ID: "t2", AccountID: "acc1", Name: "eng", Hash: "h2", CreatedAt: at(time.Second), Org: "eng"}
		for _, tk := range []Token{tok, orgTok} {
			if err := s.CreateToken(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		list, err := s.ListTokens(ctx, "acc1")
		if diff := cmp.Diff([]Token{tok, orgTok}, list); err != nil || diff != "" {
			t.Errorf("ListTokens error %v (-want +got):\n%s", err, diff)
		}
		byHash, err := s.TokenByHash(ctx, "acc1", "h1")
		if diff := cmp.Diff(tok, byHash); err != nil || diff != "" {
			t.Errorf("TokenByHash error %v (-want +got):\n%s", err, diff)
		}
		byID, err := s.TokenByID(ctx, "t2")
		if diff := cmp.Diff(orgTok, byID); err != nil || diff != "" {
			t.Errorf("TokenByID error %v (-want +got):\n%s", err, diff)
		}
		revoked, err := s.RevokeToken(ctx, "acc1", "web", at(time.Hour))
		want := tok
		want.RevokedAt = ptr(at(time.Hour))
		if diff := cmp.Diff(want, revoked); err != nil || diff != "" {
			t.Errorf("RevokeToken error %v (-want +got):\n%s", err, diff)
		}

		in := Instance{
			ID: "i1", AccountID: "acc1", IdentityKey: "web|host-a", Name: "web", Hostname: "host-a",
			TokenID: "t1", Org: "eng", Project: "web", RegisteredAt: t0,
		}
		got, err := s.UpsertInstance(ctx, in)
		wantIn := in
		wantIn.Generation = 1
		if diff := cmp.Diff(wantIn, got, equateEmpty); err != nil || diff != "" {
			t.Errorf("UpsertInstance error %v (-want +got):\n%s", err, diff)
		}
		// Re-registering with another token moves the instance to its scope.
		again := in
		again.TokenID, again.Org, again.Project = "t2", "eng", ""
		got, err = s.UpsertInstance(ctx, again)
		wantIn = again
		wantIn.Generation = 2
		if diff := cmp.Diff(wantIn, got, equateEmpty); err != nil || diff != "" {
			t.Errorf("re-register error %v (-want +got):\n%s", err, diff)
		}
		stored, err := s.GetInstance(ctx, "i1")
		if diff := cmp.Diff(wantIn, stored, equateEmpty); err != nil || diff != "" {
			t.Errorf("GetInstance error %v (-want +got):\n%s", err, diff)
		}
		acct := Instance{ID: "i2", AccountID: "acc1", IdentityKey: "acct|host-b", Name: "acct", Hostname: "host-b", RegisteredAt: t0}
		if _, err := s.UpsertInstance(ctx, acct); err != nil {
			t.Fatal(err)
		}
		all, err := s.ListInstances(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		var scopes []string
		for _, in := range all {
			scopes = append(scopes, fmt.Sprintf("%s org=%q project=%q", in.ID, in.Org, in.Project))
		}
		if diff := cmp.Diff([]string{`i2 org="" project=""`, `i1 org="eng" project=""`}, scopes); diff != "" {
			t.Errorf("ListInstances scopes (-want +got):\n%s", diff)
		}
	})
}

func TestTaskScope(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		scoped := newTask("scoped", "acc1", t0)
		scoped.Spec.Org, scoped.Spec.Project = "eng", "web"
		scoped.Spec.Capabilities = []string{"https://git.example.com", "tcp://db:5432", "binary:kubectl"}
		scoped.Spec.Connector = "github"
		plain := newTask("plain", "acc1", t0)
		mustCreate(t, s, scoped, plain)
		if diff := cmp.Diff(stored(scoped), mustGet(t, s, "acc1", "scoped"), equateEmpty); diff != "" {
			t.Errorf("GetTask (-want +got):\n%s", diff)
		}
		for _, tt := range []struct{ id, org, project string }{{"scoped", "eng", "web"}, {"plain", "", ""}} {
			var org, project string
			if err := s.reader.QueryRowContext(ctx, s.rebind("SELECT org, project FROM tasks WHERE id = ?"), tt.id).Scan(&org, &project); err != nil {
				t.Fatal(err)
			}
			if org != tt.org || project != tt.project {
				t.Errorf("%s: columns org=%q project=%q, want %q %q", tt.id, org, project, tt.org, tt.project)
			}
		}
	})
}

func TestConnectors(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		gh := Connector{AccountID: "acc1", Name: "github", URL: "https://github.example.com", Type: "git",
			Selectors: []string{"linux", "git"}, CreatedAt: t0}
		k8s := Connector{AccountID: "acc1", Name: "cluster", URL: "https://k8s.example.com:6443", Type: "kubernetes",
			CreatedAt: at(time.Minute)}
		other := Connector{AccountID: "acc2", Name: "github", URL: "https://other.example.com", CreatedAt: t0}
		for _, c := range []Connector{gh, k8s, other} {
			if err := s.CreateConnector(ctx, c); err != nil {
				t.Fatalf("CreateConnector(%s): %v", c.Name, err)
			}
		}
		wantErr(t, "duplicate connector", s.CreateConnector(ctx, Connector{AccountID: "acc1", Name: "github", CreatedAt: t0}), ErrConflict)

		list, err := s.ListConnectors(ctx, "acc1")
		if diff := cmp.Diff([]Connector{k8s, gh}, list); err != nil || diff != "" {
			t.Errorf("ListConnectors error %v (-want +got):\n%s", err, diff)
		}
		got, err := s.GetConnector(ctx, "acc2", "github")
		if diff := cmp.Diff(other, got); err != nil || diff != "" {
			t.Errorf("GetConnector error %v (-want +got):\n%s", err, diff)
		}
		_, err = s.GetConnector(ctx, "acc1", "nope")
		wantErr(t, "GetConnector unknown", err, ErrNotFound)

		for _, inst := range []string{"i1", "i2"} {
			if err := s.SetConnectorSuccess(ctx, "acc1", "github", inst); err != nil {
				t.Fatal(err)
			}
		}
		got, err = s.GetConnector(ctx, "acc1", "github")
		wantGH := gh
		wantGH.LastSuccessInstance = "i2"
		if diff := cmp.Diff(wantGH, got); err != nil || diff != "" {
			t.Errorf("after SetConnectorSuccess, error %v (-want +got):\n%s", err, diff)
		}
		if got, _ := s.GetConnector(ctx, "acc2", "github"); got.LastSuccessInstance != "" {
			t.Errorf("SetConnectorSuccess touched another account's connector: %+v", got)
		}

		if err := s.DeleteConnector(ctx, "acc1", "github"); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "delete again", s.DeleteConnector(ctx, "acc1", "github"), ErrNotFound)
		wantErr(t, "delete unknown", s.DeleteConnector(ctx, "acc3", "cluster"), ErrNotFound)
		if err := s.SetConnectorSuccess(ctx, "acc1", "github", "i3"); err != nil {
			t.Errorf("SetConnectorSuccess of a deleted connector: %v", err)
		}
		list, err = s.ListConnectors(ctx, "acc1")
		if diff := cmp.Diff([]Connector{k8s}, list); err != nil || diff != "" {
			t.Errorf("ListConnectors after delete, error %v (-want +got):\n%s", err, diff)
		}
		if got, err := s.GetConnector(ctx, "acc2", "github"); err != nil || got.Name != "github" {
			t.Errorf("deleting acc1/github deleted acc2/github: %v", err)
		}
	})
}

// capRows counts the stored capability results, expired ones included.
func capRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.reader.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM capability_results").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, in := range []Instance{
			{ID: "a1", AccountID: "acc1", IdentityKey: "a1", RegisteredAt: t0},
			{ID: "a2", AccountID: "acc1", IdentityKey: "a2", RegisteredAt: t0},
			{ID: "b1", AccountID: "acc2", IdentityKey: "b1", RegisteredAt: t0},
		} {
			if _, err := s.UpsertInstance(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		allow := func(inst, criteria string, checked, ttl time.Duration) CapabilityResult {
			return CapabilityResult{InstanceID: inst, Criteria: criteria, OK: true, CheckedAt: at(checked), ExpiresAt: at(checked + ttl)}
		}
		denyRes := func(inst, criteria, msg string, checked, ttl time.Duration) CapabilityResult {
			return CapabilityResult{InstanceID: inst, Criteria: criteria, Error: msg, CheckedAt: at(checked), ExpiresAt: at(checked + ttl)}
		}
		const allowTTL, denyTTL = 6 * time.Hour, 5 * time.Minute

		first := []CapabilityResult{
			allow("a2", "https://git", 0, allowTTL),
			denyRes("a1", "tcp://db:5432", "connection refused", 0, denyTTL),
			allow("a1", "https://git", 0, allowTTL),
			allow("b1", "https://git", 0, allowTTL),
			allow("ghost", "binary:kubectl", 0, allowTTL), // unknown instance: all accounts only
		}
		if err := s.RecordCapabilities(ctx, first); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordCapabilities(ctx, nil); err != nil {
			t.Errorf("RecordCapabilities(nil): %v", err)
		}
		// a1's deny entry becomes an allow entry (newer), a2's allow entry
		// becomes a deny entry; a late report checked earlier changes nothing;
		// within a batch the last of two equal times wins.
		second := []CapabilityResult{
			allow("a1", "tcp://db:5432", time.Minute, allowTTL),
			denyRes("a2", "https://git", "timeout", time.Minute, denyTTL),
			denyRes("a1", "https://git", "late report", -time.Minute, denyTTL),
			denyRes("b1", "https://git", "first", time.Minute, denyTTL),
			denyRes("b1", "https://git", "second", time.Minute, denyTTL),
		}
		if err := s.RecordCapabilities(ctx, second); err != nil {
			t.Fatal(err)
		}

		tests := []struct {
			name    string
			account string
			now     time.Duration
			want    []CapabilityResult
		}{
			{"acc1", "acc1", 2 * time.Minute, []CapabilityResult{first[2], second[0], second[1]}},
			{"acc2", "acc2", 2 * time.Minute, []CapabilityResult{second[4]}},
			{"all accounts", "", 2 * time.Minute, []CapabilityResult{first[2], second[0], second[1], second[4], first[4]}},
			{"unknown account", "acc3", 2 * time.Minute, nil},
			// At 6m the deny entries (checked at 1m, 5m TTL) expire: ExpiresAt
			// must be after now.
			{"deny entries expired", "acc1", 6 * time.Minute, []CapabilityResult{first[2], second[0]}},
			{"deny entries expired, acc2", "acc2", 6 * time.Minute, nil},
			{"all expired", "", 7 * time.Hour, nil},
		}
		for _, tt := range tests {
			got, err := s.LiveCapabilities(ctx, tt.account, at(tt.now))
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: LiveCapabilities (-want +got):\n%s", tt.name, diff)
			}
		}
		// Reading at 7h purged every expired row.
		if n := capRows(t, s); n != 0 {
			t.Errorf("%d rows left after the purge", n)
		}
		// A purged criteria can be recorded again.
		again := allow("a1", "https://git", 8*time.Hour, allowTTL)
		if err := s.RecordCapabilities(ctx, []CapabilityResult{again}); err != nil {
			t.Fatal(err)
		}
		got, err := s.LiveCapabilities(ctx, "acc1", at(8*time.Hour))
		if diff := cmp.Diff([]CapabilityResult{again}, got); err != nil || diff != "" {
			t.Errorf("after re-record, error %v (-want +got):\n%s", err, diff)
		}
	})
}

func TestRecordCapabilitiesBatch(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		const instances, criteria = 10, 100
		for i := range instances {
			acc := "acc1"
			if i%2 == 1 {
				acc = "acc2"
			}
			id := fmt.Sprintf("i%02d", i)
			if _, err := s.UpsertInstance(ctx, Instance{ID: id, AccountID: acc, IdentityKey: id, RegisteredAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		batch := func(checked time.Duration, ok bool) []CapabilityResult {
			var rs []CapabilityResult
			for i := range instances {
				for c := range criteria {
					rs = append(rs, CapabilityResult{
						InstanceID: fmt.Sprintf("i%02d", i), Criteria: fmt.Sprintf("https://svc-%03d", c),
						OK: ok, CheckedAt: at(checked), ExpiresAt: at(checked + time.Hour),
					})
				}
			}
			return rs
		}
		if err := s.RecordCapabilities(ctx, batch(0, false)); err != nil {
			t.Fatal(err)
		}
		want := batch(time.Minute, true)
		if err := s.RecordCapabilities(ctx, want); err != nil {
			t.Fatal(err)
		}
		if n := capRows(t, s); n != instances*criteria {
			t.Errorf("%d rows, want %d", n, instances*criteria)
		}
		got, err := s.LiveCapabilities(ctx, "", at(2*time.Minute))
		if diff := cmp.Diff(want, got); err != nil || diff != "" {
			t.Errorf("LiveCapabilities error %v (-want +got):\n%s", err, diff)
		}
		acc1, err := s.LiveCapabilities(ctx, "acc1", at(2*time.Minute))
		if err != nil || len(acc1) != instances*criteria/2 {
			t.Errorf("acc1 has %d live results, %v; want %d", len(acc1), err, instances*criteria/2)
		}
		for _, r := range acc1 {
			var i int
			fmt.Sscanf(r.InstanceID, "i%d", &i)
			if i%2 != 0 {
				t.Fatalf("acc1 result of acc2's instance %s", r.InstanceID)
			}
		}
	})
}

func TestRequeueTask(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		task := newTask("t1", "acc1", t0)
		task.Retries = 1
		mustCreate(t, s, task, newTask("queued", "acc1", t0), newTask("done", "acc1", t0))

		// First fault: attempts 1 <= retries 1, back to the queue.
		claimed := mustClaim(t, s, "t1", "i1", at(time.Minute))
		if err := s.MarkStarted(ctx, "t1", 1, at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		now := at(2 * time.Minute)
		got, requeued, err := s.RequeueTask(ctx, "t1", 1, "i1", "capability https://git lost", 0, now)
		if err != nil {
			t.Fatal(err)
		}
		want := claimed.WithoutSecretValues()
		want.Status = protocol.StatusQueued
		want.DeniedInstances = []string{"i1"}
		want.InstanceID, want.DelegateName, want.DelegateHostname = "", "", ""
		want.AcquiredAt, want.StartedAt, want.LeaseExpiresAt = nil, nil, nil
		want.QueueDeadline = now.Add(time.Duration(task.QueueTimeoutMS) * time.Millisecond)
		if !requeued {
			t.Error("first fault: requeued = false")
		}
		if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
			t.Errorf("requeued task (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, mustGet(t, s, "acc1", "t1"), equateEmpty); diff != "" {
			t.Errorf("stored requeued task (-want +got):\n%s", diff)
		}
		// The faulty delegate's lease is gone.
		_, _, err = s.RequeueTask(ctx, "t1", 1, "i1", "again", 0, now)
		wantErr(t, "requeue a requeued task", err, ErrStaleLease)
		_, err = s.CompleteTask(ctx, "t1", 1, Result{Status: protocol.StatusSucceeded}, now)
		wantErr(t, "result of the faulty delegate", err, ErrStaleLease)

		// Second fault: attempts 2 > retries 1, the task fails with the reason.
		claimed = mustClaim(t, s, "t1", "i2", at(3*time.Minute))
		now = at(4 * time.Minute)
		got, requeued, err = s.RequeueTask(ctx, "t1", 2, "", "executor crashed", 0, now)
		if err != nil {
			t.Fatal(err)
		}
		want = claimed.WithoutSecretValues()
		want.Status = protocol.StatusFailed
		want.Error = "executor crashed"
		want.DeniedInstances = []string{"i1", "i2"} // "" means the holder
		want.FinishedAt = ptr(now)
		want.LeaseExpiresAt = nil
		if requeued {
			t.Error("second fault: requeued = true")
		}
		if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
			t.Errorf("failed task (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, mustGet(t, s, "acc1", "t1"), equateEmpty); diff != "" {
			t.Errorf("stored failed task (-want +got):\n%s", diff)
		}

		mustClaim(t, s, "done", "i1", t0)
		if _, err := s.CompleteTask(ctx, "done", 1, Result{Status: protocol.StatusSucceeded}, t0); err != nil {
			t.Fatal(err)
		}
		stale := []struct {
			name    string
			id      string
			epoch   int64
			wantErr error
		}{
			{"failed task", "t1", 2, ErrStaleLease},
			{"queued task", "queued", 0, ErrStaleLease},
			{"succeeded task", "done", 1, ErrStaleLease},
			{"unknown task", "nope", 1, ErrNotFound},
		}
		for _, tt := range stale {
			before, _ := s.GetTask(ctx, "acc1", tt.id)
			_, _, err := s.RequeueTask(ctx, tt.id, tt.epoch, "i9", "x", 0, now)
			wantErr(t, tt.name, err, tt.wantErr)
			after, _ := s.GetTask(ctx, "acc1", tt.id)
			if diff := cmp.Diff(before, after, equateEmpty); diff != "" {
				t.Errorf("%s: refused RequeueTask changed the task (-before +after):\n%s", tt.name, diff)
			}
		}

		// Wrong epoch on a running task.
		mustClaim(t, s, "queued", "i3", t0)
		_, _, err = s.RequeueTask(ctx, "queued", 2, "i3", "x", 0, now)
		wantErr(t, "wrong epoch", err, ErrStaleLease)
		if got := mustGet(t, s, "acc1", "queued"); got.Status != protocol.StatusRunning || got.DeniedInstances != nil {
			t.Errorf("wrong epoch changed the task: %s denied %v", got.Status, got.DeniedInstances)
		}
	})
}

func TestRequeueTaskDenyListOnce(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		task := newTask("t1", "acc1", t0)
		task.Retries = 5
		mustCreate(t, s, task)
		for i, inst := range []string{"i1", "i2", "i1"} {
			mustClaim(t, s, "t1", inst, at(time.Duration(i)*time.Minute))
			if _, requeued, err := s.RequeueTask(ctx, "t1", int64(i+1), inst, "fault", 0, at(time.Duration(i)*time.Minute)); err != nil || !requeued {
				t.Fatalf("fault %d: requeued %v, %v", i, requeued, err)
			}
		}
		got := mustGet(t, s, "acc1", "t1")
		if diff := cmp.Diff([]string{"i1", "i2"}, got.DeniedInstances); diff != "" {
			t.Errorf("DeniedInstances (-want +got):\n%s", diff)
		}
		if got.Attempts != 3 || got.Epoch != 3 || got.Status != protocol.StatusQueued {
			t.Errorf("attempts %d epoch %d status %s", got.Attempts, got.Epoch, got.Status)
		}
	})
}

// TestMigrateFrom0001 builds a database the way a build with only
// migration 0001 left it, with rows in it, and checks that Open applies
// the later migrations and gives the old rows account-level scope.
func TestMigrateFrom0001(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		path := b.newDSN(t)

		old := b.openRaw(t, path)
		body, err := migrationFS.ReadFile("migrations/0001_init.sql")
		if err != nil {
			t.Fatal(err)
		}
		spec, err := encodeSpec(newTask("t1", "acc1", t0).Spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`,
			string(body),
			`INSERT INTO schema_migrations (version, applied_at) VALUES ('0001_init', 1)`,
			`INSERT INTO tokens (id, account_id, name, hash, created_at, revoked_at) VALUES ('tok1', 'acc1', 'prod', 'h1', 1, NULL)`,
			`INSERT INTO instances (id, account_id, identity_key, name, hostname, ip, tags, version, type, token_id,
				capacity, generation, connection, draining, registered_at, last_heartbeat, deregistered_at)
				VALUES ('i1', 'acc1', 'build|host-a', 'build', 'host-a', '', '[]', '1.0', 'SHELL', 'tok1', 2, 1, '', 0, 1, NULL, NULL)`,
			`INSERT INTO tasks (id, account_id, type, spec, status, exit_code, error, http_result, timeout_ms,
				queue_timeout_ms, retries, attempts, epoch, instance_id, delegate_name, delegate_hostname,
				denied_instances, created_at, acquired_at, started_at, finished_at, queue_deadline,
				lease_expires_at, log_bytes, log_omitted)
				VALUES ('t1', 'acc1', 'shell', '` + spec + `', 'queued', NULL, '', NULL, 1000, 1000, 0, 0, 0, '', '', '',
				'[]', 1, NULL, NULL, NULL, 2, NULL, 0, 0)`,
		} {
			if _, err := old.ExecContext(ctx, q); err != nil {
				t.Fatalf("build 0001 database: %v\n%s", err, q)
			}
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}

		s := openAt(t, path)
		var versions []string
		rows, err := s.reader.QueryContext(ctx, "SELECT version FROM schema_migrations ORDER BY version")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			versions = append(versions, v)
		}
		rows.Close()
		if diff := cmp.Diff(embeddedVersions(t), versions); diff != "" {
			t.Errorf("versions (-want +got):\n%s", diff)
		}

		tok, err := s.TokenByID(ctx, "tok1")
		if err != nil || tok.Org != "" || tok.Project != "" || tok.Name != "prod" {
			t.Errorf("old token: %+v, %v", tok, err)
		}
		in, err := s.GetInstance(ctx, "i1")
		if err != nil || in.Org != "" || in.Project != "" || in.Capacity != 2 || in.Description != "" {
			t.Errorf("old instance: %+v, %v", in, err)
		}
		var org, project string
		if err := s.reader.QueryRowContext(ctx, "SELECT org, project FROM tasks WHERE id = 't1'").Scan(&org, &project); err != nil || org != "" || project != "" {
			t.Errorf("old task: org=%q project=%q, %v", org, project, err)
		}
		if task := mustGet(t, s, "acc1", "t1"); task.Spec.Org != "" || task.Spec.Shell == nil {
			t.Errorf("old task spec: %+v", task.Spec)
		}
		// The old rows work with the new features.
		if err := s.CreateOrg(ctx, Org{AccountID: "acc1", Name: "eng", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteOrg(ctx, "acc1", "eng"); err != nil {
			t.Errorf("the old account-level token holds a new org: %v", err)
		}
		if _, err := s.UpsertInstance(ctx, Instance{ID: "x", AccountID: "acc1", IdentityKey: "build|host-a", TokenID: "tok1", Org: "eng", RegisteredAt: t0}); err != nil {
			t.Fatal(err)
		}
		if in, err := s.GetInstance(ctx, "i1"); err != nil || in.Org != "eng" || in.Generation != 2 {
			t.Errorf("re-registered old instance: %+v, %v", in, err)
		}
	})
}

// embeddedVersions lists the versions of the embedded migrations, in order.
func embeddedVersions(t *testing.T) []string {
	t.Helper()
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		out = append(out, strings.TrimSuffix(path.Base(n), ".sql"))
	}
	slices.Sort(out)
	return out
}

func BenchmarkRecordCapabilities1000(b *testing.B) {
	s := openTest(b)
	ctx := context.Background()
	rs := make([]CapabilityResult, 1000)
	for i := range rs {
		rs[i] = CapabilityResult{
			InstanceID: fmt.Sprintf("i%02d", i%20), Criteria: fmt.Sprintf("https://svc-%03d.example.com", i/20),
			OK: i%7 != 0, Error: "", CheckedAt: t0, ExpiresAt: at(6 * time.Hour),
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Each batch is newer than the last, so every row is replaced.
		checked := at(time.Duration(i) * time.Second)
		for j := range rs {
			rs[j].CheckedAt, rs[j].ExpiresAt = checked, checked.Add(6*time.Hour)
		}
		if err := s.RecordCapabilities(ctx, rs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/row")
}

// TestCompleteTaskRecordsConnectorSuccess: the result that ends a task of
// a connector succeeded makes its instance the connector's last success
// in the same call (the pipeline engine starts the stage's next step as
// soon as it sees the task end, and that step must find the preference);
// a failure changes nothing, a repeated result is a no-op, a deleted
// connector is no error, and another account's connector of the same
// name is left alone.
func TestCompleteTaskRecordsConnectorSuccess(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, acc := range []string{"acc1", "acc2"} {
			if err := s.CreateConnector(ctx, Connector{AccountID: acc, Name: "farm", URL: "https://farm.example", CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
		}
		steps := []struct {
			task, instance, connector, status string
			want                              string // acc1's farm's last success after the step
		}{
			{"t1", "i1", "farm", protocol.StatusSucceeded, "i1"},
			{"t2", "i2", "farm", protocol.StatusFailed, "i1"},
			{"t3", "i2", "farm", protocol.StatusSucceeded, "i2"},
			{"t4", "i1", "", protocol.StatusSucceeded, "i2"},
			{"t5", "i1", "gone", protocol.StatusSucceeded, "i2"},
		}
		for _, st := range steps {
			task := newTask(st.task, "acc1", t0)
			task.Spec.Connector = st.connector
			mustCreate(t, s, task)
			mustClaim(t, s, st.task, st.instance, t0)
			for range 2 { // a repeated result changes nothing
				if _, err := s.CompleteTask(ctx, st.task, 1, Result{Status: st.status}, at(time.Second)); err != nil {
					t.Fatalf("CompleteTask(%s): %v", st.task, err)
				}
			}
			got, err := s.GetConnector(ctx, "acc1", "farm")
			if err != nil || got.LastSuccessInstance != st.want {
				t.Errorf("after %s %s on %s (connector %q): last success %q, error %v; want %q",
					st.task, st.status, st.instance, st.connector, got.LastSuccessInstance, err, st.want)
			}
		}
		if got, _ := s.GetConnector(ctx, "acc2", "farm"); got.LastSuccessInstance != "" {
			t.Errorf("another account's connector farm: last success %q, want none", got.LastSuccessInstance)
		}
	})
}
