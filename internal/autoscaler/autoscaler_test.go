package autoscaler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

type fakeManager struct {
	eligible  int
	running   map[string]int // by hostname
	asked     []string
	signalErr error
}

func (f *fakeManager) QueueSignal(_ context.Context, sels []string) (protocol.QueueSignal, error) {
	f.asked = sels
	return protocol.QueueSignal{Eligible: f.eligible}, f.signalErr
}

func (f *fakeManager) ListDelegatesPage(_ context.Context, q protocol.DelegateQuery) (protocol.DelegateList, error) {
	var l protocol.DelegateList
	for h, n := range f.running {
		l.Delegates = append(l.Delegates, protocol.Delegate{Name: q.Name, Hostname: h, RunningTasks: n})
	}
	return l, nil
}

type fakeCluster struct{ replicas, patches int }

func (f *fakeCluster) StatefulSetReplicas(context.Context, string, string) (int, error) {
	return f.replicas, nil
}

func (f *fakeCluster) ScaleStatefulSet(_ context.Context, _, _ string, n int) error {
	f.replicas = n
	f.patches++
	return nil
}

// TestStep walks the autoscaler's decisions on a fake clock: out at once
// to what the queue needs within MAX, in one replica at a time only after
// the cool-down, never while a task waits or while the highest ordinal
// runs one, never below MIN; a failed read changes nothing.
func TestStep(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	m := &fakeManager{running: map[string]int{}}
	k := &fakeCluster{replicas: 1}
	a, err := New(Config{Namespace: "ns", StatefulSet: "pool", Delegate: "pool", Selectors: []string{"linux"}, Min: 1, Max: 4,
		TasksPerReplica: 2, CoolDown: time.Minute, Manager: m, Cluster: k, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	step := func(want int, what string) {
		t.Helper()
		if err := a.Step(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if k.replicas != want {
			t.Fatalf("%s: replicas %d, want %d", what, k.replicas, want)
		}
	}
	m.eligible = 5
	step(3, "5 tasks wait, 2 per replica")
	if want := []string{"linux", "pool", "pool-0", "pool-1", "pool-2", "pool-3"}; len(m.asked) != len(want) {
		t.Errorf("asked for %v, want the tags, the name and every pod up to MAX: %v", m.asked, want)
	}
	m.eligible = 50
	step(4, "50 wait: MAX")
	m.eligible, m.running = 0, map[string]int{"pool-3": 1}
	step(4, "nothing waits, within the cool-down")
	now = now.Add(time.Minute)
	step(4, "the highest ordinal runs a task")
	m.running = map[string]int{"pool-0": 1}
	m.eligible = 1
	step(4, "a task waits")
	m.eligible = 0
	step(3, "pool-3 idle, nothing waits, after the cool-down")
	step(3, "within the cool-down of the last change")
	now = now.Add(time.Minute)
	step(2, "the next after another cool-down")
	now = now.Add(time.Minute)
	step(1, "one task runs: 1 replica")
	m.running = nil
	now = now.Add(time.Minute)
	step(1, "never below MIN")
	m.signalErr = errors.New("manager down")
	patches := k.patches
	if err := a.Step(ctx); err == nil || k.patches != patches {
		t.Errorf("a failed read: %v, %d patches, want an error and no change", err, k.patches-patches)
	}
	for _, bad := range []Config{{Namespace: "ns", StatefulSet: "s", Delegate: "d", Min: 3, Max: 2, Manager: m, Cluster: k},
		{Namespace: "ns", StatefulSet: "s", Delegate: "d", Min: 0, Max: MaxReplicas + 1, Manager: m, Cluster: k},
		{StatefulSet: "s", Delegate: "d", Max: 1, Manager: m, Cluster: k}} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) accepted", bad)
		}
	}
}
