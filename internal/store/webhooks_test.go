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
		want.CreatedAt, want.RotatedAt = t0, t0
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
