package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCurrentDeployments: per service, environment and scope, the last
// succeeded deployment by its end and the last succeeded one before it
// of another version; failed and rolled-back deployments and those still
// running are neither; the filters and scopes; a rollback's mark on its
// run and its deployment.
func TestCurrentDeployments(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		if err := s.CreateAccount(ctx, Account{ID: "acc1", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		n := 0
		// deploy records a deployment of version v that ends with status
		// (running: does not end) n minutes after t0.
		deploy := func(org, service, env, v, status, rollbackOf string) string {
			n++
			id := fmt.Sprintf("d%02d", n)
			at := t0.Add(time.Duration(n) * time.Minute)
			if _, err := s.BeginDeployment(ctx, Deployment{ID: id, AccountID: "acc1", Org: org, Service: service, Environment: env,
				Version: v, Pipeline: "ship", RunID: "r" + id, Stage: "deploy", StartedAt: at, RollbackOf: rollbackOf}, DeploymentLimits{}); err != nil {
				t.Fatal(err)
			}
			if status != DeploymentRunning {
				if _, _, err := s.EndDeployment(ctx, "acc1", id, DeploymentEnd{Status: status}, at.Add(30*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			return id
		}
		deploy("o1", "web", "prod", "1.0", DeploymentSucceeded, "")    // d01
		deploy("o1", "web", "prod", "2.0", DeploymentSucceeded, "")    // d02
		deploy("o1", "web", "prod", "2.0", DeploymentSucceeded, "")    // d03: the same version again
		deploy("o1", "web", "prod", "3.0", DeploymentRolledBack, "")   // d04
		deploy("o1", "web", "prod", "4.0", DeploymentFailed, "")       // d05
		deploy("o1", "web", "prod", "5.0", DeploymentRunning, "")      // d06
		deploy("o1", "web", "staging", "9.0", DeploymentSucceeded, "") // d07
		deploy("o2", "web", "prod", "7.0", DeploymentSucceeded, "")    // d08: another scope
		deploy("o2", "api", "prod", "", DeploymentCancelled, "")       // d09: never succeeded
		deploy("o1", "db", "prod", "", DeploymentSucceeded, "")        // d10
		deploy("o1", "db", "prod", "", DeploymentSucceeded, "d10")     // d11: no versions: the one before

		rows := func(f CurrentFilter) []string {
			f.AccountID = "acc1"
			cur, err := s.CurrentDeployments(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, c := range cur {
				r := c.Current.Org + " " + c.Current.Service + "/" + c.Current.Environment + " " + c.Current.ID
				if c.Previous != nil {
					r += " after " + c.Previous.ID
				}
				out = append(out, r)
			}
			return out
		}
		if diff := cmp.Diff([]string{"o1 db/prod d11 after d10", "o1 web/prod d03 after d01", "o2 web/prod d08", "o1 web/staging d07"}, rows(CurrentFilter{})); diff != "" {
			t.Errorf("current (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"o1 web/prod d03 after d01", "o2 web/prod d08"}, rows(CurrentFilter{Service: "web", Environment: "prod"})); diff != "" {
			t.Errorf("current of web in prod (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"o2 web/prod d08"}, rows(CurrentFilter{Service: "web", Scoped: true, Org: "o2"})); diff != "" {
			t.Errorf("current of org o2 (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"o2 web/prod d08"}, rows(CurrentFilter{Scopes: []ScopeFilter{{Org: "o2"}}})); diff != "" {
			t.Errorf("current seen from o2 (-want +got):\n%s", diff)
		}
		if got := rows(CurrentFilter{Scopes: []ScopeFilter{}}); len(got) != 0 {
			t.Errorf("current seen from no scope: %v", got)
		}
		d11, err := s.GetDeployment(ctx, "acc1", "d11")
		if err != nil || d11.RollbackOf != "d10" {
			t.Errorf("d11: %+v, %v; want a rollback of d10", d11, err)
		}
		d06, err := s.GetDeployment(ctx, "acc1", "d06")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PreviousDeployment(ctx, d06); !errors.Is(err, ErrNotFound) {
			t.Errorf("previous of a running deployment: %v, want ErrNotFound", err)
		}

		run := Run{ID: "r1", AccountID: "acc1", Pipeline: "ship", Source: "src", Status: RunRunning, Trigger: "rollback",
			TriggeredBy: "user ana", CreatedAt: t0, RollbackOf: "d03"}
		if _, err := s.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetRun(ctx, "acc1", "r1"); err != nil || got.RollbackOf != "d03" {
			t.Errorf("run %+v, %v; want a rollback of d03", got, err)
		}
	})
}
