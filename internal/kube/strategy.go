package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Labels the canary and blue-green strategies add to the Deployments they
// make (to their own labels, their selector and their pods').
const (
	// TrackLabel marks a canary's pods: legate.dev/track=canary.
	TrackLabel = "legate.dev/track"
	// ColorLabel marks a blue-green colour's pods: legate.dev/color=blue
	// or green; the Service's selector holds it too once switched.
	ColorLabel = "legate.dev/color"
	// CanarySuffix ends the name of a Deployment's canary (web-canary).
	CanarySuffix = "-canary"
	Blue         = "blue"
	Green        = "green"
)

// deployments are the Deployments of todo; a StatefulSet or DaemonSet is
// refused (the strategy makes copies of Deployments only).
func deployments(todo []applied, strategy string) ([]applied, error) {
	var out []applied
	for _, a := range workloads(todo) {
		if a.obj.Kind != "Deployment" {
			return nil, fmt.Errorf("%s (%s): the %s strategy deploys Deployments only: deploy a %s in a rolling step", a.obj.Where, a.obj.Ref(), strategy, a.obj.Kind)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the %s strategy needs at least one Deployment in the manifests", strategy)
	}
	return out, nil
}

// variant is a copy of the Deployment a named name whose own labels,
// selector and pods' labels hold key=value, with replicas unless < 0.
func variant(a applied, name, key, value string, replicas int) (applied, error) {
	b, err := json.Marshal(a.obj.Doc)
	if err != nil {
		return a, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return a, err
	}
	meta := mapAt(doc, "metadata")
	meta["name"] = name
	mapAt(meta, "labels")[key] = value
	spec := mapAt(doc, "spec")
	mapAt(mapAt(spec, "selector"), "matchLabels")[key] = value
	mapAt(mapAt(mapAt(spec, "template"), "metadata"), "labels")[key] = value
	if replicas >= 0 {
		spec["replicas"] = replicas
	}
	a.obj.Doc, a.obj.Name = doc, name
	return a, nil
}

// mapAt is m[key] as a mapping, made when it is not one.
func mapAt(m map[string]any, key string) map[string]any {
	v, ok := m[key].(map[string]any)
	if !ok {
		v = map[string]any{}
		m[key] = v
	}
	return v
}

// replicasOf is a Deployment manifest's spec.replicas (1 when not given,
// as the API defaults it).
func replicasOf(o Object) int {
	spec, _ := o.Doc["spec"].(map[string]any)
	switch n := spec["replicas"].(type) {
	case int:
		return n
	case int64:
		return int(n)
	case uint64:
		return int(n)
	case float64:
		return int(n)
	}
	return 1
}

// deleteAll deletes the objects of as (one already gone is no error).
func (dp *deployer) deleteAll(ctx context.Context, as []applied) error {
	var errs []error
	for _, a := range as {
		err := dp.c.Delete(ctx, a.res.Path(dp.ns, a.obj.Name))
		switch {
		case IsNotFound(err):
			fmt.Fprintf(dp.out, "%s: not there, nothing to delete\n", a.obj.Ref())
		case err != nil:
			errs = append(errs, fmt.Errorf("delete %s: %w", a.obj.Ref(), err))
		default:
			fmt.Fprintf(dp.out, "%s: deleted\n", a.obj.Ref())
		}
	}
	return errors.Join(errs...)
}

// revisionsNow lists "kind/name:revision" of each of as that exists.
func (dp *deployer) revisionsNow(ctx context.Context, as []applied) []string {
	var out []string
	for _, a := range as {
		if rev, err := dp.revisionOf(ctx, a); err == nil && rev.exists {
			out = append(out, a.obj.Ref()+":"+rev.number)
		}
	}
	return out
}

// canary runs a canary's action. start: a copy NAME-canary of each
// Deployment with a share of its replicas, beside the stable one, which
// is left as it is (a Service selecting the app's labels routes to both);
// promote: a rolling deploy of the manifests to the stable Deployments,
// then the canaries deleted; abort: the canaries deleted.
func (dp *deployer) canary(ctx context.Context, d Deploy, todo []applied) (Outcome, error) {
	stable, err := deployments(todo, StrategyCanary)
	if err != nil {
		return Failed, err
	}
	canaries := make([]applied, 0, len(stable))
	for _, a := range stable {
		n := d.CanaryReplicas
		if n <= 0 {
			n = max((replicasOf(a.obj)*d.CanaryPercent+99)/100, 1)
		}
		c, err := variant(a, a.obj.Name+CanarySuffix, TrackLabel, "canary", n)
		if err != nil {
			return Failed, err
		}
		canaries = append(canaries, c)
	}
	switch d.Action {
	case CanaryStart:
		return dp.canaryStart(ctx, d, todo, stable, canaries)
	case CanaryPromote:
		dp.touched = workloads(todo)
		o, err := dp.rolling(ctx, todo, d.Rollback)
		if o == Failed {
			fmt.Fprintf(dp.out, "promote failed: the canaries stay (an abort step deletes them)\n")
			return o, err
		}
		// Promoted, or rolled back: either way no canary is left.
		if derr := dp.deleteAll(ctx, canaries); derr != nil {
			return Failed, errors.Join(err, derr)
		}
		if o == Succeeded {
			fmt.Fprintf(dp.out, "canary promoted: the stable Deployments run the new version\n")
		}
		return o, err
	case CanaryAbort:
		dp.touched = stable
		if err := dp.deleteAll(ctx, canaries); err != nil {
			return Failed, err
		}
		dp.rolledBack = dp.revisionsNow(ctx, stable)
		fmt.Fprintf(dp.out, "canary aborted: the stable Deployments serve alone\n")
		return RolledBack, nil
	}
	return Failed, fmt.Errorf("canary action %q is unknown: use %s, %s or %s", d.Action, CanaryStart, CanaryPromote, CanaryAbort)
}

// canaryStart applies the canaries and waits for their rollout; the other
// objects of the manifests wait for the promote (a changed ConfigMap would
// change the stable version too).
func (dp *deployer) canaryStart(ctx context.Context, d Deploy, todo, stable, canaries []applied) (Outcome, error) {
	dp.touched = canaries
	for _, a := range todo {
		if !isWorkload(a.obj.APIVersion, a.obj.Kind) {
			fmt.Fprintf(dp.out, "%s: not applied by a canary start (promote applies it)\n", a.obj.Ref())
		}
	}
	for i, c := range canaries {
		fmt.Fprintf(dp.out, "%s: canary of %s with %d of its %d replicas\n", c.obj.Ref(), stable[i].obj.Ref(), replicasOf(c.obj), replicasOf(stable[i].obj))
		if err := dp.apply(ctx, c); err != nil {
			return Failed, err
		}
	}
	err := dp.waitAll(ctx, canaries, time.Now().Add(dp.timeout))
	if err == nil {
		return Succeeded, nil
	}
	if ctx.Err() != nil || !d.Rollback {
		return Failed, err
	}
	fmt.Fprintf(dp.out, "canary failed: %v\n", err)
	if derr := dp.deleteAll(ctx, canaries); derr != nil {
		return Failed, fmt.Errorf("%w; rollback failed: %v", err, derr)
	}
	dp.rolledBack = dp.revisionsNow(ctx, stable)
	return RolledBack, fmt.Errorf("rolled back (canary deleted): %w", err)
}

// service is the part of a Service a blue-green deploy reads.
type service struct {
	Spec struct {
		Selector map[string]string `json:"selector"`
	} `json:"spec"`
}

// other is the colour that is not c.
func other(c string) string {
	if c == Blue {
		return Green
	}
	return Blue
}

// blueGreen runs a blue-green action. deploy: each Deployment as the
// colour the Service does not select now (NAME-blue or NAME-green),
// waited for, then the Service's selector switched to it; the old colour
// stays. switch, swap-back: the Service switched to the other colour,
// which must be there and ready. The Service never selects a colour that
// is not ready.
func (dp *deployer) blueGreen(ctx context.Context, d Deploy, todo []applied) (Outcome, error) {
	stable, err := deployments(todo, StrategyBlueGreen)
	if err != nil {
		return Failed, err
	}
	svcRes, err := dp.c.Resource(ctx, "v1", "Service")
	if err != nil {
		return Failed, err
	}
	var svc service
	err = dp.c.Get(ctx, svcRes.Path(dp.ns, d.Service), &svc)
	exists := err == nil
	if err != nil && !IsNotFound(err) {
		return Failed, fmt.Errorf("read service/%s: %w", d.Service, err)
	}
	cur := svc.Spec.Selector[ColorLabel]
	color := func(c string) ([]applied, error) {
		var out []applied
		for _, a := range stable {
			v, err := variant(a, a.obj.Name+"-"+c, ColorLabel, c, -1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	switch d.Action {
	case BlueGreenDeploy:
		target := other(cur)
		colored, err := color(target)
		if err != nil {
			return Failed, err
		}
		return dp.blueGreenDeploy(ctx, d, todo, colored, svcRes, exists, cur, target)
	case BlueGreenSwitch, BlueGreenSwapBack:
		if !exists || (cur != Blue && cur != Green) {
			return Failed, fmt.Errorf("service/%s selects no colour (no %s in its selector): run a blue-green deploy first", d.Service, ColorLabel)
		}
		target := other(cur)
		colored, err := color(target)
		if err != nil {
			return Failed, err
		}
		dp.touched = colored
		for _, a := range colored {
			var w workload
			if err := dp.c.Get(ctx, a.res.Path(dp.ns, a.obj.Name), &w); err != nil {
				return Failed, fmt.Errorf("%s: %w: nothing to switch to; service/%s stays on %s", a.obj.Ref(), err, d.Service, cur)
			}
			if done, msg, err := rolloutStatus(a.obj.Kind, &w); !done || err != nil || w.Status.AvailableReplicas == 0 {
				dp.notReady(ctx, &w)
				return Failed, fmt.Errorf("%s is not ready (%s): service/%s stays on %s", a.obj.Ref(), strings.TrimSpace(msg+" "+errText(err)), d.Service, cur)
			}
		}
		if err := dp.selectColor(ctx, svcRes, d.Service, cur, target); err != nil {
			return Failed, err
		}
		if d.Action == BlueGreenSwapBack {
			dp.rolledBack = []string{target}
			return RolledBack, nil
		}
		return Succeeded, nil
	}
	return Failed, fmt.Errorf("blue-green action %q is unknown: use %s, %s or %s", d.Action, BlueGreenDeploy, BlueGreenSwitch, BlueGreenSwapBack)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// blueGreenDeploy deploys the colour target (colored) and switches the
// Service (from the manifests, or in the cluster) to it.
func (dp *deployer) blueGreenDeploy(ctx context.Context, d Deploy, todo, colored []applied, svcRes Resource, exists bool, cur, target string) (Outcome, error) {
	var svcDoc *applied
	var rest []applied
	for _, a := range todo {
		switch {
		case a.obj.APIVersion == "v1" && a.obj.Kind == "Service" && a.obj.Name == d.Service:
			svcDoc = &a
		case !isWorkload(a.obj.APIVersion, a.obj.Kind):
			rest = append(rest, a)
		}
	}
	if svcDoc == nil && !exists {
		return Failed, fmt.Errorf("the Service %s is neither in the manifests nor in namespace %s: add it to the manifests", d.Service, dp.ns)
	}
	dp.touched = colored
	serving := cur
	if serving == "" {
		serving = "no colour"
	}
	fmt.Fprintf(dp.out, "deploying colour %s; service/%s selects %s now\n", target, d.Service, serving)
	for _, a := range append(rest, colored...) {
		if err := dp.apply(ctx, a); err != nil {
			return Failed, err
		}
	}
	if err := dp.waitAll(ctx, colored, time.Now().Add(dp.timeout)); err != nil {
		if ctx.Err() != nil || !d.Rollback {
			return Failed, fmt.Errorf("%w (service/%s still selects %s)", err, d.Service, serving)
		}
		fmt.Fprintf(dp.out, "colour %s failed: %v\n", target, err)
		if derr := dp.deleteAll(ctx, colored); derr != nil {
			return Failed, fmt.Errorf("%w; rollback failed: %v", err, derr)
		}
		dp.rolledBack = []string{serving}
		return RolledBack, fmt.Errorf("rolled back (colour %s deleted; service/%s still selects %s): %w", target, d.Service, serving, err)
	}
	if svcDoc != nil {
		doc := *svcDoc
		b, _ := json.Marshal(doc.obj.Doc)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return Failed, err
		}
		mapAt(mapAt(m, "spec"), "selector")[ColorLabel] = target
		doc.obj.Doc = m
		if err := dp.apply(ctx, doc); err != nil {
			return Failed, err
		}
		fmt.Fprintf(dp.out, "service/%s: selects colour %s (was %s)\n", d.Service, target, serving)
		return Succeeded, nil
	}
	if err := dp.selectColor(ctx, svcRes, d.Service, cur, target); err != nil {
		return Failed, err
	}
	return Succeeded, nil
}

// selectColor switches the Service name's selector from colour cur ("":
// none) to target; the patch tests that it still selects cur, so that a
// concurrent switch is not overwritten.
func (dp *deployer) selectColor(ctx context.Context, svcRes Resource, name, cur, target string) error {
	p := "/spec/selector/" + strings.ReplaceAll(ColorLabel, "/", "~1")
	ops := []map[string]any{}
	if cur != "" {
		ops = append(ops, map[string]any{"op": "test", "path": p, "value": cur})
	}
	ops = append(ops, map[string]any{"op": "add", "path": p, "value": target})
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := dp.c.Patch(ctx, svcRes.Path(dp.ns, name), patch, nil); err != nil {
		return fmt.Errorf("switch service/%s to colour %s: %w", name, target, err)
	}
	was := cur
	if was == "" {
		was = "no colour"
	}
	fmt.Fprintf(dp.out, "service/%s: selects colour %s (was %s)\n", name, target, was)
	return nil
}
