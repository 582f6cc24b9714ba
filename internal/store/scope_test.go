package store

import (
	"context"
	"errors"
	"fmt"
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
