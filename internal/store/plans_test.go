package store

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestInFlightQueriesUseTheirIndexes: every query the store runs on the
// paths of queued and running tasks (submit, claim, start, result, the
// queue and lease sweeps, timeouts, queue stats, the running tasks of an
// instance, retention, pruning) reads tasks through an index, never by a
// scan of the whole table, which holds every finished task of the
// retention period. The partial indexes of queued and running tasks
// (migration 0019) are used only when a query names the status as a
// literal (isQueued, isRunning): a query written with a bound status
// would scan the table, and this test would say which. The queries are
// the ones the scenario below prepared (the store's statement caches),
// explained with SQLite's EXPLAIN QUERY PLAN.
func TestInFlightQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := context.Background()

	for i := range 3 {
		task := newTask(fmt.Sprintf("t%d", i), "acc1", at(time.Duration(i)*time.Second))
		mustCreate(t, s, task)
	}
	c := claimFor("t0", "i1")
	c.Capacity = 4
	claimed, err := s.ClaimTask(ctx, c, at(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h := Holder{Instance: "i1"}
	if _, err := s.StartTask(ctx, "t0", claimed.Epoch, h, at(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompleteTask(ctx, "t0", claimed.Epoch, Result{Status: protocol.StatusSucceeded, ExitCode: new(int), Holder: h}, at(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, "t1", "i1", at(6*time.Second))
	first, err := s.QueuedPage(ctx, nil, 1)
	if err != nil || len(first) != 1 {
		t.Fatalf("queued page: %v %v", first, err)
	}
	calls := []func() error{
		func() error { _, err := s.QueuedPage(ctx, &first[0], 10); return err },
		func() error { _, err := s.QueuedPastDeadline(ctx, at(time.Hour), 10); return err },
		func() error { _, _, err := s.QueueStats(ctx); return err },
		func() error { _, _, err := s.NextLeaseExpiry(ctx); return err },
		func() error { _, err := s.RunningTasksOf(ctx, "i1"); return err },
		func() error { _, err := s.TasksHeldBy(ctx, "i1", []string{"t1"}); return err },
		func() error { _, err := s.TimeoutRunning(ctx, at(time.Minute), 0); return err },
		func() error { _, err := s.ExpireLeases(ctx, at(time.Minute)); return err },
		func() error { _, err := s.DeleteFinishedTasks(ctx, at(time.Hour), 10); return err },
		func() error { _, err := s.PruneInstances(ctx, at(time.Hour), 10); return err },
		func() error { _, err := s.DeleteDelegate(ctx, "acc1", "dlg-i1", at(0)); return err },
	}
	for i, call := range calls {
		if err := call(); err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatalf("call %d: %v", i, err)
		}
	}

	var queries []string
	seen := map[string]bool{}
	for _, c := range []*stmtCache{&s.wcache, &s.rcache} {
		c.mu.Lock()
		for q := range c.m {
			if !seen[q] {
				seen[q] = true
				queries = append(queries, q)
			}
		}
		for q := range c.pending {
			if !seen[q] {
				seen[q] = true
				queries = append(queries, q)
			}
		}
		c.mu.Unlock()
	}
	sort.Strings(queries)
	readsTasks := regexp.MustCompile(`(?i)\b(FROM|JOIN|UPDATE)\s+tasks\b`)
	// A plan line that reads the tasks table whole: one on tasks (or t,
	// its alias) through no index ("SCAN tasks"; "SEARCH tasks" without
	// USING, as SQLite words a min/max it cannot take from an index), or
	// a scan of a whole index other than a partial index of in-flight
	// tasks, which holds only those.
	onTasks := regexp.MustCompile(`^(SCAN|SEARCH) (tasks|t)\b`)
	inFlight := regexp.MustCompile(`^SCAN .* USING (COVERING )?INDEX tasks_(queued|running)_`)
	checked := 0
	for _, q := range queries {
		if !readsTasks.MatchString(q) {
			continue
		}
		checked++
		rows, err := s.reader.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, make([]any, strings.Count(q, "?"))...)
		if err != nil {
			t.Fatalf("explain %q: %v", q, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()

		for _, line := range plan {
			whole := onTasks.MatchString(line) &&
				(!strings.Contains(line, " USING ") || (strings.HasPrefix(line, "SCAN ") && !inFlight.MatchString(line)))
			if whole {
				t.Errorf("this query reads every task:\n%s\nplan:\n  %s", q, strings.Join(plan, "\n  "))
				break
			}
		}
	}
	if checked < 15 {
		t.Errorf("checked %d queries on tasks, want the scenario's (at least 15): did the statement caches change?", checked)
	}
}
