package queue

import (
	"fmt"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/store"
)

// TestSummarizeFoldsPastTheBound reads more groups than are shown and a
// read cut at MaxGroupsRead: the sets past MaxSelectorSets go to the
// other bucket, whose count is the account's total less the sets shown
// and whose oldest is the account's when no set shown holds it.
func TestSummarizeFoldsPastTheBound(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var groups []store.QueueGroup
	for i := range MaxSelectorSets + 5 {
		groups = append(groups, store.QueueGroup{AccountID: "a", Selectors: fmt.Sprintf(`["s%02d"]`, i), Queued: 100 - i, Oldest: now.Add(-time.Minute)})
	}
	groups = append(groups, store.QueueGroup{AccountID: "b", Selectors: `["x"]`, Queued: 7, Oldest: now})
	// The account holds 1000 more tasks in groups the read left out, the
	// oldest of them an hour old.
	total := 1000
	for _, g := range groups[:MaxSelectorSets+5] {
		total += g.Queued
	}
	totals := []store.QueueGroup{{AccountID: "a", Queued: total, Oldest: now.Add(-time.Hour)}, {AccountID: "b", Queued: 7, Oldest: now}}
	sum := Summarize(groups, totals, "a", now)
	if len(sum.Sets) != MaxSelectorSets+1 || sum.Queued != total || sum.OldestSeconds != 3600 {
		t.Fatalf("summary: %d sets, %d queued, oldest %ds", len(sum.Sets), sum.Queued, sum.OldestSeconds)
	}
	shown := 0
	for _, s := range sum.Sets[:MaxSelectorSets] {
		shown += s.Queued
	}
	other := sum.Sets[MaxSelectorSets]
	if !other.Other || other.Queued != total-shown || other.OldestSeconds != 3600 {
		t.Errorf("other: %+v, want %d tasks, oldest 3600s", other, total-shown)
	}
	if b := Summarize(groups, totals, "b", now); len(b.Sets) != 1 || b.Sets[0].Queued != 7 {
		t.Errorf("account b: %+v", b)
	}
	if none := Summarize(nil, nil, "c", now); none.Queued != 0 || len(none.Sets) != 0 {
		t.Errorf("an account with nothing queued: %+v", none)
	}
}
