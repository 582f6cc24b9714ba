package store

import (
	"context"
	"testing"
	"time"
)

// TestQueueGroups groups queued tasks by account and normalized stored
// selectors on both backends, reads a task stored before the selectors
// column (its group is its spec), and bounds the groups read while the
// per-account totals still count every queued task.
func TestQueueGroups(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		sel := func(id, acct string, d time.Duration, sels ...string) Task {
			tk := newTask(id, acct, at(d))
			tk.Spec.Selectors = sels
			return tk
		}
		mustCreate(t, s,
			sel("a1", "acc1", 1*time.Second, "GPU", "linux"),
			sel("a2", "acc1", 2*time.Second, "linux", "gpu", "gpu"),
			sel("a3", "acc1", 3*time.Second),
			sel("b1", "acc2", 4*time.Second, "win"),
			sel("r1", "acc1", 0, "gpu", "linux"),
		)
		mustClaim(t, s, "r1", "i1", at(5*time.Second))
		// A task stored before 0035: no selectors column value.
		mustCreate(t, s, sel("old", "acc1", 6*time.Second, "legacy"))
		if _, err := s.w(nil).exec(ctx, `UPDATE tasks SET selectors = '' WHERE id = ?`, "old"); err != nil {
			t.Fatal(err)
		}
		groups, totals, err := s.QueueGroups(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) != 4 || groups[0].AccountID != "acc1" || groups[0].Selectors != `["gpu","linux"]` || groups[0].Queued != 2 || !groups[0].Oldest.Equal(at(1*time.Second)) {
			t.Errorf("groups: %+v, want gpu,linux of acc1 first with 2 tasks", groups)
		}
		var legacy bool
		for _, g := range groups {
			legacy = legacy || (g.AccountID == "acc1" && len(g.Selectors) > 0 && g.Selectors[0] == '{')
		}
		if !legacy {
			t.Errorf("groups: %+v, want the task stored without a selectors column grouped by its spec", groups)
		}
		if len(totals) != 2 || totals[0].Queued != 4 || totals[1].Queued != 1 || !totals[0].Oldest.Equal(at(1*time.Second)) {
			t.Errorf("totals: %+v, want acc1 4 (oldest 1s), acc2 1", totals)
		}
		groups, totals, err = s.QueueGroups(ctx, 1)
		if err != nil || len(groups) != 1 || len(totals) != 2 || totals[0].Queued != 4 {
			t.Errorf("one group read: %+v %+v %v, want one group and every task in the totals", groups, totals, err)
		}
	})
}
