package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func intp(v int) *int { return &v }

// TestDeployments: begin, end and list deployments; the rolling windows,
// the account's own limits over the defaults, and when the next slot
// frees up.
func TestDeployments(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		if err := s.CreateAccount(ctx, Account{ID: "acc1", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		defaults := DeploymentLimits{PerHour: 3, PerDay: 5}
		n := 0
		begin := func(at time.Time, service, env string) (Deployment, error) {
			n++
			return s.BeginDeployment(ctx, Deployment{ID: fmt.Sprintf("d%02d", n), AccountID: "acc1", Org: "o1", Project: "p1",
				Service: service, Environment: env, Version: "1.2." + fmt.Sprint(n), Pipeline: "deploy", RunID: "r1", Stage: "prod",
				PrincipalKind: "user", PrincipalName: "ana", StartedAt: at}, defaults)
		}
		d1, err := begin(t0, "api", "prod")
		if err != nil {
			t.Fatal(err)
		}
		want := Deployment{ID: "d01", AccountID: "acc1", Org: "o1", Project: "p1", Service: "api", Environment: "prod",
			Version: "1.2.1", Pipeline: "deploy", RunID: "r1", Stage: "prod", PrincipalKind: "user", PrincipalName: "ana",
			Status: DeploymentRunning, StartedAt: t0}
		if diff := cmp.Diff(want, d1); diff != "" {
			t.Errorf("BeginDeployment (-want +got):\n%s", diff)
		}
		if _, err := s.BeginDeployment(ctx, Deployment{ID: "x", AccountID: "nobody", StartedAt: t0}, defaults); !errors.Is(err, ErrNotFound) {
			t.Errorf("deployment of an unknown account: %v, want ErrNotFound", err)
		}
		for _, min := range []int{10, 20} {
			if _, err := begin(t0.Add(time.Duration(min)*time.Minute), "web", "staging"); err != nil {
				t.Fatal(err)
			}
		}
		// The hour is full (3): the next begin is refused until d01 is an
		// hour old.
		_, err = begin(t0.Add(30*time.Minute), "api", "prod")
		var le *LimitError
		if !errors.As(err, &le) {
			t.Fatalf("4th deployment in an hour: %v, want a *LimitError", err)
		}
		wantUse := WindowUsage{Window: HourWindow, Limit: 3, Used: 3, NextFree: t0.Add(time.Hour)}
		if diff := cmp.Diff(wantUse, le.Usage); diff != "" {
			t.Errorf("refusal (-want +got):\n%s", diff)
		}
		if got, want := le.Message(t0.Add(30*time.Minute)), "deployment limit reached: 3 of 3 deployments per hour used; the next slot frees up at 2026-11-22T09:00:00Z (in 30m0s)"; got != want {
			t.Errorf("message %q, want %q", got, want)
		}
		// At exactly an hour d01 has left the window.
		if _, err := begin(t0.Add(time.Hour), "api", "prod"); err != nil {
			t.Fatalf("deployment once a slot freed up: %v", err)
		}
		if _, err := begin(t0.Add(70*time.Minute), "api", "prod"); err != nil {
			t.Fatal(err)
		}
		// 5 in 24 hours: the day is full, the hour not (d02, d03 left it
		// at 1:10 and 1:20, d05, d06 in it).
		at := t0.Add(90 * time.Minute)
		_, err = begin(at, "api", "prod")
		if !errors.As(err, &le) {
			t.Fatalf("6th deployment in a day: %v, want a *LimitError", err)
		}
		if diff := cmp.Diff(WindowUsage{Window: DayWindow, Limit: 5, Used: 5, NextFree: t0.Add(24 * time.Hour)}, le.Usage); diff != "" {
			t.Errorf("daily refusal (-want +got):\n%s", diff)
		}
		u, err := s.DeploymentUsage(ctx, "acc1", defaults, at)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(DeploymentUsage{
			Hour: WindowUsage{Window: HourWindow, Limit: 3, Used: 2},
			Day:  WindowUsage{Window: DayWindow, Limit: 5, Used: 5, NextFree: t0.Add(24 * time.Hour)},
		}, u); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}

		// The account raises its daily limit; the hourly one stays the
		// default; 0 is unlimited.
		st, err := s.SetDeploymentLimits(ctx, "acc1", nil, intp(6), false, at)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(StoredLimits{PerDay: intp(6), UpdatedAt: at}, st); diff != "" {
			t.Errorf("stored limits (-want +got):\n%s", diff)
		}
		if _, err := begin(at, "api", "prod"); err != nil {
			t.Fatalf("deployment after raising the daily limit: %v", err)
		}
		if _, err := s.SetDeploymentLimits(ctx, "acc1", intp(0), intp(0), false, at); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := begin(at, "api", "prod"); err != nil {
				t.Fatalf("deployment without limits: %v", err)
			}
		}
		u, err = s.DeploymentUsage(ctx, "acc1", defaults, at)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(DeploymentUsage{Custom: true, Hour: WindowUsage{Window: HourWindow, Used: 6}, Day: WindowUsage{Window: DayWindow, Used: 9}}, u); diff != "" {
			t.Errorf("usage without limits (-want +got):\n%s", diff)
		}
		// Reset: the defaults again.
		st, err = s.SetDeploymentLimits(ctx, "acc1", nil, nil, true, at)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(StoredLimits{UpdatedAt: at}, st); diff != "" {
			t.Errorf("reset limits (-want +got):\n%s", diff)
		}
		if got, err := s.StoredDeploymentLimits(ctx, "acc1"); err != nil || !cmp.Equal(st, got) {
			t.Errorf("StoredDeploymentLimits = %+v, %v; want %+v", got, err, st)
		}

		// End: once; a second end changes nothing.
		end := t0.Add(5 * time.Minute)
		// The verifications and the reason are kept with it.
		verifs := `[{"step":"verify","verdict":"failed","reason":"error_rate: 0.2 is not < 0.01"}]`
		d, ended, err := s.EndDeployment(ctx, "acc1", "d01", DeploymentEnd{Status: DeploymentRolledBack, Records: `[{"type":"kubernetes"}]`,
			Verifications: verifs, Reason: "verification failed: error_rate"}, end)
		if err != nil || !ended {
			t.Fatalf("end: ended %v, %v", ended, err)
		}
		want.Status, want.FinishedAt, want.Records = DeploymentRolledBack, &end, `[{"type":"kubernetes"}]`
		want.Verifications, want.Reason = verifs, "verification failed: error_rate"
		if diff := cmp.Diff(want, d); diff != "" {
			t.Errorf("EndDeployment (-want +got):\n%s", diff)
		}
		if d, ended, err := s.EndDeployment(ctx, "acc1", "d01", DeploymentEnd{Status: DeploymentFailed}, end.Add(time.Minute)); err != nil || ended || !cmp.Equal(want, d) {
			t.Errorf("second end: %+v, ended %v, %v; want it unchanged", d, ended, err)
		}
		if _, _, err := s.EndDeployment(ctx, "acc1", "nope", DeploymentEnd{Status: DeploymentFailed}, end); !errors.Is(err, ErrNotFound) {
			t.Errorf("end of an unknown deployment: %v", err)
		}
		if _, _, err := s.EndDeployment(ctx, "acc1", "d02", DeploymentEnd{Status: "running"}, end); err == nil {
			t.Errorf("end with status running: no error")
		}
		if got, err := s.GetDeployment(ctx, "acc1", "d01"); err != nil || !cmp.Equal(want, got) {
			t.Errorf("GetDeployment = %+v, %v", got, err)
		}

		// Listing: newest first, filters, pages.
		ids := func(f DeploymentFilter) []string {
			t.Helper()
			f.AccountID = "acc1"
			ds, err := s.ListDeployments(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, d := range ds {
				out = append(out, d.ID)
			}
			return out
		}
		for _, tc := range []struct {
			name string
			f    DeploymentFilter
			want []string
		}{
			{"all", DeploymentFilter{}, []string{"d11", "d10", "d09", "d08", "d06", "d05", "d03", "d02", "d01"}},
			{"service", DeploymentFilter{Service: "web"}, []string{"d03", "d02"}},
			{"environment", DeploymentFilter{Environment: "prod", Since: t0.Add(time.Hour)}, []string{"d11", "d10", "d09", "d08", "d06", "d05"}},
			{"limit", DeploymentFilter{Limit: 2}, []string{"d11", "d10"}},
			{"page", DeploymentFilter{Limit: 3, Before: &Deployment{ID: "d08", StartedAt: at}}, []string{"d06", "d05", "d03"}},
			{"scope", DeploymentFilter{Scopes: []ScopeFilter{{Org: "o2"}}}, nil},
			{"scope of the project", DeploymentFilter{Scopes: []ScopeFilter{{Org: "o1", Project: "p1"}}, Service: "web"}, []string{"d03", "d02"}},
		} {
			if diff := cmp.Diff(tc.want, ids(tc.f)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.name, diff)
			}
		}
	})
}

