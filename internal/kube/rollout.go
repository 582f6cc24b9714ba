package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// workload is the part of a Deployment, StatefulSet or DaemonSet that a
// rollout wait reads.
type workload struct {
	Metadata struct {
		Name        string            `json:"name"`
		UID         string            `json:"uid"`
		Generation  int64             `json:"generation"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Replicas       *int32        `json:"replicas"`
		Selector       labelSelector `json:"selector"`
		UpdateStrategy struct {
			Type          string `json:"type"`
			RollingUpdate *struct {
				Partition *int32 `json:"partition"`
			} `json:"rollingUpdate"`
		} `json:"updateStrategy"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration     int64       `json:"observedGeneration"`
		Replicas               int32       `json:"replicas"`
		UpdatedReplicas        int32       `json:"updatedReplicas"`
		ReadyReplicas          int32       `json:"readyReplicas"`
		AvailableReplicas      int32       `json:"availableReplicas"`
		CurrentRevision        string      `json:"currentRevision"`
		UpdateRevision         string      `json:"updateRevision"`
		DesiredNumberScheduled int32       `json:"desiredNumberScheduled"`
		UpdatedNumberScheduled int32       `json:"updatedNumberScheduled"`
		NumberAvailable        int32       `json:"numberAvailable"`
		Conditions             []condition `json:"conditions"`
	} `json:"status"`
}

type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// labelSelector is a workload's selector.
type labelSelector struct {
	MatchLabels      map[string]string `json:"matchLabels"`
	MatchExpressions []struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	} `json:"matchExpressions"`
}

// String is the selector in the API's query syntax.
func (s labelSelector) String() string {
	var parts []string
	for _, k := range sortedKeys(s.MatchLabels) {
		parts = append(parts, k+"="+s.MatchLabels[k])
	}
	for _, e := range s.MatchExpressions {
		switch e.Operator {
		case "In":
			parts = append(parts, fmt.Sprintf("%s in (%s)", e.Key, strings.Join(e.Values, ",")))
		case "NotIn":
			parts = append(parts, fmt.Sprintf("%s notin (%s)", e.Key, strings.Join(e.Values, ",")))
		case "Exists":
			parts = append(parts, e.Key)
		case "DoesNotExist":
			parts = append(parts, "!"+e.Key)
		}
	}
	return strings.Join(parts, ",")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// errStuck is a rollout that cannot complete (past its progress deadline).
var errStuck = errors.New("rollout stuck")

// rolloutStatus says where the rollout of w (of kind) stands: done, or a
// line of progress; an errStuck error when it will not complete.
func rolloutStatus(kind string, w *workload) (done bool, msg string, err error) {
	if w.Metadata.Generation > w.Status.ObservedGeneration {
		return false, "waiting for the controller to see the new spec", nil
	}
	want := int32(1)
	if w.Spec.Replicas != nil {
		want = *w.Spec.Replicas
	}
	st := w.Status
	switch kind {
	case "Deployment":
		for _, c := range st.Conditions {
			if c.Type == "Progressing" && c.Reason == "ProgressDeadlineExceeded" {
				return false, "", fmt.Errorf("%w: %s", errStuck, c.Message)
			}
		}
		switch {
		case st.UpdatedReplicas < want:
			return false, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want), nil
		case st.Replicas > st.UpdatedReplicas:
			return false, fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas), nil
		case st.AvailableReplicas < st.UpdatedReplicas:
			return false, fmt.Sprintf("%d of %d updated replicas available", st.AvailableReplicas, st.UpdatedReplicas), nil
		}
		return true, fmt.Sprintf("%d of %d replicas updated and available", st.AvailableReplicas, want), nil
	case "StatefulSet":
		if t := w.Spec.UpdateStrategy.Type; t != "" && t != "RollingUpdate" {
			return true, fmt.Sprintf("update strategy %s: not waited for", t), nil
		}
		partition := int32(0)
		if ru := w.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			partition = *ru.Partition
		}
		switch {
		case st.ReadyReplicas < want:
			return false, fmt.Sprintf("%d of %d replicas ready", st.ReadyReplicas, want), nil
		case partition > 0 && st.UpdatedReplicas < want-partition:
			return false, fmt.Sprintf("%d of %d replicas updated (partition %d)", st.UpdatedReplicas, want-partition, partition), nil
		case partition == 0 && st.UpdateRevision != st.CurrentRevision:
			return false, fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want), nil
		}
		return true, fmt.Sprintf("%d of %d replicas ready at revision %s", st.ReadyReplicas, want, st.UpdateRevision), nil
	case "DaemonSet":
		switch {
		case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
			return false, fmt.Sprintf("%d of %d pods updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled), nil
		case st.NumberAvailable < st.DesiredNumberScheduled:
			return false, fmt.Sprintf("%d of %d updated pods available", st.NumberAvailable, st.DesiredNumberScheduled), nil
		}
		return true, fmt.Sprintf("%d of %d pods updated and available", st.NumberAvailable, st.DesiredNumberScheduled), nil
	}
	return true, "", nil
}

