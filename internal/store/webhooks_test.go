package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWebhooks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		h := Webhook{ID: "wh_1", AccountID: "acc1", Org: "o1", Pipeline: "web", PrincipalKind: "user", PrincipalID: "u_1", EnabledBy: "user alice"}
		if _, err := s.SetWebhook(ctx, h, "s1", false, t0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("webhook of a pipeline that does not exist: %v, want ErrNotFound", err)
		}
		if _, _, err := s.ApplyPipeline(ctx, Pipeline{AccountID: "acc1", Org: "o1", Name: "web", Source: "x", UpdatedBy: "alice"}, t0); err != nil {
			t.Fatal(err)
		}
		got, err := s.SetWebhook(ctx, h, "s1", false, t0)
		want := h
		want.CreatedAt, want.RotatedAt, want.EnabledVersion = t0, t0, 1
		if err != nil || !cmp.Equal(want, got) {
			t.Fatalf("SetWebhook: %v (-want +got):\n%s", err, cmp.Diff(want, got))
		}
		if _, err := s.SetWebhook(ctx, Webhook{ID: "wh_2", AccountID: "acc1", Org: "o1", Pipeline: "web"}, "s2", false, t0); !errors.Is(err, ErrConflict) {
			t.Errorf("a second webhook without rotate: %v, want ErrConflict", err)
		}
		if got, err := s.WebhookOf(ctx, "acc1", "o1", "", "web"); err != nil || !cmp.Equal(want, got) {
			t.Errorf("WebhookOf: %v (-want +got):\n%s", err, cmp.Diff(want, got))
		}
		gotH, secret, err := s.WebhookByID(ctx, "wh_1")
		if err != nil || string(secret) != "s1" || !cmp.Equal(want, gotH) {
			t.Errorf("WebhookByID: %q, %v (-want +got):\n%s", secret, err, cmp.Diff(want, gotH))
		}
		// A rotation keeps the ID, takes the new secret and principal.
		rot, err := s.SetWebhook(ctx, Webhook{ID: "wh_ignored", AccountID: "acc1", Org: "o1", Pipeline: "web", PrincipalKind: "service_account", PrincipalID: "sa_1", EnabledBy: "service account ci"}, "s2", true, at(time.Hour))
		want.PrincipalKind, want.PrincipalID, want.EnabledBy, want.RotatedAt = "service_account", "sa_1", "service account ci", at(time.Hour)
		if err != nil || !cmp.Equal(want, rot) {
			t.Errorf("rotate: %v (-want +got):\n%s", err, cmp.Diff(want, rot))
		}
		if _, secret, err := s.WebhookByID(ctx, "wh_1"); err != nil || string(secret) != "s2" {
			t.Errorf("secret after the rotation: %q, %v", secret, err)
		}
		if got, err := s.SealedKeys(ctx); err != nil || got[testKeys.Primary()] != 1 {
			t.Errorf("SealedKeys counts the webhook's secret: %v, %v", got, err)
		}

		// One run per delivery ID of a webhook.
		run := Run{ID: "r_1", AccountID: "acc1", Org: "o1", Pipeline: "web", Version: 1, Status: RunRunning, Trigger: "webhook",
			TriggeredBy: "webhook:web", CreatedAt: t0, WebhookID: "wh_1", Delivery: "d-1"}
		if _, err := s.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		dup := run
		dup.ID = "r_2"
		if _, err := s.CreateRun(ctx, dup); !errors.Is(err, ErrConflict) {
			t.Errorf("a second run of delivery d-1: %v, want ErrConflict", err)
		}
		for i, id := range []string{"r_3", "r_4"} { // no delivery ID: no limit
			r := run
			r.ID, r.Delivery = id, ""
			if _, err := s.CreateRun(ctx, r); err != nil {
				t.Errorf("run %d without a delivery ID: %v", i, err)
			}
		}
		got1, err := s.RunOfDelivery(ctx, "wh_1", "d-1")
		if err != nil || got1.ID != "r_1" || got1.WebhookID != "wh_1" || got1.Delivery != "d-1" {
			t.Errorf("RunOfDelivery: %+v, %v", got1, err)
		}
		if _, err := s.RunOfDelivery(ctx, "wh_other", "d-1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("RunOfDelivery of another webhook: %v, want ErrNotFound", err)
		}

		if err := s.DeleteWebhook(ctx, "acc1", "o1", "", "web"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteWebhook(ctx, "acc1", "o1", "", "web"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second DeleteWebhook: %v, want ErrNotFound", err)
		}
		if _, _, err := s.WebhookByID(ctx, "wh_1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("WebhookByID after delete: %v, want ErrNotFound", err)
		}
		// Deleting the pipeline deletes its webhook.
		if _, err := s.SetWebhook(ctx, Webhook{ID: "wh_3", AccountID: "acc1", Org: "o1", Pipeline: "web"}, "s3", false, t0); err != nil {
			t.Fatal(err)
		}
		if err := s.DeletePipeline(ctx, "acc1", "o1", "", "web"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.WebhookByID(ctx, "wh_3"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the webhook of a deleted pipeline: %v, want ErrNotFound", err)
		}
		if err := s.DeletePipeline(ctx, "acc1", "o1", "", "web"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second DeletePipeline: %v, want ErrNotFound", err)
		}
	})
}

