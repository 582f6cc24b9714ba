package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Deploy is one deploy: manifests applied into a namespace, the rollout of
// their workloads waited for.
type Deploy struct {
	Namespace string
	// Manifests: see ParseManifests.
	Manifests []string
	// Timeout bounds the wait for all rollouts, and that of a rollback.
	Timeout time.Duration
	// Rollback rolls each Deployment the deploy changed back to the
	// revision it had before when a rollout fails.
	Rollback bool
	// Poll is how often a rollout's status is read; 0 means a second.
	Poll time.Duration
}

// Outcome is how a deploy ended.
type Outcome int

const (
	// Succeeded: applied, and every rollout completed.
	Succeeded Outcome = iota
	// Failed: refused, not applied, or a rollout failed and was not
	// rolled back (or its rollback failed).
	Failed
	// RolledBack: a rollout failed and every Deployment the deploy
	// changed is back at its revision from before, rolled out.
	RolledBack
)

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
}

// Run runs d with c, writing its progress to out, and returns how it
// ended and why (nil when it succeeded). Everything is checked and every
// kind found before anything is applied.
func Run(ctx context.Context, c *Client, d Deploy, out io.Writer) (Outcome, error) {
	dp := &deployer{c: c, ns: d.Namespace, out: out, poll: d.Poll, timeout: d.Timeout}
	if dp.poll <= 0 {
		dp.poll = time.Second
	}
	objs, err := ParseManifests(d.Namespace, d.Manifests)
	if err != nil {
		return Failed, err
	}
	todo := make([]applied, 0, len(objs))
	for _, o := range objs {
		r, err := c.Resource(ctx, o.APIVersion, o.Kind)
		if err != nil {
			return Failed, fmt.Errorf("%s (%s): %w", o.Where, o.Ref(), err)
		}
		todo = append(todo, applied{obj: o, res: r})
	}
	before := map[string]string{} // the revision of each Deployment before: "" when new
	for _, a := range todo {
		if a.obj.Kind == "Deployment" && a.obj.APIVersion == "apps/v1" {
			rev, err := dp.revision(ctx, a)
			if err != nil {
				return Failed, err
			}
			before[a.obj.Name] = rev
		}
	}
	for _, a := range todo {
		if err := dp.apply(ctx, a); err != nil {
			return Failed, err
		}
	}
	deadline := time.Now().Add(d.Timeout)
	for _, a := range todo {
		if !isWorkload(a.obj.APIVersion, a.obj.Kind) {
			continue
		}
		if err := dp.waitRollout(ctx, a, deadline); err != nil {
			if ctx.Err() != nil || !d.Rollback {
				return Failed, err
			}
			fmt.Fprintf(out, "rollout failed: %v\n", err)
			if rerr := dp.rollbackAll(ctx, todo, before); rerr != nil {
				return Failed, fmt.Errorf("%w; rollback failed: %v", err, rerr)
			}
			return RolledBack, fmt.Errorf("rolled back: %w", err)
		}
		fmt.Fprintf(out, "%s: rolled out\n", a.obj.Ref())
	}
	return Succeeded, nil
}

// apply applies one object and says what came of it.
func (d *deployer) apply(ctx context.Context, a applied) error {
	body, err := a.obj.body(a.res, d.ns)
	if err != nil {
		return fmt.Errorf("%s (%s): %w", a.obj.Where, a.obj.Ref(), err)
	}
	var got struct {
		Metadata struct {
			Generation int64 `json:"generation"`
		} `json:"metadata"`
	}
	if err := d.c.Apply(ctx, a.res.Path(d.ns, a.obj.Name), body, &got); err != nil {
		return fmt.Errorf("apply %s (%s): %w", a.obj.Ref(), a.obj.Where, err)
	}
	where := ""
	if a.res.Namespaced {
		where = " in namespace " + d.ns
	}
	if got.Metadata.Generation > 0 {
		fmt.Fprintf(d.out, "%s applied%s (generation %d)\n", a.obj.Ref(), where, got.Metadata.Generation)
	} else {
		fmt.Fprintf(d.out, "%s applied%s\n", a.obj.Ref(), where)
	}
	return nil
}

