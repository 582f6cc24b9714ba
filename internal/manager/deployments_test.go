package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/pipeline/engine"
	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// TestDeploymentLimits: BeginDeployment refuses the deployment over the
// hourly limit with a message that names the limit, the usage and when
// the next slot frees up, counts the refusal, and lets the next one
// through once the clock passes that moment; the account admin raises the
// limit through the API; EndDeployment and the listing.
func TestDeploymentLimits(t *testing.T) {
	// Whole seconds: the store keeps microseconds.
	clock := &fakeClock{now: time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)}
	tm := startTestManager(t, Config{Now: clock.Now, DeploymentsPerHour: 3, DeploymentsPerDay: 4})
	ctx := context.Background()
	acct := tm.admin.AccountID
	start := func(service string) engine.DeploymentStart {
		return engine.DeploymentStart{AccountID: acct, Org: "", Service: service, Environment: "prod", Version: "1.0",
			Pipeline: "deploy", RunID: "r1", Stage: "ship", PrincipalKind: access.KindUser, PrincipalName: "admin"}
	}
	var ids []string
	for i := range 3 {
		id, err := tm.m.engine.BeginDeployment(ctx, start("api"))
		if err != nil {
			t.Fatalf("deployment %d: %v", i+1, err)
		}
		ids = append(ids, id)
		clock.Add(10 * time.Minute)
	}
	_, err := tm.m.engine.BeginDeployment(ctx, start("api"))
	var le *engine.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("4th deployment in an hour: %v, want a *engine.LimitError", err)
	}
	want := "deployment limit reached: 3 of 3 deployments per hour used; the next slot frees up at 2026-11-23T09:00:00Z (in 30m0s)"
	if err.Error() != want {
		t.Errorf("refusal %q, want %q", err, want)
	}
	f := promtest.Scrape(t, tm.url+protocol.PathMetrics)
	if got := f.Value(t, "legate_deployments_refused_total", "limit", "hour"); got != 1 {
		t.Errorf("legate_deployments_refused_total{limit=hour} = %v, want 1", got)
	}

	// The API shows the usage and the next slot.
	admin := tm.admin.APIKey
	var lim protocol.DeploymentLimits
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathLimits, "", 200)), &lim); err != nil {
		t.Fatal(err)
	}
	next := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	if diff := cmp.Diff(protocol.DeploymentLimits{
		PerHour:        protocol.LimitUsage{Limit: 3, Used: 3, NextFree: &next},
		PerDay:         protocol.LimitUsage{Limit: 4, Used: 3},
		DefaultPerHour: 3, DefaultPerDay: 4, Now: clock.Now(),
	}, lim); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}

	// Once the first deployment is an hour old, a slot is free.
	clock.Add(30 * time.Minute)
	if _, err := tm.m.engine.BeginDeployment(ctx, start("web")); err != nil {
		t.Fatalf("deployment once a slot freed up: %v", err)
	}
	// At 9:20 the hour has one deployment, the day four, which is full:
	// the account admin raises the daily limit, bad values
	// are refused, and the audit log says who changed what.
	clock.Add(20 * time.Minute)
	if _, err := tm.m.engine.BeginDeployment(ctx, start("web")); !errors.As(err, &le) || le.Window != store.DayWindow {
		t.Fatalf("5th deployment in a day: %v, want the daily limit", err)
	}
	for _, body := range []string{`{"per_day":-1}`, `{}`, `{"per_hour":"x"}`, fmt.Sprintf(`{"per_day":%d}`, protocol.MaxDeploymentLimit+1)} {
		tm.mustAPI(t, admin, "PUT", protocol.PathLimits, body, 400)
	}
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "PUT", protocol.PathLimits, `{"per_day":10}`, 200)), &lim); err != nil {
		t.Fatal(err)
	}
	if lim.PerDay.Limit != 10 || lim.PerHour.Limit != 3 || !lim.Custom {
		t.Errorf("after raising the daily limit: %+v", lim)
	}
	events, err := tm.st.ListAuditEvents(ctx, store.AuditFilter{AccountID: acct, ResourceType: "limits"})
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, e := range events {
		if e.Outcome == "success" {
			changes = append(changes, e.Action+" by "+e.Principal+": "+e.Detail)
		}
	}
	if diff := cmp.Diff([]string{"limits.update by admin: per hour 3 (default), per day 10"}, changes); diff != "" {
		t.Errorf("audit of the change (-want +got):\n%s", diff)
	}
	if _, err := tm.m.engine.BeginDeployment(ctx, start("web")); err != nil {
		t.Fatalf("deployment after raising the daily limit: %v", err)
	}

	// A viewer sees the limits and the deployments but may not set them.
	viewer := tm.userKey(t, "vera", access.RoleViewer, access.Account)
	tm.mustAPI(t, viewer, "GET", protocol.PathLimits, "", 200)
	tm.mustAPI(t, viewer, "PUT", protocol.PathLimits, `{"per_hour":1000}`, 403)

	if err := tm.m.engine.EndDeployment(ctx, acct, ids[0], protocol.DeploymentSucceeded); err != nil {
		t.Fatal(err)
	}
	var list protocol.DeploymentList
	if err := json.Unmarshal([]byte(tm.mustAPI(t, viewer, "GET", protocol.PathDeployments+"?service=api&limit=2", "", 200)), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Deployments) != 2 || list.Next == "" || list.Deployments[0].ID != ids[2] || list.Deployments[0].TriggeredBy != "user:admin" {
		t.Fatalf("first page: %+v", list)
	}
	page := list.Next
	list = protocol.DeploymentList{}
	if err := json.Unmarshal([]byte(tm.mustAPI(t, viewer, "GET", protocol.PathDeployments+"?service=api&limit=2&page="+page, "", 200)), &list); err != nil {
		t.Fatal(err)
	}
	first := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	if diff := cmp.Diff(protocol.DeploymentList{Deployments: []protocol.Deployment{{ID: ids[0], Service: "api", Environment: "prod",
		Version: "1.0", Pipeline: "deploy", RunID: "r1", Stage: "ship", TriggeredBy: "user:admin", Status: "succeeded",
		StartedAt: first, FinishedAt: timeAt(clock.Now())}}}, list); diff != "" {
		t.Errorf("second page (-want +got):\n%s", diff)
	}
	for _, q := range []string{"?since=yesterday", "?page=nope", "?limit=0"} {
		tm.mustAPI(t, viewer, "GET", protocol.PathDeployments+q, "", 400)
	}
	// A user who may view nothing sees no deployment.
	nobody := tm.userKey(t, "nora", "", access.Account)
	if body := tm.mustAPI(t, nobody, "GET", protocol.PathDeployments, "", 200); !strings.Contains(body, `"deployments":[]`) {
		t.Errorf("listing of a user without pipeline:view: %s", body)
	}
}

func timeAt(t time.Time) *time.Time { return &t }

// TestDeploymentLimitAcrossManagers: concurrent begins through two
// managers sharing one PostgreSQL database let exactly the limit through.
func TestDeploymentLimitAcrossManagers(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	clock := &fakeClock{now: time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)}
	cfg := Config{Now: clock.Now, DeploymentsPerHour: 5}
	tms := startTestManagers(t, dsn, cfg, cfg)
	ctx := context.Background()
	const tries = 30
	var wg sync.WaitGroup
	errs := make([]error, tries)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = tms[i%2].m.engine.BeginDeployment(ctx, engine.DeploymentStart{AccountID: tms[0].admin.AccountID, Service: "api", Environment: "prod"})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		var le *engine.LimitError
		switch {
		case err == nil:
			ok++
		case !errors.As(err, &le):
			t.Errorf("begin: %v", err)
		}
	}
	if ok != 5 {
		t.Errorf("%d concurrent begins on two managers: %d through, want 5", tries, ok)
	}
	if st, body := tms[1].api(t, tms[1].admin.APIKey, "GET", protocol.PathDeployments, ""); st != http.StatusOK || strings.Count(body, `"id"`) != 5 {
		t.Errorf("listing: %d %s", st, body)
	}
}
