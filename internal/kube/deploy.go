package kube

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Deploy is one deploy: manifests applied into a namespace, the rollout of
// their workloads waited for, by a strategy.
type Deploy struct {
	Namespace string
	// Manifests: see ParseManifests.
	Manifests []string
	// Timeout bounds the wait for all rollouts, and that of a rollback.
	Timeout time.Duration
	// Rollback undoes a failed deploy: a rolling one rolls each workload
	// it changed back to the revision it had before; a canary start or a
	// blue-green deploy removes the workloads it added.
	Rollback bool
	// Poll is how often a rollout's status is read; 0 means a second.
	Poll time.Duration
	// Strategy is StrategyRolling ("" too), StrategyCanary or
	// StrategyBlueGreen; Action is what to do within a canary
	// (CanaryStart, CanaryPromote, CanaryAbort) or a blue-green
	// (BlueGreenDeploy, BlueGreenSwitch, BlueGreenSwapBack).
	Strategy, Action string
	// CanaryPercent or CanaryReplicas is the canary's share of a canary
	// start: a percentage of each Deployment's replicas (rounded up, at
	// least 1), or a number of replicas.
	CanaryPercent, CanaryReplicas int
	// Service is the Service whose selector a blue-green deploy switches.
	Service string
}

// Strategies and their actions (the values of protocol.KubernetesSpec's).
const (
	StrategyRolling   = "rolling"
	StrategyCanary    = "canary"
	StrategyBlueGreen = "blue-green"

	CanaryStart   = "start"
	CanaryPromote = "promote"
	CanaryAbort   = "abort"

	BlueGreenDeploy   = "deploy"
	BlueGreenSwitch   = "switch"
	BlueGreenSwapBack = "swap-back"
)

// Outcome is how a deploy ended.
type Outcome int

const (
	// Succeeded: applied, and every rollout completed.
	Succeeded Outcome = iota
	// Failed: refused, not applied, or a rollout failed and was not
	// rolled back (or its rollback failed).
	Failed
	// RolledBack: a rollout failed and every workload the deploy changed
	// is back where it was; or the step's own action was a way back (a
	// canary abort, a blue-green swap-back), which then has no error.
	RolledBack
)

// Result is how a deploy ended and what it left in the cluster.
type Result struct {
	Outcome Outcome
	// Workloads are the workloads the step is about, as they are after
	// it (those it rolled out; a canary's; the serving colour's).
	Workloads []Workload
	// RolledBackTo is what it rolled back to when it did: the revision
	// of each workload rolled back ("deployment/web:2"; the number alone
	// when there is one), or, for a canary abort or a blue-green step,
	// what serves now.
	RolledBackTo string
}

// Workload is one workload as a deploy left it.
type Workload struct {
	Kind, Name string
	// Images are its pod template's containers' images, in order.
	Images []string
	// Revision is a Deployment's revision, or the number of a
	// StatefulSet's or DaemonSet's newest ControllerRevision; "" when
	// unknown.
	Revision string
}

// RevisionAnnotation is where a Deployment and its ReplicaSets keep their
// revision.
const RevisionAnnotation = "deployment.kubernetes.io/revision"

// deployer is one run of a Deploy.
type deployer struct {
	c       *Client
	ns      string
	out     io.Writer
	poll    time.Duration
	timeout time.Duration
	// touched are the workloads the step is about (Result.Workloads).
	touched []applied
	// rolledBack lists what was rolled back to (Result.RolledBackTo).
	rolledBack []string
}