// revision is the revision of a Deployment now, "" when there is none.
func (d *deployer) revision(ctx context.Context, a applied) (string, error) {
	var w workload
	err := d.c.Get(ctx, a.res.Path(d.ns, a.obj.Name), &w)
	if IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s before applying: %w", a.obj.Ref(), err)
	}
	return w.Metadata.Annotations[RevisionAnnotation], nil
}

// rollbackAll rolls back each Deployment of todo that the deploy changed.
func (d *deployer) rollbackAll(ctx context.Context, todo []applied, before map[string]string) error {
	var errs []error
	rolled := false
	for _, a := range todo {
		prev, ok := before[a.obj.Name]
		if !ok || a.obj.Kind != "Deployment" {
			if isWorkload(a.obj.APIVersion, a.obj.Kind) {
				fmt.Fprintf(d.out, "%s: not rolled back (only Deployments are)\n", a.obj.Ref())
			}
			continue
		}
		if prev == "" {
			fmt.Fprintf(d.out, "%s: created by this deploy, no earlier revision to roll back to; left as it is\n", a.obj.Ref())
			errs = append(errs, fmt.Errorf("%s has no earlier revision", a.obj.Ref()))
			continue
		}
		changed, err := d.rollback(ctx, a, prev)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rolled = rolled || changed
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if !rolled {
		return errors.New("nothing this deploy changed could be rolled back")
	}
	return nil
}

// replicaSets is the part of a ReplicaSet list that a rollback reads.
type replicaSets struct {
	Items []struct {
		Metadata struct {
			Name            string            `json:"name"`
			Annotations     map[string]string `json:"annotations"`
			OwnerReferences []struct {
				UID        string `json:"uid"`
				Controller *bool  `json:"controller"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	} `json:"items"`
}

// rollback puts the pod template of the Deployment's ReplicaSet at
// revision prev back into the Deployment (as kubectl rollout undo does),
// and waits for that rollout. changed is false when the Deployment already
// runs that revision's template.
func (d *deployer) rollback(ctx context.Context, a applied, prev string) (changed bool, err error) {
	path := a.res.Path(d.ns, a.obj.Name)
	var w workload
	if err := d.c.Get(ctx, path, &w); err != nil {
		return false, fmt.Errorf("roll back %s: %w", a.obj.Ref(), err)
	}
	cur := w.Metadata.Annotations[RevisionAnnotation]
	if cur == prev {
		fmt.Fprintf(d.out, "%s: still at revision %s, nothing to roll back\n", a.obj.Ref(), prev)
		return false, nil
	}
	var rss replicaSets
	if err := d.c.List(ctx, "/apis/apps/v1/namespaces/"+d.ns+"/replicasets", w.Spec.Selector.String(), "", &rss); err != nil {
		return false, fmt.Errorf("roll back %s: list its ReplicaSets: %w", a.obj.Ref(), err)
	}
	var tmpl map[string]any
	for _, rs := range rss.Items {
		owned := false
		for _, o := range rs.Metadata.OwnerReferences {
			owned = owned || o.UID == w.Metadata.UID && o.Controller != nil && *o.Controller
		}
		if owned && rs.Metadata.Annotations[RevisionAnnotation] == prev {
			tmpl = rs.Spec.Template
		}
	}
	if tmpl == nil {
		return false, fmt.Errorf("roll back %s: no ReplicaSet of revision %s is left (revisionHistoryLimit?)", a.obj.Ref(), prev)
	}
	if meta, ok := tmpl["metadata"].(map[string]any); ok {
		if labels, ok := meta["labels"].(map[string]any); ok {
			delete(labels, "pod-template-hash")
		}
	}
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template", "value": tmpl}})
	if err != nil {
		return false, err
	}
	if err := d.c.Patch(ctx, path, patch, nil); err != nil {
		return false, fmt.Errorf("roll back %s: %w", a.obj.Ref(), err)
	}
	fmt.Fprintf(d.out, "%s: rolling back from revision %s to the template of revision %s\n", a.obj.Ref(), cur, prev)
	if err := d.waitRollout(ctx, a, time.Now().Add(d.timeout)); err != nil {
		return true, fmt.Errorf("roll back %s: %w", a.obj.Ref(), err)
	}
	fmt.Fprintf(d.out, "%s: rolled back to the template of revision %s\n", a.obj.Ref(), prev)
	return true, nil
}
