package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/promtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/queue"
)

// TestQueueSignalsPerSelectorSet queues tasks with selector sets written
// in different case, order and with duplicates, and more distinct sets
// than the per-account bound, and reads the queue signals over HTTP: the
// summary of GET /api/v1/queue, the one-set answer a KEDA metrics-api
// scaler reads with a bearer API key, and the series of /metrics, whose
// selector sets past the bound are folded into one "other" bucket.
func TestQueueSignalsPerSelectorSet(t *testing.T) {
	clock := &fakeClock{now: time.Now().Truncate(time.Second)}
	tm := startTestManager(t, Config{Now: clock.Now, HeartbeatInterval: time.Hour})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	submit := func(sels ...string) {
		t.Helper()
		if _, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Selectors: sels}); err != nil {
			t.Fatal(err)
		}
	}
	// The oldest: two tasks of one set, written two ways.
	submit("GPU", " linux")
	submit("linux", "gpu", "gpu")
	clock.Add(10 * time.Second)
	submit("Linux", "GPU")
	submit()
	submit("linux")
	clock.Add(5 * time.Second)
	// More distinct sets than are shown one by one: one task each, the
	// oldest of them 5 s old.
	extra := queue.MaxSelectorSets + 2
	for i := range extra {
		submit(fmt.Sprintf("pool-%02d", i))
		if i == 0 {
			clock.Add(5 * time.Second)
		}
	}

	sum, err := admin.Queue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Queued != 5+extra || sum.OldestSeconds != 20 || len(sum.Sets) != queue.MaxSelectorSets+1 {
		t.Fatalf("summary: queued %d oldest %ds, %d sets, want %d, 20s, %d sets", sum.Queued, sum.OldestSeconds, len(sum.Sets), 5+extra, queue.MaxSelectorSets+1)
	}
	first := sum.Sets[0]
	if !reflect.DeepEqual(first.Selectors, []string{"gpu", "linux"}) || first.Queued != 3 || first.OldestSeconds != 20 {
		t.Errorf("largest set: %+v, want gpu,linux with 3 tasks, oldest 20s", first)
	}
	other := sum.Sets[len(sum.Sets)-1]
	shown := 0
	for _, s := range sum.Sets[:len(sum.Sets)-1] {
		shown += s.Queued
	}
	if !other.Other || other.Queued != sum.Queued-shown || other.Queued != 5+extra-shown {
		t.Errorf("other bucket: %+v, want the %d tasks of the sets not shown", other, sum.Queued-shown)
	}

	// The answer for one set, as KEDA's metrics-api scaler asks for it:
	// a bearer API key, selectors in any case and order.
	sig := getQueueSignal(t, tm.url+protocol.PathQueue+"?selectors=Linux,gpu", tm.admin.APIKey)
	if sig.Queued != 3 || sig.OldestSeconds != 20 || sig.Eligible != 5 || sig.EligibleOldestSeconds != 20 {
		t.Errorf("signal of gpu,linux: %+v, want 3 queued (20s), 5 eligible (the set, linux alone, none)", sig)
	}
	if got := getQueueSignal(t, tm.url+protocol.PathQueue+"?selectors=nothing-waits", tm.admin.APIKey); got.Queued != 0 || got.OldestSeconds != 0 || got.Eligible != 1 {
		t.Errorf("signal of an idle set: %+v, want 0 queued, 1 eligible (the task without selectors)", got)
	}
	req, _ := http.NewRequest("GET", tm.url+protocol.PathQueue+"?selectors=gpu", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without an API key: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	tooMany := strings.Repeat("a,", queue.MaxQuerySelectors) + "b"
	if _, err := admin.QueueSignal(ctx, strings.Split(tooMany, ",")); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("too many selectors: %v, want a refusal that says the bound", err)
	}

	f := promtest.Scrape(t, tm.url+protocol.PathMetrics)
	acct := tm.admin.AccountID
	if got := f.Value(t, queue.MetricQueued, "account", acct, "selectors", "gpu,linux"); got != 3 {
		t.Errorf("%s{gpu,linux} = %v, want 3", queue.MetricQueued, got)
	}
	if got := f.Value(t, queue.MetricOldest, "account", acct, "selectors", "gpu,linux"); got != 20 {
		t.Errorf("%s{gpu,linux} = %v, want 20", queue.MetricOldest, got)
	}
	if got := f.Value(t, queue.MetricQueued, "account", acct, "selectors", protocol.QueueOtherSelectors); got != float64(other.Queued) {
		t.Errorf("%s{other} = %v, want %d", queue.MetricQueued, got, other.Queued)
	}
	if n := len(f[queue.MetricQueued].Series); n != queue.MaxSelectorSets+1 {
		t.Errorf("%d series of %s, want at most %d sets and the other bucket", n, queue.MetricQueued, queue.MaxSelectorSets)
	}
}

func getQueueSignal(t *testing.T, url, key string) protocol.QueueSignal {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var sig protocol.QueueSignal
	if err := json.NewDecoder(resp.Body).Decode(&sig); err != nil {
		t.Fatal(err)
	}
	return sig
}

// TestQueueSignalsAcrossManagers runs two managers on one PostgreSQL
// database: tasks queued through one and acquired through the other are
// counted the same by both, because the signal is the store's.
func TestQueueSignalsAcrossManagers(t *testing.T) {
	dsn := pgtest.NewDatabase(t) // first: dropped after the managers stop
	clock := &fakeClock{now: time.Now().Truncate(time.Second)}
	cfg := Config{Now: clock.Now, HeartbeatInterval: time.Hour}
	tms := startTestManagers(t, dsn, cfg, cfg)
	a, b := tms[0], tms[1]
	ctx := context.Background()
	onA, onB := a.client(t, a.admin.APIKey), b.client(t, b.admin.APIKey)
	var ids []string
	for range 3 {
		task, err := onA.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"gpu"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	clock.Add(3 * time.Second)
	for name, c := range map[string]*client.Client{"A": onA, "B": onB} {
		if sig, err := c.QueueSignal(ctx, []string{"gpu"}); err != nil || sig.Queued != 3 || sig.OldestSeconds != 3 {
			t.Errorf("manager %s: %+v %v, want 3 queued, oldest 3s", name, sig, err)
		}
	}
	tok, err := onB.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	poller, _ := b.registerFake(t, b.admin.AccountID, tok.Value, "grp", "gpu-host", "gpu")
	if _, err := poller.Acquire(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	clock.Add(queue.ReadInterval)
	for name, c := range map[string]*client.Client{"A": onA, "B": onB} {
		if sig, err := c.QueueSignal(ctx, []string{"gpu"}); err != nil || sig.Queued != 2 {
			t.Errorf("manager %s after an acquire through B: %+v %v, want 2 queued", name, sig, err)
		}
	}
}
