package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestUpgradePoliciesAndReports(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC)
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		if err := s.CreateAccount(ctx, Account{ID: "acc1", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		p, err := s.GetUpgradePolicy(ctx, "acc1", "", "", "Build")
		if err != nil || p != (UpgradePolicy{Name: "build"}) {
			t.Fatalf("policy of a group without one: %+v, %v", p, err)
		}
		if err := s.SetUpgradePolicy(ctx, "acc1", UpgradePolicy{Name: "Build", Pinned: "v1.2.3", UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetUpgradePolicy(ctx, "acc1", UpgradePolicy{Name: "deploy", Held: true, Ring: "canary", UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		// A second pin replaces the first.
		if err := s.SetUpgradePolicy(ctx, "acc1", UpgradePolicy{Name: "build", Pinned: "v1.2.4", UpdatedAt: t0.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
		// A group of the same name in a project is another group.
		if err := s.SetUpgradePolicy(ctx, "acc1", UpgradePolicy{Name: "build", Org: "eng", Project: "web", Ring: "early", UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		all, err := s.UpgradePolicies(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]UpgradePolicy{
			"//build":       {Name: "build", Pinned: "v1.2.4", UpdatedAt: t0.Add(time.Second)},
			"//deploy":      {Name: "deploy", Held: true, Ring: "canary", UpdatedAt: t0},
			"eng/web/build": {Name: "build", Org: "eng", Project: "web", Ring: "early", UpdatedAt: t0},
		}
		if diff := cmp.Diff(want, all); diff != "" {
			t.Errorf("policies (-want +got):\n%s", diff)
		}
		// Releasing (no pin, no hold, default ring) removes the policy.
		if err := s.SetUpgradePolicy(ctx, "acc1", UpgradePolicy{Name: "deploy"}); err != nil {
			t.Fatal(err)
		}
		if p, err := s.GetUpgradePolicy(ctx, "acc1", "", "", "deploy"); err != nil || p.Held {
			t.Errorf("released policy: %+v, %v", p, err)
		}

		r := UpgradeReport{AccountID: "acc1", Name: "Build", Hostname: "Host-1", State: "failed", Target: "v1.2.4",
			Reason: "did not connect within 1m0s", UpdatedAt: t0}
		if err := s.ReportUpgrade(ctx, r); err != nil {
			t.Fatal(err)
		}
		r2 := r
		r2.State, r2.Reason, r2.UpdatedAt = "upgrading", "", t0.Add(time.Minute)
		if err := s.ReportUpgrade(ctx, r2); err != nil {
			t.Fatal(err)
		}
		r3 := r
		r3.Org, r3.Project = "eng", "web"
		if err := s.ReportUpgrade(ctx, r3); err != nil {
			t.Fatal(err)
		}
		reports, err := s.UpgradeReports(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		wantReports := map[string]UpgradeReport{"//build|host-1": {AccountID: "acc1", Name: "build", Hostname: "host-1",
			State: "upgrading", Target: "v1.2.4", UpdatedAt: t0.Add(time.Minute)},
			"eng/web/build|host-1": {AccountID: "acc1", Org: "eng", Project: "web", Name: "build", Hostname: "host-1",
				State: "failed", Target: "v1.2.4", Reason: "did not connect within 1m0s", UpdatedAt: t0}}
		if diff := cmp.Diff(wantReports, reports); diff != "" {
			t.Errorf("reports (-want +got):\n%s", diff)
		}

		// A ring reaches a version once: the first time stays.
		at, err := s.RingReached(ctx, "acc1", "", "", "canary", "v1.2.4", t0)
		if err != nil || !at.Equal(t0) {
			t.Fatalf("ring reached: %v, %v", at, err)
		}
		if at, err := s.RingReached(ctx, "acc1", "", "", "canary", "v1.2.4", t0.Add(time.Hour)); err != nil || !at.Equal(t0) {
			t.Errorf("ring reached again: %v, %v; want the first time", at, err)
		}
		if _, err := s.RingReached(ctx, "acc1", "eng", "web", "canary", "v1.2.4", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		soaks, err := s.RingSoaks(ctx, "acc1", "v1.2.4")
		if err != nil || len(soaks) != 2 || !soaks["//canary"].Equal(t0) || !soaks["eng/web/canary"].Equal(t0.Add(time.Hour)) {
			t.Errorf("soaks: %v, %v", soaks, err)
		}
	})
}
