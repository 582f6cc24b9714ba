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

// TestApproval: instances of a token that requires approval are pending
// until their delegate (name within token) is approved or rejected; the
// decision reaches every instance, replicas that register later, and
// instances that come back after their rows were deleted.
func TestApproval(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		inst := func(id, name, host, token string, approval bool) Instance {
			in := Instance{ID: id, AccountID: "acc1", IdentityKey: name + "|" + host, Name: name, Hostname: host, TokenID: token, RegisteredAt: t0}
			if approval {
				in.Approval = protocol.ApprovalPending
			}
			return in
		}
		approvals := func() map[string]string {
			t.Helper()
			list, err := s.ListInstances(ctx, "acc1")
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, in := range list {
				out[in.ID] = in.Approval
			}
			return out
		}
		mustUpsert(t, s, inst("b1", "Build", "h1", "tokA", true), inst("b2", "build", "h2", "tokA", true),
			inst("o1", "other", "h1", "tokA", true), inst("p1", "plain", "h1", "tokB", false))
		want := map[string]string{"b1": "pending", "b2": "pending", "o1": "pending", "p1": ""}
		if diff := cmp.Diff(want, approvals()); diff != "" {
			t.Fatalf("after registration (-want +got):\n%s", diff)
		}

		if _, err := s.SetApproval(ctx, "acc1", "nobody", protocol.ApprovalApproved, "admin", at(time.Minute)); !errors.Is(err, ErrNotFound) {
			t.Errorf("approve an unknown delegate: %v, want ErrNotFound", err)
		}
		if _, err := s.SetApproval(ctx, "acc1", "plain", protocol.ApprovalApproved, "admin", at(time.Minute)); !errors.Is(err, ErrNoApproval) {
			t.Errorf("approve a delegate that needs none: %v, want ErrNoApproval", err)
		}
		got, err := s.SetApproval(ctx, "acc1", "BUILD", protocol.ApprovalApproved, "admin", at(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Approval != "approved" || got[1].Approval != "approved" {
			t.Errorf("SetApproval returned %+v, want b1 and b2 approved", got)
		}
		// A new replica of the approved delegate, and a re-registration.
		mustUpsert(t, s, inst("b3", "build", "h3", "tokA", true), inst("x", "Build", "h1", "tokA", true))
		want = map[string]string{"b1": "approved", "b2": "approved", "b3": "approved", "o1": "pending", "p1": ""}
		if diff := cmp.Diff(want, approvals()); diff != "" {
			t.Errorf("after approval (-want +got):\n%s", diff)
		}

		if _, err := s.SetApproval(ctx, "acc1", "other", protocol.ApprovalRejected, "admin", at(time.Minute)); err != nil {
			t.Fatal(err)
		}
		// The rows go; the decision stays.
		if _, err := s.DeleteDelegate(ctx, "acc1", "other", at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		mustUpsert(t, s, inst("o2", "other", "h9", "tokA", true))
		if got := approvals()["o2"]; got != protocol.ApprovalRejected {
			t.Errorf("a rejected delegate that comes back after its deletion is %q, want rejected", got)
		}
		if st, err := s.InstanceApproval(ctx, "o2"); err != nil || st != protocol.ApprovalRejected {
			t.Errorf("InstanceApproval = %q, %v; want rejected", st, err)
		}
	})
}

// TestAuditEvents: records are listed newest first, filtered, paged
// and pruned.
func TestAuditEvents(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for i := range 5 {
			who := "alice"
			if i%2 == 1 {
				who = "bob"
			}
			e := AuditEvent{ID: fmt.Sprintf("e%d", i), AccountID: "acc1", At: at(time.Duration(i) * time.Minute), Principal: who,
				Action: "token.create", ResourceType: "token", Resource: fmt.Sprintf("t%d", i), Outcome: protocol.AuditSuccess, Status: 201}
			if err := s.AddAuditEvent(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddAuditEvent(ctx, AuditEvent{ID: "z", AccountID: "acc2", At: t0, Action: "x", Outcome: "success"}); err != nil {
			t.Fatal(err)
		}
		ids := func(f AuditFilter) []string {
			t.Helper()
			f.AccountID = "acc1"
			es, err := s.ListAuditEvents(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			out := []string{}
			for _, e := range es {
				out = append(out, e.ID)
			}
			return out
		}
		for _, tc := range []struct {
			name string
			f    AuditFilter
			want []string
		}{
			{"all", AuditFilter{}, []string{"e4", "e3", "e2", "e1", "e0"}},
			{"since", AuditFilter{Since: at(3 * time.Minute)}, []string{"e4", "e3"}},
			{"user", AuditFilter{Principal: "bob"}, []string{"e3", "e1"}},
			{"resource", AuditFilter{ResourceType: "token", Resource: "t2"}, []string{"e2"}},
			{"page 1", AuditFilter{Limit: 2}, []string{"e4", "e3"}},
			{"page 2", AuditFilter{Limit: 2, After: &AuditCursor{At: at(3 * time.Minute), ID: "e3"}}, []string{"e2", "e1"}},
		} {
			if diff := cmp.Diff(tc.want, ids(tc.f)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.name, diff)
			}
		}
		n, err := s.PruneAuditEvents(ctx, at(2*time.Minute), 100)
		if err != nil || n != 3 { // e0, e1 and acc2's z
			t.Errorf("PruneAuditEvents = %d, %v; want 3", n, err)
		}
		if diff := cmp.Diff([]string{"e4", "e3", "e2"}, ids(AuditFilter{})); diff != "" {
			t.Errorf("after pruning (-want +got):\n%s", diff)
		}
	})
}