// Run runs d with c, writing its progress to out, and returns how it
// ended, what it left, and why it failed (nil when it succeeded).
// Everything is checked and every kind found before anything is applied.
func Run(ctx context.Context, c *Client, d Deploy, out io.Writer) (Result, error) {
	dp := &deployer{c: c, ns: d.Namespace, out: out, poll: d.Poll, timeout: d.Timeout}
	if dp.poll <= 0 {
		dp.poll = time.Second
	}
	objs, err := ParseManifests(d.Namespace, d.Manifests)
	if err != nil {
		return Result{Outcome: Failed}, err
	}
	todo := make([]applied, 0, len(objs))
	for _, o := range objs {
		r, err := c.Resource(ctx, o.APIVersion, o.Kind)
		if err != nil {
			return Result{Outcome: Failed}, fmt.Errorf("%s (%s): %w", o.Where, o.Ref(), err)
		}
		todo = append(todo, applied{obj: o, res: r})
	}
	var o Outcome
	switch d.Strategy {
	case "", StrategyRolling:
		dp.touched = workloads(todo)
		o, err = dp.rolling(ctx, todo, d.Rollback)
	case StrategyCanary:
		o, err = dp.canary(ctx, d, todo)
	case StrategyBlueGreen:
		o, err = dp.blueGreen(ctx, d, todo)
	default:
		o, err = Failed, fmt.Errorf("strategy %q is unknown: use %s, %s or %s", d.Strategy, StrategyRolling, StrategyCanary, StrategyBlueGreen)
	}
	res := Result{Outcome: o, Workloads: dp.record(ctx), RolledBackTo: strings.Join(dp.rolledBack, ", ")}
	if len(dp.rolledBack) == 1 {
		// One workload: its revision alone.
		if _, rev, ok := strings.Cut(dp.rolledBack[0], ":"); ok {
			res.RolledBackTo = rev
		}
	}
	return res, err
}

// workloads are the workloads of todo.
func workloads(todo []applied) []applied {
	var out []applied
	for _, a := range todo {
		if isWorkload(a.obj.APIVersion, a.obj.Kind) {
			out = append(out, a)
		}
	}
	return out
}

// rolling applies todo in order and waits for each workload's rollout
// (the workloads' own rolling update); with rollback, a failed rollout
// rolls each workload back to its revision from before.
func (dp *deployer) rolling(ctx context.Context, todo []applied, rollback bool) (Outcome, error) {
	before := map[string]revision{} // each workload's revision before: zero when new
	for _, a := range workloads(todo) {
		rev, err := dp.revisionOf(ctx, a)
		if err != nil {
			return Failed, err
		}
		before[a.obj.Ref()] = rev
	}
	for _, a := range todo {
		if err := dp.apply(ctx, a); err != nil {
			return Failed, err
		}
	}
	if err := dp.waitAll(ctx, workloads(todo), time.Now().Add(dp.timeout)); err != nil {
		if ctx.Err() != nil || !rollback {
			return Failed, err
		}
		fmt.Fprintf(dp.out, "rollout failed: %v\n", err)
		if rerr := dp.rollbackAll(ctx, todo, before); rerr != nil {
			return Failed, fmt.Errorf("%w; rollback failed: %v", err, rerr)
		}
		return RolledBack, fmt.Errorf("rolled back: %w", err)
	}
	return Succeeded, nil
}

// waitAll waits for the rollout of each of ws in turn.
func (dp *deployer) waitAll(ctx context.Context, ws []applied, deadline time.Time) error {
	for _, a := range ws {
		if err := dp.waitRollout(ctx, a, deadline); err != nil {
			return err
		}
		fmt.Fprintf(dp.out, "%s: rolled out\n", a.obj.Ref())
	}
	return nil
}

// apply applies one object and says what came of it.
func (dp *deployer) apply(ctx context.Context, a applied) error {
	body, err := a.obj.body(a.res, dp.ns)
	if err != nil {
		return fmt.Errorf("%s (%s): %w", a.obj.Where, a.obj.Ref(), err)
	}
	var got struct {
		Metadata struct {
			Generation int64 `json:"generation"`
		} `json:"metadata"`
	}
	if err := dp.c.Apply(ctx, a.res.Path(dp.ns, a.obj.Name), body, &got); err != nil {
		return fmt.Errorf("apply %s (%s): %w", a.obj.Ref(), a.obj.Where, err)
	}
	where := ""
	if a.res.Namespaced {
		where = " in namespace " + dp.ns
	}
	if got.Metadata.Generation > 0 {
		fmt.Fprintf(dp.out, "%s applied%s (generation %d)\n", a.obj.Ref(), where, got.Metadata.Generation)
	} else {
		fmt.Fprintf(dp.out, "%s applied%s\n", a.obj.Ref(), where)
	}
	return nil
}
