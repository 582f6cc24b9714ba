package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestAuditEventsByAction: the action filter keeps an action and those
// beneath it, or the actions that start with a prefix, in the database, with no wildcard of its
// own ("_" and "%" are plain characters) and case as written.
func TestAuditEventsByAction(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		actions := []string{"task.create", "task.cancel", "token.create", "taskx.create", "task_create", "Task.cancel", "pipeline.run", "task"}
		for i, a := range actions {
			e := AuditEvent{ID: fmt.Sprintf("e%d", i), AccountID: "acc1", At: at(time.Duration(i) * time.Minute), Principal: "alice",
				Action: a, Outcome: protocol.AuditSuccess, Status: 200}
			if err := s.AddAuditEvent(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddAuditEvent(ctx, AuditEvent{ID: "z", AccountID: "acc2", At: t0, Action: "task.create", Outcome: "success"}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			f    AuditFilter
			want []string
		}{
			{"exact", AuditFilter{Action: "task.cancel"}, []string{"e1"}},
			{"exact, nothing", AuditFilter{Action: "task.cancel."}, []string{}},
			{"an action and those beneath", AuditFilter{Action: "task"}, []string{"e7", "e1", "e0"}},
			{"prefix", AuditFilter{ActionPrefix: "task."}, []string{"e1", "e0"}},
			{"prefix without the dot", AuditFilter{ActionPrefix: "task"}, []string{"e7", "e4", "e3", "e1", "e0"}},
			{"underscore is no wildcard", AuditFilter{ActionPrefix: "task_"}, []string{"e4"}},
			{"percent is no wildcard", AuditFilter{ActionPrefix: "%"}, []string{}},
			{"case", AuditFilter{ActionPrefix: "Task."}, []string{"e5"}},
			{"prefix and user", AuditFilter{ActionPrefix: "t", Principal: "alice", Limit: 2}, []string{"e7", "e4"}},
			{"prefix, page 2", AuditFilter{ActionPrefix: "t", Limit: 2, After: &AuditCursor{At: at(4 * time.Minute), ID: "e4"}}, []string{"e3", "e2"}},
		} {
			f := tc.f
			f.AccountID = "acc1"
			es, err := s.ListAuditEvents(ctx, f)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got := []string{}
			for _, e := range es {
				got = append(got, e.ID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.name, diff)
			}
		}
	})
}