// isWorkload reports whether a rollout of kind is waited for.
func isWorkload(apiVersion, kind string) bool {
	return apiVersion == "apps/v1" && slices.Contains([]string{"Deployment", "StatefulSet", "DaemonSet"}, kind)
}

// applied is an object a deploy applied.
type applied struct {
	obj Object
	res Resource
}

// waitRollout polls the workload a until its rollout completes, writing
// each new line of progress and the Warning events of its pods to out;
// an error names the workload and why: stuck, deadline passed, gone.
func (dp *deployer) waitRollout(ctx context.Context, a applied, deadline time.Time) error {
	path := a.res.Path(dp.ns, a.obj.Name)
	ev := newEventWatch()
	last := ""
	tick := time.NewTicker(dp.poll)
	defer tick.Stop()
	for {
		var w workload
		if err := dp.c.Get(ctx, path, &w); err != nil {
			return fmt.Errorf("%s: read its status: %w", a.obj.Ref(), err)
		}
		done, msg, err := rolloutStatus(a.obj.Kind, &w)
		if msg != last && msg != "" {
			fmt.Fprintf(dp.out, "%s: %s\n", a.obj.Ref(), msg)
			last = msg
		}
		dp.events(ctx, ev, &w)
		if err != nil {
			dp.notReady(ctx, &w)
			return fmt.Errorf("%s: %w", a.obj.Ref(), err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-tick.C:
			if now.After(deadline) {
				dp.notReady(ctx, &w)
				return fmt.Errorf("%s: rollout not complete after %s (%s)", a.obj.Ref(), dp.timeout, last)
			}
		}
	}
}

// eventWatch remembers the events already shown (by UID and count).
type eventWatch struct{ seen map[string]int32 }

func newEventWatch() *eventWatch { return &eventWatch{seen: map[string]int32{}} }

type podList struct {
	Items []struct {
		Metadata struct {
			Name            string            `json:"name"`
			UID             string            `json:"uid"`
			Labels          map[string]string `json:"labels"`
			OwnerReferences []ownerReference  `json:"ownerReferences"`
		} `json:"metadata"`
		Status struct {
			Phase      string      `json:"phase"`
			Conditions []condition `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

type eventList struct {
	Items []struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
		InvolvedObject struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"involvedObject"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
		Count   int32  `json:"count"`
	} `json:"items"`
}

// pods lists the pods of w's selector (nil when it cannot).
func (dp *deployer) pods(ctx context.Context, w *workload) *podList {
	sel := w.Spec.Selector.String()
	if sel == "" {
		return nil
	}
	var pl podList
	if err := dp.c.List(ctx, "/api/v1/namespaces/"+dp.ns+"/pods", sel, "", &pl); err != nil {
		fmt.Fprintf(dp.out, "[legate: cannot list the pods of %s: %v]\n", w.Metadata.Name, err)
		return nil
	}
	return &pl
}

// events writes the Warning events of w and its pods not shown before.
// Events are a help, not the outcome: an error reading them is shown once
// and then ignored.
func (dp *deployer) events(ctx context.Context, ev *eventWatch, w *workload) {
	if ev.seen == nil {
		return
	}
	uids := map[string]bool{w.Metadata.UID: true}
	if pl := dp.pods(ctx, w); pl != nil {
		for _, p := range pl.Items {
			uids[p.Metadata.UID] = true
		}
	}
	var el eventList
	if err := dp.c.List(ctx, "/api/v1/namespaces/"+dp.ns+"/events", "", "type=Warning", &el); err != nil {
		fmt.Fprintf(dp.out, "[legate: cannot read the namespace's events (%v); going on without them]\n", err)
		ev.seen = nil
		return
	}
	for _, e := range el.Items {
		if !uids[e.InvolvedObject.UID] || ev.seen[e.Metadata.UID] >= max(e.Count, 1) {
			continue
		}
		ev.seen[e.Metadata.UID] = max(e.Count, 1)
		fmt.Fprintf(dp.out, "warning: %s/%s: %s: %s\n", strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, e.Reason, oneLine(e.Message))
	}
}

// notReady writes the pods of w that are not ready, and why.
func (dp *deployer) notReady(ctx context.Context, w *workload) {
	pl := dp.pods(ctx, w)
	if pl == nil {
		return
	}
	for _, p := range pl.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status != "True" {
				why := strings.TrimSpace(c.Reason + " " + oneLine(c.Message))
				if why == "" {
					why = "no reason given"
				}
				fmt.Fprintf(dp.out, "pod/%s: %s, not ready (%s)\n", p.Metadata.Name, p.Status.Phase, why)
			}
		}
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
