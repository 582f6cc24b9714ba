package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// revision is where a workload stood before a deploy: a Deployment's
// revision (its annotation), a StatefulSet's or DaemonSet's newest
// ControllerRevision. The zero value: the workload did not exist.
type revision struct {
	exists bool
	// number is a Deployment's revision or the ControllerRevision's.
	number string
	// cr is the ControllerRevision's name (StatefulSet, DaemonSet).
	cr string
}

// controllerRevision is the part of a ControllerRevision a rollback reads.
type controllerRevision struct {
	Metadata struct {
		Name            string            `json:"name"`
		Labels          map[string]string `json:"labels"`
		OwnerReferences []ownerReference  `json:"ownerReferences"`
	} `json:"metadata"`
	Revision int64 `json:"revision"`
	Data     struct {
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	} `json:"data"`
}

type ownerReference struct {
	UID        string `json:"uid"`
	Controller *bool  `json:"controller"`
}

// ownedBy reports whether refs name uid as the controller.
func ownedBy(refs []ownerReference, uid string) bool {
	for _, o := range refs {
		if o.UID == uid && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// revisionOf is where the workload a stands now.
func (dp *deployer) revisionOf(ctx context.Context, a applied) (revision, error) {
	var w workload
	err := dp.c.Get(ctx, a.res.Path(dp.ns, a.obj.Name), &w)
	if IsNotFound(err) {
		return revision{}, nil
	}
	if err != nil {
		return revision{}, fmt.Errorf("read %s before applying: %w", a.obj.Ref(), err)
	}
	if a.obj.Kind == "Deployment" {
		return revision{exists: true, number: w.Metadata.Annotations[RevisionAnnotation]}, nil
	}
	newest, err := dp.newestRevision(ctx, a, &w)
	if err != nil {
		return revision{}, err
	}
	if newest == nil {
		return revision{exists: true}, nil
	}
	return revision{exists: true, number: strconv.FormatInt(newest.Revision, 10), cr: newest.Metadata.Name}, nil
}

// controllerRevisions lists the ControllerRevisions of the StatefulSet or
// DaemonSet w.
func (dp *deployer) controllerRevisions(ctx context.Context, a applied, w *workload) ([]controllerRevision, error) {
	var list struct {
		Items []controllerRevision `json:"items"`
	}
	if err := dp.c.List(ctx, "/apis/apps/v1/namespaces/"+dp.ns+"/controllerrevisions", w.Spec.Selector.String(), "", &list); err != nil {
		return nil, fmt.Errorf("%s: list its ControllerRevisions: %w", a.obj.Ref(), err)
	}
	var out []controllerRevision
	for _, cr := range list.Items {
		if ownedBy(cr.Metadata.OwnerReferences, w.Metadata.UID) {
			out = append(out, cr)
		}
	}
	return out, nil
}

// newestRevision is w's ControllerRevision of the highest number (nil:
// none yet).
func (dp *deployer) newestRevision(ctx context.Context, a applied, w *workload) (*controllerRevision, error) {
	crs, err := dp.controllerRevisions(ctx, a, w)
	if err != nil {
		return nil, err
	}
	var newest *controllerRevision
	for i := range crs {
		if newest == nil || crs[i].Revision > newest.Revision {
			newest = &crs[i]
		}
	}
	return newest, nil
}

// rollbackAll rolls back each workload of todo that the deploy changed.
func (dp *deployer) rollbackAll(ctx context.Context, todo []applied, before map[string]revision) error {
	var errs []error
	rolled := false
	for _, a := range workloads(todo) {
		prev := before[a.obj.Ref()]
		if !prev.exists || prev.number == "" {
			fmt.Fprintf(dp.out, "%s: created by this deploy, no earlier revision to roll back to; left as it is\n", a.obj.Ref())
			errs = append(errs, fmt.Errorf("%s has no earlier revision", a.obj.Ref()))
			continue
		}
		var changed bool
		var err error
		if a.obj.Kind == "Deployment" {
			changed, err = dp.rollbackDeployment(ctx, a, prev.number)
		} else {
			changed, err = dp.rollbackRevision(ctx, a, prev)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if changed {
			rolled = true
			dp.rolledBack = append(dp.rolledBack, a.obj.Ref()+":"+prev.number)
		}
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
			OwnerReferences []ownerReference  `json:"ownerReferences"`
		} `json:"metadata"`
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	} `json:"items"`
}

// rollbackDeployment puts the pod template of the Deployment's ReplicaSet
// at revision prev back into the Deployment (as kubectl rollout undo
// does), and waits for that rollout. changed is false when the Deployment
// already runs that revision's template.
func (dp *deployer) rollbackDeployment(ctx context.Context, a applied, prev string) (changed bool, err error) {
	path := a.res.Path(dp.ns, a.obj.Name)
	var w workload
	if err := dp.c.Get(ctx, path, &w); err != nil {
		return false, fmt.Errorf("roll back %s: %w", a.obj.Ref(), err)
	}
	cur := w.Metadata.Annotations[RevisionAnnotation]
	if cur == prev {
		fmt.Fprintf(dp.out, "%s: still at revision %s, nothing to roll back\n", a.obj.Ref(), prev)
		return false, nil
	}
	var rss replicaSets
	if err := dp.c.List(ctx, "/apis/apps/v1/namespaces/"+dp.ns+"/replicasets", w.Spec.Selector.String(), "", &rss); err != nil {
		return false, fmt.Errorf("roll back %s: list its ReplicaSets: %w", a.obj.Ref(), err)
	}
	var tmpl map[string]any
	for _, rs := range rss.Items {
		if ownedBy(rs.Metadata.OwnerReferences, w.Metadata.UID) && rs.Metadata.Annotations[RevisionAnnotation] == prev {
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
	if err := dp.replaceTemplate(ctx, a, tmpl); err != nil {
		return false, err
	}
	fmt.Fprintf(dp.out, "%s: rolling back from revision %s to the template of revision %s\n", a.obj.Ref(), cur, prev)
	if err := dp.waitRollout(ctx, a, time.Now().Add(dp.timeout)); err != nil {
		return true, fmt.Errorf("roll back %s: %w", a.obj.Ref(), err)
	}
	fmt.Fprintf(dp.out, "%s: rolled back to the template of revision %s\n", a.obj.Ref(), prev)
	return true, nil
}

// replaceTemplate puts tmpl as the pod template of a (a JSON patch).
func (dp *deployer) replaceTemplate(ctx context.Context, a applied, tmpl map[string]any) error {
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template", "value": tmpl}})
	if err != nil {
		return err
	}
	if err := dp.c.Patch(ctx, a.res.Path(dp.ns, a.obj.Name), patch, nil); err != nil {
		return fmt.Errorf("roll back %s: %w", a.obj.Ref(), err)
	}
	return nil
}

// rollbackRevision rolls a StatefulSet or DaemonSet back to the
// ControllerRevision prev as kubectl rollout undo does (its template put
// back; the controller then reuses that revision), and waits for that
// rollout. A StatefulSet does not replace a pod of the failed version
// that never became Ready (its ordered update waits for it forever), so
// such pods are deleted once the controller has seen the rollback: the
// "forced rollback" the StatefulSet documentation asks for.
func (dp *deployer) rollbackRevision(ctx context.Context, a applied, prev revision) (changed bool, err error) {
	path := a.res.Path(dp.ns, a.obj.Name)
	var w workload
	if err := dp.c.Get(ctx, path, &w); err != nil {
		return false, fmt.Errorf("roll back %s: %w", a.obj.Ref(), err)
	}
	crs, err := dp.controllerRevisions(ctx, a, &w)
	if err != nil {
		return false, fmt.Errorf("roll back %w", err)
	}
	var target, newest *controllerRevision
	for i := range crs {
		if crs[i].Metadata.Name == prev.cr {
			target = &crs[i]
		}
		if newest == nil || crs[i].Revision > newest.Revision {
			newest = &crs[i]
		}
	}
	if newest != nil && newest.Metadata.Name == prev.cr {
		fmt.Fprintf(dp.out, "%s: still at revision %s, nothing to roll back\n", a.obj.Ref(), prev.cr)
		return false, nil
	}
	if target == nil || target.Data.Spec.Template == nil {
		return false, fmt.Errorf("roll back %s: its ControllerRevision %s is gone (revisionHistoryLimit?)", a.obj.Ref(), prev.cr)
	}
	tmpl := target.Data.Spec.Template
	delete(tmpl, "$patch") // the revision's data is a strategic merge patch
	if err := dp.replaceTemplate(ctx, a, tmpl); err != nil {
		return false, err
	}
	fmt.Fprintf(dp.out, "%s: rolling back to revision %s (%s)\n", a.obj.Ref(), prev.cr, prev.number)
	deadline := time.Now().Add(dp.timeout)
	if a.obj.Kind == "StatefulSet" {
		if err := dp.replaceStuckPods(ctx, a, target, deadline); err != nil {
			return true, fmt.Errorf("roll back %s: %w", a.obj.Ref(), err)
		}
	}
	if err := dp.waitRollout(ctx, a, deadline); err != nil {
		return true, fmt.Errorf("roll back %s: %w", a.obj.Ref(), err)
	}
	fmt.Fprintf(dp.out, "%s: rolled back to revision %s\n", a.obj.Ref(), prev.cr)
	return true, nil
}

// replaceStuckPods waits until the StatefulSet a's controller has seen the
// rollback, then deletes its pods that are not Ready and not at the
// revision target.
func (dp *deployer) replaceStuckPods(ctx context.Context, a applied, target *controllerRevision, deadline time.Time) error {
	path := a.res.Path(dp.ns, a.obj.Name)
	tick := time.NewTicker(dp.poll)
	defer tick.Stop()
	var w workload
	for {
		if err := dp.c.Get(ctx, path, &w); err != nil {
			return err
		}
		if w.Status.ObservedGeneration >= w.Metadata.Generation && w.Status.UpdateRevision == target.Metadata.Name {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-tick.C:
			if now.After(deadline) {
				return fmt.Errorf("the controller did not take the rollback within %s", dp.timeout)
			}
		}
	}
	pl := dp.pods(ctx, &w)
	if pl == nil {
		return errors.New("cannot list its pods")
	}
	for _, p := range pl.Items {
		if !ownedBy(p.Metadata.OwnerReferences, w.Metadata.UID) || p.Metadata.Labels["controller-revision-hash"] == target.Metadata.Name || podReady(p.Status.Conditions) {
			continue
		}
		err := dp.c.Delete(ctx, "/api/v1/namespaces/"+dp.ns+"/pods/"+p.Metadata.Name)
		if err != nil && !IsNotFound(err) {
			return fmt.Errorf("delete its stuck pod %s: %w", p.Metadata.Name, err)
		}
		fmt.Fprintf(dp.out, "pod/%s: not ready at revision %s: deleted, to be made again at %s\n", p.Metadata.Name, p.Metadata.Labels["controller-revision-hash"], target.Metadata.Name)
	}
	return nil
}

func podReady(cs []condition) bool {
	for _, c := range cs {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// recordTimeout bounds the reads of what a deploy left, also after it was
// cancelled (the record is reported all the same).
const recordTimeout = 10 * time.Second

// record reads the workloads the step is about as they are now; a
// workload that cannot be read is recorded as its manifest says.
func (dp *deployer) record(ctx context.Context) []Workload {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	out := make([]Workload, 0, len(dp.touched))
	for _, a := range dp.touched {
		rec := Workload{Kind: a.obj.Kind, Name: a.obj.Name, Images: images(a.obj.Doc)}
		var doc map[string]any
		if err := dp.c.Get(ctx, a.res.Path(dp.ns, a.obj.Name), &doc); err == nil {
			rec.Images = images(doc)
			if rev, err := dp.revisionOf(ctx, a); err == nil {
				rec.Revision = rev.number
			}
		} else if IsNotFound(err) {
			continue // deleted (a canary aborted, a colour removed)
		}
		out = append(out, rec)
	}
	return out
}

// images are the images of a workload's pod template's containers.
func images(doc map[string]any) []string {
	var out []string
	spec, _ := doc["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pspec, _ := tmpl["spec"].(map[string]any)
	cs, _ := pspec["containers"].([]any)
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			if img, ok := m["image"].(string); ok {
				out = append(out, img)
			}
		}
	}
	return out
}
