// Package autoscaler is `legate autoscaler`: a loop that sets a delegate
// StatefulSet's replicas from the queue signal of its selector set, within
// bounds, with a cool-down before scaling in, and that scales in only a
// replica that runs nothing.
package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Defaults of the flags.
const (
	// DefaultInterval is how often the queue signal is read.
	DefaultInterval = 15 * time.Second
	// DefaultCoolDown is how long after the last change of replicas the
	// autoscaler waits before it scales in (scaling out does not wait: a
	// queue that grows is served at once).
	DefaultCoolDown = 2 * time.Minute
	// DefaultTasksPerReplica is the tasks one replica is sized for (its
	// DELEGATE_CAPACITY).
	DefaultTasksPerReplica = 1
	// MaxReplicas bounds MAX: the signal names every pod up to it.
	MaxReplicas = 200
	// StepTimeout bounds one step's requests: a manager or API server
	// that does not answer costs one step, not the loop.
	StepTimeout = 30 * time.Second
)

// Manager is what the autoscaler asks the manager.
type Manager interface {
	QueueSignal(ctx context.Context, selectors []string) (protocol.QueueSignal, error)
	ListDelegatesPage(ctx context.Context, q protocol.DelegateQuery) (protocol.DelegateList, error)
}

// Cluster reads and sets the StatefulSet's replicas.
type Cluster interface {
	StatefulSetReplicas(ctx context.Context, ns, statefulSet string) (int, error)
	ScaleStatefulSet(ctx context.Context, ns, statefulSet string, replicas int) error
}

// Config is one autoscaler: which StatefulSet, for which delegates and
// selector set, within which bounds.
type Config struct {
	Namespace, StatefulSet string
	// Delegate is the delegates' DELEGATE_NAME; their hostnames are the
	// pods' names, STATEFULSET-ORDINAL.
	Delegate string
	// Selectors is the set of the queue signal: the delegates' tags.
	Selectors       []string
	Min, Max        int
	TasksPerReplica int
	Interval        time.Duration
	CoolDown        time.Duration
	Manager         Manager
	Cluster         Cluster
	Log             *slog.Logger
	Now             func() time.Time
}

// Autoscaler is one running autoscaler.
type Autoscaler struct {
	cfg        Config
	lastChange time.Time
	waitingFor string // the replica whose task holds back scaling in, logged once
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Autoscaler, error) {
	switch {
	case cfg.Namespace == "" || cfg.StatefulSet == "" || cfg.Delegate == "":
		return nil, errors.New("autoscaler: the namespace, the StatefulSet and the delegate name are required")
	case cfg.Min < 0 || cfg.Max < 1 || cfg.Min > cfg.Max || cfg.Max > MaxReplicas:
		return nil, fmt.Errorf("autoscaler: bounds %d:%d: MIN:MAX with 0 <= MIN <= MAX and 1 <= MAX <= %d", cfg.Min, cfg.Max, MaxReplicas)
	case cfg.Manager == nil || cfg.Cluster == nil:
		return nil, errors.New("autoscaler: a manager client and a cluster client are required")
	}
	if cfg.TasksPerReplica <= 0 {
		cfg.TasksPerReplica = DefaultTasksPerReplica
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.CoolDown < 0 {
		cfg.CoolDown = DefaultCoolDown
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Autoscaler{cfg: cfg}, nil
}

// Run scales every Interval until ctx ends. A failed step (the manager or
// the API server unreachable) is logged and retried at the next tick:
// the replicas stay as they are meanwhile.
func (a *Autoscaler) Run(ctx context.Context) error {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, StepTimeout)
		err := a.Step(sctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			a.cfg.Log.Warn("autoscaler step failed; replicas unchanged", "statefulset", a.cfg.StatefulSet, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Step reads the signal and the replicas once and changes the replicas
// if they should: out at once to what the queue and the running tasks
// need (at most Max); in by one replica at a time after the cool-down,
// only when no task the delegates could take waits (a queued task goes
// to a replica that is there, never to one on its way out) and the
// replica that goes (the highest ordinal) runs nothing.
func (a *Autoscaler) Step(ctx context.Context) error {
	c := a.cfg
	sig, err := c.Manager.QueueSignal(ctx, a.selectors())
	if err != nil {
		return fmt.Errorf("read the queue signal: %w", err)
	}
	running, byHost, err := a.running(ctx)
	if err != nil {
		return err
	}
	cur, err := c.Cluster.StatefulSetReplicas(ctx, c.Namespace, c.StatefulSet)
	if err != nil {
		return err
	}
	want := min(max((sig.Eligible+running+c.TasksPerReplica-1)/c.TasksPerReplica, c.Min), c.Max)
	now := c.Now()
	switch {
	case want > cur:
		return a.set(ctx, cur, want, now, "queued", sig.Eligible, "running", running)
	case want < cur && sig.Eligible == 0 && now.Sub(a.lastChange) >= c.CoolDown:
		last := c.StatefulSet + "-" + strconv.Itoa(cur-1)
		if n := byHost[last]; n > 0 {
			if a.waitingFor != last {
				c.Log.Info("not scaling in: the highest-ordinal replica runs tasks", "replica", last, "running", n)
				a.waitingFor = last
			}
			return nil
		}
		return a.set(ctx, cur, cur-1, now, "queued", sig.Eligible, "running", running)
	}
	return nil
}

// selectors is the set whose queue sizes the StatefulSet
// (protocol.PoolSelectors): a task pinned to one replica counts too.
func (a *Autoscaler) selectors() []string {
	return protocol.PoolSelectors(a.cfg.Delegate, a.cfg.StatefulSet, a.cfg.Selectors, a.cfg.Max)
}

func (a *Autoscaler) set(ctx context.Context, from, to int, now time.Time, why ...any) error {
	if err := a.cfg.Cluster.ScaleStatefulSet(ctx, a.cfg.Namespace, a.cfg.StatefulSet, to); err != nil {
		return err
	}
	a.lastChange, a.waitingFor = now, ""
	a.cfg.Log.Info("scaled", append([]any{"statefulset", a.cfg.StatefulSet, "from", from, "to", to}, why...)...)
	return nil
}

// running counts the tasks the StatefulSet's delegates run, in all and
// per hostname (pod name).
func (a *Autoscaler) running(ctx context.Context) (int, map[string]int, error) {
	byHost := map[string]int{}
	total := 0
	q := protocol.DelegateQuery{Name: a.cfg.Delegate}
	for range maxDelegatePages {
		l, err := a.cfg.Manager.ListDelegatesPage(ctx, q)
		if err != nil {
			return 0, nil, fmt.Errorf("list the delegates %s: %w", a.cfg.Delegate, err)
		}
		for _, d := range l.Delegates {
			if d.Name != a.cfg.Delegate {
				continue
			}
			byHost[d.Hostname] += d.RunningTasks
			total += d.RunningTasks
		}
		if l.Next == "" {
			return total, byHost, nil
		}
		q.Page = l.Next
	}
	return total, byHost, nil
}

// maxDelegatePages bounds the pages of delegates one step reads.
const maxDelegatePages = 100