// TestWebhookSuspension: an apply that asks for it suspends the webhook
// of the pipeline when it stores a new version, not when nothing changed;
// a rotation ends the suspension and records the version.
func TestWebhookSuspension(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		p := Pipeline{AccountID: "acc1", Name: "web", Source: "v1", UpdatedBy: "alice"}
		if _, _, err := s.ApplyPipeline(ctx, p, t0); err != nil {
			t.Fatal(err)
		}
		h := Webhook{ID: "wh_1", AccountID: "acc1", Pipeline: "web", PrincipalKind: "user", PrincipalID: "u_1", EnabledBy: "user alice"}
		if _, err := s.SetWebhook(ctx, h, "s1", false, t0); err != nil {
			t.Fatal(err)
		}
		if _, changed, id, err := s.ApplyPipelineSuspending(ctx, p, "why", at(time.Minute)); err != nil || changed || id != "" {
			t.Errorf("an unchanged apply: changed %v, suspended %q, %v; want neither", changed, id, err)
		}
		p.Source = "v2"
		if _, _, id, err := s.ApplyPipelineSuspending(ctx, p, "", at(time.Minute)); err != nil || id != "" {
			t.Errorf("an apply with no reason: suspended %q, %v; want none", id, err)
		}
		p.Source = "v3"
		out, changed, id, err := s.ApplyPipelineSuspending(ctx, p, "changed by bob", at(2*time.Minute))
		if err != nil || !changed || id != "wh_1" || out.Version != 3 {
			t.Fatalf("a suspending apply: %+v changed %v, suspended %q, %v", out, changed, id, err)
		}
		got, err := s.WebhookOf(ctx, "acc1", "", "", "web")
		if err != nil || got.SuspendedReason != "changed by bob" || !got.SuspendedAt.Equal(at(2*time.Minute)) || got.EnabledVersion != 1 {
			t.Errorf("after the apply: %+v, %v", got, err)
		}
		p.Source = "v4"
		if _, _, id, err := s.ApplyPipelineSuspending(ctx, p, "again", at(3*time.Minute)); err != nil || id != "" {
			t.Errorf("an apply of a suspended webhook's pipeline: suspended %q, %v; want it left as it was", id, err)
		}
		rot, err := s.SetWebhook(ctx, h, "s2", true, at(4*time.Minute))
		if err != nil || rot.SuspendedReason != "" || !rot.SuspendedAt.IsZero() || rot.EnabledVersion != 4 {
			t.Errorf("rotation: %+v, %v; want it no longer suspended, enabled for version 4", rot, err)
		}
		if got, _, err := s.WebhookByID(ctx, "wh_1"); err != nil || got.SuspendedReason != "" || got.EnabledVersion != 4 {
			t.Errorf("stored after the rotation: %+v, %v", got, err)
		}
	})
}

// TestRememberDelivery: a delivery ID is accepted once per webhook while
// remembered, expired ones are pruned, and a webhook has at most max.
func TestRememberDelivery(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		exp := at(5 * time.Minute)
		if err := s.RememberDelivery(ctx, "wh_1", "d-1", exp, 2, t0); err != nil {
			t.Fatal(err)
		}
		if err := s.RememberDelivery(ctx, "wh_1", "d-1", exp, 2, t0); !errors.Is(err, ErrConflict) {
			t.Errorf("the same ID again: %v, want ErrConflict", err)
		}
		if err := s.RememberDelivery(ctx, "wh_2", "d-1", exp, 2, t0); err != nil {
			t.Errorf("the same ID for another webhook: %v", err)
		}
		if err := s.RememberDelivery(ctx, "wh_1", "d-2", exp, 2, t0); err != nil {
			t.Fatal(err)
		}
		if err := s.RememberDelivery(ctx, "wh_1", "d-3", exp, 2, t0); !errors.Is(err, ErrTooManyDeliveries) {
			t.Errorf("a third ID with max 2: %v, want ErrTooManyDeliveries", err)
		}
		// Once expired, the rows are pruned: the ID is new again and the
		// webhook has room.
		later := at(5*time.Minute + time.Second)
		if err := s.RememberDelivery(ctx, "wh_1", "d-1", at(10*time.Minute), 2, later); err != nil {
			t.Errorf("an expired ID: %v", err)
		}
		var n int
		if err := s.r(nil).queryRow(ctx, `SELECT COUNT(*) FROM webhook_deliveries`).Scan(&n); err != nil || n != 1 {
			t.Errorf("%d rows remembered (%v), want 1: the expired ones pruned", n, err)
		}
	})
}

func TestRotationResealsWebhooks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		dsn := b.newDSN(t)
		ctx := context.Background()
		sa := openWithKeys(t, dsn, mustRing(t, 1))
		if _, _, err := sa.ApplyPipeline(ctx, Pipeline{AccountID: "acc1", Name: "web", Source: "x"}, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := sa.SetWebhook(ctx, Webhook{ID: "wh_1", AccountID: "acc1", Pipeline: "web"}, "s1", false, t0); err != nil {
			t.Fatal(err)
		}
		sba := openWithKeys(t, dsn, mustRing(t, 2, 1))
		rep, err := sba.Reseal(ctx)
		if err != nil || rep.Webhooks != 1 {
			t.Fatalf("Reseal: %+v, %v; want one webhook", rep, err)
		}
		if _, secret, err := openWithKeys(t, dsn, mustRing(t, 2)).WebhookByID(ctx, "wh_1"); err != nil || string(secret) != "s1" {
			t.Errorf("with the new key alone: %q, %v", secret, err)
		}
	})
}