// TestBeginDeploymentConcurrent: many begins at once, from two stores on
// one database (two managers), let exactly the limit through.
func TestBeginDeploymentConcurrent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.newDSN(t)
		s1 := openAt(t, dsn)
		s2 := openAt(t, dsn)
		ctx := context.Background()
		if err := s1.CreateAccount(ctx, Account{ID: "acc1", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		const limit, tries = 7, 40
		defaults := DeploymentLimits{PerHour: limit, PerDay: 100}
		var wg sync.WaitGroup
		errs := make([]error, tries)
		start := make(chan struct{})
		for i := range tries {
			st := s1
			if i%2 == 1 {
				st = s2
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = st.BeginDeployment(ctx, Deployment{ID: fmt.Sprintf("d%02d", i), AccountID: "acc1", Service: "api",
					Environment: "prod", StartedAt: t0.Add(time.Duration(i) * time.Second)}, defaults)
			}()
		}
		close(start)
		wg.Wait()
		ok, refused := 0, 0
		for _, err := range errs {
			var le *LimitError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &le):
				refused++
			default:
				t.Errorf("begin: %v", err)
			}
		}
		if ok != limit || refused != tries-limit {
			t.Errorf("%d begins: %d through, %d refused; want %d through", tries, ok, refused, limit)
		}
		ds, err := s1.ListDeployments(ctx, DeploymentFilter{AccountID: "acc1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != limit {
			t.Errorf("%d deployments stored, want %d", len(ds), limit)
		}
	})
}
